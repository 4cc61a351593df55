"""Start and stop a real Prometheus on loopback for tests; load history with promtool."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx


def require_binary(name: str) -> str:
    """conftest's rule under pytest (skip, or fail under CI); a plain error elsewhere."""
    try:
        from conftest import require_binary as pytest_require
    except ImportError:
        path = shutil.which(name)
        if path is None:
            raise RuntimeError(f"{name} is not installed (apt-get install -y {name})") from None
        return path
    return pytest_require(name)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def create_blocks(openmetrics: str, tsdb: Path) -> None:
    """Backfill `tsdb` from OpenMetrics text (must end with `# EOF`) with promtool."""
    promtool = require_binary("promtool")
    tsdb.mkdir(parents=True, exist_ok=True)
    source = tsdb.parent / "history.om"
    source.write_text(openmetrics)
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tsdb)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"promtool failed: {done.stderr.strip() or done.stdout.strip()}")


@dataclass(frozen=True)
class ScrapeJob:
    job: str
    targets: Sequence[str]
    interval: str = "1s"


@dataclass
class PromServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def _config(jobs: Iterable[ScrapeJob]) -> str:
    lines = ["global:", "  scrape_interval: 15s", "scrape_configs:"]
    jobs = list(jobs)
    if not jobs:
        return "global:\n  scrape_interval: 15s\nscrape_configs: []\n"
    for job in jobs:
        lines += [
            f"  - job_name: {job.job}",
            f"    scrape_interval: {job.interval}",
            f"    scrape_timeout: {job.interval}",
            "    static_configs:",
            "      - targets: [" + ", ".join(f"'{t}'" for t in job.targets) + "]",
        ]
    return "\n".join(lines) + "\n"


def start_prometheus(
    workdir: Path, jobs: Iterable[ScrapeJob] = (), tsdb: Path | None = None
) -> PromServer:
    """A Prometheus on 127.0.0.1:<free port>, ready to answer; call `.stop()` after."""
    binary = require_binary("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(_config(jobs))
    tsdb = tsdb or workdir / "tsdb"
    port = free_port()
    log = workdir / "prometheus.log"
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tsdb}",
            "--storage.tsdb.retention.time=3650d",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-admin-api",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    server = PromServer(f"http://127.0.0.1:{port}", process, log)
    _wait_ready(server)
    return server


def _wait_ready(server: PromServer, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"prometheus exited: {server.log.read_text()[-2000:]}")
        try:
            if httpx.get(server.url + "/-/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError("prometheus did not become ready")


# --- OpenMetrics writing ----------------------------------------------------------------

Labels = dict[str, str]
Samples = list[tuple[float, float]]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items())) + "}"


class OpenMetricsWriter:
    """Collects series family by family and renders OpenMetrics text for promtool."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, list[tuple[str, Labels, Samples]]]] = {}

    def add(
        self, family: str, kind: str, sample_name: str, labels: Labels, samples: Samples
    ) -> None:
        self._families.setdefault(family, (kind, []))[1].append((sample_name, labels, samples))

    def render(self) -> str:
        lines: list[str] = []
        for family, (kind, series) in self._families.items():
            lines.append(f"# TYPE {family} {kind}")
            for name, labels, samples in series:
                text = _labels(labels)
                lines += [f"{name}{text} {value!r} {int(t)}" for t, value in samples]
        lines.append("# EOF")
        return "\n".join(lines) + "\n"

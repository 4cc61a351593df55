"""A real Prometheus scraping the simulated lanes, when one is installed."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from cockpit.demo.lane import LOOPBACK


def free_port() -> int:
    """A loopback port free right now (the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _loopback_get(url: str, timeout: float = 1.0) -> bytes:
    """GET a loopback URL, never through a proxy from the environment."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        body: bytes = response.read()
        return body


def prometheus_config(targets: dict[str, str], interval_s: float = 1.0) -> str:
    """A Prometheus config scraping each `name -> host:port` as job `name`."""
    import yaml

    config = {
        "global": {"scrape_interval": f"{interval_s:g}s", "evaluation_interval": "15s"},
        "scrape_configs": [
            {"job_name": name, "static_configs": [{"targets": [target]}]}
            for name, target in targets.items()
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


class DemoPrometheus:
    """Debian's `prometheus` on a free loopback port, with temp config and storage."""

    def __init__(self, binary: str, folder: Path, targets: dict[str, str]) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "prometheus.yml"
        config.write_text(prometheus_config(targets))
        self._log = (folder / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address={LOOPBACK}:{self.port}",
                "--storage.tsdb.retention.time=1d",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited with {self._process.returncode}: {self._last_words()}"
                )
            try:
                _loopback_get(f"{self.url}/-/ready", timeout=0.5)
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        raise RuntimeError(f"prometheus was not ready on {self.url} within {timeout:g} s")

    def _last_words(self) -> str:
        """The last line Prometheus logged (its folder goes away with the demo's)."""
        said = (self.folder / "prometheus.log").read_text(errors="replace").strip().splitlines()
        return said[-1] if said else "it said nothing"

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)
        self._log.close()

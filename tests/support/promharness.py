"""Start and stop a real Prometheus on loopback for tests; load history into it.

History goes in through promtool (blocks in a TSDB of the test's own) or, on a running server,
through Prometheus's remote-write receiver with an out-of-order window wide enough for any
past: `remote_write`.
"""

from __future__ import annotations

import math
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx


def require_binary(name: str) -> str:
    """The tests' rule under pytest (skip, or fail under CI); a plain error elsewhere."""
    try:
        from tests.support.repo import require_binary as pytest_require
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
    source = tsdb.parent / f"history-{time.monotonic_ns()}.om"
    source.write_text(openmetrics)
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tsdb)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    source.unlink()
    if done.returncode != 0:
        raise RuntimeError(f"promtool failed: {done.stderr.strip() or done.stdout.strip()}")


@dataclass(frozen=True)
class ScrapeJob:
    job: str
    targets: Sequence[str]
    interval: str = "1s"
    metrics_path: str = "/metrics"


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


OUT_OF_ORDER = "storage:\n  tsdb:\n    out_of_order_time_window: 36500d\n"
"""Remote-written history of any age is taken, whatever was written before it."""


def _config(jobs: Iterable[ScrapeJob], storage: str = "") -> str:
    """A scrape config; `storage` (Prometheus's own section) goes before the jobs."""
    lines = ["global:", "  scrape_interval: 15s", *storage.splitlines(), "scrape_configs:"]
    jobs = list(jobs)
    if not jobs:
        return "\n".join(lines[:-1]) + "\nscrape_configs: []\n"
    for job in jobs:
        lines += [
            f"  - job_name: {job.job}",
            f"    scrape_interval: {job.interval}",
            f"    scrape_timeout: {job.interval}",
            f"    metrics_path: {job.metrics_path}",
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
    config.write_text(_config(jobs, OUT_OF_ORDER))
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
            "--web.enable-remote-write-receiver",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    server = PromServer(f"http://127.0.0.1:{port}", process, log)
    _wait_ready(server)
    return server


def _wait_ready(server: PromServer, timeout: float = 30.0, ready: str = "/-/ready") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"the server exited: {server.log.read_text()[-2000:]}")
        try:
            if httpx.get(server.url + ready, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"the server at {server.url} did not become ready")


# --- remote write: history into a running Prometheus ------------------------------------


def instant(server: PromServer, query: str, at: float) -> list[tuple[dict[str, str], float]]:
    """Prometheus's own answer to an instant query at `at`: each result's labels and value."""
    params: dict[str, str | float] = {"query": query, "time": at}
    body = httpx.get(f"{server.url}/api/v1/query", params=params).json()
    return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]


def instant_value(server: PromServer, query: str, at: float) -> float:
    """The one value of an instant query at `at`."""
    results = instant(server, query, at)
    assert len(results) == 1, (query, results)
    return results[0][1]


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        if not number:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _field(number: int, data: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _timeseries(name: str, labels: Labels, samples: Samples) -> bytes:
    """prometheus.TimeSeries: labels sorted by name, samples as (double value, int64 ms)."""
    pairs = sorted({**labels, "__name__": name}.items())
    body = b"".join(_field(1, _field(1, k.encode()) + _field(2, v.encode())) for k, v in pairs)
    for t, v in samples:
        value = _varint(1 << 3 | 1) + struct.pack("<d", v)
        stamp = _varint(2 << 3 | 0) + _varint(int(t * 1000))
        body += _field(2, value + stamp)
    return _field(1, body)


def _snappy_literal(data: bytes) -> bytes:
    """Snappy's block format with every byte a literal: valid, just not smaller."""
    out = bytearray(_varint(len(data)))
    for start in range(0, len(data), 65536):
        chunk = data[start : start + 65536]
        out.append(61 << 2)  # a literal whose length - 1 follows in two bytes
        out += struct.pack("<H", len(chunk) - 1)
        out += chunk
    return bytes(out)


def remote_write(server: PromServer, writer: OpenMetricsWriter, batch: int = 200) -> None:
    """Write the writer's samples to a running Prometheus (its remote-write receiver), a few
    hundred series a request; they are queryable when this returns."""
    series = [
        _timeseries(name, labels, samples)
        for _, found in writer.families()
        for name, labels, samples in found
        if samples
    ]
    headers = {
        "Content-Encoding": "snappy",
        "Content-Type": "application/x-protobuf",
        "X-Prometheus-Remote-Write-Version": "0.1.0",
    }
    with httpx.Client(timeout=120) as client:
        for start in range(0, len(series), batch):
            body = _snappy_literal(b"".join(series[start : start + batch]))
            reply = client.post(f"{server.url}/api/v1/write", content=body, headers=headers)
            if reply.status_code != 204:
                raise RuntimeError(f"remote write refused: {reply.status_code} {reply.text}")


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

    def render(self, start: float = -math.inf, end: float = math.inf) -> str:
        """OpenMetrics text of the samples with start <= t < end."""
        lines: list[str] = []
        for family, (kind, series) in self._families.items():
            lines.append(f"# TYPE {family} {kind}")
            for name, labels, samples in series:
                text = _labels(labels)
                lines += [f"{name}{text} {v!r} {int(t)}" for t, v in samples if start <= t < end]
        lines.append("# EOF")
        return "\n".join(lines) + "\n"

    def render_prometheus(self) -> str:
        """The samples as Prometheus text with millisecond timestamps (an import API's)."""
        lines = [
            f"{name}{_labels(labels)} {v!r} {int(t * 1000)}"
            for _, series in self._families.values()
            for name, labels, samples in series
            for t, v in samples
        ]
        return "\n".join(lines) + "\n"

    def families(self) -> list[tuple[str, list[tuple[str, Labels, Samples]]]]:
        """Each family's name and its series (sample name, labels, samples)."""
        return [(family, series) for family, (_, series) in self._families.items()]

    def span(self) -> tuple[float, float]:
        times = [s[0][0] for _, series in self._families.values() for _, _, s in series if s]
        ends = [s[-1][0] for _, series in self._families.values() for _, _, s in series if s]
        return min(times), max(ends)


def create_blocks_by_day(writer: OpenMetricsWriter, tsdb: Path) -> None:
    """Backfill day by day: promtool rescans its whole input for every 2 h block it writes."""
    first, last = writer.span()
    day = float(int(first) // 86400 * 86400)
    while day <= last:
        create_blocks(writer.render(day, day + 86400), tsdb)
        day += 86400


# --- a long vLLM lane, for the long-window tests and the benchmark ---------------------


def long_history(
    end: int, days: float = 8, interval: int = 60, offset: int = 7, seed: int = 11
) -> tuple[OpenMetricsWriter, list[tuple[str, Labels, Samples]]]:
    """A vLLM lane `job="lane-long"` over `days` up to `end`, samples off the block grid.

    Instance l1 restarts (counter reset) just after a 3 h boundary; l2 is swapped for l3
    three days before `end`. Returns the writer and every series for expected values.
    """
    import random

    rng = random.Random(seed)
    first = int(end - days * 86400) // interval * interval
    times = list(range(first, end + 1, interval))
    times = [t + offset for t in times if t + offset <= end]
    reset_at = next(t for t in times if t > end - 2 * 86400 and (t - offset) % 10800 == 0)
    swap_at = end - 3 * 86400
    instances = {
        "l1": times,
        "l2": [t for t in times if t < swap_at],
        "l3": [t for t in times if t > swap_at],
    }
    writer = OpenMetricsWriter()
    series: list[tuple[str, Labels, Samples]] = []

    def add(family: str, kind: str, name: str, labels: Labels, samples: Samples) -> None:
        writer.add(family, kind, name, labels, samples)
        series.append((name, labels, samples))

    def counter(stamps: list[int], low: int, high: int, restart: int | None) -> Samples:
        value, out = 0.0, []
        for t in stamps:
            value = 0.0 if t == restart else value
            value += rng.randint(low, high)
            out.append((float(t), value))
        return out

    for instance, stamps in instances.items():
        labels = {"job": "lane-long", "instance": instance, "model_name": "m", "engine": "0"}
        restart = reset_at if instance == "l1" else None
        add(
            "vllm:prompt_tokens",
            "counter",
            "vllm:prompt_tokens_total",
            labels,
            counter(stamps, 900, 1100, restart),
        )
        add(
            "vllm:generation_tokens",
            "counter",
            "vllm:generation_tokens_total",
            labels,
            counter(stamps, 15, 25, restart),
        )
        per_bucket = [counter(stamps, 4, 6, restart) for _ in range(3)]
        running = [0.0] * len(stamps)
        for le, bucket in zip(("100.0", "1000.0", "+Inf"), per_bucket, strict=True):
            running = [acc + v for acc, (_, v) in zip(running, bucket, strict=True)]
            add(
                "vllm:request_prompt_tokens",
                "histogram",
                "vllm:request_prompt_tokens_bucket",
                {**labels, "le": le},
                [(float(t), v) for t, v in zip(stamps, running, strict=True)],
            )
        add(
            "vllm:num_requests_running",
            "gauge",
            "vllm:num_requests_running",
            labels,
            [(float(t), float(rng.randint(4, 8))) for t in stamps],
        )
    return writer, series


# --- VictoriaMetrics ---------------------------------------------------------------------


def start_victoria_metrics(workdir: Path, jobs: Iterable[ScrapeJob] = ()) -> PromServer:
    """A single-node VictoriaMetrics on 127.0.0.1:<free port> (Debian's `victoria-metrics`),
    ready to answer the Prometheus query API; history goes in with `import_history`."""
    binary = require_binary("victoria-metrics")
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "scrape.yml"
    config.write_text(_config(jobs))
    port = free_port()
    log = workdir / "victoria-metrics.log"
    process = subprocess.Popen(
        [
            binary,
            f"-httpListenAddr=127.0.0.1:{port}",
            f"-storageDataPath={workdir / 'data'}",
            f"-promscrape.config={config}",
            "-retentionPeriod=100y",  # backfilled history is older than the default month
            "-search.disableCache",  # history imported after a query is not hidden by a cache
            "-search.latencyOffset=0s",
            "-loggerLevel=ERROR",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    server = PromServer(f"http://127.0.0.1:{port}", process, log)
    _wait_ready(server, ready="/health")
    return server


def import_history(server: PromServer, writer: OpenMetricsWriter) -> None:
    """Load the writer's samples into a VictoriaMetrics (Prometheus text, millisecond times)
    and flush them, so the next query sees them."""
    body = writer.render_prometheus().encode()
    reply = httpx.post(f"{server.url}/api/v1/import/prometheus", content=body, timeout=120)
    reply.raise_for_status()
    httpx.get(f"{server.url}/internal/force_flush", timeout=60).raise_for_status()


# --- a fleet: many lanes of every engine ----------------------------------------------------

BOUNDS = ("0.1", "0.5", "1.0", "2.5", "+Inf")
"""Bucket bounds of a simulated histogram (+Inf last)."""


def _leaves(spec: object) -> list[object]:
    """The metric specs a raw key reads: a choice's first option, both sides of a difference."""
    from cockpit.engines import dialects

    if isinstance(spec, dialects.Either):
        return _leaves(spec.options[0])
    if isinstance(spec, dialects.Difference):
        return [*_leaves(spec.a), *_leaves(spec.b)]
    if isinstance(spec, dialects.Now | dialects.LastMinute):
        return _leaves(spec.of)
    return [spec]


@dataclass(frozen=True)
class Series:
    """One series an engine instance exposes for the specs: a `counter` (only grows), a
    `gauge` (0 to `top`) or a histogram's `bucket` set (cumulative over BOUNDS)."""

    kind: str
    family: str
    name: str
    labels: tuple[tuple[str, str], ...]
    top: float = 1.0


def engine_series(dialect: str, keys: Iterable[str]) -> list[Series]:
    """What one engine instance of `dialect` exposes for the raw keys (each spec's series)."""
    from cockpit.engines import dialects

    specs = dialects.lane_specs(dialect)
    found: dict[tuple[str, tuple[tuple[str, str], ...]], Series] = {}
    for key in keys:
        for leaf in _leaves(specs[key]):
            if isinstance(leaf, dialects.Gauge):
                top = 1.0 if leaf.across == "avg" else 20.0
                series = Series("gauge", leaf.metric, leaf.metric, (), top)
            elif isinstance(leaf, dialects.Histogram):
                series = Series("bucket", leaf.base, f"{leaf.base}_bucket", leaf.extra)
            elif isinstance(leaf, dialects.Counter):
                family = leaf.metric.removesuffix("_total")
                kind = "counter" if leaf.metric.endswith("_total") else "unknown"
                series = Series(kind, family, leaf.metric, leaf.extra)
            else:
                continue
            found.setdefault((series.name, series.labels), series)
    return list(found.values())


def add_engine(
    writer: OpenMetricsWriter,
    dialect: str,
    labels: Labels,
    times: Sequence[float],
    keys: Iterable[str],
    seed: int,
) -> None:
    """One engine instance's series for each raw key in `keys` of `dialect`, sampled at
    `times`: counters that only grow, gauges that move."""
    import random

    rng = random.Random(seed)
    for series in engine_series(dialect, keys):
        own = {**labels, **dict(series.labels)}
        if series.kind == "gauge":
            values = [(t, round(rng.uniform(0, series.top), 3)) for t in times]
            writer.add(series.family, "gauge", series.name, own, values)
        elif series.kind == "bucket":
            cumulative = [0.0] * len(times)
            tail = rng.choice((0.02, 2.0))  # p95 within the buckets, or past them (a bound)
            for le in BOUNDS:
                running = 0.0
                for i in range(len(times)):
                    running += rng.randint(0, 4) if le != "+Inf" else rng.random() * tail
                    cumulative[i] += running
                samples = list(zip(times, cumulative, strict=True))
                writer.add(series.family, "histogram", series.name, {**own, "le": le}, samples)
        else:
            value, samples = 0.0, []
            for t in times:
                value += rng.randint(1, 60)
                samples.append((t, value))
            writer.add(series.family, series.kind, series.name, own, samples)


@dataclass(frozen=True)
class SimLane:
    """A simulated lane: `instances` engines of `dialect` from `start` to `stop` (epoch s)."""

    name: str
    dialect: str
    start: float
    stop: float
    instances: int = 3
    up_until: float | None = None
    """When given, the targets' `up` series: 1 while the engines run, 0 after, to this time."""


def fleet_history(
    lanes: Iterable[SimLane],
    keys: Iterable[str],
    label: str = "job",
    interval: int = 15,
    common: Labels | None = None,
) -> OpenMetricsWriter:
    """The history of a fleet: every lane's engines (their `instance` e0, e1, ...), each
    series also carrying the `common` labels (what tells this fleet from a server's others)."""
    common = common or {}
    writer = OpenMetricsWriter()
    keys = tuple(keys)
    for number, lane in enumerate(lanes):
        first = int(lane.start) // interval * interval
        times = [float(t) for t in range(first, int(lane.stop) + 1, interval) if t >= lane.start]
        for instance in range(lane.instances):
            labels = {**common, label: lane.name, "instance": f"e{instance}", "model_name": "m"}
            if lane.dialect == "sglang":
                labels["tp_rank"] = "0"
            seed = number * 1000 + instance
            add_engine(writer, lane.dialect, labels, times, keys, seed)
            if lane.up_until is not None:
                stamps = range(first, int(lane.up_until) + 1, interval)
                up = [(float(t), 1.0 if t <= lane.stop else 0.0) for t in stamps]
                target = {**common, label: lane.name, "instance": f"e{instance}"}
                writer.add("up", "gauge", "up", target, up)
    return writer

"""The fleet at scale: 100 lanes × 3 engine instances behind a real Prometheus.

`python -m bench fleet`. A simulated fleet (a process of its own serves every engine's
/metrics: 80 vLLM and 20 SGLang lanes, 3 instances each, on 127.0.0.1-3 at one port, counters
growing with time) is scraped every 5 s by a real Prometheus, its lanes found by `job`. Then:

- HTTP requests per refresh of the whole overview (target 1) and the client's time per
  refresh, wall − the server's own evaluation (`stats`; target ≤ 20 ms median), 1 h window,
  with the client's CPU time per refresh beside it (what the client itself spends, however
  busy the machine: the wall time also waits for Prometheus's JSON and a CPU), the same
  query asked with a one-sample answer (`count(...)`: what is left is the answer's cost, the
  server encoding and gzipping it, the client reading it) and the answer's size;
- idle CPU (target ≤ 1.0 % of one core, the row `bench peers` leaves to this benchmark) and
  RSS (≤ 80 MB) at a 5 s refresh, over 60 s:
  the cockpit with the overview open (`cockpit --prometheus URL --lanes-by job` in a
  160×48 tmux pane), and the fleet's polling loop alone, headless, in a process of its own.
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # the harness that starts Prometheus lives in tests/support

from bench.common import (  # noqa: E402
    COCKPIT,
    PYTHON,
    cpu_seconds,
    load_average,
    rss_mb,
    spread,
    table,
    tmux_server,
    wait_full_frame,
)
from cockpit.core.fleet import RAW_KEYS  # noqa: E402
from tests.support.promharness import BOUNDS, ScrapeJob, Series, engine_series, start_prometheus  # noqa: E402

LANES = 100
INSTANCES = 3
SGLANG_EVERY = 5
"""Every fifth lane is SGLang."""
WINDOW_S = 3600.0
REFRESH_S = 5.0
SCRAPE = "5s"
READS = 40
MEASURE_S = 60.0
SETTLE_S = 10.0
CLIENT_TARGET_MS = 20.0
CPU_TARGET_PCT = 1.0
RSS_TARGET_MB = 80.0


def lane_name(number: int) -> str:
    return f"lane-{number:03d}"


def lane_dialect(number: int) -> str:
    return "sglang" if number % SGLANG_EVERY == 0 else "vllm"


class Engine:
    """One simulated engine instance: its series, each with its own pace."""

    def __init__(self, dialect: str, series: list[Series], seed: int) -> None:
        rng = random.Random(seed)
        self.started = time.time()
        self.lines: list[tuple[Series, str, float, float]] = []
        extra = {"model_name": "m", **({"tp_rank": "0"} if dialect == "sglang" else {})}
        for one in series:
            labels = {**extra, **dict(one.labels)}
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            self.lines.append((one, text, rng.uniform(0.5, 12.0), rng.uniform(0, math.tau)))

    def exposition(self) -> str:
        now = time.time()
        elapsed = now - self.started
        out: list[str] = []
        for series, labels, pace, phase in self.lines:
            if series.kind == "gauge":
                value = series.top * (0.5 + 0.5 * math.sin(now / 60 + phase))
                out.append(f"{series.name}{{{labels}}} {value:.4f}")
            elif series.kind == "bucket":
                for i, le in enumerate(BOUNDS):
                    count = int(pace * elapsed * (i + 1) / len(BOUNDS))
                    out.append(f'{series.name}{{{labels},le="{le}"}} {count}')
            else:
                out.append(f"{series.name}{{{labels}}} {int(pace * elapsed)}")
        return "\n".join(out) + "\n"


class Fleet:
    """Every lane's engines, served at /lane-NNN on 127.0.0.1, .2 and .3 (one per instance)."""

    def __init__(self) -> None:
        series = {d: engine_series(d, (*RAW_KEYS, "ttft")) for d in ("vllm", "sglang")}
        self.engines = {
            (lane_name(n), i): Engine(lane_dialect(n), series[lane_dialect(n)], n * 10 + i)
            for n in range(LANES)
            for i in range(INSTANCES)
        }
        self.port = 0

    def start(self) -> None:
        for instance in range(INSTANCES):
            server = ThreadingHTTPServer(
                (f"127.0.0.{instance + 1}", self.port), self.handler(instance)
            )
            server.daemon_threads = True
            self.port = server.server_address[1]
            threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True).start()

    def handler(self, instance: int) -> type[BaseHTTPRequestHandler]:
        """Serves the lanes' engines of one instance number, each at /<lane>."""
        engines = self.engines

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                engine = engines.get((self.path.strip("/"), instance))
                if engine is None:
                    self.send_error(404)
                    return
                body = engine.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def serve_fleet(ports: Queue[int]) -> None:
    """A process of its own serving the fleet (its threads would otherwise share the measured
    client's interpreter lock): says its port, then serves until terminated."""
    fleet = Fleet()
    fleet.start()
    ports.put(fleet.port)
    threading.Event().wait()


def fleet_jobs(port: int) -> list[ScrapeJob]:
    """One scrape job per lane (its `job` label), its engines on 127.0.0.1, .2 and .3."""
    targets = [f"127.0.0.{host}:{port}" for host in range(1, INSTANCES + 1)]
    return [ScrapeJob(lane_name(n), targets, SCRAPE, f"/{lane_name(n)}") for n in range(LANES)]


@contextmanager
def fleet_behind_prometheus(workdir: Path) -> Iterator[str]:
    context = multiprocessing.get_context("spawn")
    ports: Queue[int] = context.Queue()
    exporter = context.Process(target=serve_fleet, args=(ports,), daemon=True)
    exporter.start()
    try:
        server = start_prometheus(workdir, fleet_jobs(ports.get(timeout=60)))
        try:
            _wait_scraped(server.url)
            yield server.url
        finally:
            server.stop()
    finally:
        exporter.terminate()
        exporter.join(timeout=10)


def _wait_scraped(url: str, timeout: float = 60.0) -> None:
    """Until every target has been scraped twice (a counter's increase needs two samples)."""
    query = "count(count_over_time(up[1m]) >= 2)"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = httpx.get(f"{url}/api/v1/query", params={"query": query}).json()["data"]
        if result["result"] and float(result["result"][0]["value"][1]) >= LANES * INSTANCES:
            return
        time.sleep(0.5)
    raise RuntimeError("prometheus did not scrape the whole fleet")


# --- measurements ---------------------------------------------------------------------------


async def refresh_costs(url: str) -> dict[str, Any]:
    from cockpit.sources.fleet import FleetSource
    from cockpit.sources.prometheus import PrometheusSource

    fleet = FleetSource(PrometheusSource(url, stats=True), "job")
    try:
        client: list[float] = []
        cpu: list[float] = []
        server: list[float] = []
        requests: list[int] = []
        floor: list[float] = []
        lean: list[float] = []
        for _ in range(READS):
            before = fleet.source.requests
            started, used = time.perf_counter(), time.process_time()
            view = await fleet.read(WINDOW_S)
            wall = time.perf_counter() - started
            cpu.append(time.process_time() - used)
            requests.append(fleet.source.requests - before)
            server.append(view.eval_seconds or 0.0)
            client.append(wall - (view.eval_seconds or 0.0))
            started = time.perf_counter()
            await fleet.source.query("vector(1)", time.time())  # the round trip alone
            floor.append(time.perf_counter() - started)
            started = time.perf_counter()
            counted = await fleet.source.query(f"count({view.query})", time.time())
            lean.append(time.perf_counter() - started - (counted.eval_seconds or 0.0))
            await asyncio.sleep(1.0)
    finally:
        await fleet.aclose()
    up = sum(1 for row in view.rows if row.up)
    ms = [c * 1000 for c in client]
    return {
        "lanes": len(view.rows),
        "lanes_up": up,
        "requests_per_refresh": max(requests),
        "client_ms": {**spread(ms, 3), "p90": round(sorted(ms)[int(len(ms) * 0.9)], 3)},
        "client_cpu_ms": spread([c * 1000 for c in cpu], 3),
        "trivial_query_ms": spread([f * 1000 for f in floor], 3),
        "one_sample_answer_ms": spread([x * 1000 for x in lean], 3),
        "server_eval_ms": spread([s * 1000 for s in server], 3),
        "load_average": load_average(),
        "query_chars": len(view.query),
        **answer_size(url, view.query),
    }


def answer_size(url: str, query: str) -> dict[str, int]:
    """The fleet answer's size: samples, JSON bytes and bytes on the wire (gzip, as the
    cockpit's client asks)."""
    reply = httpx.post(f"{url}/api/v1/query", data={"query": query}, timeout=30)
    return {
        "answer_samples": len(reply.json()["data"]["result"]),
        "answer_bytes": len(reply.content),
        "answer_wire_bytes": reply.num_bytes_downloaded,
    }


def poll(url: str, seconds: float) -> None:
    """The child process: the fleet read every REFRESH_S for `seconds` after a settle; prints
    its CPU % of one core and RSS as JSON."""
    from cockpit.sources.fleet import FleetSource
    from cockpit.sources.prometheus import PrometheusSource

    async def loop() -> dict[str, float]:
        fleet = FleetSource(PrometheusSource(url), "job")
        try:
            deadline = time.monotonic() + SETTLE_S
            while time.monotonic() < deadline:
                await fleet.read(WINDOW_S)
                await asyncio.sleep(REFRESH_S)
            cpu, started = time.process_time(), time.monotonic()
            while time.monotonic() - started < seconds:
                await fleet.read(WINDOW_S)
                await asyncio.sleep(REFRESH_S)
            elapsed = time.monotonic() - started
            return {"cpu_pct": 100 * (time.process_time() - cpu) / elapsed}
        finally:
            await fleet.aclose()

    result = asyncio.run(loop())
    status = Path("/proc/self/status").read_text()
    rss = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    print(json.dumps({**result, "rss_mb": int(rss.split()[1]) / 1024}))


def headless_idle(url: str, seconds: float) -> dict[str, float]:
    done = subprocess.run(
        [PYTHON, "-m", "bench.fleet", "poll", url, str(seconds)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=seconds + SETTLE_S + 120,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def overview_idle(url: str, seconds: float) -> dict[str, Any]:
    """The cockpit with the overview open, in tmux; None values with why when it can't."""
    with tmux_server() as tmux:
        window = tmux.start([COCKPIT, "--prometheus", url, "--lanes-by", "job"])
        try:
            try:
                wait_full_frame(window, timeout=60)
            except TimeoutError:
                last = window.capture().strip().splitlines()[-3:]
                return {"cpu_pct": None, "rss_mb": None, "why": " / ".join(last)}
            time.sleep(SETTLE_S)
            before, started = cpu_seconds(window.pid), time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - started
            cpu = 100 * (cpu_seconds(window.pid) - before) / elapsed
            screen = window.capture()
            return {
                "cpu_pct": round(cpu, 3),
                "rss_mb": round(rss_mb(window.pid), 1),
                "overview_rows": sum(1 for line in screen.splitlines() if "lane-" in line),
            }
        finally:
            window.stop()


def run(seconds: float = MEASURE_S) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, fleet_behind_prometheus(Path(tmp)) as url:
        costs = asyncio.run(refresh_costs(url))
        headless = headless_idle(url, seconds)
        overview = overview_idle(url, seconds)
    result: dict[str, Any] = {
        "lanes": LANES,
        "instances_per_lane": INSTANCES,
        "window_s": WINDOW_S,
        "refresh_s": REFRESH_S,
        **costs,
        "idle_headless": headless,
        "idle_overview": overview,
        "targets": {
            "requests_per_refresh": 1,
            "client_ms_median": CLIENT_TARGET_MS,
            "cpu_pct": CPU_TARGET_PCT,
            "rss_mb": RSS_TARGET_MB,
        },
    }
    idle = overview if overview["cpu_pct"] is not None else headless
    result["ok"] = (
        costs["requests_per_refresh"] == 1
        and costs["client_ms"]["median"] <= CLIENT_TARGET_MS
        and idle["cpu_pct"] <= CPU_TARGET_PCT
        and idle["rss_mb"] <= RSS_TARGET_MB
    )
    print_table(result)
    return result


def print_table(result: dict[str, Any]) -> None:
    client, overview, headless = (
        result["client_ms"],
        result["idle_overview"],
        result["idle_headless"],
    )

    def shown(value: float | None, unit: str) -> str:
        return "—" if value is None else f"{value:.3g} {unit}"

    rows = [
        ("lanes found (up)", f"{result['lanes']} ({result['lanes_up']})", str(LANES)),
        ("HTTP requests per refresh", str(result["requests_per_refresh"]), "1"),
        ("client ms per refresh, median (p90)",
         f"{client['median']:.2f} ({client['p90']:.2f})", f"≤ {CLIENT_TARGET_MS:g}"),
        ("client CPU ms per refresh, median", f"{result['client_cpu_ms']['median']:.2f}", ""),
        ("a trivial query's round trip ms, median",
         f"{result['trivial_query_ms']['median']:.2f}", ""),
        ("the same query, one-sample answer: client ms, median",
         f"{result['one_sample_answer_ms']['median']:.2f}", ""),
        ("answer: samples, KB (KB on the wire)",
         f"{result['answer_samples']}, {result['answer_bytes'] / 1000:.0f}"
         f" ({result['answer_wire_bytes'] / 1000:.0f})", ""),
        ("server evaluation ms, median", f"{result['server_eval_ms']['median']:.1f}", ""),
        ("idle CPU, overview open", shown(overview["cpu_pct"], "%"), f"≤ {CPU_TARGET_PCT} %"),
        ("RSS, overview open", shown(overview["rss_mb"], "MB"), f"≤ {RSS_TARGET_MB:g} MB"),
        ("idle CPU, polling loop headless", shown(headless["cpu_pct"], "%"), ""),
        ("RSS, polling loop headless", shown(headless["rss_mb"], "MB"), ""),
    ]  # fmt: skip
    print(table(rows, ("figure", "measured", "target")))
    print(f"load average during the refreshes: {result['load_average']}")
    if overview.get("why"):
        print(f"overview not measured: {overview['why']}")
    print("all targets met" if result["ok"] else "TARGET MISSED")


if __name__ == "__main__":
    if sys.argv[1:2] == ["poll"]:
        poll(sys.argv[2], float(sys.argv[3]))
    else:
        print(json.dumps(run(float(sys.argv[1]) if len(sys.argv) > 1 else MEASURE_S), indent=2))

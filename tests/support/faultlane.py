"""Shared parts of the fault tests: a vLLM-like exporter, a real Prometheus, the app driven.

The exporter moves its counters by a fixed step on every scrape, so ratios of counters read
through a real Prometheus are exact whatever the scrape timing: the hit rate of each model is
hits-step / queries-step, and of the whole lane the sum of hits steps over the sum of queries
steps. Expected texts are computed here from those steps.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import socket
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import MetricsHandler
from textual.pilot import Pilot

from cockpit.app.app import CockpitApp, make_app
from cockpit.config.schema import Config, LaneConfig, LedgerConfig
from cockpit.runtime.feeds import build_feeds
from cockpit.widgets import CacheGauge, StatusLine
from tests.support.fakeprom import QuietServer
from tests.support.faultproxy import FaultProxy, http_answer, json_answer
from tests.support.promharness import PromServer, ScrapeJob, start_prometheus
from tests.support.screentext import screen_text

JOB = "fault-lane"
LATE_JOB = "late-lane"
"""Scraped from the start, but its engine is not up yet: Prometheus has only `up` and
`scrape_*` for it, as for a vLLM still loading its model."""
REFRESH_S = 0.5
QUOTED = 'q"uote\\back\nnew'
"""A model_name with a quote, a backslash and a newline."""
QUOTED_PREFIX = 'q"uote\\back'
"""The same without its last line: must not match QUOTED (nor be matched by it)."""
MODELS: dict[str, tuple[int, int, int]] = {
    "plain": (800, 1000, 2),
    QUOTED: (500, 1000, 3),
    QUOTED_PREFIX: (250, 1000, 5),
}
"""model_name -> (prefix-cache hits per scrape, queries per scrape, requests running)."""


def share_text(hits: float, queries: float) -> str:
    """A share as the cockpit prints it (one decimal and a percent sign)."""
    return f"{hits / queries * 100:.1f}%"


LANE_HIT_RATE = share_text(
    sum(h for h, _, _ in MODELS.values()), sum(q for _, q, _ in MODELS.values())
)


class StepCollector:
    """Every collect (one scrape) adds one step to each model's counters."""

    def __init__(self) -> None:
        self.scrapes = 0
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            self.scrapes += 1
            n = self.scrapes
        labels = ["model_name", "engine"]
        queries = CounterMetricFamily("vllm:prefix_cache_queries", "q", labels=labels)
        hits = CounterMetricFamily("vllm:prefix_cache_hits", "h", labels=labels)
        running = GaugeMetricFamily("vllm:num_requests_running", "r", labels=labels)
        for model, (hit_step, query_step, busy) in MODELS.items():
            queries.add_metric([model, "0"], float(query_step * n))
            hits.add_metric([model, "0"], float(hit_step * n))
            running.add_metric([model, "0"], float(busy))
        yield from (queries, hits, running)


@dataclass
class Exporter:
    collector: StepCollector
    server: ThreadingHTTPServer

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_exporter(port: int = 0) -> Exporter:
    registry = CollectorRegistry()
    collector = StepCollector()
    registry.register(collector)  # type: ignore[arg-type]
    server = QuietServer(("127.0.0.1", port), MetricsHandler.factory(registry))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return Exporter(collector, server)


SCRAPED: dict[str, int] = {
    LATE_JOB: 1,
    "live-lane": 1,
    "pair": 2,
    "pair-lane": 2,
    "week-lane": 1,
    "cards-live": 1,
    "fast": 1,
    "jumped": 1,
}
"""Jobs the run's Prometheus scrapes besides JOB, with their number of targets: ports held
from its start (bound, not listening: a scrape is refused) until the one test of each job takes
them for its engines. Prometheus applies a new scrape config only on its 5 s discovery tick, so
a job declared up front is scraped within a second of its engine coming up."""


def start_lane_prometheus(
    workdir: Path, exporter: Exporter, held: Mapping[str, list[int]]
) -> PromServer:
    """Prometheus scraping the exporter as JOB, and each job of `held` on its ports, where
    nothing listens yet."""
    jobs = [ScrapeJob(JOB, [exporter.address], "1s")] + [
        ScrapeJob(job, [f"127.0.0.1:{port}" for port in ports], "1s") for job, ports in held.items()
    ]
    server = start_prometheus(workdir, jobs)
    wait_for_samples(server.url, 3)
    return server


def wait_for_samples(url: str, count: int, timeout: float = 20.0) -> None:
    """Until Prometheus holds `count` scrapes of the lane (names may arrive as vllm_...)."""
    query = f'count_over_time({{__name__=~"vllm[:_]prefix_cache_queries_total",job="{JOB}"}}[1m])'
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            body = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=2).json()
            values = [float(r["value"][1]) for r in body["data"]["result"]]
            if values and min(values) >= count:
                return
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"prometheus at {url} did not scrape the exporter")


def lane_config(url: str, ledger: Path | None = None, **lane: Any) -> Config:
    """One lane on `url` reading the exporter's job over 5 minutes, refreshed every 0.5 s."""
    lane.setdefault("selector", f'job="{JOB}"')
    return Config(
        source="<test>",
        lanes=(LaneConfig("lane-f", prometheus=url, **lane),),
        ledgers=(LedgerConfig(str(ledger)),) if ledger else (),
        window="5m",
        refresh_s=REFRESH_S,
    )


@contextlib.asynccontextmanager
async def running_app(
    config: Config, size: tuple[int, int] = (160, 48), **options: Any
) -> AsyncIterator[tuple[CockpitApp, Pilot[None]]]:
    """The cockpit on the real feeds built from `config`."""
    lanes, ledger = build_feeds(config)
    app = make_app(config, lanes, ledger, refresh_s=config.refresh_s, **options)
    _record_notices(app)
    async with app.run_test(size=size) as pilot:
        yield app, pilot


async def wait_until(
    pilot: Pilot[None], condition: Callable[[], bool], timeout: float = 10.0
) -> float:
    """Seconds until `condition()` holds, checked every 20 ms; AssertionError at `timeout`."""
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > timeout:
            raise AssertionError(f"not within {timeout} s; screen:\n{screen_text(pilot.app)}")
        await asyncio.sleep(0.02)
    await pilot.pause()
    return time.perf_counter() - started


def cache_text(app: CockpitApp) -> str:
    return app.query_one(CacheGauge).render().plain


def status_text(app: CockpitApp) -> str:
    return app.query_one(StatusLine).render().plain


def lane_state(app: CockpitApp) -> str:
    snapshot = app.lane_snapshot
    return snapshot.freshness.state if snapshot is not None else "none"


def lane_reason(app: CockpitApp) -> str:
    snapshot = app.lane_snapshot
    return snapshot.freshness.reason if snapshot is not None else ""


def hit_rate_row(app: CockpitApp) -> str:
    """The `Hit rate (engine)` line of the cache pane."""
    return next(line for line in cache_text(app).splitlines() if "Hit rate" in line)


_NOTICES: weakref.WeakKeyDictionary[CockpitApp, list[tuple[str, str]]] = weakref.WeakKeyDictionary()


def _record_notices(app: CockpitApp) -> None:
    """Keep (severity, title and message) of every notice `app` is asked to show."""
    shown, notify = _NOTICES.setdefault(app, []), app.notify

    def recorded(message: str, *args: Any, **kwargs: Any) -> None:
        title = kwargs.get("title", "")
        shown.append((kwargs.get("severity", "information"), f"{title}: {message}"))
        notify(message, *args, **kwargs)

    app.notify = recorded  # type: ignore[method-assign]


def notices(app: CockpitApp) -> list[str]:
    """`title: message` of each notice shown since `running_app` made the app."""
    return [text for _, text in _NOTICES[app]]


def error_notices(app: CockpitApp) -> list[str]:
    return [text for severity, text in _NOTICES[app] if severity == "error"]


_SHARED: list[Future[tuple[Exporter, PromServer]]] = []
_HELD: dict[str, list[socket.socket]] = {}
"""Each SCRAPED job's ports, bound but not listening (a connection is refused) until taken."""


def start_shared_lane_prometheus(workdir: Path) -> None:
    """Start the run's Prometheus in the background (its first scrapes take ~5 s): the
    tests before its first user run meanwhile. `shared_lane_prometheus` waits for it."""
    if _SHARED:
        return
    for job, count in SCRAPED.items():
        _HELD[job] = [socket.socket() for _ in range(count)]
        for held in _HELD[job]:
            held.bind(("127.0.0.1", 0))  # held, so no other test's server gets this port
    ports = {job: [held.getsockname()[1] for held in sockets] for job, sockets in _HELD.items()}

    def start() -> tuple[Exporter, PromServer]:
        exporter = start_exporter()
        atexit.register(exporter.stop)
        server = start_lane_prometheus(workdir, exporter, ports)
        atexit.register(server.stop)
        return exporter, server

    pool = ThreadPoolExecutor(1)
    _SHARED.append(pool.submit(start))
    pool.shutdown(wait=False)  # its thread ends with the start


def shared_lane_prometheus(workdir: Path) -> tuple[Exporter, PromServer]:
    """JOB's exporter and the run's one Prometheus (stopped at exit): it scrapes JOB and the
    SCRAPED jobs' held ports, and takes remote-written history (the `prometheus` fixture)."""
    start_shared_lane_prometheus(workdir)
    return _SHARED[0].result(timeout=60)


def take_ports(job: str) -> list[int]:
    """The SCRAPED job's ports, freed for the test's engines to come up on. Once per run:
    after that, Prometheus holds that test's series for the job."""
    assert job in _HELD, f"shared_lane_prometheus() first, and only one test can take {job}"
    ports = []
    for held in _HELD.pop(job):
        ports.append(held.getsockname()[1])
        held.close()
    return ports


def take_late_port() -> int:
    """LATE_JOB's port, freed for the engine to come up on (see `take_ports`)."""
    return take_ports(LATE_JOB)[0]


def fresh_with(app: Any, text: str) -> bool:
    return lane_state(app) == "ok" and text in hit_rate_row(app)


# --- answers a broken Prometheus gives ---------------------------------------------------


def vector(samples: dict[str, str], warnings: list[str] | None = None) -> bytes:
    result = [{"metric": {"fig": fig}, "value": [time.time(), v]} for fig, v in samples.items()]
    body: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": result}}
    if warnings:
        body["warnings"] = warnings
    return json_answer(body)


FAILURES: dict[str, tuple[bytes | str, str]] = {
    "http 500": (http_answer(500, "boom"), "HTTP 500 Internal Server Error"),
    "503 retry-after": (
        http_answer(503, "busy", {"Retry-After": "2"}),
        "HTTP 503 Service Unavailable (retry after 2 s)",
    ),
    "html page": (
        http_answer(200, "<!doctype html><html><body>Sign in</body></html>",
                    {"Content-Type": "text/html"}),
        "answered an HTML page, not the Prometheus API",
    ),
    "invalid json": (http_answer(200, '{"status": "success", "da'), "answered invalid JSON"),
    "status error": (
        json_answer({"status": "error", "errorType": "execution",
                     "error": "query processing would load too many samples\nsecond line"}, 422),
        "execution: query processing would load too many samples",
    ),
    "connection cut": ("cut", "disconnected without sending a response"),
    "answer cut short": ("corrupt", "peer closed connection without sending complete message body"),
}  # fmt: skip
"""Case -> (canned answer to /api/v1/query, or a proxy mode; the reason the user reads)."""


def break_proxy(proxy: FaultProxy, fault: bytes | str) -> None:
    if isinstance(fault, bytes):
        proxy.canned["/api/v1/query"] = fault
    else:
        proxy.mode = fault  # type: ignore[assignment]

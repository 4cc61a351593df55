"""A real Prometheus scraping a prometheus_client exporter every second: the window moves."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import MetricsHandler

from cockpit.sources.prometheus import PrometheusSource, SourceError
from tests.support.faultlane import shared_lane_prometheus, take_ports
from tests.support.promharness import PromServer

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]


class Engine:
    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __init__(self, port: int = 0) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        self.prompt = Counter("vllm:prompt_tokens", "p", labels, registry=self.registry)
        self.running = Gauge("vllm:num_requests_running", "r", labels, registry=self.registry)
        self.prompt.labels("live", "0")
        self.running.labels("live", "0").set(3)
        self.server = ThreadingHTTPServer(
            ("127.0.0.1", port), MetricsHandler.factory(self.registry)
        )
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()


@pytest.fixture(scope="module")
def scraping(tmp_path_factory: pytest.TempPathFactory) -> PromServer:
    """The run's Prometheus: it scrapes this module's jobs every second."""
    return shared_lane_prometheus(tmp_path_factory.mktemp("prom-lane"))[1]


@pytest.fixture(scope="module")
def live(scraping: PromServer) -> Iterator[tuple[Engine, PromServer]]:
    engine = Engine(take_ports("live-lane")[0])
    yield engine, scraping
    engine.stop()


def _scraped_samples(server: PromServer, count: int) -> None:
    """Wait until Prometheus holds `count` samples of the lane's counter."""
    deadline = time.monotonic() + 15
    # prometheus_client 0.26 may answer Prometheus's OpenMetrics scrape with `vllm_` names.
    name = '{__name__=~"vllm[:_]prompt_tokens_total",job="live-lane"}'
    query = f"count_over_time({name}[1m])"
    while time.monotonic() < deadline:
        body = httpx.get(f"{server.url}/api/v1/query", params={"query": query}).json()
        result = body["data"]["result"]
        if result and float(result[0]["value"][1]) >= count:
            return
        time.sleep(0.2)
    raise AssertionError("prometheus did not scrape the exporter")


async def test_window_moves_while_polling(live: tuple[Engine, PromServer]) -> None:
    engine, server = live
    await asyncio.to_thread(_scraped_samples, server, 2)
    source = PrometheusSource(server.url)
    try:
        first = await source.read_lane("live", None, '{job="live-lane"}', 60)
        assert first.dialect == "vllm"
        assert first.values["prompt_tokens"] == 0.0  # series exist, nothing happened: zero
        assert first.values["running"] == 3.0
        assert first.covered_s is not None and 0 < first.covered_s < 60
        assert first.coverage_note.startswith("data since ")

        engine.prompt.labels("live", "0").inc(1000)
        before = source.requests
        await asyncio.sleep(3.2)
        second = await source.read_lane("live", None, '{job="live-lane"}', 60)
        ends = [read.trend.end if read.trend else None for read in (first, second)]
        assert source.requests - before == 1 + (ends[0] != ends[1])  # the trend's new step
        # increase() extrapolates by at most ~one scrape interval past the last sample.
        assert 1000 <= second.values["prompt_tokens"] <= 1400
        assert second.end > first.end
    finally:
        await source.aclose()


def _wait_up(server: PromServer, job: str, up: int) -> None:
    """Wait until `sum(up)` of the job is `up`."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        params = {"query": f'sum(up{{job="{job}"}})'}
        result = httpx.get(f"{server.url}/api/v1/query", params=params).json()["data"]["result"]
        if result and float(result[0]["value"][1]) == up:
            return
        time.sleep(0.2)
    raise AssertionError(f"up of {job} never became {up}")


async def test_scrape_targets_that_are_down_are_said(scraping: PromServer) -> None:
    """Some of the lane's engines down: the read says how many; all down: the lane is down
    (its engine absent, asked again every refresh), not "ok" with the window's old data."""
    first, second = (Engine(port) for port in take_ports("pair"))
    server = scraping
    source = PrometheusSource(server.url, stats=True)
    try:
        await asyncio.to_thread(_wait_up, server, "pair", 2)
        both = await source.read_lane("pair", None, '{job="pair"}', 60)
        # Now, not the window's mean: that depends on when each engine's first scrape landed.
        assert both.warnings == () and both.values["running_now"] == 6.0
        second.stop()
        await asyncio.to_thread(_wait_up, server, "pair", 1)
        one = await source.read_lane("pair", None, '{job="pair"}', 60)
        assert one.warnings == ("1 of 2 scrape targets down (up == 0)",)
        first.stop()
        await asyncio.to_thread(_wait_up, server, "pair", 0)
        with pytest.raises(SourceError, match=r"2 scrape target\(s\) are down") as down:
            await source.read_lane("pair", None, '{job="pair"}', 60)
        assert down.value.engine_absent
        # While it is down, a long window's next refreshes ask only `up`, not the figures.
        touched = []
        for _ in range(2):
            with pytest.raises(SourceError, match="are down"):
                await source.read_lane("pair", None, '{job="pair"}', 7 * 86400)
            touched.append(source.last_samples or 0)
        assert touched[1] == 4 < touched[0]  # count(up) and sum(up) of the two targets
    finally:
        await source.aclose()
        first.stop()  # again: a stopped server's stop returns at once
        second.stop()

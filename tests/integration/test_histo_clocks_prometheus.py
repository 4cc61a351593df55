"""An engine whose clock runs a minute fast, scraped by a real Prometheus that keeps the
exposition's own timestamps: the lane says its clocks disagree, and by how much, instead of
calling its series stale or showing minute-old values as fresh."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from cockpit.core.model import LaneTotals
from cockpit.sources.prometheus import PrometheusSource, SourceError
from tests.support.faultlane import shared_lane_prometheus, take_ports
from tests.support.promharness import PromServer

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]
AHEAD = re.compile(r"the lane's samples are stamped (\d+) s ahead of the evaluation time")


class FastClock(BaseHTTPRequestHandler):
    """An engine stamping its samples `ahead` seconds past this machine's time."""

    ahead = 0.0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        stamp = int((time.time() + type(self).ahead) * 1000)  # the engine's own (fast) clock
        labels = 'model_name="m",engine="0"'
        body = (
            f"vllm:num_requests_running{{{labels}}} 4 {stamp}\n"
            f"vllm:prompt_tokens_total{{{labels}}} {stamp % 100000} {stamp}\n"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def engine(ahead: float, port: int) -> tuple[ThreadingHTTPServer, type[FastClock]]:
    handler = type("Handler", (FastClock,), {"ahead": ahead})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server, handler


@pytest.fixture(scope="module")
def lanes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PromServer, type[FastClock]]]:
    server = shared_lane_prometheus(tmp_path_factory.mktemp("prom-lane"))[1]
    fast, _ = engine(60.0, take_ports("fast")[0])  # fast from its first sample on
    jumped, jumping = engine(0.0, take_ports("jumped")[0])  # in step at first, then a minute fast
    try:
        wait_for_samples(server, "fast", ahead=120)
        wait_for_samples(server, "jumped", ahead=0)
        jumping.ahead = 60.0
        wait_for_samples(server, "jumped", ahead=120, at_least=3)
        yield server, jumping
    finally:
        for one in (fast, jumped):
            one.shutdown()
            one.server_close()


def wait_for_samples(server: PromServer, job: str, ahead: float, at_least: int = 2) -> None:
    """Until Prometheus holds samples of the job's lane up to `ahead` s past now."""
    query = f'count_over_time(vllm:num_requests_running{{job="{job}"}}[{ahead + 60:.0f}s])'
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        at = time.time() + ahead
        body = httpx.get(f"{server.url}/api/v1/query", params={"query": query, "time": at}).json()
        result = body["data"]["result"]
        if result and float(result[0]["value"][1]) >= at_least:
            return
        time.sleep(0.2)
    raise AssertionError(f"prometheus did not scrape {job}")


def seconds_ahead(text: str) -> float:
    found = AHEAD.search(text)
    assert found, text
    return float(found.group(1))


async def read(server: PromServer, job: str) -> LaneTotals:
    source = PrometheusSource(server.url)
    try:
        return await source.read_lane(job, "vllm", f'{{job="{job}"}}', 300)
    finally:
        await source.aclose()


async def test_only_samples_from_the_future_are_said_to_be_so(
    lanes: tuple[PromServer, type[FastClock]],
) -> None:
    server, _ = lanes
    with pytest.raises(SourceError) as failed:
        await read(server, "fast")
    said = str(failed.value)
    assert "went stale" not in said
    assert 40 <= seconds_ahead(said) <= 61, said
    assert said.endswith("none is at or before it yet"), said


async def test_values_read_behind_samples_from_the_future_say_how_old_they_may_be(
    lanes: tuple[PromServer, type[FastClock]],
) -> None:
    server, _ = lanes
    totals = await read(server, "jumped")
    warnings = " | ".join(totals.warnings)
    assert 40 <= seconds_ahead(warnings) <= 61, warnings
    assert "the values read are up to that much older than they look" in warnings

"""A direct scrape when clocks lie: this machine's wall clock steps, or the engine stamps its
samples ahead of it. The clocks are injected; the engine is a real HTTP server on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cockpit.core.figures import lane_figures
from cockpit.sources.scrape import ScrapeSource

START = 1_790_000_000.0
LABELS = 'model_name="m",engine="0"'
NOW_KEYS = ("running_now", "waiting_now", "kv_usage_now")
RATE_KEYS = ("requests_per_s", "prompt_tok_s", "requests_per_s_1m", "prompt_tok_s_1m")


class Engine(BaseHTTPRequestHandler):
    text = ""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = type(self).text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def engine() -> Iterator[type[Engine]]:
    handler = type("Handler", (Engine,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}/metrics"  # type: ignore[attr-defined]
    yield handler
    server.shutdown()
    server.server_close()


def exposition(n: int, stamp: float | None = None) -> str:
    at = f" {int(stamp * 1000)}" if stamp is not None else ""
    lines = [
        f"vllm:num_requests_running{{{LABELS}}} 4{at}",
        f"vllm:num_requests_waiting{{{LABELS}}} 14{at}",
        f"vllm:kv_cache_usage_perc{{{LABELS}}} 0.87{at}",
        f'vllm:request_success_total{{{LABELS},finished_reason="stop"}} {2 * n}{at}',
        f"vllm:prompt_tokens_total{{{LABELS}}} {100 * n}{at}",
    ]
    return "\n".join(lines) + "\n"


class Clock:
    """A wall clock and a steady one that the test moves."""

    def __init__(self) -> None:
        self.wall_at, self.steady_at = START, 500.0

    def wall(self) -> float:
        return self.wall_at

    def steady(self) -> float:
        return self.steady_at

    def tick(self, seconds: float = 5.0) -> None:
        self.wall_at += seconds
        self.steady_at += seconds


async def poll(source: ScrapeSource, engine: type[Engine], clock: Clock, n: int) -> None:
    engine.text = exposition(n)
    await source.poll()
    clock.tick()


def assert_lane_reads(source: ScrapeSource) -> list[str]:
    totals = source.totals("lane", "{}", 300, None)
    figures = lane_figures(totals).figures
    for key in (*NOW_KEYS, *RATE_KEYS):
        assert figures[key].value is not None, (key, figures[key].reason)
    assert figures["waiting_now"].value == 14 and figures["kv_usage_now"].value == 0.87
    assert figures["requests_per_s"].value == pytest.approx(2 / 5)
    return list(totals.warnings)


async def test_a_backward_step_of_the_wall_clock_blanks_nothing(engine: type[Engine]) -> None:
    clock = Clock()
    source = ScrapeSource(engine.url, wall=clock.wall, steady=clock.steady)  # type: ignore[attr-defined]
    try:
        for n in range(6):
            await poll(source, engine, clock, n)
        clock.wall_at -= 120  # NTP steps the clock back two minutes
        for n in range(6, 12):
            await poll(source, engine, clock, n)
        warnings = assert_lane_reads(source)
    finally:
        await source.aclose()
    assert warnings[0].startswith("this machine's clock stepped back by 2 min"), warnings


async def test_a_day_forward_and_back_blanks_nothing(engine: type[Engine]) -> None:
    clock = Clock()
    source = ScrapeSource(engine.url, wall=clock.wall, steady=clock.steady)  # type: ignore[attr-defined]
    try:
        for n in range(4):
            await poll(source, engine, clock, n)
        clock.wall_at += 86400
        for n in range(4, 8):
            await poll(source, engine, clock, n)
        assert_lane_reads(source)
        clock.wall_at -= 86400
        for n in range(8, 14):
            await poll(source, engine, clock, n)
        assert assert_lane_reads(source) == []  # back in step: nothing to say
    finally:
        await source.aclose()


@pytest.mark.parametrize("ahead", [60.0, 0.0])
async def test_samples_stamped_ahead_of_this_machine_are_said_to_be(
    engine: type[Engine], ahead: float
) -> None:
    clock = Clock()
    source = ScrapeSource(engine.url, wall=clock.wall, steady=clock.steady)  # type: ignore[attr-defined]
    try:
        for n in range(4):
            engine.text = exposition(n, clock.wall_at + ahead)
            await source.poll()
            clock.tick()
        warnings = assert_lane_reads(source)
    finally:
        await source.aclose()
    said = [w for w in warnings if "ahead of this machine's clock" in w]
    if ahead:
        assert said == [
            "the engine's samples are stamped 1 min ahead of this machine's clock "
            "(the clocks disagree): read as of each scrape"
        ]
    else:
        assert said == []

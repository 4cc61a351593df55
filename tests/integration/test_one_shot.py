"""One-shot reads (`cockpit report`, `cockpit check`) of a lane read by direct scrape, on the
simulated vLLM lane served over HTTP: two scrapes a stated interval apart, so counters are
rates over that interval and the receipt says how much was watched."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time

from prometheus_client.core import Metric

from cockpit.config.schema import Config, LaneConfig
from cockpit.demo.lane import SimulatedLane, serve_metrics
from cockpit.runtime.feeds import read_once
from cockpit.sources.buffer import span
from tests.support.loopback import line_sum

WINDOW = "5m"
SAMPLE_S = 1.0
LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})? (\S+)$")


class CountedLane(SimulatedLane):
    """The simulated lane, noting when each scrape read it; it moves only when stepped."""

    def __init__(self) -> None:
        super().__init__(seed=5, warm_start=900.0)  # started before the window
        self.scraped: list[float] = []
        self.first = threading.Event()

    def families(self) -> list[Metric]:
        families = super().families()
        self.scraped.append(time.time())
        self.first.set()
        return families


async def test_report_counts_between_its_two_scrapes() -> None:
    lane = CountedLane()
    server, _ = serve_metrics(lane.registry, 0)  # served, never stepped on its own
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    config = Config(source="<test>", lanes=(LaneConfig("sim", metrics_url=url),), window=WINDOW)
    try:
        before = lane.render()
        lane.scraped.clear()
        lane.first.clear()
        read = asyncio.create_task(read_once(config, None, None, SAMPLE_S))
        await asyncio.to_thread(lane.first.wait, 10)
        lane.step(30.0)  # between the cockpit's first and second scrape
        after = lane.render()
        snapshot, _, errors = await read
    finally:
        server.shutdown()
        server.server_close()
    assert errors == []
    assert snapshot is not None and snapshot.totals is not None
    totals = snapshot.totals
    name = "vllm:prompt_tokens_total"
    prompt = line_sum(after, name) - line_sum(before, name)
    assert prompt > 0 and totals.values["prompt_tokens"] == prompt
    running = [line_sum(text, "vllm:num_requests_running") for text in (before, after)]
    assert totals.values["running"] == sum(running) / 2  # both samples, not one
    first, second = lane.scraped[0], lane.scraped[-1]  # the cockpit's two (the test's between)
    assert second - first >= SAMPLE_S
    assert totals.covered_s is not None and abs(totals.covered_s - (second - first)) < 0.5
    assert totals.coverage_note == f"watched {span(totals.covered_s)} of {WINDOW}"
    assert "needs a second scrape" not in totals.missing.values()


def cockpit(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cockpit", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_report_and_check_say_what_they_watched() -> None:
    with SimulatedLane(seed=2, warm_start=900.0) as lane:
        flags = ("--metrics-url", lane.url, "--window", WINDOW, "--sample", "1s")
        reported = cockpit("report", *flags, "--format", "json")
        checked = cockpit("check", *flags)
        single = cockpit("check", *flags[:-1], "0")
    assert reported.returncode == 0, reported.stderr
    receipt = json.loads(reported.stdout)["lane"]
    assert re.fullmatch(r"watched \d s of 5m", receipt["coverage"]), receipt["coverage"]
    assert "needs a second scrape" not in json.dumps(receipt["missing"])
    assert receipt["figures"]["prompt_tok_s"]["value"] is not None  # a rate, 0 when idle
    assert checked.returncode == 0 and "watched " in checked.stdout.splitlines()[-1]
    assert "needs a second scrape" not in checked.stdout
    assert "needs a second scrape" in single.stdout.splitlines()[-1]


async def test_since_start_counts_the_engines_whole_life() -> None:
    lane = CountedLane()  # started 15 minutes ago, standing still
    server, _ = serve_metrics(lane.registry, 0)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    config = Config(source="<test>", lanes=(LaneConfig("sim", metrics_url=url),), window=WINDOW)
    try:
        snapshot, _, errors = await read_once(config, None, None, from_start=True)
        text = lane.render()
    finally:
        server.shutdown()
        server.server_close()
    assert errors == [] and snapshot is not None and snapshot.totals is not None
    totals = snapshot.totals
    for key, name in (("prompt_tokens", "vllm:prompt_tokens_total"),
                      ("requests", "vllm:request_success_total")):  # fmt: skip
        assert totals.values[key] == line_sum(text, name) > 0  # from 0 at `_created`
    assert totals.coverage_note.startswith("since engine start (")
    assert totals.window_s > 900 and snapshot.window != WINDOW


async def test_since_start_needs_a_direct_scrape() -> None:
    config = Config(source="<t>", lanes=(LaneConfig("p", prometheus="http://127.0.0.1:9"),))
    snapshot, _, errors = await read_once(config, None, None, from_start=True)
    assert snapshot is None
    assert errors == ["lane p: --since-start reads an engine's /metrics (--metrics-url)"]

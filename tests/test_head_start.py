"""The first reads start before the UI loads and the app takes them over, never reading twice.

Real sources: the demo's simulated vLLM lane (its /metrics behind a loopback proxy that counts
and can delay requests) and the simulated Hermes writing its ledger.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cockpit.app import make_app
from cockpit.config import Config, parse_config
from cockpit.demo import SimulatedHermes, SimulatedLane
from cockpit.feeds import build_feeds
from cockpit.head_start import HeadStart, build_pollers
from tests.faultproxy import FaultProxy


@pytest.fixture
def sources(tmp_path: Path) -> Iterator[tuple[FaultProxy, Path]]:
    lane = SimulatedLane("h100-llama8b", seed=1)
    url = lane.start()
    hermes = SimulatedHermes(tmp_path / "state.db", seed=1, history_sessions=50).start()
    proxy = FaultProxy(url.removesuffix("/metrics")).start()
    try:
        yield proxy, hermes.path
    finally:
        proxy.stop()
        hermes.close()
        lane.stop()


def config_for(proxy: FaultProxy, ledger: Path) -> Config:
    data = {
        "lanes": [{"name": "lab", "metrics_url": f"{proxy.url}/metrics", "engine": "vllm"}],
        "ledgers": [str(ledger)],
        "window": "5m",
        "ledger_window": "1d",
        "refresh": 3600,
    }
    return parse_config(yaml.safe_dump(data), "<test>")


def head_start(config: Config) -> tuple[HeadStart, tuple[object, ...]]:
    lanes, ledger = build_feeds(config)
    pollers = build_pollers(config, lanes, ledger, config.refresh_s)
    head = HeadStart(pollers, config.window, config.ledger_window or config.window).start()
    return head, (config, lanes, ledger)


def test_the_app_paints_the_reads_made_while_it_loaded(sources: tuple[FaultProxy, Path]) -> None:
    proxy, ledger_path = sources
    config = config_for(proxy, ledger_path)
    head, (config, lanes, ledger) = head_start(config)
    loop = head.handover(wait_s=20)
    assert head.lane_read is not None and head.ledger_read is not None
    assert head.lane_read.done() and head.ledger_read.done()
    lane_first, ledger_first = head.lane_read.result(), head.ledger_read.result()
    assert lane_first.figures is not None, lane_first.freshness
    assert ledger_first.figures is not None, ledger_first.freshness
    app = make_app(config, lanes, ledger, head_start=head)  # type: ignore[arg-type]

    async def first_paint() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            assert app.lane_snapshot is lane_first
            assert app.ledger_snapshot is ledger_first
            await asyncio.sleep(0.5)
            assert proxy.requests_to("/metrics") == 1, "the app read the lane again"

    try:
        loop.run_until_complete(first_paint())
    finally:
        head.close()
    assert loop.is_closed()


def test_a_read_still_out_at_handover_lands_in_the_app(sources: tuple[FaultProxy, Path]) -> None:
    proxy, ledger_path = sources
    proxy.mode, proxy.delay_s = "delay", 1.0
    head, (config, lanes, ledger) = head_start(config_for(proxy, ledger_path))
    loop = head.handover()
    assert head.lane_read is not None and not head.lane_read.done()
    app = make_app(config, lanes, ledger, head_start=head)  # type: ignore[arg-type]

    async def wait_for_the_lane() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            deadline = time.monotonic() + 10
            while app.lane_snapshot is None:
                assert time.monotonic() < deadline, "the lane read never landed"
                await pilot.pause(0.05)
            assert head.lane_read is not None
            assert app.lane_snapshot is head.lane_read.result()
            assert app.lane_snapshot.figures is not None
            assert proxy.requests_to("/metrics") == 1

    try:
        loop.run_until_complete(wait_for_the_lane())
    finally:
        head.close()


def test_quitting_before_a_slow_first_read_ends_cancels_it(
    sources: tuple[FaultProxy, Path],
) -> None:
    proxy, ledger_path = sources
    proxy.mode, proxy.delay_s = "delay", 30.0
    head, (config, lanes, ledger) = head_start(config_for(proxy, ledger_path))
    loop = head.handover()
    app = make_app(config, lanes, ledger, head_start=head)  # type: ignore[arg-type]

    async def quit_at_once() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("q")

    started = time.monotonic()
    try:
        loop.run_until_complete(quit_at_once())
    finally:
        head.close()
    assert time.monotonic() - started < 10
    assert head.lane_read is not None and head.lane_read.cancelled()


def test_a_new_window_cancels_the_first_read_still_out(sources: tuple[FaultProxy, Path]) -> None:
    """Like a worker's cycle, the adopted first read is dropped when the state moves on."""
    proxy, ledger_path = sources
    proxy.mode, proxy.delay_s = "delay", 2.0
    head, (config, lanes, ledger) = head_start(config_for(proxy, ledger_path))
    loop = head.handover()
    app = make_app(config, lanes, ledger, head_start=head)  # type: ignore[arg-type]

    async def switch_window() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            assert head.lane_read is not None and not head.lane_read.done()
            await pilot.press("w")
            await pilot.pause(0.1)
            assert head.lane_read.cancelled()
            deadline = time.monotonic() + 10
            while app.lane_snapshot is None:
                assert time.monotonic() < deadline, "the new window's read never landed"
                await pilot.pause(0.05)
            assert app.lane_snapshot.window == app.window != config.window

    try:
        loop.run_until_complete(switch_window())
    finally:
        head.close()

"""The refresh cycle without Textual: figures, freshness, back-off, latency."""

from __future__ import annotations

import pytest

from cockpit.config.schema import Config, LaneConfig
from cockpit.core.health import Thresholds, check
from cockpit.core.model import Freshness, SourceFailure
from cockpit.runtime.feeds import build_lane_feeds
from cockpit.runtime.poller import Clocks, LanePoller, LedgerPoller, close_all, failure_reason
from cockpit.widgets.vitals import down_message
from tests.support.feeds import (
    EVAL_AT,
    ScriptedLaneFeed,
    ScriptedLedgerFeed,
    SourceDown,
    fixed_clocks,
)
from tests.support.promharness import PromServer, free_port


class Wall:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def rate_limited(retry_after: float) -> SourceFailure:
    return SourceFailure(f"429 too many requests, retry after {retry_after:.0f} s", retry_after)


async def test_a_good_read_gives_fresh_figures_from_the_totals() -> None:
    feed = ScriptedLaneFeed("lane-a")
    poller = LanePoller(feed, 5.0, clocks=fixed_clocks(latency_s=0.25))
    snapshot = await poller.cycle("1h")
    assert snapshot.freshness.state == "ok"
    assert snapshot.lane == "lane-a" and snapshot.window == "1h"
    assert feed.reads == [(3600.0, None)]
    assert snapshot.figures is not None
    assert snapshot.figures.value("prefix_cache_hit_rate") == pytest.approx(18_320_000 / 20_000_000)
    assert snapshot.latency_s == pytest.approx(0.25)
    assert snapshot.hardware is feed.hardware and snapshot.model is feed.model
    assert poller.delay == 5.0


async def test_host_kv_tokens_are_added_to_the_resident_tokens() -> None:
    feed = ScriptedLaneFeed("lane-a", host_kv_tokens=1_000_000)
    snapshot = await LanePoller(feed, 5.0).cycle("1h")
    assert snapshot.figures is not None
    # kv_usage 0.6 of a 500,000-token GPU cache, plus the host tier
    assert snapshot.figures.value("kv_resident_tokens") == pytest.approx(0.6 * 500_000 + 1e6)


async def test_a_failure_after_a_good_read_keeps_the_figures_marked_stale() -> None:
    wall = Wall(1000.0)
    feed = ScriptedLaneFeed("lane-a")
    poller = LanePoller(feed, 5.0, clocks=Clocks(wall=wall))
    good = await poller.cycle("1h")
    feed.failure = SourceDown("connection refused (127.0.0.1:9090)")
    wall.now = 1010.0
    first = await poller.cycle("1h")
    wall.now = 1030.0
    second = await poller.cycle("1h")
    for stale in (first, second):
        assert stale.freshness.state == "stale"
        assert stale.freshness.since == 1010.0
        assert stale.freshness.reason == "connection refused (127.0.0.1:9090)"
        assert stale.figures == good.figures
    feed.failure = None
    wall.now = 1060.0
    recovered = await poller.cycle("1h")
    assert recovered.freshness == Freshness("ok")


async def test_a_source_that_never_answered_is_missing_with_its_reason() -> None:
    feed = ScriptedLedgerFeed(failure=SourceDown("state.db: unable to open database file"))
    snapshot = await LedgerPoller(feed, 5.0).cycle("1h")
    assert snapshot.freshness.state == "missing"
    assert snapshot.freshness.reason == "state.db: unable to open database file"
    assert snapshot.figures is None and snapshot.totals is None


async def test_a_lane_never_reached_is_missing_since_its_first_failure() -> None:
    wall = Wall(1000.0)
    feed = ScriptedLaneFeed("lane-a", failure=SourceDown("connection refused (127.0.0.1:9090)"))
    poller = LanePoller(feed, 5.0, clocks=Clocks(wall=wall))
    first = await poller.cycle("1h")
    wall.now = 1030.0
    second = await poller.cycle("1h")
    for down in (first, second):
        assert down.freshness.state == "missing" and down.figures is None
        assert down.freshness.since == 1000.0, "down since the first failure, not the latest"
    feed.failure = None
    assert (await poller.cycle("1h")).freshness.since is None


async def test_the_waiting_streak_counts_good_refreshes_in_a_row_with_requests_waiting() -> None:
    feed = ScriptedLaneFeed("lane-a", changes={"waiting_now": 2.0})
    poller = LanePoller(feed, 5.0)
    streaks = [(await poller.cycle("1h")).waiting_streak for _ in range(3)]
    feed.failure = SourceDown("timeout after 10 s")
    streaks.append((await poller.cycle("1h")).waiting_streak)
    feed.failure = None
    streaks.append((await poller.cycle("1h")).waiting_streak)
    feed.changes = {"waiting_now": 0.0, "waiting": 0.0}
    streaks.append((await poller.cycle("1h")).waiting_streak)
    assert streaks == [1, 2, 3, 0, 1, 0]


async def test_a_window_never_read_is_missing_not_the_other_windows_figures() -> None:
    feed = ScriptedLaneFeed("lane-a")
    poller = LanePoller(feed, 5.0)
    await poller.cycle("1h")
    feed.failure = SourceDown("timeout after 10 s")
    other = await poller.cycle("24h")
    assert other.freshness.state == "missing" and other.figures is None
    back = await poller.cycle("1h")
    assert back.freshness.state == "stale" and back.figures is not None


async def test_back_off_doubles_up_to_the_cap_and_resets_on_success() -> None:
    feed = ScriptedLaneFeed("lane-a", failure=SourceDown("down"))
    poller = LanePoller(feed, 5.0)
    delays = []
    for _ in range(6):
        await poller.cycle("1h")
        delays.append(poller.delay)
    assert delays == [5.0, 10.0, 20.0, 40.0, 60.0, 60.0]
    feed.failure = None
    await poller.cycle("1h")
    assert poller.delay == 5.0 and poller.failures == 0


async def test_a_lane_not_there_yet_is_asked_again_every_refresh() -> None:
    """A healthy server without the lane's series yet (an engine loading its model) is no
    reason to back off: the lane must show at the first refresh after it comes up."""
    not_yet = SourceFailure("no vllm: or sglang: metrics found for this lane", engine_absent=True)
    feed = ScriptedLaneFeed("lane-a", failure=SourceDown("503 service unavailable"))
    poller = LanePoller(feed, 5.0)
    await poller.cycle("1h")
    await poller.cycle("1h")
    assert poller.delay == 10.0
    feed.failure = not_yet
    delays = []
    for _ in range(4):
        snapshot = await poller.cycle("1h")
        delays.append(poller.delay)
    assert delays == [5.0] * 4
    assert snapshot.freshness.state == "missing"
    assert snapshot.freshness.reason == "no vllm: or sglang: metrics found for this lane"
    feed.failure = None
    assert (await poller.cycle("1h")).freshness.state == "ok"


async def test_retry_after_on_the_error_is_honoured() -> None:
    feed = ScriptedLedgerFeed(failure=rate_limited(45.0))
    poller = LedgerPoller(feed, 5.0)
    await poller.cycle("1h")
    assert poller.delay == 45.0


async def test_backoff_cap_is_never_below_the_refresh_interval() -> None:
    poller = LanePoller(ScriptedLaneFeed("lane-a", failure=SourceDown("down")), 120.0)
    for _ in range(3):
        await poller.cycle("1h")
        assert poller.delay == 120.0  # the cap is 60 s


async def test_replay_reads_end_at_the_replayed_moment() -> None:
    feed = ScriptedLaneFeed("lane-a")
    snapshot = await LanePoller(feed, 5.0, replay_at=1_700_000_000.0).cycle("6h")
    assert feed.reads == [(6 * 3600.0, 1_700_000_000.0)]
    assert snapshot.totals is not None and snapshot.totals.end == 1_700_000_000.0


async def test_ledger_figures_use_the_configured_prices() -> None:
    from cockpit.core.ledger_figures import Prices

    prices = Prices(input=1.0, cache_read=0.5, cache_write=1.0, output=2.0)
    snapshot = await LedgerPoller(ScriptedLedgerFeed(), 5.0, prices=prices).cycle("1h")
    assert snapshot.figures is not None
    # totals in the feed: input 1.0 M, cache read 30 M, cache write 2 M, output 180 k
    expected = 1_000_000 * 1.0 + 30_000_000 * 0.5 + 2_000_000 * 1.0 + 180_000 * 2.0
    assert snapshot.figures["spend_units"].value == pytest.approx(expected)


def test_failure_reason_is_the_first_line_or_the_type() -> None:
    assert failure_reason(SourceDown("one\ntwo")) == "one"
    assert failure_reason(TimeoutError()) == "TimeoutError"


async def test_an_error_that_is_not_a_source_failure_is_shown_and_polling_goes_on() -> None:
    feed = ScriptedLaneFeed("lane-a", failure=KeyError("model_name"))
    poller = LanePoller(feed, 5.0)
    snapshot = await poller.cycle("1h")
    assert snapshot.freshness.state == "missing"
    assert snapshot.freshness.reason == "'model_name'"
    feed.failure = None
    assert (await poller.cycle("1h")).freshness.state == "ok"


NO_SUCH_JOB = 'job="poller-no-engine"'
"""A lane no test writes, so the run's Prometheus has no series of it."""


async def lane_down_as_read(prometheus: str) -> tuple[Freshness, str, str]:
    """A real lane feed on `prometheus`, read once: its freshness, the health line's finding
    and the vital strip's message."""
    lane = LaneConfig("lane-a", prometheus=prometheus, selector=NO_SUCH_JOB, timeout_s=5.0)
    feeds = build_lane_feeds(Config(source="<test>", lanes=(lane,)))
    try:
        snapshot = await LanePoller(feeds[0], 5.0, clocks=Clocks(wall=lambda: EVAL_AT)).cycle("5m")
    finally:
        await close_all(feeds, None)
    (finding,) = check(snapshot, Thresholds())
    return snapshot.freshness, finding.text, down_message(snapshot)


async def test_a_prometheus_that_refuses_is_the_source_down_not_the_engine() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there: connection refused
    freshness, finding, strip = await lane_down_as_read(url)
    assert (freshness.state, freshness.cause) == ("missing", "source")
    assert finding == f"source unreachable since 14:13:20 UTC: {url}: connection refused"
    assert strip == "source unreachable since 14:13:20 UTC · connection refused"


@pytest.mark.prometheus
async def test_a_prometheus_without_the_lane_s_series_says_the_engine_is_down(
    prometheus: PromServer,
) -> None:
    freshness, finding, strip = await lane_down_as_read(prometheus.url)  # answers, no lane series
    assert (freshness.state, freshness.cause) == ("missing", "engine")
    assert finding.startswith("engine DOWN since 14:13:20 UTC: ")
    assert strip.startswith("engine DOWN since 14:13:20 UTC · ")

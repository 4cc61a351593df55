"""The triage screen as a user reads it: vital signs, health, tails, trends, spec decoding and
what folds away, read from the rendered screen of the app on scripted feeds."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from cockpit.app.app import CockpitApp, make_app
from cockpit.core.health import Thresholds, check
from cockpit.core.model import Trend
from cockpit.widgets.pane import SPARK_BLOCKS, short_reason, sparkline
from cockpit.widgets.trends import step_text
from cockpit.widgets.vitals import vital_items
from tests.support.feeds import (
    ScriptedLaneFeed,
    ScriptedLedgerFeed,
    SourceDown,
    config,
    fixed_clocks,
    lane_trend,
)
from tests.support.pilot import settle
from tests.support.screentext import screen_text
from tests.support.snapshots import lane_snapshot

pytestmark = pytest.mark.usefixtures("utc")


def cockpit(*lanes: ScriptedLaneFeed, ledger: bool = True) -> CockpitApp:
    feeds = list(lanes) or [ScriptedLaneFeed()]
    names = [feed.name for feed in feeds]
    ledger_feed = ScriptedLedgerFeed() if ledger else None
    return make_app(config(*names), feeds, ledger_feed, clocks=fixed_clocks())


async def shown(app: CockpitApp, size: tuple[int, int] = (160, 48)) -> str:
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        return screen_text(app)


def rows_of(text: str, title: str) -> Iterator[str]:
    """The inside of the pane titled `title` (one column of panes), row by row."""
    lines = text.split("\n")
    for y, line in enumerate(lines):
        start = line.find(f"╭─ {title}")
        if start < 0:
            continue
        end = line.index("╮", start)
        for row in lines[y + 1 :]:
            if row[start] == "╰":
                return
            yield row[start + 1 : end].strip()
    raise AssertionError(f"no pane {title!r} on screen:\n{text}")


async def test_the_vital_strip_says_what_the_lane_does_now_under_the_status_line() -> None:
    text = await shown(cockpit())
    top = "\n".join(text.split("\n")[1:3])
    for item in (
        "running 7",
        "waiting 2 (capacity 2, deferred 0)",
        "KV 64.0%",
        "req/s 0.278 · 1m 0.3",  # 1,000 requests in the hour; 18 in the last minute
        "prompt 5,556 tok/s · 1m 6,000",
        "gen 111 tok/s · 1m 120",
        "finished 1,000: stop 940 length 52 abort 6 error 2",
        "preempted 3",
    ):
        assert item in top, (item, top)
    assert "rejected" not in text  # the engine does not expose admission rejections


DOWN_CASES = [
    (SourceDown('no series match {job="lane-a"}', engine_absent=True), "engine DOWN"),
    (SourceDown("http://127.0.0.1:9: connection refused", unreachable=True), "source unreachable"),
    (SourceDown("http://127.0.0.1:9090: 503 service unavailable"), "source failing"),
]


@pytest.mark.parametrize(("failure", "said"), DOWN_CASES)
async def test_a_lane_down_says_what_is_down_and_since_when(failure: SourceDown, said: str) -> None:
    """The engine is called down only when the source answers without it: a source that can't
    be reached, or errs, is said to be the source's failure (on the strip and the health line)."""
    text = await shown(cockpit(ScriptedLaneFeed(failure=failure)))
    lines = text.split("\n")
    reason = short_reason(failure.reason)
    assert lines[1].strip() == f"{said} since 14:13:25 UTC · {reason}"
    assert lines[2].strip() == f"▲ {said} since 14:13:25 UTC: {failure.reason}"
    assert "running" not in text


async def test_the_health_line_names_each_rule_that_fires_or_says_healthy() -> None:
    busy = ScriptedLaneFeed(changes={"kv_usage_now": 0.95, "preemptions": 0.0})
    text = await shown(cockpit(busy))
    health = text.split("\n")[3]
    assert health.lstrip().startswith("▲") and "95.0%" in health and "90" in health, health
    calm = ScriptedLaneFeed(changes={"preemptions": 0.0})
    text = await shown(cockpit(calm))
    assert "✓ healthy" in text and "▲" not in text


def test_a_figure_a_health_rule_flags_takes_the_rule_colour_in_the_strip() -> None:
    lane = lane_snapshot(kv_usage_now=0.95)
    assert lane.figures is not None
    findings = check(lane, Thresholds())
    assert {f.figure_key for f in findings} >= {"kv_usage_now", "preemptions"}
    tones = {label: tone for label, _, tone in vital_items(lane.figures.figures, {})}
    assert set(tones.values()) == {"plain"}
    flagged = {f.figure_key: f.severity for f in findings}
    tones = {label: tone for label, _, tone in vital_items(lane.figures.figures, flagged)}
    assert tones["KV"] == flagged["kv_usage_now"] and tones["preempted"] == flagged["preemptions"]
    assert tones["running"] == tones["req/s"] == "plain"


async def test_the_tails_sit_beside_the_mean_and_a_quantile_past_the_buckets_is_a_bound() -> None:
    rows = list(rows_of(await shown(cockpit(), (250, 70)), "Latency tails"))
    assert rows[0].split() == ["mean", "p50", "p90", "p95", "p99"]
    table = {row.split()[0]: row for row in rows[1:]}
    # TTFT: the 500th of 1,000 requests lies 200/250 into the (0.1 s, 0.25 s] bucket.
    assert table["TTFT"].split() == ["TTFT", "0.90", "s", "0.22", "s", "1.00", "s", "2.07", "s",
                                     "5.00", "s"]  # fmt: skip
    assert table["End-to-end"].endswith("> 60.00 s")  # 1.5 % of requests took longer than 60 s
    assert set(table) == {"TTFT", "Inter-token", "TPOT", "End-to-end", "Queue"}


async def test_the_tails_have_the_overviews_p95_in_compact_cells() -> None:
    rows = list(rows_of(await shown(cockpit()), "Latency tails"))
    assert rows[0].split() == ["mean", "p50", "p90", "p95", "p99"]
    table = {row.split()[0]: row.split() for row in rows[1:]}
    assert table["TTFT"] == ["TTFT", "0.90s", "0.22s", "1.00s", "2.07s", "5.00s"]


async def test_at_80_columns_the_tails_keep_the_mean_and_p95_in_compact_cells() -> None:
    rows = list(rows_of(await shown(cockpit(), (80, 60)), "Latency tails"))
    assert rows[0].split() == ["mean", "p50", "p95", "p99"]
    table = {row.split()[0]: row.split() for row in rows[1:]}
    assert table["TTFT"] == ["TTFT", "0.90s", "0.22s", "2.07s", "5.00s"]
    assert table["ITL"] == ["ITL", "20.0ms", "19.2ms", "72.7ms", "0.19s"]
    assert table["E2E"][-2:] == ["36.67s", ">60s"]  # a lower bound, apart from its neighbour


async def test_trends_state_their_step_and_leave_a_gap_blank() -> None:
    text = await shown(cockpit())
    assert "╭─ Trends · step 1 min" in text
    rows = {row[:11].strip(): row[12:] for row in rows_of(text, "Trends · step 1 min")}
    assert list(rows) == ["Hit rate", "TTFT p95", "Step (ITL)", "Gen tok/s", "Running avg",
                          "Waiting avg", "KV use avg", "avg: the me"]  # fmt: skip
    del rows["avg: the me"]  # the note: the gauges' points are means per step
    for name, row in rows.items():
        line = row[: max(row.rfind(block) for block in SPARK_BLOCKS) + 1].strip()
        assert " " in line, name  # the four minutes with no data: blank, not ▁
        assert row[len(line) :].strip(), name  # the latest point beside
    assert rows["KV use avg"].endswith("55.4%")  # the trend's last point


def test_a_sparkline_spreads_its_points_leaves_gaps_blank_and_draws_zero_low() -> None:
    assert sparkline((0.0, 0.5, 1.0), 3, 1.0) == "▁▅█"
    assert sparkline((1.0, None, 1.0), 3) == "█ █"
    assert sparkline((0.0, 1.0), 4) == "▁▁██"  # fewer points than cells: stretched
    assert sparkline((0.0, 0.0, 1.0, 1.0), 2) == "▁█"  # more: each cell the mean of its own
    assert sparkline((None, None), 5) == "     "
    assert sparkline((), 5) == ""


def test_the_step_reads_in_the_unit_a_person_would_say() -> None:
    assert [step_text(s) for s in (15, 60, 120, 1800, 7200)] == [
        "step 15 s", "step 1 min", "step 2 min", "step 30 min", "step 2 h"
    ]  # fmt: skip


async def test_speculative_decoding_shows_only_on_a_lane_that_drafts() -> None:
    text = await shown(cockpit(ScriptedLaneFeed(spec=True)))
    decode = list(rows_of(text, "Phases & decode"))
    assert any(row.startswith("Draft acceptance") and row.endswith("57.0%") for row in decode)
    assert any(row.endswith("78% 56% 37%") for row in decode)  # per draft position
    text = await shown(cockpit(ScriptedLaneFeed()))
    assert "Draft acceptance" not in text and "by position" not in text


async def test_no_ledger_folds_its_panes_into_one_line_naming_the_key_and_the_flag() -> None:
    text = await shown(cockpit(ledger=False))
    folded = [line.strip() for line in text.split("\n") if line.strip().startswith("no ledger")]
    assert folded == ["no ledger: add `ledgers:` to the config, or run with --ledger PATH"]
    for title in ("Token ratios", "Spend split", "Ledger tables", "Ledger cache-read share"):
        assert title not in text


async def test_no_profile_folds_the_roofline_into_one_line_naming_its_keys() -> None:
    text = await shown(cockpit(ScriptedLaneFeed(hardware=None)))
    assert "Roofline" not in text
    assert "no roofline: set `hardware:` and `model:` on the lane" in text


async def test_the_roofline_caption_says_what_its_letters_and_percentages_are() -> None:
    rows = list(rows_of(await shown(cockpit()), "Roofline"))
    assert "P prefill · D decode step · M engine-measured" in rows
    assert "I FLOP/byte · % of roof: achieved ÷ roof at I" in rows


async def test_at_80x24_the_vital_signs_and_the_health_line_come_first() -> None:
    app = cockpit()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app).split("\n")
        vitals, health = app.query_one("#vitals").region, app.query_one("#health").region
        body = app.query_one("#body").region
        assert vitals.bottom <= health.y and health.bottom <= body.y
        assert "running 7" in text[vitals.y] and "▲" in text[health.y]


async def test_a_wide_screen_shows_the_ledger_tables_a_narrower_one_does_not() -> None:
    wide = list(rows_of(await shown(cockpit(), (250, 70)), "Ledger tables"))
    assert wide[0].split() == ["per", "source", "sessions", "calls", "prompt", "output", "P:O",
                               "fresh:O", "cache", "rd"]  # fmt: skip
    cli = next(row for row in wide if row.startswith("cli"))
    assert cli.split()[1:5] == ["30", "1,500", "26.1", "M"]  # sessions, calls, prompt tokens
    assert "Ledger tables" not in await shown(cockpit(), (160, 48))


@pytest.mark.parametrize("size", [(80, 24), (160, 48), (250, 70)])
async def test_each_column_is_its_panes_stacked_with_no_gap(size: tuple[int, int]) -> None:
    app = cockpit(ScriptedLaneFeed(spec=True))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        panes = [pane.region for pane in app.query("#panes > *") if pane.display]
        for x, column in itertools.groupby(sorted(panes, key=lambda r: (r.x, r.y)), lambda r: r.x):
            boxes = list(column)
            assert boxes[0].y == app.query_one("#panes").region.y, x
            for upper, lower in itertools.pairwise(boxes):
                assert lower.y == upper.bottom, (x, upper, lower)
        grid = app.query_one("#panes").region  # as tall as its longest column, no taller
        assert grid.bottom == max(box.bottom for box in panes)


def test_the_scripted_trend_has_a_gap_and_a_step() -> None:
    trend = lane_trend()
    assert isinstance(trend, Trend) and trend.step_s == 60
    assert all(len(points) == 60 and points[30] is None for points in trend.series.values())

"""The app under Textual's Pilot: every key, lane and window switching, polling, resizes."""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget

from cockpit.app.app import CockpitApp, LaneRead, LedgerRead, make_app
from cockpit.app.screens import KEY_GROUPS, HelpScreen
from cockpit.config.schema import Config, LaneConfig, LedgerConfig
from cockpit.core.health import rule_lines
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.runtime.poller import Clocks
from cockpit.widgets import CacheGauge, PhaseBar, PrefillPane, SpendPane, StatusLine
from cockpit.widgets.pane import Pane
from tests.support.faultlane import lane_state, running_app, start_exporter, wait_until
from tests.support.feeds import (
    EVAL_AT,
    ScriptedLaneFeed,
    ScriptedLedgerFeed,
    SourceDown,
    config,
    fixed_clocks,
)
from tests.support.pilot import check_screen, on_screen, settle
from tests.support.screentext import screen_text


def utc_hms(epoch: float) -> str:
    """`HH:MM:SS` of `epoch` in UTC, as the cockpit shows every time."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S")


def two_lanes(**options: object) -> tuple[ScriptedLaneFeed, ScriptedLaneFeed, ScriptedLedgerFeed]:
    return ScriptedLaneFeed("lane-a", **options), ScriptedLaneFeed("lane-b"), ScriptedLedgerFeed()  # type: ignore[arg-type]


def status_text(pilot: Pilot[None]) -> str:
    return pilot.app.query_one(StatusLine).render().plain


async def test_only_the_selected_lane_polls_and_the_ledger_polls_too() -> None:
    a, b, ledger = two_lanes()
    app = make_app(config("lane-a", "lane-b"), [a, b], ledger)
    async with app.run_test() as pilot:
        await settle(pilot)
        assert len(a.reads) == 1 and b.reads == [] and len(ledger.reads) == 1
        assert a.reads[0] == (3600.0, None)
        assert "lane-a (1/2)" in status_text(pilot)


async def test_digit_keys_switch_lane_and_read_the_new_one_at_once() -> None:
    a, b, ledger = two_lanes()
    app = make_app(config("lane-a", "lane-b"), [a, b], ledger)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        assert app.lane_index == 1 and len(b.reads) == 1
        assert app.lane_snapshot is not None and app.lane_snapshot.lane == "lane-b"
        assert "lane-b (2/2)" in status_text(pilot)
        await pilot.press("9")  # no ninth lane: nothing changes
        await pilot.press("1")
        await settle(pilot)
        assert app.lane_index == 0 and len(a.reads) == 2 and len(b.reads) == 1


async def test_tab_and_shift_tab_cycle_through_lanes() -> None:
    feeds = [ScriptedLaneFeed(name) for name in ("x", "y", "z")]
    app = make_app(config("x", "y", "z"), feeds, None)
    async with app.run_test() as pilot:
        seen = []
        for key in ("tab", "tab", "tab", "shift+tab"):
            await pilot.press(key)
            seen.append(app.lane_name)
        assert seen == ["y", "z", "x", "z"]


async def test_w_and_W_step_through_the_windows_and_re_read_both_sources() -> None:
    a, b, ledger = two_lanes()
    app = make_app(config("lane-a", "lane-b"), [a, b], ledger)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        assert app.window == "6h"
        assert a.reads[-1] == (6 * 3600.0, None) and ledger.reads[-1] == (6 * 3600.0, None)
        assert "│ 6h │" in status_text(pilot)
        await pilot.press("W", "W")
        assert app.window == "5m"
        await pilot.press("W")
        assert app.window == "90d"
        await pilot.press("w")
        assert app.window == "5m"


async def test_a_separate_ledger_window_stays_put_when_the_lane_window_moves() -> None:
    a, _, ledger = two_lanes()
    app = make_app(config("lane-a", ledger_window="90d"), [a], ledger)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        assert [window for window, _ in ledger.reads] == [90 * 86400.0]
        assert "6h · ledger 90d" in status_text(pilot)


async def test_r_reads_every_source_again() -> None:
    a, b, ledger = two_lanes()
    app = make_app(config("lane-a", "lane-b"), [a, b], ledger)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert len(a.reads) == 2 and len(ledger.reads) == 2 and b.reads == []


async def reads_reach(pilot: Pilot[None], reads: list[object], count: int) -> None:
    """Until `reads` has `count` entries (AssertionError after 1,000 frames)."""
    for _ in range(1000):
        if len(reads) >= count:
            return
        await pilot.pause(0.01)
    raise AssertionError(f"{len(reads)} reads, not {count}")


async def test_polls_repeat_at_the_refresh_interval_and_never_overlap() -> None:
    running = 0
    most = 0

    class Counting(ScriptedLaneFeed):
        async def read(self, window_s: float, end: float | None):  # type: ignore[no-untyped-def]
            nonlocal running, most
            running += 1
            most = max(most, running)
            try:
                return await super().read(window_s, end)
            finally:
                running -= 1

    feed = Counting("lane-a", delay_s=0.05)
    app = make_app(config("lane-a"), [feed], None, refresh_s=0.01)
    async with app.run_test() as pilot:
        await reads_reach(pilot, feed.reads, 4)  # a read takes 5 refresh periods: no overlap
        assert most == 1


async def test_p_pauses_polling() -> None:
    feed = ScriptedLaneFeed("lane-a")
    app = make_app(config("lane-a"), [feed], None, refresh_s=0.02)
    async with app.run_test() as pilot:
        await reads_reach(pilot, feed.reads, 2)
        await pilot.press("p")
        await settle(pilot)  # a read under way when paused ends and arms nothing
        assert "PAUSED" in status_text(pilot)
        reads = len(feed.reads)
        for _ in range(10):  # ten refresh periods at least: nothing is read while paused
            await pilot.pause(0.02)
        assert len(feed.reads) == reads
        await pilot.press("p")
        await reads_reach(pilot, feed.reads, reads + 2)
        assert "PAUSED" not in status_text(pilot)


async def test_resuming_reads_at_once_not_after_a_refresh_period() -> None:
    feed = ScriptedLaneFeed("lane-a")
    app = make_app(config("lane-a"), [feed], None, refresh_s=3600.0)
    async with app.run_test() as pilot:
        await reads_reach(pilot, feed.reads, 1)
        await pilot.press("p", "p")
        await reads_reach(pilot, feed.reads, 2)  # an hour early


async def test_keys_are_answered_while_a_read_never_ends() -> None:
    """Each key shows its effect at once, whatever the sources are doing: here the reads of
    every window hang (a key that waited on one would never return)."""
    stuck = ScriptedLaneFeed("lane-a", delay_s=86400.0)
    ledger = ScriptedLedgerFeed(delay_s=86400.0)
    app = make_app(config("lane-a"), [stuck], ledger)
    async with app.run_test() as pilot:
        await pilot.pause()
        for window, seconds in (("6h", 6 * 3600.0), ("24h", 86400.0), ("7d", 7 * 86400.0)):
            await asyncio.wait_for(pilot.press("w"), timeout=30)
            await pilot.pause()
            assert f"│ {window} │ lane reading…" in status_text(pilot)
            assert stuck.reads[-1][0] == seconds  # the new window's read has started
        await asyncio.wait_for(pilot.press("p"), timeout=30)
        await pilot.pause()
        assert "PAUSED" in status_text(pilot)


async def test_switching_lane_abandons_the_old_lanes_slow_read() -> None:
    slow = ScriptedLaneFeed("lane-a", delay_s=10.0)
    fast = ScriptedLaneFeed("lane-b")
    app = make_app(config("lane-a", "lane-b"), [slow, fast], None)
    async with app.run_test() as pilot:
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause(0.1)
        assert app.lane_snapshot is not None and app.lane_snapshot.lane == "lane-b"
        lane_workers = [w for w in app.workers if w.group == "lane" and w.is_running]
        assert lane_workers == []


def shows_recorded(app: CockpitApp) -> list[LaneSnapshot | None]:
    """The lane snapshot at each `_show` of `app` from now on."""
    shown: list[LaneSnapshot | None] = []
    show = app._show

    def recorded() -> None:
        shown.append(app.lane_snapshot)
        show()

    app._show = recorded  # type: ignore[method-assign]
    return shown


async def test_the_first_frame_waits_for_the_first_read_rather_than_a_placeholder() -> None:
    feed = ScriptedLaneFeed("lane-a", delay_s=0.05)
    app = make_app(config("lane-a"), [feed], ScriptedLedgerFeed())
    app.first_read_wait_s = 3600.0
    shown = shows_recorded(app)
    async with app.run_test() as pilot:
        assert len(feed.reads) == 1  # read before the screen was composed
        await settle(pilot)
        assert shown and shown[0] is not None and shown[0].lane == "lane-a"
        assert "Prefill" in screen_text(app)


async def test_an_app_that_does_not_wait_shows_its_placeholders_first() -> None:
    feed = ScriptedLaneFeed("lane-a")
    app = make_app(config("lane-a"), [feed], None)
    shown = shows_recorded(app)
    async with app.run_test() as pilot:
        await settle(pilot)
        assert shown[0] is None and shown[-1] is not None


async def test_a_first_read_that_is_late_shows_the_screen_waiting_for_it() -> None:
    stuck = ScriptedLaneFeed("lane-a", delay_s=86400.0)
    app = make_app(config("lane-a"), [stuck], None)
    app.first_read_wait_s = 0.01
    shown = shows_recorded(app)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert shown == [None]
        assert "waiting for the first read" in screen_text(app)
        assert [w for w in app.workers if w.group == "lane" and w.is_running]  # still reading


async def test_a_stale_source_keeps_its_last_value_in_place_and_says_since_when() -> None:
    feed = ScriptedLaneFeed("lane-a")
    app = make_app(config("lane-a"), [feed], None, clocks=fixed_clocks(wall=EVAL_AT + 30))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        pane = app.query_one(PrefillPane)
        before = pane.render().plain
        # 1.68 M computed tokens over 800 s of prefill
        assert f"{1_680_000 / 800:,.0f} tok/s" in before
        feed.failure = SourceDown("connection refused")
        await pilot.press("r")
        await settle(pilot)
        after = pane.render().plain
        assert f"{1_680_000 / 800:,.0f} tok/s" in after
        since = utc_hms(EVAL_AT + 30)
        assert pane.border_subtitle == f"lane stale since {since} · connection refused"
        assert pane.has_class("-stale")
        assert f"lane stale since {since} 12.0 ms · connection refused" in status_text(pilot)


async def test_a_missing_source_shows_dashes_with_the_reason_reachable() -> None:
    feed = ScriptedLaneFeed("lane-a", failure=SourceDown("no such host: lab-prom"))
    app = make_app(config("lane-a"), [feed], None)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        pane = app.query_one(PrefillPane)
        assert "—" in pane.render().plain
        assert pane.border_subtitle == "lane missing: no such host: lab-prom"
        assert "no such host: lab-prom" in str(pane.tooltip)


async def test_e_exports_the_receipt_as_markdown(tmp_path: Path) -> None:
    a, _, ledger = two_lanes()
    app = make_app(
        config("lane-a"), [a], ledger, export_dir=tmp_path, clocks=fixed_clocks(wall=EVAL_AT)
    )
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        files = list(tmp_path.iterdir())
        # EVAL_AT is 2026-09-21 14:13:20 UTC
        assert [f.name for f in files] == ["cockpit-receipt-lane-a-1h-20260921T141320Z.md"]
        text = files[0].read_text(encoding="utf-8")
        assert text.startswith("# ")
        assert "lane-a" in text
        await on_screen(pilot, "receipt exported")


async def test_a_replay_exports_a_receipt_named_for_the_moment_it_shows(tmp_path: Path) -> None:
    a, _, ledger = two_lanes()
    replayed = EVAL_AT - 86400
    app = make_app(
        config("lane-a"), [a], ledger, export_dir=tmp_path, clocks=fixed_clocks(wall=EVAL_AT),
        replay_at=replayed,
    )  # fmt: skip
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        # a day before EVAL_AT (2026-09-21 14:13:20 UTC)
        assert [f.name for f in tmp_path.iterdir()] == [
            "cockpit-receipt-lane-a-1h-20260920T141320Z.md"
        ]
        first = (tmp_path / "cockpit-receipt-lane-a-1h-20260920T141320Z.md").read_text()
        await pilot.press("e")  # the same moment again: a second file, the first kept
        await settle(pilot)
        assert sorted(f.name for f in tmp_path.iterdir()) == [
            "cockpit-receipt-lane-a-1h-20260920T141320Z-2.md",
            "cockpit-receipt-lane-a-1h-20260920T141320Z.md",
        ]
        assert (tmp_path / "cockpit-receipt-lane-a-1h-20260920T141320Z.md").read_text() == first


async def test_export_failure_is_reported_not_raised(tmp_path: Path) -> None:
    a, _, _ = two_lanes()
    missing_dir = tmp_path / "not-there"
    app = make_app(config("lane-a"), [a], None, export_dir=missing_dir)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        await on_screen(pilot, "export failed", "No such file or directory")
        assert app.is_running


async def test_t_cycles_the_cockpit_themes() -> None:
    app = make_app(config("lane-a"), [ScriptedLaneFeed()], None)
    async with app.run_test() as pilot:
        seen = [app.theme]
        for _ in range(3):
            await pilot.press("t")
            seen.append(app.theme)
        assert seen == ["cockpit-dark", "cockpit-light", "cockpit-high-contrast", "cockpit-dark"]


async def test_question_mark_opens_help_listing_every_key() -> None:
    app = make_app(config("lane-a"), [ScriptedLaneFeed()], None)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.text  # type: ignore[attr-defined]
        for key in ("1 – 9", "tab", "w / W", "r", "p", "e", "t", "m", "?", "q", "l", "enter"):
            assert any(line.startswith(key) for line in text.splitlines()), key
        shown = {b.key for b in app.BINDINGS if hasattr(b, "key")}  # type: ignore[union-attr]
        assert {"tab", "w", "W", "r", "p", "e", "t", "m", "question_mark", "q"} <= shown
        rules = rule_lines(app.config.health)
        assert rules and all(rule in text for rule in rules)  # each names figure and threshold
        helped = " ".join(key for _, rows in KEY_GROUPS for key, _ in rows).split()
        arrows = {"question_mark": "?", "down": "↓", "right": "→", "up": "↑", "left": "←"}
        for binding in app.BINDINGS:
            for key in getattr(binding, "key", "").split(","):
                if key and not key.isdigit():
                    assert arrows.get(key, key) in helped, f"{key} is not in the help"
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_at_80x24_the_help_shows_every_key_and_scrolls_to_the_health_rules() -> None:
    app = make_app(config("lane-a"), [ScriptedLaneFeed()], None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        shown = screen_text(app)
        for key, text in (row for _, rows in KEY_GROUPS for row in rows):
            assert re.search(rf"{re.escape(key)} +{re.escape(text)}", shown), (key, shown)
        last_rule = rule_lines(app.config.health)[-1]
        assert last_rule not in shown
        await pilot.press(*["down"] * 30)  # the arrows scroll the help
        assert last_rule in screen_text(app)
        await pilot.press("home")
        assert last_rule not in screen_text(app)
        await pilot.press("pagedown")
        assert last_rule in screen_text(app)


async def test_q_quits_and_closes_every_feed() -> None:
    a, b, ledger = two_lanes()
    app = make_app(config("lane-a", "lane-b"), [a, b], ledger)
    async with app.run_test() as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
    assert a.closed and b.closed and ledger.closed


async def test_a_cycle_that_crashes_is_reported_and_the_app_goes_on() -> None:
    class Garbled(ScriptedLaneFeed):
        async def read(self, window_s: float, end: float | None):  # type: ignore[no-untyped-def]
            self.reads.append((window_s, end))
            return "not totals"

    app = make_app(config("lane-a"), [Garbled("lane-a")], None)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        await pilot.pause(0.05)
        await on_screen(pilot, "refresh failed", "read lane lane-a over 1h")
        assert app.is_running


async def test_replay_reads_at_the_moment_and_says_so() -> None:
    at = 1_700_000_000.0
    a, _, ledger = two_lanes()
    app = make_app(config("lane-a"), [a], ledger, replay_at=at, refresh_s=0.01)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        await pilot.pause(0.1)
        assert a.reads == [(3600.0, at)]  # a replayed moment is read once
        assert ledger.reads == [(3600.0, at)]
        assert "REPLAY 2023-11-14 22:13:20 UTC" in status_text(pilot)


async def test_command_palette_offers_lanes_windows_themes_and_export() -> None:
    a, b, ledger = two_lanes()
    app = make_app(config("lane-a", "lane-b"), [a, b], ledger)
    async with app.run_test() as pilot:
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        for title in (
            "Lane: lane-b",
            "Window: 7d",
            "Export receipt",
            "Cockpit theme: cockpit-light",
        ):
            assert title in commands
        commands["Lane: lane-b"].callback()
        commands["Window: 7d"].callback()
        commands["Cockpit theme: cockpit-light"].callback()
        await settle(pilot)
        assert (app.lane_name, app.window, app.theme) == ("lane-b", "7d", "cockpit-light")
        assert b.reads[-1] == (7 * 86400.0, None)


def test_a_newer_snapshot_replaces_an_unhandled_older_one() -> None:
    lane = LaneRead(LaneSnapshot("lane-a", "1h", None, None, None, None), 1)
    ledger = LedgerRead(LedgerSnapshot("1h", None, None), 1)
    assert lane.can_replace(LaneRead(lane.snapshot, 0))
    assert not lane.can_replace(ledger)
    assert ledger.can_replace(LedgerRead(ledger.snapshot, 0))


@pytest.mark.parametrize(("size", "small"), [((40, 12), False), ((30, 10), True), ((80, 11), True)])
async def test_a_too_small_terminal_says_what_it_needs(size: tuple[int, int], small: bool) -> None:
    app = make_app(config("lane-a"), [ScriptedLaneFeed()], None)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        message = app.query_one("#too-small")
        assert message.display is small
        assert app.query_one("#body").display is not small
        if small:
            assert "terminal too small: needs 40×12" in str(message.render())


async def test_a_resize_storm_leaves_a_sound_layout() -> None:
    rng = random.Random(7)
    a, _, ledger = two_lanes()
    app = make_app(config("lane-a"), [a], ledger)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for _ in range(60):
            width, height = rng.randint(20, 220), rng.randint(6, 70)
            await pilot.resize_terminal(width, height)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.is_running
        assert app.query_one("#body").display
        panes = [app.query_one(f"#{name}") for name in ("cache", "prefill", "phases", "spend")]
        for left, right in itertools.pairwise(panes):
            assert not left.region.overlaps(right.region)


async def test_panes_come_prefill_first() -> None:
    app = make_app(config("lane-a"), [ScriptedLaneFeed()], None)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        order = [w.id for w in app.query("#panes > *")]
        assert order == [
            "cache", "prefill", "phases", "tails", "offload", "trends", "roofline", "ratios",
            "spend", "tables", "models",
        ]  # fmt: skip
        assert not app.query_one("#offload").display  # a plain lane: no KV connector


async def test_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed())
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.no_color
        styled = 0
        colours = set()
        for widget in app.screen.walk_children(Widget):
            if not widget.region.area:
                continue
            for strip in widget.render_lines(Region(0, 0, *widget.size)):
                for segment in strip:
                    style = segment.style
                    styled += bool(style and (style.bold or style.reverse))
                    for colour in (style.color, style.bgcolor) if style else ():
                        if colour is not None and not colour.is_default:
                            colours.add(colour.name)
        assert styled, "no bold or reverse left: the test would prove nothing"
        assert colours == set(), "a colour (or a grey) survived NO_COLOR"


async def test_w_follows_the_configured_window_list() -> None:
    app = make_app(config("lane-a", windows=("1h", "7d", "30d")), [ScriptedLaneFeed()], None)
    async with app.run_test() as pilot:
        seen = []
        for key in ("w", "w", "w", "W"):
            await pilot.press(key)
            seen.append(app.window)
        assert seen == ["7d", "30d", "1h", "30d"]


async def test_m_filters_the_lane_to_one_model_and_empty_clears_it() -> None:
    feed = ScriptedLaneFeed("lane-a")
    app = make_app(config("lane-a"), [feed], None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        reads_before = len(feed.reads)
        await pilot.press("m")
        await pilot.pause()
        await pilot.press(*'qwen "3"')
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert feed.model_filter == 'qwen "3"'
        assert len(feed.reads) > reads_before  # the filtered lane is read at once
        assert "model 'qwen \"3\"'" in status_text(pilot)
        await pilot.press("m")
        await pilot.pause()
        await pilot.press("escape")  # cancel keeps the filter
        await pilot.pause()
        assert feed.model_filter == 'qwen "3"'
        await pilot.press("m")
        await pilot.pause()
        for _ in range(len('qwen "3"')):
            await pilot.press("backspace")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert feed.model_filter is None
        assert "model " not in status_text(pilot)


# --- why a source is stale, on screen; a lane not configured; one time zone ------------------

PLACEHOLDERS = ("waiting for the first read", "reading…", "starting…")
"""What a pane or the status line shows before a source's first answer."""
WALL = EVAL_AT + 600
"""The fixed wall clock of the tests below: `stale since` is this moment."""


def ledger_only(path: Path) -> Config:
    return Config(
        source="<test>",
        ledgers=(LedgerConfig(str(path)),),
        window="90d",
        windows=("90d",),
        refresh_s=3600.0,
    )


def truncate_to_half(path: Path) -> str:
    """Cut the file mid-way; the words a reader should see about it, from its own header."""
    data = path.read_bytes()
    page = int.from_bytes(data[16:18], "big") or 65536
    pages = int.from_bytes(data[28:32], "big")
    path.write_bytes(data[: len(data) // 2])
    return f"{path.name} is truncated: {len(data) // 2} bytes, its header says {pages * page}"


def corrupt_pages(path: Path) -> str:
    """Every page after the first overwritten with garbage, the file replaced by a rename."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    for offset in range(page, len(data)):
        data[offset] = (offset * 151 + 7) % 256
    spare = path.with_suffix(".new")
    spare.write_bytes(bytes(data))
    spare.replace(path)
    return f"{path.name} is truncated or corrupt"


def ledger_state(app: CockpitApp) -> str:
    return app.ledger_snapshot.freshness.state if app.ledger_snapshot else "none"


@pytest.mark.parametrize(
    ("damage", "size"),
    [(truncate_to_half, (80, 24)), (corrupt_pages, (160, 48))],
    ids=["truncated-80x24", "corrupt-160x48"],
)
async def test_a_damaged_ledger_says_why_on_the_status_line_and_the_panes(
    hermes_v22: Path, damage: Callable[[Path], str], size: tuple[int, int]
) -> None:
    async with running_app(
        ledger_only(hermes_v22), size=size, clocks=Clocks(wall=lambda: WALL)
    ) as (app, pilot):
        await wait_until(pilot, lambda: ledger_state(app) == "ok")
        words = damage(hermes_v22)
        await pilot.press("r")
        await wait_until(pilot, lambda: ledger_state(app) == "stale")
        await pilot.pause()
        since = f"ledger stale since {utc_hms(WALL)}"
        status = status_text(pilot)
        assert since in status
        after = status.split(since, 1)[1].split("\n")[0]
        assert " · " in after, status  # the time, then why
        reason = after.split(" · ", 1)[1].rstrip("…")
        assert len(reason) >= 20  # the reason, cut if need be: one is the start of the other
        assert reason[: len(words)] == words[: len(reason)]
        assert str(hermes_v22.parent) not in status  # the file's name, not its folders
        spend = app.query_one(SpendPane)
        assert spend.border_subtitle.startswith(f"{since} · {words}")
        assert str(hermes_v22) in str(spend.tooltip)  # whole, path and all, on hover
        assert reason in screen_text(app)
        assert check_screen(app) > 0  # borders and figures whole around it


async def test_a_locked_ledger_says_it_is_locked(hermes_v22: Path) -> None:
    async with running_app(ledger_only(hermes_v22), clocks=Clocks(wall=lambda: WALL)) as (
        app,
        pilot,
    ):
        await wait_until(pilot, lambda: ledger_state(app) == "ok")
        holder = sqlite3.connect(hermes_v22, isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            await pilot.press("r")
            await wait_until(pilot, lambda: ledger_state(app) == "stale")
            await pilot.pause()
            line = next(text for text in status_text(pilot).splitlines() if "ledger stale" in text)
            assert f"ledger stale since {utc_hms(WALL)}" in line
            assert f"· {hermes_v22.name} stayed locked" in line
            assert "locked" in app.query_one(SpendPane).border_subtitle
        finally:
            holder.execute("ROLLBACK")
            holder.close()


async def test_a_lane_on_a_refused_port_says_so_on_the_status_line_and_the_panes() -> None:
    exporter = start_exporter()
    lane = LaneConfig("lane-r", metrics_url=f"http://{exporter.address}/metrics")
    settings = Config(source="<test>", lanes=(lane,), window="5m", refresh_s=3600.0)
    try:
        async with running_app(settings, clocks=Clocks(wall=lambda: WALL)) as (app, pilot):
            await wait_until(pilot, lambda: lane_state(app) == "ok")
            exporter.stop()  # nothing listens on the port any more: connection refused
            await pilot.press("r")
            await wait_until(pilot, lambda: lane_state(app) == "stale")
            await pilot.pause()
            since = f"lane stale since {utc_hms(WALL)}"
            status = status_text(pilot)
            assert since in status and " · connection refused" in status
            assert exporter.address not in status  # the lane is named; its URL is on hover
            for pane in (app.query_one(PrefillPane), app.query_one(PhaseBar)):
                assert pane.border_subtitle == f"{since} · connection refused"
                assert f"{exporter.address}/metrics: connection refused" in str(pane.tooltip)
            assert "connection refused" in screen_text(app)
    finally:
        exporter.stop()


async def test_without_a_lane_the_lane_panes_say_none_is_configured() -> None:
    app = make_app(config(), [], ScriptedLedgerFeed(), clocks=fixed_clocks())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.pause(0.2)
        # Folded into the line that says how to add a lane (a folded pane builds no view).
        for pane in (
            app.query_one(PrefillPane),
            app.query_one(PhaseBar),
            app.query_one(CacheGauge),
        ):
            assert not pane.display and pane.border_subtitle is None
        assert status_text(pilot).startswith("no lane configured │ 1h")
        screen = screen_text(app)
        assert "no lane configured" in screen
        panes = [pane.border_subtitle or "" for pane in app.query(Pane)]
        for placeholder in PLACEHOLDERS:
            assert placeholder not in screen and placeholder not in status_text(pilot)
            assert not any(placeholder in subtitle for subtitle in panes)
            assert not any(placeholder in str(pane.tooltip) for pane in app.query(Pane))


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machine's zone 9 h east of UTC; the process's zone put back afterwards."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        assert time.localtime(EVAL_AT).tm_gmtoff == 9 * 3600
        yield
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.usefixtures("tokyo")
async def test_every_time_on_screen_is_utc_whatever_the_machines_zone() -> None:
    feed = ScriptedLaneFeed("lane-a")
    app = make_app(config("lane-a"), [feed], None, clocks=fixed_clocks(wall=WALL))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert f"at {utc_hms(EVAL_AT)} UTC" in status_text(pilot)
        feed.failure = SourceDown("connection refused")
        await pilot.press("r")
        await settle(pilot)
        status = status_text(pilot)
        assert f"at {utc_hms(EVAL_AT)} UTC" in status
        assert f"lane stale since {utc_hms(WALL)}" in status
        pane = app.query_one(PrefillPane)
        assert pane.border_subtitle.startswith(f"lane stale since {utc_hms(WALL)}")
        assert f"stale since {utc_hms(WALL)}" in str(pane.tooltip)
        for moment in (EVAL_AT, WALL):
            local = time.strftime("%H:%M:%S", time.localtime(moment))
            assert local != utc_hms(moment)
            assert local not in screen_text(app)


async def test_text_from_outside_is_shown_as_typed_never_as_markup() -> None:
    """A lane name, a model filter, a server's reason and a notice that look like markup are
    shown as they are, and nothing raises a MarkupError."""
    odd = ScriptedLaneFeed("[/x]")
    other = ScriptedLaneFeed("b", failure=SourceDown("[bold]500[/] from [link=x]proxy"))
    app = make_app(
        config("[/x]", "b"), [odd, other], ScriptedLedgerFeed(), clocks=fixed_clocks(),
        notice="[red]no prometheus[/",
    )  # fmt: skip
    async with app.run_test(size=(160, 48), notifications=True, tooltips=True) as pilot:
        await settle(pilot)
        await on_screen(pilot, "[/x] (1/2)", "[red]no prometheus[/")
        await pilot.press("m")
        await pilot.press(*"[bold red]x[/")
        await pilot.press("enter")
        await settle(pilot)
        await on_screen(pilot, "model '[bold red]x[/'")
        await pilot.press("ctrl+p")
        await pilot.press(*"lane")
        await on_screen(pilot, "Show lane 1 of 2")  # the palette found the lane
        assert ": [/x]" in screen_text(app)
        await pilot.press("escape")
        await pilot.press("2")
        await settle(pilot)
        await on_screen(pilot, "[bold]500[/] from [link=x]proxy")
        await pilot.hover(StatusLine)
        await pilot.pause(0.6)
        assert app.is_running


async def test_reads_that_land_under_the_help_and_the_model_filter_show_once_closed() -> None:
    feed = ScriptedLaneFeed("lane-a", failure=SourceDown("connection refused"))
    app = make_app(config("lane-a"), [feed], ScriptedLedgerFeed(), clocks=fixed_clocks())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for key, closing in (("question_mark", "escape"), ("m", "escape")):
            await pilot.press(key)
            feed.failure = None if feed.failure else SourceDown("connection refused")
            reads = len(feed.reads)
            app.action_refresh()  # the next read lands while the screen is covered
            await reads_reach(pilot, feed.reads, reads + 1)
            await settle(pilot)
            await pilot.press(closing)
            await pilot.pause()
            shown = "lane ok" if feed.failure is None else "lane stale"
            await on_screen(pilot, shown)
            assert len(feed.reads) == reads + 1  # shown from the read made under the screen

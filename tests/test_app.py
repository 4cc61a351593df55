"""The app under Textual's Pilot: every key, lane and window switching, polling, resizes."""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
import time
from pathlib import Path

import pytest
from textual import events
from textual.geometry import Size
from textual.pilot import Pilot

from cockpit.app import LaneRefreshed, LedgerRefreshed, make_app
from cockpit.screens import KEY_HELP, HelpScreen
from cockpit.widgets import PrefillPane, StatusLine
from tests.test_app_feeds import (
    EVAL_AT,
    ScriptedLaneFeed,
    ScriptedLedgerFeed,
    SourceDown,
    config,
    fixed_clocks,
)


def two_lanes(**options: object) -> tuple[ScriptedLaneFeed, ScriptedLaneFeed, ScriptedLedgerFeed]:
    return ScriptedLaneFeed("lane-a", **options), ScriptedLaneFeed("lane-b"), ScriptedLedgerFeed()  # type: ignore[arg-type]


def status_text(pilot: Pilot[None]) -> str:
    return pilot.app.query_one(StatusLine).render().plain


async def settle(pilot: Pilot[None]) -> None:
    """Wait until no read is under way (cancelled ones included), then for the redraw."""
    for _ in range(500):
        if not any(worker.is_running for worker in pilot.app.workers):
            break
        await asyncio.sleep(0.005)
    await pilot.pause()


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
        await pilot.pause(0.6)
        assert 3 <= len(feed.reads) <= 0.6 / 0.05 + 1
        assert most == 1


async def test_p_pauses_polling_and_resuming_reads_at_once() -> None:
    feed = ScriptedLaneFeed("lane-a")
    app = make_app(config("lane-a"), [feed], None, refresh_s=0.05)
    async with app.run_test() as pilot:
        await pilot.pause(0.1)
        await pilot.press("p")
        await pilot.pause(0.3)  # let a read already under way (or just armed) end
        assert "PAUSED" in status_text(pilot)
        reads = len(feed.reads)
        await pilot.pause(0.3)  # six refresh periods: nothing is read while paused
        assert len(feed.reads) == reads
        await pilot.press("p")
        resumed = time.monotonic()
        while len(feed.reads) == reads:  # resuming reads at once, not after a period
            assert time.monotonic() - resumed < 1.0, "no read after resuming"
            await pilot.pause(0.01)
        assert "PAUSED" not in status_text(pilot)


async def test_a_key_is_answered_at_once_while_a_read_takes_10_seconds() -> None:
    slow = ScriptedLaneFeed("lane-a", delay_s=10.0)
    ledger = ScriptedLedgerFeed(delay_s=10.0)
    app = make_app(config("lane-a"), [slow], ledger)
    async with app.run_test() as pilot:
        await pilot.pause()
        latencies = []
        for window, seconds in (("6h", 6 * 3600.0), ("24h", 86400.0), ("7d", 7 * 86400.0)):
            started = time.perf_counter()
            await pilot.press("w")
            await pilot.pause()
            latencies.append(time.perf_counter() - started)
            assert f"│ {window} │ lane reading…" in status_text(pilot)
            assert slow.reads[-1][0] == seconds  # the new window's read has started
        # The median holds the 100 ms bar; the worst press only has to beat the 10 s read by
        # far, so a busy CI machine's one slow frame doesn't fail the test.
        assert statistics.median(latencies) < 0.1, latencies
        assert max(latencies) < 1.0, latencies


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
        since = time.strftime("%H:%M:%S", time.localtime(EVAL_AT + 30))
        assert pane.border_subtitle == f"lane stale since {since}"
        assert pane.has_class("-stale")
        assert f"lane stale since {since}" in status_text(pilot)


async def test_a_missing_source_shows_dashes_with_the_reason_reachable() -> None:
    feed = ScriptedLaneFeed("lane-a", failure=SourceDown("no such host: lab-prom"))
    app = make_app(config("lane-a"), [feed], None)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        pane = app.query_one(PrefillPane)
        assert "—" in pane.render().plain
        assert pane.border_subtitle == "lane missing: no such host: lab-prom"
        assert "no such host: lab-prom" in str(pane.tooltip)


async def test_unchanged_figures_do_not_redraw_a_pane(monkeypatch: pytest.MonkeyPatch) -> None:
    renders = {"count": 0}
    original = PrefillPane.render_line

    def counting(self: PrefillPane, y: int):  # type: ignore[no-untyped-def]
        renders["count"] += 1
        return original(self, y)

    monkeypatch.setattr(PrefillPane, "render_line", counting)
    feed = ScriptedLaneFeed("lane-a")
    app = make_app(config("lane-a"), [feed], None, clocks=fixed_clocks())
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.pause(0.05)
        drawn = renders["count"]
        await pilot.press("r")
        await settle(pilot)
        assert len(feed.reads) == 2
        assert renders["count"] == drawn
        feed.changes = {"prefill_sum": 400.0}  # twice the prefill rate: now it must redraw
        await pilot.press("r")
        await settle(pilot)
        assert renders["count"] > drawn


async def test_e_exports_the_receipt_as_markdown(tmp_path: Path) -> None:
    a, _, ledger = two_lanes()
    app = make_app(
        config("lane-a"), [a], ledger, export_dir=tmp_path, clocks=fixed_clocks(wall=EVAL_AT)
    )
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        files = list(tmp_path.iterdir())
        # EVAL_AT is 2026-09-21 14:13:20 UTC
        assert [f.name for f in files] == ["cockpit-receipt-lane-a-1h-20260921T141320Z.md"]
        text = files[0].read_text(encoding="utf-8")
        assert text.startswith("# ")
        assert "lane-a" in text
        assert any(str(files[0]) in n.message for n in app._notifications)


async def test_export_failure_is_reported_not_raised(tmp_path: Path) -> None:
    a, _, _ = two_lanes()
    missing_dir = tmp_path / "not-there"
    app = make_app(config("lane-a"), [a], None, export_dir=missing_dir)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        assert any(n.title == "export failed" for n in app._notifications)
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
        text = app.screen.query_one("#help-text").render().plain  # type: ignore[attr-defined]
        for key in ("1 – 9", "tab", "w / W", "r", "p", "e", "t", "m", "?", "q"):
            assert any(line.startswith(key) for line in text.splitlines()), key
        shown = {b.key for b in app.BINDINGS if hasattr(b, "key")}  # type: ignore[union-attr]
        assert {"tab", "w", "W", "r", "p", "e", "t", "m", "question_mark", "q"} <= shown
        helped = " ".join(key for key, _ in KEY_HELP)
        for binding in app.BINDINGS:
            key = getattr(binding, "key", "")
            if key and not key.isdigit():
                label = {"question_mark": "?", "shift+tab": "shift+tab"}.get(key, key)
                assert label in helped.split() or label in helped, f"{key} is not in the help"
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


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
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.pause(0.05)
        failures = [n for n in app._notifications if n.title == "refresh failed"]
        assert failures and "read lane lane-a over 1h" in failures[0].message
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
    lane = LaneRefreshed.__new__(LaneRefreshed)
    ledger = LedgerRefreshed.__new__(LedgerRefreshed)
    assert LaneRefreshed.can_replace(lane, lane)
    assert not LaneRefreshed.can_replace(lane, ledger)
    assert LedgerRefreshed.can_replace(ledger, ledger)


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
        for step in range(60):
            width, height = rng.randint(20, 220), rng.randint(6, 70)
            if step % 6 == 0:
                await pilot.resize_terminal(width, height)
            else:  # events pile up faster than frames, as when a window is dragged
                app._driver._size = (width, height)  # type: ignore[union-attr]
                app.post_message(events.Resize(Size(width, height), Size(width, height)))
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
        assert order == ["cache", "prefill", "phases", "roofline", "ratios", "spend"]


async def test_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed())
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.no_color
        update = app.screen._compositor.render_full_update()
        styled = 0
        colours = set()
        for line in update.strips:
            for strip in line:
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

"""Panes draw snapshots: the numbers they show, their bands, stale and missing figures."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from textual.app import App, ComposeResult

from cockpit.core.figures import format_value, lane_figures
from cockpit.core.model import Freshness, frozen_map
from cockpit.roofline.model import RooflineView, operating_points
from cockpit.roofline.profiles import find_hardware, find_model
from cockpit.themes import THEMES
from cockpit.widgets import CacheGauge, PrefillPane, StatusView
from cockpit.widgets.cache_gauge import cache_view
from cockpit.widgets.pane import MISSING, Bar, Cells, Note, PaneView, Row
from cockpit.widgets.phase_bar import phase_view
from cockpit.widgets.prefill import prefill_view
from cockpit.widgets.ratios import ratios_view
from cockpit.widgets.spend import spend_view
from cockpit.widgets.status import SourceStatus, pack_items, status_items
from cockpit.widgets.tables import HEADER, NAME_CELLS
from tests.support.feeds import EVAL_AT
from tests.support.snapshots import (
    SPLIT,
    lane_snapshot,
    ledger_snapshot,
    priced_ledger,
    rows,
    split_lane_snapshot,
)


@pytest.mark.parametrize(
    ("hits", "tone"),
    [(13_000_000, "bad"), (14_000_000, "warn"), (18_000_000, "warn"), (18_400_000, "good")],
)
def test_hit_rate_bands_are_red_under_70_and_green_over_90(hits: float, tone: str) -> None:
    view = cache_view(lane_snapshot(prefix_cache_hits=hits), None)
    rate = rows(view)["Hit rate (engine)"]
    assert rate.tone == tone
    assert rate.value == f"{hits / 20_000_000 * 100:.1f}%"
    bar = view.lines[0]
    assert isinstance(bar, Bar) and bar.segments[0].fraction == pytest.approx(hits / 20e6)
    band = view.lines[1]
    assert isinstance(band, Note) and band.tone == tone


def test_cache_gauge_shows_hits_over_queries_and_the_ledger_share() -> None:
    view = cache_view(lane_snapshot(), ledger_snapshot())
    shown = rows(view)
    assert shown["Hits / queries"].value == "18.3 M / 20 M"
    assert shown["Prompt: computed locally"].value == "1.68 M · 8.4%"
    assert shown["Cached: host"].value == "320,000 · 1.7%"  # of the 18.32 M hits
    # ledger: 30 M cache read of 33 M prompt tokens
    assert shown["Ledger cache-read share"].value == f"{30 / 33 * 100:.1f}%"


def test_prefill_pane_puts_the_rate_first_and_shows_kv_against_contexts() -> None:
    view = prefill_view(lane_snapshot())
    labels = [line.label for line in view.lines if isinstance(line, Row)]
    assert labels[0] == "Effective prefill rate"
    shown = rows(view)
    assert shown["Effective prefill rate"].value == f"{1_680_000 / 800:,.0f} tok/s"
    assert shown["Fresh prefill / request"].value == "1,680"
    assert shown["Prefill with cache off"].value == f"{20_000 / (1_680_000 / 800):.2f} s"
    assert shown["Prompts > 10,000 tok"].value == "60.0%"
    assert shown["KV tokens resident"].value == f"{0.6 * 500_000:,.0f}"
    assert shown["Mean contexts resident"].value == f"{0.6 * 500_000 / 20_400:,.1f}"


def test_phase_bar_stacks_the_phase_means_in_proportion() -> None:
    view = phase_view(lane_snapshot())
    bar = view.lines[0]
    assert isinstance(bar, Bar)
    total = 0.05 + 0.8 + 8.0
    fractions = [segment.fraction for segment in bar.segments]
    assert fractions == pytest.approx([0.05 / total, 0.8 / total, 8.0 / total])
    shown = rows(view)
    assert shown["Decode tok/s per stream"].value == f"{1 / 0.02:,.0f} tok/s"
    assert shown["Decode share"].value == f"{8000 / 8800 * 100:.1f}%"


def test_spend_split_shares_match_the_price_ratios() -> None:
    units = {"input": 1.0e6, "read": 30e6 * 0.1, "write": 2e6 * 1.25, "output": 180e3 * 5}
    total = sum(units.values())
    view = spend_view(ledger_snapshot())
    shown = rows(view)
    assert shown["█ Input (fresh)"].value == f"{units['input'] / total * 100:.1f}%"
    assert shown["▒ Cache read"].value == f"{units['read'] / total * 100:.1f}%"
    assert shown["▚ Output"].value == f"{units['output'] / total * 100:.1f}%"
    uncached = 33e6 / (33e6 + units["output"])
    assert shown["Prompt side, uncached"].value == f"{uncached * 100:.1f}%"


def test_spend_shows_usd_and_keeps_local_tokens_apart() -> None:
    shown = rows(spend_view(priced_ledger()))
    assert shown["USD, window"].value == "$4.75"
    assert shown["Tokens, priced models"].value == format_value(26.1e6 + 120e3, "tokens")
    local = shown["Tokens, unpriced/local"]
    assert local.value == format_value(6.9e6 + 60e3, "tokens")
    assert local.figure is not None and "custom/qwen3-32b" in local.figure.reason


def test_a_lane_narrowed_to_its_local_model_shows_no_usd_and_says_so() -> None:
    view = spend_view(priced_ledger("Qwen3-32B"))
    shown = rows(view)
    assert shown["USD, window"].value == MISSING
    assert shown["USD, window"].reason == "no model with a price in the window"
    assert shown["Tokens, priced models"].value == "0"
    assert shown["Tokens, unpriced/local"].value == format_value(6.9e6 + 60e3, "tokens")
    notes = [line.text for line in view.lines if isinstance(line, Note)]
    assert notes == ["lane only: custom/qwen3-32b"]
    ratios = ratios_view(lane_snapshot(), priced_ledger("Qwen3-32B"))
    assert "Source lowest" not in rows(ratios) and "Most calls" not in rows(ratios)
    assert rows(ratios)["Prompt : output"].value == f"{6.9e6 / 60e3:,.0f} : 1"
    assert Note("agent ledger, lane only") in ratios.lines


def test_ratios_show_ranges_with_names_and_the_busiest_source() -> None:
    view = ratios_view(lane_snapshot(), ledger_snapshot())
    shown = rows(view)
    assert shown["Prompt : output"].value == f"{33e6 / 180e3:,.0f} : 1"
    # cron: 6.9 M prompt / 60 k output; cli: 26.1 M / 120 k
    assert shown["Source lowest"].value == f"{6.9e6 / 60e3:,.0f} : 1 cron"
    assert shown["Source highest"].value == f"{26.1e6 / 120e3:,.0f} : 1 cli"
    assert shown["Most calls"].value == "cli 75.0%"
    assert shown["Model highest"].value.endswith("claude-sonn…")
    assert shown["Prompt : generated"].value == "50.0 : 1"


def test_stale_rows_are_marked_and_keep_their_values() -> None:
    stale = Freshness("stale", since=EVAL_AT, reason="timeout")
    view = prefill_view(lane_snapshot(stale))
    rate = rows(view)["Effective prefill rate"]
    assert rate.stale and rate.value == f"{1_680_000 / 800:,.0f} tok/s"
    assert view.sources == (("lane", stale),)


def test_cache_gauge_says_where_the_prompt_tokens_came_from_and_which_tier_served_them() -> None:
    shown = rows(cache_view(split_lane_snapshot(), None))
    prompt, cached = SPLIT["prompt_by_source"], SPLIT["cached_by_source"]
    # Each source as tokens and its share of the sources' sum (the 20 M prompt tokens).
    assert sum(prompt.values()) == 20_000_000
    assert shown["Prompt: computed locally"].value == "1.38 M · 6.9%"
    assert shown["Prompt: local cache hit"].value == "18.32 M · 91.6%"
    assert shown["Prompt: external KV transfer"].value == "300,000 · 1.5%"
    # The tiers that served tokens, each of the 18.62 M cached; p2p served none: not shown.
    assert f"{cached['host'] / sum(cached.values()) * 100:.1f}%" == "4.8%"
    assert shown["Cached: host"].value == "900,000 · 4.8%"
    assert shown["Cached: external, unspecified"].value == "100,000 · 0.5%"
    assert "Cached: p2p" not in shown
    row = shown["Cached: disk"]
    assert row.figure is not None and row.figure.key == "cached_disk"  # its details on enter


def test_a_cache_with_no_hits_says_so_in_one_row() -> None:
    lane = split_lane_snapshot()
    assert lane.totals is not None
    groups = {
        **lane.totals.groups,
        "cached_by_source": frozen_map(dict.fromkeys(SPLIT["cached_by_source"], 0.0)),
    }
    totals = replace(lane.totals, groups=frozen_map(groups))
    shown = rows(cache_view(replace(lane, totals=totals, figures=lane_figures(totals)), None))
    assert shown["Cached by tier"].value == "0" and shown["Cached by tier"].tone == "muted"
    assert not [label for label in shown if label.startswith("Cached:")]


def test_without_a_ledger_its_figures_are_dashes_with_the_reason() -> None:
    view = spend_view(None, ledger_configured=False)
    output = rows(view)["▚ Output"]
    assert output.value == MISSING and output.reason == "no ledger configured"


def test_a_row_never_cuts_its_value_only_its_label() -> None:
    row = Row("A very long label that cannot fit", "12,345 tok/s")
    for width in (20, 30, 60):
        line = row.content(width).plain
        assert line.endswith("12,345 tok/s") and len(line) == width


def test_a_bar_fills_exactly_its_share_of_the_width() -> None:
    bar = Bar((), "")
    assert bar.content(10).plain == "░" * 10
    from cockpit.widgets.pane import Segment

    half = Bar((Segment(0.5, "good"),), "")
    assert half.content(10).plain == "█████░░░░░"


def test_status_items_wrap_between_items_never_inside_one() -> None:
    view = StatusView(
        "lane-a", 1, 2, "1h", evaluated_at=EVAL_AT,
        sources=(SourceStatus("lane", Freshness("ok"), 0.012),
                 SourceStatus("ledger", Freshness("missing", reason="no such file")),),
        paused=True,
    )  # fmt: skip
    items = [item.plain for item in status_items(view)]
    assert items[0] == "lane-a (1/2)" and "PAUSED" in items
    assert "ledger missing: no such file" in items
    for width in (30, 45, 200):
        lines = [line.plain for line in pack_items(status_items(view), width)]
        assert all(len(line) <= width for line in lines)
        for item in items:
            assert any(item in line for line in lines)


def test_without_a_lane_its_panes_say_none_is_configured() -> None:
    unconfigured = Freshness("missing", reason="no lane configured")
    views = {
        "prefill": prefill_view(None, lane_configured=False),
        "phases": phase_view(None, lane_configured=False),
        "cache": cache_view(None, ledger_snapshot(), lane_configured=False),
    }
    for name, view in views.items():
        assert ("lane", unconfigured) in view.sources, name
        lane_rows = [row for row in rows(view).values() if row.value == MISSING]
        assert any(row.reason == "no lane configured" for row in lane_rows), name
        assert not any("waiting" in row.reason for row in lane_rows), name
    band = views["cache"].lines[1]
    assert isinstance(band, Note) and band.text == "no lane configured"


def test_a_source_not_configured_has_its_rows_folded_away_not_dashed() -> None:
    ratios = ratios_view(None, ledger_snapshot(), lane_configured=False)
    assert "Prompt : generated" not in rows(ratios) and "lane" not in dict(ratios.sources)
    assert rows(ratios)["Prompt : output"].value == "183 : 1"
    cache = cache_view(lane_snapshot(), None, ledger_configured=False)
    assert "Ledger cache-read share" not in rows(cache)
    assert "ledger" not in dict(cache.sources)


def test_a_failure_is_said_short_on_screen_and_whole_on_hover() -> None:
    from cockpit.widgets.pane import freshness_note, short_reason, tooltip_for

    path = "/home/agent/.hermes/profiles/work/state.db"
    locked = Freshness("stale", since=EVAL_AT, reason=f"{path} stayed locked longer than 1 s")
    refused = Freshness("missing", reason="http://10.1.2.3:9090/metrics: connection refused")
    since = datetime.fromtimestamp(EVAL_AT, UTC).strftime("%H:%M:%S")
    note = freshness_note("ledger", locked)
    assert note == f"ledger stale since {since} · state.db stayed locked longer than 1 s"
    assert freshness_note("lane", refused) == f"lane missing: {refused.reason}"
    assert short_reason("a" * 50, 20) == "a" * 19 + "…"
    assert short_reason("http://h:1/x?q=a: b") == "b"
    assert short_reason("see http://h:1/x/y: b") == "see http://h:1/x/y: b"  # not a lead URL
    for not_a_file in (
        "timeout after 5 s (GET /api/v1/query)",
        'no series match {job="x",path="/srv/a/b.db"}',
        "/home/me/My Ledgers/state.db is truncated",
    ):
        assert short_reason(not_a_file) == not_a_file
    tooltip = str(tooltip_for(PaneView((), (("ledger", locked), ("lane", refused)))))
    assert path in tooltip and "http://10.1.2.3:9090/metrics" in tooltip


def test_status_reasons_fit_their_line_and_give_way_before_the_other_items() -> None:
    from cockpit.widgets.status import status_lines

    long_reason = "/srv/ledgers/state.db is truncated: 1 bytes, its header says " + "9" * 40
    timeout = Freshness("stale", since=EVAL_AT, reason="http://h:1: timed out after 3 s")
    truncated = Freshness("stale", since=EVAL_AT, reason=long_reason)
    view = StatusView(
        "lane-a", 1, 2, "1h", evaluated_at=EVAL_AT, model_filter="llama",
        coverage="since start (3 s)", paused=True,
        sources=(SourceStatus("lane", timeout, 3.0), SourceStatus("ledger", truncated, 0.2)),
    )  # fmt: skip
    for width in (78, 98, 118, 158):  # 80 to 160 columns, less the padding
        lines = [line.plain for line in status_lines(view, width)]
        text = "\n".join(lines)
        assert len(lines) <= 3 and all(len(line) <= width for line in lines), (width, lines)
        for item in ("lane-a (1/2)", "model 'llama'", "PAUSED", "lane stale since", "ledger stale"):
            assert item in text, (width, item, lines)
        assert "· timed out" in text, (width, lines)  # the short reason stays
    wide = "\n".join(line.plain for line in status_lines(view, 158))
    assert "· timed out after 3 s" in wide and "· state.db is truncated: 1 bytes" in wide
    assert "/srv/ledgers" not in wide


def test_the_status_line_shows_control_bytes_in_names_and_reasons_as_symbols() -> None:
    """A lane named by a Prometheus label, a model filter, a server's reason: none may reach
    the terminal as an escape sequence (ESC ] 0 ; … BEL sets the terminal's title)."""
    from cockpit.widgets.status import StatusLine, status_lines

    osc = "\x1b]0;pwned\x07"
    failed = Freshness("stale", since=EVAL_AT, reason=f"http://h:1: refused {osc}")
    warned = Freshness("ok", reason=f"partial {osc}")
    view = StatusView(
        f"lane{osc}", 1, 2, "1h", evaluated_at=EVAL_AT, model_filter=f"m{osc}",
        sources=(SourceStatus("lane", failed, 3.0), SourceStatus("ledger", warned, 0.2)),
    )  # fmt: skip
    text = "\n".join(line.plain for line in status_lines(view, 158))
    assert "\x1b" not in text and "\x07" not in text
    assert text.count("␛]0;pwned␇") == 4, text  # lane, filter, both reasons
    line = StatusLine()
    line.show(view)
    assert line.tooltip is not None and "\x1b" not in str(line.tooltip)


def test_a_lane_not_configured_is_said_first_on_the_status_line() -> None:
    view = StatusView("no lane", 0, 0, "1h", sources=(SourceStatus("ledger", Freshness("ok")),))
    assert [item.plain for item in status_items(view)][:2] == ["no lane configured", "1h"]


class Host(App[None]):
    def __init__(self, pane: CacheGauge | PrefillPane) -> None:
        super().__init__()
        self.pane = pane

    def compose(self) -> ComposeResult:
        yield self.pane

    def on_mount(self) -> None:
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = "cockpit-dark"


async def test_a_pane_redraws_only_when_its_view_changes() -> None:
    pane = PrefillPane()
    async with Host(pane).run_test() as pilot:
        pane.show(lane_snapshot())
        await pilot.pause()
        shown = pane.view
        pane.show(lane_snapshot())  # equal figures, a new snapshot object
        assert pane.view is shown
        pane.show(lane_snapshot(prefill_sum=400.0))
        assert pane.view is not shown


async def test_a_stale_pane_says_since_when_in_its_border() -> None:
    pane = CacheGauge()
    async with Host(pane).run_test() as pilot:
        stale = Freshness("stale", since=EVAL_AT, reason="connection refused")
        pane.show(lane_snapshot(stale), None, ledger_configured=False)
        await pilot.pause()
        since = datetime.fromtimestamp(EVAL_AT, UTC).strftime("%H:%M:%S")
        assert pane.border_subtitle.startswith(f"lane stale since {since} · connection refused")
        assert "ledger" not in pane.border_subtitle  # not configured: nothing to say
        assert "91.6%" in pane.render().plain
        assert "lane: stale since" in str(pane.tooltip)


async def test_a_source_not_configured_comes_last_in_a_pane_border() -> None:
    pane = CacheGauge()
    async with Host(pane).run_test() as pilot:
        stale = Freshness("stale", since=EVAL_AT, reason="state.db is truncated")
        pane.show(None, ledger_snapshot(stale), lane_configured=False)
        await pilot.pause()
        assert pane.border_subtitle.startswith("ledger stale since ")
        assert pane.border_subtitle.endswith("lane missing: no lane configured")


# --- the roofline: plotted again only when what it shows changes -----------------------------


def _roofline_view(prefill_scale: float) -> RooflineView:
    """The roofline test pane's view with the prefill rate scaled."""
    from tests.support.roofline import CHUNK, LLAMA, LOAD
    from tests.support.roofline import H100 as H100_PROFILE

    load = replace(LOAD, effective_prefill_rate=LOAD.effective_prefill_rate * prefill_scale)
    points = operating_points(load, H100_PROFILE, LLAMA, chunk_tokens=CHUNK)
    return RooflineView(H100_PROFILE, LLAMA, points)


def _prefill_at(view: RooflineView) -> tuple[float, float]:
    """The prefill point's log10 intensity and FLOP/s."""
    assert view.points is not None and view.points.prefill is not None
    point = view.points.prefill
    return math.log10(point.intensity), math.log10(point.achieved_flops_per_s)


async def test_a_point_moving_within_its_spot_draws_nothing() -> None:
    from tests.support.roofline import CountedApp, plot_text

    app = CountedApp(_roofline_view(1.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane, before = app.pane, plot_text(app)
        pane.plot.refreshes.clear()
        pane.show(_roofline_view(1.0001))  # 0.00004 of a decade: far less than a cell
        await pilot.pause()
        assert pane.plot.refreshes == []
        assert plot_text(app) == before


async def test_a_point_moving_far_is_plotted_again_where_it_now_is() -> None:
    from tests.support.roofline import CountedApp, mark_position, plot_text

    app = CountedApp(_roofline_view(1.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.pane
        _, y_before = mark_position(plot_text(app), "P")
        pane.plot.refreshes.clear()
        moved = _roofline_view(4.0)  # 0.6 decade higher: rows up on a 3-decade axis
        pane.show(moved)
        await pilot.pause()
        assert pane.plot.refreshes == [False]
        text = plot_text(app)
        x, y = mark_position(text, "P")
        assert y > y_before + 0.4
        want_x, want_y = _prefill_at(moved)
        assert abs(x - want_x) < 0.1 and abs(y - want_y) < 0.3, text


async def test_small_moves_keep_the_letter_on_its_point() -> None:
    """Whatever is skipped, the letter on screen is where the last view's point is."""
    from tests.support.roofline import CountedApp, mark_position, plot_text

    app = CountedApp(_roofline_view(1.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.pane
        skipped = 0
        for step in range(1, 25):
            pane.plot.refreshes.clear()
            view = _roofline_view(1.0 + 0.02 * step)
            pane.show(view)
            await pilot.pause()
            skipped += pane.plot.refreshes == []
            x, y = mark_position(plot_text(app), "P")
            want_x, want_y = _prefill_at(view)
            assert abs(x - want_x) < 0.1 and abs(y - want_y) < 0.3
        assert 0 < skipped < 24


async def test_a_new_view_with_the_same_title_does_not_repaint_the_whole_pane() -> None:
    from tests.support.roofline import CountedApp

    app = CountedApp(_roofline_view(1.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.pane
        pane.refreshes.clear()
        pane.show(_roofline_view(1.5))
        await pilot.pause()
        assert pane.refreshes == []
        pane.show(RooflineView(find_hardware("a100"), find_model("llama-3.1-8b"), None))
        await pilot.pause()
        assert pane.refreshes  # a new title repaints the border


async def test_a_caption_line_that_changes_repaints_the_caption_without_layout() -> None:
    from tests.support.roofline import CountedApp
    from tests.support.screentext import screen_text

    app = CountedApp(_roofline_view(1.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.pane
        pane.caption.refreshes.clear()
        pane.show(_roofline_view(1.5))
        await pilot.pause()
        assert pane.caption.refreshes == [False]
        assert "38% of roof" in screen_text(app)


async def test_a_taller_pane_adds_the_roofs_line_to_its_caption() -> None:
    from tests.support.roofline import CountedApp
    from tests.support.screentext import screen_text

    app = CountedApp(_roofline_view(1.0))
    async with app.run_test(size=(80, 16)) as pilot:
        await pilot.pause()
        assert "ridge 295 · peak" not in screen_text(app)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert "ridge 295 · peak" in screen_text(app)
        assert "FLOP/byte" in screen_text(app)  # and the plot its axis labels


def test_a_model_filter_is_shown_as_typed() -> None:
    from cockpit.widgets.status import status_items

    typed = 'no"such\\model'
    view = StatusView("lane-a", 1, 1, "1h", evaluated_at=EVAL_AT, model_filter=typed)
    shown = [item.plain for item in status_items(view)]
    assert f"model '{typed}'" in shown, shown


def test_a_table_row_too_wide_for_its_pane_keeps_its_label_and_leaves_out_its_last_columns() -> (
    None
):
    """The ledger tables in a 61-cell column (a 200-column screen): seven 10-cell columns and a
    24-cell label don't fit even at 9 cells a column; the name stays, the last columns go."""
    header = Cells("per source", HEADER, column=10, min_label=NAME_CELLS)
    row = Cells("telegram", ("2", "41", "6.143 M", "24,464", "251 : 1", "41.1 : 1", "83.9%"),
                column=10, min_label=NAME_CELLS)  # fmt: skip
    width = 61
    kept = (width - NAME_CELLS // 2) // 9  # columns of 9 cells beside half the label's cells
    assert kept == 5
    assert header.content(width).plain.split() == ["per", "source", *HEADER[:kept]]
    assert row.content(width).plain.split()[0] == "telegram"
    assert row.content(width).plain.split()[1:] == [
        "2",
        "41",
        "6.143",
        "M",
        "24,464",
        "251",
        ":",
        "1",
    ]
    # At 81 cells the seven 9-cell columns leave the label 18 cells: nothing is left out.
    assert row.content(81).plain.split()[-1] == "83.9%"

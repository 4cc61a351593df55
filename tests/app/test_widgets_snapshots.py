"""What each pane looks like with fixed figures (pytest-textual-snapshot)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.app import App, ComposeResult
from textual.widget import Widget

from cockpit.core.model import FRESH, Freshness
from cockpit.themes import THEMES
from cockpit.widgets import CacheGauge, PhaseBar, PrefillPane, RatiosPane, SpendPane, StatusLine
from cockpit.widgets.status import SourceStatus, StatusView
from tests.support.feeds import EVAL_AT
from tests.support.snapshots import (
    lane_snapshot,
    ledger_snapshot,
    priced_ledger,
    split_lane_snapshot,
)

SnapCompare = Callable[..., bool]


pytestmark = pytest.mark.usefixtures("utc")


class PaneApp(App[None]):
    """One pane on an otherwise empty screen, in the cockpit's dark theme."""

    CSS = "Screen { align: center top; } Screen > * { width: 48; }"

    def __init__(self, pane: Widget, show: Callable[[], None]) -> None:
        super().__init__()
        self.pane = pane
        self.show_pane = show

    def compose(self) -> ComposeResult:
        yield self.pane

    def on_mount(self) -> None:
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = "cockpit-dark"
        self.show_pane()


STALE = Freshness("stale", since=EVAL_AT, reason="connection refused")


def test_cache_gauge(snap_compare: SnapCompare) -> None:
    pane = CacheGauge()
    assert snap_compare(PaneApp(pane, lambda: pane.show(lane_snapshot(), ledger_snapshot())),
                        terminal_size=(50, 16))  # fmt: skip


def test_cache_gauge_low_hit_rate(snap_compare: SnapCompare) -> None:
    pane = CacheGauge()
    low = lane_snapshot(prefix_cache_hits=12_000_000)
    assert snap_compare(PaneApp(pane, lambda: pane.show(low, ledger_snapshot())),
                        terminal_size=(50, 16))  # fmt: skip


def test_cache_gauge_with_the_prompt_split(snap_compare: SnapCompare) -> None:
    """Where the prompt tokens came from and the tiers that served the cached ones."""
    pane = CacheGauge()
    show = lambda: pane.show(split_lane_snapshot(), ledger_snapshot())  # noqa: E731
    assert snap_compare(PaneApp(pane, show), terminal_size=(160, 48))


def test_prefill_pane(snap_compare: SnapCompare) -> None:
    pane = PrefillPane()
    assert snap_compare(PaneApp(pane, lambda: pane.show(lane_snapshot())), terminal_size=(50, 17))


def test_prefill_pane_stale(snap_compare: SnapCompare) -> None:
    pane = PrefillPane()
    stale = lane_snapshot(STALE)
    assert snap_compare(PaneApp(pane, lambda: pane.show(stale)), terminal_size=(50, 17))


def test_phase_bar(snap_compare: SnapCompare) -> None:
    pane = PhaseBar()
    assert snap_compare(PaneApp(pane, lambda: pane.show(lane_snapshot())), terminal_size=(50, 12))


def test_ratios_pane(snap_compare: SnapCompare) -> None:
    pane = RatiosPane()
    assert snap_compare(PaneApp(pane, lambda: pane.show(lane_snapshot(), ledger_snapshot())),
                        terminal_size=(50, 18))  # fmt: skip


def test_spend_pane(snap_compare: SnapCompare) -> None:
    pane = SpendPane()
    assert snap_compare(PaneApp(pane, lambda: pane.show(priced_ledger("claude-sonnet-4"))),
                        terminal_size=(50, 14))  # fmt: skip


def test_spend_pane_without_a_ledger(snap_compare: SnapCompare) -> None:
    pane = SpendPane()
    assert snap_compare(PaneApp(pane, lambda: pane.show(None, ledger_configured=False)),
                        terminal_size=(50, 10))  # fmt: skip


def test_status_line(snap_compare: SnapCompare) -> None:
    line = StatusLine()
    view = StatusView(
        "lane-a", 1, 3, "24h", evaluated_at=EVAL_AT,
        sources=(SourceStatus("lane", FRESH, 0.012), SourceStatus("ledger", STALE, 0.004)),
        paused=True,
    )  # fmt: skip
    assert snap_compare(PaneApp(line, lambda: line.show(view)), terminal_size=(50, 4))

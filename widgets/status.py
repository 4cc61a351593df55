"""The status line: lane, window, evaluation time, each source's freshness, latency, PAUSED."""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from cockpit.figures import format_value
from cockpit.model import Freshness
from cockpit.timeutil import clock, stamp

from .pane import freshness_note

NBSP = "\u00a0"
"""Inside one item, so a narrow terminal wraps between items, never inside one."""

SEPARATOR = " │ "


@dataclass(frozen=True, slots=True)
class SourceStatus:
    name: str
    freshness: Freshness
    latency_s: float | None = None


@dataclass(frozen=True, slots=True)
class StatusView:
    """Everything the status line says; the app builds it from its state and snapshots."""

    lane: str
    index: int
    """1-based position of the lane."""
    count: int
    window: str
    ledger_window: str | None = None
    """Shown only when the ledger reads a different window from the lane."""
    evaluated_at: float | None = None
    replay_at: float | None = None
    sources: tuple[SourceStatus, ...] = ()
    paused: bool = False


def _item(text: str, style: str = "") -> Content:
    return Content.styled(text.replace(" ", NBSP), style)


def _source_item(source: SourceStatus) -> Content:
    latency = (
        f" {format_value(source.latency_s, 'seconds')}" if source.latency_s is not None else ""
    )
    if source.freshness.state == "ok":
        return _item(f"{source.name} ok{latency}", "$success")
    style = "$warning" if source.freshness.state == "stale" else "$error"
    return _item(freshness_note(source.name, source.freshness) + latency, style)


def status_items(view: StatusView) -> list[Content]:
    items = [_item(f"{view.lane} ({view.index}/{view.count})", "bold $primary")]
    window = (
        view.window
        if view.ledger_window in (None, view.window)
        else (f"{view.window} · ledger {view.ledger_window}")
    )
    items.append(_item(window, "bold"))
    if view.replay_at is not None:
        items.append(_item(f"REPLAY {stamp(view.replay_at)}", "bold reverse $accent"))
    elif view.evaluated_at is not None:
        items.append(_item(f"at {clock(view.evaluated_at)}"))
    items.extend(_source_item(source) for source in view.sources)
    if view.paused:
        items.append(_item("PAUSED", "bold reverse $warning"))
    return items


class StatusLine(Widget):
    """One line (two when narrow) at the top of the screen."""

    DEFAULT_CSS = """
    StatusLine {
        height: auto;
        max-height: 3;
        background: $panel;
        color: $foreground;
        padding: 0 1;
    }
    """

    view: reactive[StatusView | None] = reactive(None, layout=True)

    def show(self, view: StatusView) -> None:
        self.view = view

    def watch_view(self, view: StatusView | None) -> None:
        if view is None:
            return
        reasons = [
            f"{source.name}: {source.freshness.describe()}"
            for source in view.sources
            if source.freshness.state != "ok"
        ]
        self.tooltip = "\n".join(reasons) if reasons else None

    def render(self) -> Content:
        if self.view is None:
            return Content("starting…")
        return Content(SEPARATOR).join(status_items(self.view))

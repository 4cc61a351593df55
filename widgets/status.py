"""The status line: lane, window, evaluation time, each source's freshness, latency, PAUSED."""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from cockpit.figures import format_value
from cockpit.model import Freshness
from cockpit.timeutil import clock, stamp

from .pane import DEFAULT_WIDTH, freshness_note

SEPARATOR = " │ "


@dataclass(frozen=True, slots=True)
class SourceStatus:
    name: str
    freshness: Freshness
    latency_s: float | None = None
    reading: bool = False
    """No snapshot yet: the first read is under way."""


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
    model_filter: str | None = None
    coverage: str = ""
    """How much of the window the lane's data covers, when less (`since start (12 min)`)."""
    """The lane is filtered to this `model_name`."""


def _item(text: str, style: str = "") -> Content:
    return Content.styled(text, style)


def _source_item(source: SourceStatus) -> Content:
    if source.reading:
        return _item(f"{source.name} reading…", "$text-muted")
    latency = (
        f" {format_value(source.latency_s, 'seconds')}" if source.latency_s is not None else ""
    )
    if source.freshness.state == "ok" and source.freshness.reason:
        return _item(f"{source.name} ok{latency} · {source.freshness.reason}", "$warning")
    if source.freshness.state == "ok":
        return _item(f"{source.name} ok{latency}", "$success")
    style = "$warning" if source.freshness.state == "stale" else "$error"
    return _item(freshness_note(source.name, source.freshness) + latency, style)


def status_items(view: StatusView) -> list[Content]:
    items = [_item(f"{view.lane} ({view.index}/{view.count})", "bold $primary")]
    if view.model_filter:
        items.append(_item(f"model {view.model_filter!r}", "bold $accent"))
    window = (
        view.window
        if view.ledger_window in (None, view.window)
        else (f"{view.window} · ledger {view.ledger_window}")
    )
    items.append(_item(window, "bold"))
    if view.coverage:
        items.append(_item(view.coverage, "$warning"))
    if view.replay_at is not None:
        items.append(_item(f"REPLAY {stamp(view.replay_at)}", "bold reverse $accent"))
    elif view.evaluated_at is not None:
        items.append(_item(f"at {clock(view.evaluated_at)}"))
    items.extend(_source_item(source) for source in view.sources)
    if view.paused:
        items.append(_item("PAUSED", "bold reverse $warning"))
    return items


def pack_items(items: list[Content], width: int) -> list[Content]:
    """Items on as few lines as fit `width`, breaking only between items, never inside one."""
    lines: list[Content] = []
    current: Content | None = None
    for item in items:
        if current is None:
            current = item
        elif current.cell_length + len(SEPARATOR) + item.cell_length <= width:
            current = Content.assemble(current, (SEPARATOR, "$text-muted"), item)
        else:
            lines.append(current)
            current = item
    if current is not None:
        lines.append(current)
    return [line.truncate(width, ellipsis=True) for line in lines]


class StatusLine(Widget):
    """One line (two when narrow) at the top of the screen."""

    DEFAULT_CSS = """
    StatusLine {
        height: auto;
        max-height: 3;
        background: $panel;
        color: $foreground;
        padding: 0 1;
        text-wrap: nowrap;
    }
    """

    view: reactive[StatusView | None] = reactive(None)
    """A new view repaints the line; only one that needs another number of lines lays out."""
    _height: int | None = None
    _packed: tuple[StatusView, int, list[Content]] | None = None
    """The last view packed at a width: the watcher, the layout and the render all ask."""

    def show(self, view: StatusView) -> None:
        self.view = view

    def watch_view(self, view: StatusView | None) -> None:
        if view is None:
            return
        reasons = [
            f"{source.name}: {source.freshness.describe()}"
            for source in view.sources
            if source.freshness.state != "ok" or source.freshness.reason
        ]
        tooltip = "\n".join(reasons) if reasons else None
        if tooltip != self.tooltip:  # setting it, even to the same text, updates the screen's
            self.tooltip = tooltip
        height = len(self._lines(self.size.width)) if self.size.width else None
        if height is None or height != self._height:
            self._height = height
            self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines(width))

    def _lines(self, width: int) -> list[Content]:
        view = self.view
        if view is None:
            return [Content("starting…")]
        width = width or DEFAULT_WIDTH
        packed = self._packed
        if packed is None or packed[0] is not view or packed[1] != width:
            packed = self._packed = (view, width, pack_items(status_items(view), width))
        return packed[2]

    def render(self) -> Content:
        return Content("\n").join(self._lines(self.size.width))

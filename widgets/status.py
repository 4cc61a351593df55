"""The status line: lane, window, evaluation time, each source's freshness, latency, PAUSED."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from textual.content import Content
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from cockpit.figures import format_value
from cockpit.model import FRESH, Freshness
from cockpit.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.timeutil import clock, stamp

from .pane import DEFAULT_WIDTH, short_reason, stale_since

SEPARATOR = " │ "
MAX_LINES = 3
"""The status line's most rows (its max-height)."""
REASON_CELLS = 40
"""A failure's reason on the status line is cut to at most this, or half a wide line, and to
what keeps its item on one line (whole in the tooltip)."""
MIN_REASON_CELLS = 12
"""How short reasons get, then none at all, when the items would need more than MAX_LINES."""


def _reason_room(width: int, rest: int, most: int | None) -> int:
    """Cells for a reason in an item whose other text takes `rest` cells (0: no reason)."""
    room = max(MIN_REASON_CELLS, min(max(REASON_CELLS, width // 2), width - rest))
    return room if most is None else min(room, most)


@dataclass(frozen=True, slots=True)
class SourceStatus:
    name: str
    freshness: Freshness
    latency_s: float | None = None
    reading: bool = False
    """No snapshot yet: the first read is under way."""


def source_status(name: str, snapshot: LaneSnapshot | LedgerSnapshot | None) -> SourceStatus:
    """A source's item: its snapshot's freshness and latency, or reading, before the first."""
    if snapshot is None:
        return SourceStatus(name, FRESH, reading=True)
    return SourceStatus(name, snapshot.freshness, snapshot.latency_s)


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


def _source_item(
    source: SourceStatus, width: int = DEFAULT_WIDTH, most: int | None = None
) -> Content:
    if source.reading:
        return _item(f"{source.name} reading…", "$text-muted")
    freshness = source.freshness
    latency = (
        f" {format_value(source.latency_s, 'seconds')}" if source.latency_s is not None else ""
    )
    if freshness.state == "ok" and freshness.reason:
        return _item(f"{source.name} ok{latency} · {freshness.reason}", "$warning")
    if freshness.state == "ok":
        return _item(f"{source.name} ok{latency}", "$success")
    if freshness.state == "stale":
        head = f"{source.name} {stale_since(freshness)}{latency}"
        room = _reason_room(width, cell_len(head) + 3, most)
        reason = short_reason(freshness.reason, room) if room else ""
        return _item(f"{head} · {reason}" if reason else head, "$warning")
    head = f"{source.name} missing"
    room = _reason_room(width, len(head) + 2 + len(latency), most)
    reason = short_reason(freshness.reason, room) if room else ""
    return _item((f"{head}: {reason}" if reason else head) + latency, "$error")


def status_items(
    view: StatusView, width: int = DEFAULT_WIDTH, reason_cells: int | None = None
) -> list[Content]:
    """The line's items; failure reasons fit `width`, and at most `reason_cells` (0: none)."""
    lane = f"{view.lane} ({view.index}/{view.count})" if view.count else "no lane configured"
    items = [_item(lane, "bold $primary")]
    if view.model_filter:
        items.append(_item(f"model '{view.model_filter}'", "bold $accent"))  # as typed
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
        items.append(_item(f"at {clock(view.evaluated_at)} UTC"))
    if view.paused:  # before the sources: a long reason can't push it off the line
        items.append(_item("PAUSED", "bold reverse $warning"))
    items.extend(_source_item(source, width, reason_cells) for source in view.sources)
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


def status_lines(view: StatusView, width: int) -> list[Content]:
    """The items packed into `width`; reasons shortened, then left out (they stay in the
    tooltip), when whole ones would need more than MAX_LINES rows."""
    lines: list[Content] = []
    for reason_cells in (None, MIN_REASON_CELLS, 0):
        lines = pack_items(status_items(view, width, reason_cells), width)
        if len(lines) <= MAX_LINES:
            break
    return lines


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
        tooltip = Content("\n".join(reasons)) if reasons else None  # plain text, never markup
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
            packed = self._packed = (view, width, status_lines(view, width))
        return packed[2]

    def render(self) -> Content:
        return Content("\n").join(self._lines(self.size.width))

"""The status line: lane, window, evaluation time, each source's freshness, latency, PAUSED."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from rich.cells import cell_len
from textual.content import Content

from cockpit.core.figures import format_value
from cockpit.core.model import FRESH, Freshness
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.core.text import visible
from cockpit.core.timeutil import clock, stamp

from .pane import DEFAULT_WIDTH, LinesWidget, short_reason, stale_since

SEPARATOR = " │ "
MAX_LINES = 3
"""The status line's most rows (its max-height)."""
REASON_CELLS = 40
"""A failure's reason is cut to this, or half a wide line, and to keep its item on one line."""
MIN_REASON_CELLS = 12
"""How short reasons get, then none at all, when the items would need more than MAX_LINES."""


@dataclass(frozen=True, slots=True)
class SourceStatus:
    name: str
    freshness: Freshness
    latency_s: float | None = None
    reading: bool = False
    """The first read is under way."""


def source_status(name: str, snapshot: LaneSnapshot | LedgerSnapshot | None) -> SourceStatus:
    if snapshot is None:
        return SourceStatus(name, FRESH, reading=True)
    return SourceStatus(name, snapshot.freshness, snapshot.latency_s)


@dataclass(frozen=True, slots=True)
class StatusView:
    """Everything the status line says."""

    lane: str
    index: int
    """1-based position of the lane."""
    count: int
    window: str
    ledger_window: str | None = None
    """Shown when it differs from the lane's."""
    evaluated_at: float | None = None
    replay_at: float | None = None
    sources: tuple[SourceStatus, ...] = ()
    paused: bool = False
    model_filter: str | None = None
    """The lane is filtered to this `model_name`."""
    coverage: str = ""
    """How much of the window the lane's data covers, when less (`since start (12 min)`)."""
    card: str | None = None
    card_s: float = 0.0
    """The card running on the lane, and for how long it has run."""
    cards_in_window: tuple[int, float | None, float | None] = (0, None, None)
    """Stopped cards wholly in the window: how many, their requests, the window's requests."""


def elapsed(seconds: float) -> str:
    """`42s`, `3m 05s`, `2h 07m`: a running card's time so far."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _source_item(source: SourceStatus, width: int, most: int | None) -> Content:
    """The source's state and latency; a failure's reason cut to fit `width` and `most`."""
    freshness = source.freshness
    if source.reading:
        return Content.styled(f"{source.name} reading…", "$text-muted")
    latency = "" if source.latency_s is None else f" {format_value(source.latency_s, 'seconds')}"
    if freshness.state == "ok" and freshness.reason:
        return Content.styled(
            f"{source.name} ok{latency} · {visible(freshness.reason)}", "$warning"
        )
    if freshness.state == "ok":
        return Content.styled(f"{source.name} ok{latency}", "$success")
    stale = freshness.state == "stale"
    head = f"{source.name} {stale_since(freshness)}{latency}" if stale else f"{source.name} missing"
    separator, tail = (" · ", "") if stale else (": ", latency)
    rest = cell_len(head + separator + tail)
    room = max(MIN_REASON_CELLS, min(max(REASON_CELLS, width // 2), width - rest))
    room = room if most is None else min(room, most)
    reason = short_reason(visible(freshness.reason), room) if room else ""
    text = f"{head}{separator}{reason}{tail}" if reason else head + tail
    return Content.styled(text, "$warning" if stale else "$error")


def status_items(
    view: StatusView, width: int = DEFAULT_WIDTH, reason_cells: int | None = None
) -> list[Content]:
    """The line's items; failure reasons fit `width`, and at most `reason_cells` (0: none)."""
    count, inside, requests = view.cards_in_window
    share = "" if inside is None or requests is None else f": {inside:,.0f} of {requests:,.0f}"
    cards = f"{count} card{'s' * (count > 1)} in window{share and share + ' requests'}"
    lane = f"{visible(view.lane)} ({view.index}/{view.count})" if view.count else ""
    ledger = view.ledger_window not in (None, view.window)
    card, replay, evaluated = view.card, view.replay_at, view.evaluated_at
    shown = (
        (lane or "no lane configured", "bold $primary"),
        (f"model '{visible(view.model_filter)}'" if view.model_filter else "", "bold $accent"),
        (view.window + (f" · ledger {view.ledger_window}" if ledger else ""), "bold"),
        (
            f"card {visible(card)} {elapsed(view.card_s)}" if card is not None else "",
            "bold $accent",
        ),
        (cards if count else "", "$accent"),
        (view.coverage, "$warning"),
        (f"REPLAY {stamp(replay)}" if replay is not None else "", "bold reverse $accent"),
        (f"at {clock(evaluated)} UTC" if replay is None and evaluated is not None else "", ""),
        # before the sources: a long reason can't push it off the line
        ("PAUSED" if view.paused else "", "bold reverse $warning"),
    )
    items = [Content.styled(text, style) for text, style in shown if text]
    return items + [_source_item(source, width, reason_cells) for source in view.sources]


def pack_items(items: list[Content], width: int) -> list[Content]:
    """Items on as few lines as fit `width`, breaking only between items, never inside one."""
    lines: list[Content] = []
    for item in items:
        if lines and lines[-1].cell_length + len(SEPARATOR) + item.cell_length <= width:
            lines[-1] = Content.assemble(lines[-1], (SEPARATOR, "$text-muted"), item)
        else:
            lines.append(item)
    return [line.truncate(width, ellipsis=True) for line in lines]


@lru_cache(maxsize=8)
def status_lines(view: StatusView | None, width: int) -> tuple[Content, ...]:
    """The items packed into `width`; reasons shortened, then left out (the tooltip has them),
    when whole ones would need more than MAX_LINES rows."""
    if view is None:
        return (Content("starting…"),)
    lines: list[Content] = []
    for reason_cells in (None, MIN_REASON_CELLS, 0):
        lines = pack_items(status_items(view, width, reason_cells), width)
        if len(lines) <= MAX_LINES:
            break
    return tuple(lines)


class StatusLine(LinesWidget):
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

    view: StatusView | None = None

    def show(self, view: StatusView) -> None:
        old, self.view = self.keys_now(), view
        reasons = [
            visible(f"{source.name}: {source.freshness.describe()}")
            for source in view.sources
            if source.freshness.state != "ok" or source.freshness.reason
        ]
        tooltip = Content("\n".join(reasons)) if reasons else None  # plain text, never markup
        if tooltip != self.tooltip:  # setting it, even to the same text, updates the screen's
            self.tooltip = tooltip
        self.redraw(old)

    def lines_at(self, width: int) -> Sequence[Content]:
        return status_lines(self.view, width)

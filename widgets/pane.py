"""The shared pane: a titled box of `label … value` rows and bars, drawn from a frozen view.

A pane's `show()` turns a snapshot into a `PaneView`; the view is a reactive attribute, so an
unchanged view (same text, same tones, same freshness) causes no re-render at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rich.cells import cell_len
from rich.segment import Segment as RichSegment
from rich.style import Style as RichStyle
from textual.content import Content
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.style import Style
from textual.visual import Visual
from textual.widget import Widget

from cockpit.figures import format_figure
from cockpit.model import Figure, Freshness
from cockpit.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.timeutil import clock

Tone = Literal["plain", "good", "warn", "bad", "muted", "primary", "secondary", "accent"]

TONE_STYLE: dict[str, str] = {
    "plain": "bold",
    "good": "bold $success",
    "warn": "bold $warning",
    "bad": "bold $error",
    "muted": "$text-muted",
    "primary": "$primary",
    "secondary": "$secondary",
    "accent": "$accent",
}
"""Row tones as Textual styles: theme variables only, so every theme (and NO_COLOR) applies."""

MISSING = "—"
DEFAULT_WIDTH = 40
"""Width used before the pane has been laid out (the height never depends on it)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One `label … value` line. `stale` dims the value; `reason` explains a `—`."""

    label: str
    value: str
    tone: Tone = "plain"
    stale: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Segment:
    fraction: float
    tone: Tone
    char: str = "█"


@dataclass(frozen=True, slots=True)
class Bar:
    """A horizontal bar of segments (fractions of the full width), then a caption."""

    segments: tuple[Segment, ...]
    caption: str = ""
    stale: bool = False


@dataclass(frozen=True, slots=True)
class Note:
    """A line of prose: a freshness remark or a legend."""

    text: str
    tone: Tone = "muted"


Line = Row | Bar | Note


@dataclass(frozen=True, slots=True)
class PaneView:
    lines: tuple[Line, ...]
    sources: tuple[tuple[str, Freshness], ...] = ()
    """(source name, freshness) of every source the pane draws on."""


_LEADING_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S*?: ")
"""`http://host:9090/metrics: ` before a lane's reason: the pane already names the source."""
_PATH = re.compile(r"(?<![\w:/.~=\"'-])/(?:[^\s/:\"']+/)+([^\s/:\"']+\.\w+)(?![\w/])")
"""An absolute path to a file with an extension (`state.db`): its file name says which
ledger, the folders only take room. A URL's path or a label's value is not one."""


def short_reason(reason: str, cells: int | None = None) -> str:
    """A failure's reason as the screen shows it: no leading URL, file paths as file names,
    at most `cells` wide (cut with `…`). The tooltip keeps it whole."""
    text = _PATH.sub(r"\1", _LEADING_URL.sub("", reason.strip(), count=1)) or reason
    if cells is not None and cell_len(text) > cells:
        return Content(text).truncate(cells, ellipsis=True).plain
    return text


def stale_since(freshness: Freshness) -> str:
    """`stale since 12:01:03` (UTC), or `stale` when the time is not known."""
    return f"stale since {clock(freshness.since)}" if freshness.since is not None else "stale"


def freshness_note(name: str, freshness: Freshness) -> str:
    """`lane stale since 12:01:03 · connection refused` (UTC), `ledger missing: why`,
    `lane: a server warning` or ""."""
    if freshness.state == "ok":
        return f"{name}: {freshness.reason}" if freshness.reason else ""
    if freshness.state == "stale":
        head = f"{name} {stale_since(freshness)}"
        reason = short_reason(freshness.reason)  # after the time: room is short
        return f"{head} · {reason}" if reason else head
    return f"{name} missing: {freshness.reason}" if freshness.reason else f"{name} missing"


def figure_row(
    figure: Figure | None,
    label: str | None = None,
    *,
    tone: Tone = "plain",
    stale: bool = False,
    absent: str = "",
    value: str | None = None,
) -> Row:
    """A row for one figure; `—` with the figure's reason (or `absent`) when it is missing."""
    if figure is None:
        return Row(label or "", MISSING, "muted", stale, absent or "no data yet")
    name = label or figure.label
    if figure.missing:
        return Row(name, MISSING, "muted", stale, figure.reason or absent)
    return Row(name, value if value is not None else format_figure(figure), tone, stale)


def band_tone(share: float | None, low: float = 0.70, high: float = 0.90) -> Tone:
    """Red below `low`, green above `high`, amber between (the hit-rate bands)."""
    if share is None:
        return "muted"
    if share < low:
        return "bad"
    if share > high:
        return "good"
    return "warn"


def _value_style(row: Row) -> str:
    return TONE_STYLE[row.tone] + (" dim" if row.stale else "")


def _row_content(row: Row, width: int) -> Content:
    style = _value_style(row)
    value = row.value
    room = width - cell_len(value) - 1
    if room < 1:
        return Content.styled(value, style)
    label = Content(row.label).truncate(room, ellipsis=True)
    gap = width - label.cell_length - cell_len(value)
    return Content.assemble(label, " " * gap, (value, style))


def _bar_parts(bar: Bar, width: int) -> list[tuple[str, str]]:
    """The bar's runs of cells, then its caption, each with its style."""
    caption = f" {bar.caption}" if bar.caption else ""
    room = max(width - cell_len(caption), 4)
    cells = _apportion([segment.fraction for segment in bar.segments], room)
    parts: list[tuple[str, str]] = []
    used = 0
    for segment, count in zip(bar.segments, cells, strict=True):
        style = TONE_STYLE[segment.tone] + (" dim" if bar.stale else "")
        parts.append((segment.char * count, style))
        used += count
    parts.append(("░" * (room - used), "$text-muted"))
    parts.append((caption, "dim" if bar.stale else ""))
    return parts


def _bar_content(bar: Bar, width: int) -> Content:
    return Content.assemble(*_bar_parts(bar, width)).truncate(width)


def _apportion(fractions: Iterable[float], cells: int) -> list[int]:
    """Whole cells per fraction (largest remainder), never more than `cells` in total."""
    wanted = [max(0.0, min(1.0, fraction)) * cells for fraction in fractions]
    counts = [int(value) for value in wanted]
    spare = min(cells, round(sum(wanted))) - sum(counts)
    by_remainder = sorted(range(len(wanted)), key=lambda i: counts[i] - wanted[i])
    for index in by_remainder[: max(spare, 0)]:
        counts[index] += 1
    return counts


def _note_content(note: Note, width: int) -> Content:
    return Content.styled(note.text, TONE_STYLE[note.tone]).truncate(width, ellipsis=True)


def render_line(line: Line, width: int) -> Content:
    if isinstance(line, Row):
        return _row_content(line, width)
    if isinstance(line, Bar):
        return _bar_content(line, width)
    return _note_content(line, width)


def tooltip_for(view: PaneView) -> str | None:
    """Why each `—` is missing and what is stale: the reasons the rows have no room for."""
    notes = [
        f"{line.label}: {line.reason}"
        for line in view.lines
        if isinstance(line, Row) and line.value == MISSING and line.reason
    ]
    for name, freshness in view.sources:
        if freshness.state != "ok":
            notes.insert(0, f"{name}: {freshness.describe()}")
        elif freshness.reason:  # fresh, with a warning from the source
            notes.insert(0, f"{name}: {freshness.reason}")
    return "\n".join(notes) if notes else None


def _border_notes(view: PaneView) -> list[str]:
    """Each source's note; a source not configured at all comes last, so that it doesn't
    push a failing source's note (and its reason) off a narrow border."""
    unconfigured = (NO_LANE, NO_LEDGER)
    ordered = sorted(view.sources, key=lambda source: source[1] in unconfigured)
    return [freshness_note(name, fresh) for name, fresh in ordered]


def _height(view: PaneView | None) -> int:
    return len(view.lines) if view else 1


class Pane(Widget):
    """A bordered box that draws its `view`; subclasses build the view in `show()`."""

    DEFAULT_CSS = """
    Pane {
        height: auto;
        border: round $foreground 35%;
        border-title-color: $primary;
        border-title-style: bold;
        border-subtitle-color: $warning;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    Pane.-missing { border-subtitle-color: $error; }
    """

    view: reactive[PaneView | None] = reactive(None, repaint=False)
    """What the pane shows; set by `show()`. Equal views do not redraw; a new view repaints
    only the lines that changed, and lays the screen out again only if it has more or fewer."""

    TITLE = ""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = self.TITLE
        self._strips: dict[int, tuple[tuple[object, ...], Strip]] = {}
        """Each line's last strip and what it was drawn from: a repaint redraws only the
        lines that changed (Textual would render every line of the pane again)."""
        self._span_styles: dict[tuple[Style, str, str, int], RichStyle] = {}
        """(widget style, theme, span style, x) -> the style Textual would give that span."""
        self.view = self.placeholder()

    def placeholder(self) -> PaneView:
        """The view before any data arrives."""
        return PaneView((Note("waiting for the first read…"),))

    def watch_view(self, old: PaneView | None, view: PaneView | None) -> None:
        self._repaint(old, view)
        if view is None:
            return
        subtitle = " · ".join(note for note in _border_notes(view) if note)
        if subtitle != self.border_subtitle:  # setting it repaints the whole pane
            self.border_subtitle = subtitle
        states = {fresh.state for _, fresh in view.sources}
        self.set_class("stale" in states, "-stale")
        self.set_class("missing" in states, "-missing")
        tooltip = tooltip_for(view)
        if tooltip != self.tooltip:  # setting it, even to the same text, updates the screen's
            self.tooltip = tooltip

    def _repaint(self, old: PaneView | None, view: PaneView | None) -> None:
        if old is None or view is None or len(old.lines) != len(view.lines):
            self.refresh(layout=_height(old) != _height(view))
            return
        width = self.size.width
        changed = [y for y, (a, b) in enumerate(zip(old.lines, view.lines, strict=True)) if a != b]
        if changed and width:
            self.refresh(*(Region(0, y, width, 1) for y in changed))
        elif changed:
            self.refresh()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return _height(self.view)

    def render(self) -> Content:
        if self.view is None:
            return Content("")
        width = self.size.width or DEFAULT_WIDTH
        return Content("\n").join(render_line(line, width) for line in self.view.lines)

    def render_line(self, y: int) -> Strip:
        """Line `y` on screen: drawn again only if its line, the width, theme or style changed."""
        self._dirty_regions.clear()  # Textual's own render_line would re-render every line
        width, style = self.size.width, self.visual_style
        lines = self.view.lines if self.view is not None else ()
        if not 0 <= y < len(lines):
            return Strip.blank(width, style.rich_style)
        key = (lines[y], width, self.app.theme, style, self.text_selection)
        cached = self._strips.get(y)
        if cached is not None and cached[0] == key:
            return cached[1]
        line = lines[y]
        strip = None
        if isinstance(line, Row):
            strip = self._row_strip(line, width, style)
        elif isinstance(line, Bar):
            strip = self._bar_strip(line, width, style)
        if strip is None:
            content = render_line(line, width or DEFAULT_WIDTH)
            strips = Visual.to_strips(self, content, width, 1, style)
            strip = strips[0] if strips else Strip.blank(width, style.rich_style)
        self._strips[y] = (key, strip)
        return strip

    def _row_strip(self, row: Row, width: int, style: Style) -> Strip | None:
        """The strip `Visual.to_strips` makes of a row whose label fits, built directly.

        A row is its label and the gap in the widget's style, then the value in its tone;
        Textual's general path (wrapping, spans, selection) costs ten times as much per line.
        None when the row needs that path: a label to shorten, no room, a selection.
        """
        value, label = row.value, row.label
        gap = width - cell_len(label) - cell_len(value)
        if not value or gap < 1 or self.text_selection is not None:
            return None
        parts = [(label + " " * gap, ""), (value, _value_style(row))]
        return self._parts_strip(parts, width, style)

    def _bar_strip(self, bar: Bar, width: int, style: Style) -> Strip | None:
        """The strip `Visual.to_strips` makes of a bar whose caption fits, built directly as
        `_row_strip` builds a row. None when it needs Textual's path (to be cut, a selection)."""
        parts = _bar_parts(bar, width)
        if sum(cell_len(text) for text, _ in parts) != width or self.text_selection is not None:
            return None
        return self._parts_strip(parts, width, style)

    def _parts_strip(self, parts: list[tuple[str, str]], width: int, style: Style) -> Strip:
        """Runs of text that fill the width exactly, each in its span style, as one strip."""
        segments, x = [], 0
        for text, span in parts:
            if text:
                segments.append(RichSegment(text, self._span_style(style, span, x)))
                x += len(text)  # Textual's offsets count characters
        return Strip(segments, width)

    def _span_style(self, base: Style, span: str, x: int) -> RichStyle:
        """The Rich style Content rendering gives text in `span` style at offset `x`."""
        key = (base, self.app.theme, span, x)
        cached = self._span_styles.get(key)
        if cached is None:
            if len(self._span_styles) > 1024:
                self._span_styles.clear()
            text_style = base + self._get_style(span) if span else base
            cached = self._span_styles[key] = (base + text_style).rich_style_with_offset(x, 0)
        return cached


# --- reading snapshots ----------------------------------------------------------------------

NO_LEDGER = Freshness("missing", reason="no ledger configured")
NO_LANE = Freshness("missing", reason="no lane configured")
WAITING = "waiting for the first read"


@dataclass(frozen=True, slots=True)
class Source:
    """One snapshot's figures as a pane reads them."""

    name: str
    figures: Mapping[str, Figure]
    freshness: Freshness
    absent: str
    """Why every figure is `—` when the source has none."""

    @property
    def stale(self) -> bool:
        return self.freshness.state == "stale"

    def get(self, key: str) -> Figure | None:
        return self.figures.get(key)

    def value(self, key: str) -> float | None:
        figure = self.figures.get(key)
        return figure.value if figure else None

    def row(self, key: str, label: str | None = None, **options: Any) -> Row:
        options.setdefault("absent", self.absent)
        return figure_row(self.get(key), label, stale=self.stale, **options)


def lane_source(snapshot: LaneSnapshot | None, configured: bool = True) -> Source:
    if snapshot is None:
        freshness = Freshness("missing", reason=WAITING) if configured else NO_LANE
        return Source("lane", {}, freshness, freshness.reason)
    figures = snapshot.figures.figures if snapshot.figures else {}
    return Source("lane", figures, snapshot.freshness, snapshot.freshness.reason or WAITING)


def ledger_source(snapshot: LedgerSnapshot | None, configured: bool = True) -> Source:
    if snapshot is None:
        freshness = Freshness("missing", reason=WAITING) if configured else NO_LEDGER
        return Source("ledger", {}, freshness, freshness.reason)
    figures = snapshot.figures.figures if snapshot.figures else {}
    return Source("ledger", figures, snapshot.freshness, snapshot.freshness.reason or WAITING)

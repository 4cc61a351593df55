"""The shared pane: a titled box of rows, bars, table rows and sparklines drawn from a frozen
`PaneView`. Text from outside is shown as plain text, its control characters made `visible`."""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any, ClassVar, Literal, Self

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

from cockpit.core.figures import format_figure
from cockpit.core.model import Figure, Freshness
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.core.text import visible
from cockpit.core.timeutil import clock

Tone = Literal["plain", "good", "warn", "bad", "alarm", "muted", "primary", "secondary", "accent"]

TONE_STYLE: dict[str, str] = {
    "plain": "bold",
    "good": "bold $success",
    "warn": "bold $warning",
    "bad": "bold $error",
    "alarm": "bold reverse $error",
    "muted": "$text-muted",
    "primary": "$primary",
    "secondary": "$secondary",
    "accent": "$accent",
}
"""Row tones as Textual styles: theme variables only, so every theme (and NO_COLOR) applies."""

MISSING = "—"
DEFAULT_WIDTH = 40
"""Width used before the widget has been laid out."""
BORDER_ROWS = 2
NO_LEDGER = Freshness("missing", reason="no ledger configured")
NO_LANE = Freshness("missing", reason="no lane configured")
WAITING = "waiting for the first read"


def figure_text(figure: Figure | None, shown: Callable[[Figure], str] = format_figure) -> str:
    """The figure as the panes show it; `—` when missing."""
    return MISSING if figure is None or figure.missing else shown(figure)


def _style(tone: Tone, stale: bool) -> str:
    return TONE_STYLE[tone] + (" dim" if stale else "")


@dataclass(frozen=True, slots=True)
class Row:
    """One `label … value` line. `stale` dims the value; `reason` explains a `—`."""

    label: str
    value: str
    tone: Tone = "plain"
    stale: bool = False
    reason: str = ""
    figure: Figure | None = None
    """The figure shown, for its details (definition, query, time) on `enter`/`i`."""

    def content(self, width: int) -> Content:
        style = _style(self.tone, self.stale)
        value = visible(self.value)
        room = width - cell_len(value) - 1
        if room < 1:
            return Content.styled(value, style)
        label = Content(visible(self.label)).truncate(room, ellipsis=True)
        gap = width - label.cell_length - cell_len(value)
        return Content.assemble(label, " " * gap, (value, style))


@dataclass(frozen=True, slots=True)
class Segment:
    fraction: float
    tone: Tone
    char: str = "█"


@dataclass(frozen=True, slots=True)
class Bar:
    """A horizontal bar: segments (fractions of the width), the rest in `░`, then a caption."""

    segments: tuple[Segment, ...]
    caption: str = ""
    stale: bool = False

    def cells(self, width: int) -> tuple[str, int, tuple[int, ...]]:
        """The caption, the room the segments share and each one's whole cells at `width`."""
        caption = f" {visible(self.caption)}" if self.caption else ""
        room = max(width - cell_len(caption), 4)
        return caption, room, tuple(_apportion([s.fraction for s in self.segments], room))

    def drawn(self, width: int) -> Hashable:
        """What the bar is drawn from at `width`: fractions that fill the same cells draw alike."""
        tones = tuple((segment.tone, segment.char) for segment in self.segments)
        return (Bar, self.cells(width), tones, self.stale)

    def content(self, width: int) -> Content:
        caption, room, cells = self.cells(width)
        parts = [
            (segment.char * count, _style(segment.tone, self.stale))
            for segment, count in zip(self.segments, cells, strict=True)
        ]
        parts.append(("░" * (room - sum(cells)), "$text-muted"))
        parts.append((caption, "dim" if self.stale else ""))
        return Content.assemble(*parts).truncate(width)


def _apportion(fractions: Iterable[float], cells: int) -> list[int]:
    """Whole cells per fraction (largest remainder), never more than `cells` in total."""
    wanted = [max(0.0, min(1.0, fraction)) * cells for fraction in fractions]
    counts = [int(value) for value in wanted]
    spare = min(cells, round(sum(wanted))) - sum(counts)
    by_remainder = sorted(range(len(wanted)), key=lambda i: counts[i] - wanted[i])
    for index in by_remainder[: max(spare, 0)]:
        counts[index] += 1
    return counts


@dataclass(frozen=True, slots=True)
class Note:
    """A line of prose: a freshness remark or a legend."""

    text: str
    tone: Tone = "muted"

    def content(self, width: int) -> Content:
        text = Content.styled(visible(self.text), TONE_STYLE[self.tone])
        return text.truncate(width, ellipsis=True)


@dataclass(frozen=True, slots=True)
class Cells:
    """A table row: a label, then its values right-aligned in columns of `column` cells."""

    label: str
    values: tuple[str, ...]
    tone: Tone = "plain"
    stale: bool = False
    column: int = 9
    """Cells per column; one fewer when they and `min_label` don't fit, then the last columns
    give way until the label has half its cells."""
    short: str = ""
    """The label when the full one leaves no room (`ITL` for `Inter-token`)."""
    min_label: int = 5
    drop_first: bool = False
    """Leave the first value out when even narrower columns don't fit."""

    def content(self, width: int) -> Content:
        column, shown = self.column, self.values
        if self.min_label + column * len(shown) > width:  # decided alike for every row
            column -= 1
            if self.drop_first and self.min_label + column * len(shown) > width:
                shown = shown[1:]
        while len(shown) > 1 and self.min_label // 2 + column * len(shown) > width:
            shown = shown[:-1]  # the label keeps half its cells; the last columns give way
        values = "".join(visible(value).rjust(column) for value in shown)
        room = width - cell_len(values)
        label = visible(self.label)
        if self.short and cell_len(label) >= room:
            label = visible(self.short)
        label_part = Content(label).truncate(max(room, 0), ellipsis=True, pad=True)
        return Content.assemble(label_part, (values, _style(self.tone, self.stale))).truncate(width)


SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_LABEL = 11
"""Cells for a sparkline's label."""


def sparkline(points: tuple[float | None, ...], cells: int, top: float | None = None) -> str:
    """`points` over `cells` blocks (each its points' mean) scaled to `top`; a gap is blank."""
    known = [point for point in points if point is not None]
    top = max(known, default=0.0) if top is None else top
    count = len(points)
    chars: list[str] = []
    for cell in range(max(cells, 0) if count else 0):
        start = cell * count // cells
        chunk = points[start : max((cell + 1) * count // cells, start + 1)]
        values = [point for point in chunk if point is not None]
        if not values:
            chars.append(" ")
            continue
        share = sum(values) / len(values) / top if top > 0 else 0.0
        chars.append(SPARK_BLOCKS[round(min(max(share, 0.0), 1.0) * (len(SPARK_BLOCKS) - 1))])
    return "".join(chars)


@dataclass(frozen=True, slots=True)
class Spark:
    """A label, a sparkline of `points` (None: a gap) scaled to `top`, then `value`."""

    label: str
    points: tuple[float | None, ...]
    value: str
    top: float | None = None
    stale: bool = False

    def content(self, width: int) -> Content:
        value = visible(self.value)
        label = Content(visible(self.label)).truncate(SPARK_LABEL, ellipsis=True, pad=True)
        line = sparkline(self.points, width - SPARK_LABEL - cell_len(value) - 2, self.top)
        style = _style("primary", self.stale)
        return Content.assemble(label, " ", (line, style), " ", (value, "bold")).truncate(width)


Line = Row | Bar | Note | Cells | Spark


def _drawn(line: Line, width: int) -> Hashable:
    """What a line is drawn from at `width`: not a row's figure and reason (details and
    tooltip), not a bar's fractions finer than its cells."""
    if isinstance(line, Row):
        return (line.label, line.value, line.tone, line.stale)
    if isinstance(line, Bar):
        return line.drawn(width)
    return line


@dataclass(frozen=True, slots=True)
class PaneView:
    lines: tuple[Line, ...]
    sources: tuple[tuple[str, Freshness], ...] = ()
    """(source name, freshness) of every source the pane draws on."""


_LEADING_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S*?: ")
"""`http://host:9090/metrics: ` before a lane's reason: the pane already names the source."""
_PATH = re.compile(r"(?<![\w:/.~=\"'-])/(?:[^\s/:\"']+/)+([^\s/:\"']+\.\w+)(?![\w/])")
"""An absolute path to a file (not a URL's path): its file name says which ledger."""


def cut(text: str, cells: int) -> str:
    """`text` in at most `cells` terminal cells, ending in `…` when it was longer."""
    return text if cell_len(text) <= cells else Content(text).truncate(cells, ellipsis=True).plain


def short_reason(reason: str, cells: int | None = None) -> str:
    """A reason as the screen shows it: no leading URL, file names for paths, at most `cells`."""
    text = _PATH.sub(r"\1", _LEADING_URL.sub("", reason.strip(), count=1)) or reason
    return text if cells is None else cut(text, cells)


def stale_since(freshness: Freshness) -> str:
    """`stale since 12:01:03` (UTC), or `stale` when the time is not known."""
    return f"stale since {clock(freshness.since)}" if freshness.since is not None else "stale"


def freshness_note(name: str, freshness: Freshness) -> str:
    """`lane stale since 12:01:03 · refused`, `ledger missing: why`, `lane: a warning` or ""."""
    if freshness.state == "ok":
        return f"{name}: {freshness.reason}" if freshness.reason else ""
    if freshness.state == "stale":
        head = f"{name} {stale_since(freshness)}"
        reason = short_reason(freshness.reason)  # after the time: room is short
        return f"{head} · {reason}" if reason else head
    return f"{name} missing: {freshness.reason}" if freshness.reason else f"{name} missing"


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
    return "\n".join(visible(note) for note in notes) if notes else None


def border_note(view: PaneView) -> str:
    """Each source's note; one not configured last, not to push a failing one's off the border."""
    ordered = sorted(view.sources, key=lambda source: source[1] in (NO_LANE, NO_LEDGER))
    notes = (freshness_note(name, fresh) for name, fresh in ordered)
    return visible(" · ".join(note for note in notes if note))


def _parsed(style: str | Style) -> Style:
    """A span's style, as a widget parses one that names no component class."""
    if isinstance(style, Style):
        return style
    try:
        return Style.parse(style)
    except Exception:  # as Textual draws a style it can't parse: no style
        return Style.null()


def fits_directly(content: Content, width: int) -> bool:
    """One line, no tab, shorter than `width`: nothing to wrap, cut, align or expand."""
    plain = content.plain
    return (
        0 < content.cell_length <= width
        and "\n" not in plain
        and "\t" not in plain
        and not any(isinstance(span.style, str) and span.style[:1] == "." for span in content.spans)
    )


@lru_cache(maxsize=1024)
def _offset_style(style: Style, x: int) -> RichStyle:
    """The Rich style of a piece drawn at `x` (remembered: lines are made of the same few)."""
    return style.rich_style_with_offset(x, 0)


def direct_strip(content: Content, style: Style) -> Strip:
    """The strip `Visual.to_strips` draws of a line that `fits_directly`, left-aligned, with no
    selection or links: its pieces over `style`, each with its offset (for selecting text)."""
    segments, x = [], 0
    for text, text_style in content.render(style, end="", parse_style=_parsed):
        segments.append(RichSegment(text, _offset_style(style + text_style, x)))
        x += len(text)
    return Strip(segments, content.cell_length)


class LinesWidget(Widget):
    """A widget as tall as its lines; a line is drawn again only when what it shows changed."""

    auto_links = reactive(False)
    """Its lines hold no links: none to style or look for under the mouse."""
    kept: Mapping[Hashable, Strip] = MappingProxyType({})
    """The strips drawn last, each by what it was drawn from (its key, width, style, theme)."""
    strips: list[Strip] | None = None
    """The lines' strips; None when refreshed since (the lines are asked for again)."""

    def lines_at(self, width: int) -> Sequence[Content]:
        raise NotImplementedError

    def line_keys(self, width: int) -> Sequence[Hashable]:
        """What each line is drawn from: equal keys draw the same strip."""
        return [(line.plain, tuple(line.spans)) for line in self.lines_at(width)]

    def line_content(self, y: int, width: int) -> Content:
        return self.lines_at(width)[y]

    def keys_now(self) -> Sequence[Hashable]:
        return self.line_keys(self.size.width or DEFAULT_WIDTH)

    def redraw(self, old: Sequence[Hashable], new: Sequence[Hashable] | None = None) -> None:
        """Repaint the lines changed from `old` to `new` (now's); lay out when their count did."""
        new = self.keys_now() if new is None else new
        if len(old) != len(new):
            self.refresh(layout=True)
            return
        if not self.size.width:  # not laid out (or hidden): drawn afresh when it is
            self.strips = None
            return
        width = self.size.width
        changed = [
            Region(0, y, width, 1) for y, (a, b) in enumerate(zip(old, new, strict=True)) if a != b
        ]
        if changed:  # none: no refresh at all (an empty call would redraw every line)
            self.refresh(*changed)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.line_keys(width or DEFAULT_WIDTH))

    def render(self) -> Content:
        width = self.size.width or DEFAULT_WIDTH
        return Content("\n").join(
            [self.line_content(y, width) for y in range(len(self.line_keys(width)))]
        )

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        self.strips = None
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def render_line(self, y: int) -> Strip:
        if self.text_selection is not None:  # the selection is drawn over the whole text
            return super().render_line(y)
        width, style = self.size.width, self.visual_style
        if self.strips is None:
            kept: dict[Hashable, Strip] = {}
            drawn: list[Strip] = []
            direct = self.draws_directly()
            for index, key in enumerate(self.line_keys(width or DEFAULT_WIDTH)):
                full = (key, width, style, self.app.theme)
                strip = self.kept.get(full)
                if strip is None:
                    content = self.line_content(index, width or DEFAULT_WIDTH)
                    strip = self.line_strip(content, width, style, direct)
                kept[full] = strip
                drawn.append(strip)
            self.kept, self.strips = kept, drawn
        if y < len(self.strips):
            return self.strips[y]
        return Strip.blank(width, style.rich_style)

    def draws_directly(self) -> bool:
        """Whether a line that fits is drawn as it is: no wrapping, padding, alignment, links."""
        styles = self.styles
        return (
            styles.text_wrap == "nowrap"
            and styles.line_pad == 0
            and styles.text_align in ("left", "start")
            and styles.content_align == ("left", "top")
            and not self.auto_links
        )

    def line_strip(self, content: Content, width: int, style: Style, direct: bool) -> Strip:
        """The line's strip as `Visual.to_strips` draws it; straight from its pieces when it
        fits (the same strip, without laying out a text that has nothing to lay out)."""
        if direct and fits_directly(content, width):
            return direct_strip(content, style)
        strips = Visual.to_strips(self, content, width, 1, style)
        return strips[0] if strips else Strip.blank(width, style.rich_style)


class Pane(LinesWidget):
    """A bordered box that draws its `view`; `build` makes the view of what `show` is given."""

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
    Pane:focus { border: round $accent; }
    """

    can_focus = True
    """Focused with the arrows: `enter`/`i` opens its figures' details."""
    build: Callable[..., PaneView]

    view: reactive[PaneView] = reactive(
        PaneView((Note("waiting for the first read…"),)), repaint=False
    )
    """Frozen: an equal view draws nothing, a new one repaints the lines that changed."""

    builds_hidden: ClassVar[bool] = False
    """Whether `show` builds the view while the pane is hidden (one that hides itself when
    its view is empty must)."""
    hidden_read: tuple[tuple[Any, ...], dict[str, Any]] | None = None
    """What `show` was last given while the pane was hidden: its view is built when shown."""

    built_from: tuple[tuple[Any, ...], dict[str, Any]] | None = None
    """What the view was last built from: the same (frozen) snapshots again build nothing."""

    def show(self, *args: Any, **kwargs: Any) -> None:
        if not self.display and not self.builds_hidden:
            self.hidden_read = args, kwargs
            return
        self.hidden_read = None
        if self.built_from is not None and same_read(self.built_from, (args, kwargs)):
            return
        self.built_from = args, kwargs
        self.view = self.build(*args, **kwargs)

    def on_show(self) -> None:
        if self.hidden_read is not None:
            args, kwargs = self.hidden_read
            self.show(*args, **kwargs)

    def shown(self, width: int) -> PaneView:
        """The view drawn at `width`."""
        return self.view

    def watch_view(self, old: PaneView, view: PaneView) -> None:
        width = self.size.width or DEFAULT_WIDTH
        self.redraw(
            [_drawn(line, width) for line in old.lines],
            [_drawn(line, width) for line in view.lines],
        )
        # In the cockpit's grid of one-cell rows a pane spans as many rows as it is tall.
        self.styles.row_span = len(view.lines) + BORDER_ROWS
        states = {fresh.state for _, fresh in view.sources}
        self.set_class("stale" in states, "-stale")
        self.set_class("missing" in states, "-missing")
        # Setting either, even to the same, redraws.
        subtitle, tooltip = border_note(view), tooltip_for(view)
        if subtitle != border_note(old):
            self.border_subtitle = Content(subtitle)
        if tooltip != tooltip_for(old):
            self.tooltip = Content(tooltip) if tooltip is not None else None

    def line_keys(self, width: int) -> Sequence[Hashable]:
        return [_drawn(line, width) for line in self.shown(width).lines]

    def line_content(self, y: int, width: int) -> Content:
        return self.shown(width).lines[y].content(width)


def same_read(
    old: tuple[tuple[Any, ...], dict[str, Any]], new: tuple[tuple[Any, ...], dict[str, Any]]
) -> bool:
    """Whether a pane is shown the very objects it was shown before (its view is theirs)."""
    (old_args, old_kwargs), (args, kwargs) = old, new
    return (
        len(old_args) == len(args)
        and all(a is b for a, b in zip(old_args, args, strict=True))
        and old_kwargs.keys() == kwargs.keys()
        and all(old_kwargs[key] is value for key, value in kwargs.items())
    )


# --- reading snapshots ----------------------------------------------------------------------


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

    def row(self, key: str, label: str | None = None, tone: Tone = "plain") -> Row:
        """The figure's row; `—` with its reason (or why the source has none) when missing."""
        figure = self.figures.get(key)
        if figure is None:
            return self.missing(label or "", self.absent)
        if figure.missing:
            reason = figure.reason or self.absent
            return Row(label or figure.label, MISSING, "muted", self.stale, reason, figure)
        return Row(label or figure.label, format_figure(figure), tone, self.stale, figure=figure)

    def text(self, label: str, value: str | None, reason: str = "") -> Row:
        """`value` as it is; `—` with `reason` when None."""
        return self.missing(label, reason) if value is None else Row(label, value, stale=self.stale)

    def missing(self, label: str, reason: str) -> Row:
        return Row(label, MISSING, "muted", self.stale, reason)


def lane_source(snapshot: LaneSnapshot | None, configured: bool = True) -> Source:
    return _source("lane", snapshot, configured)


def ledger_source(snapshot: LedgerSnapshot | None, configured: bool = True) -> Source:
    return _source("ledger", snapshot, configured)


def _source(name: str, snapshot: LaneSnapshot | LedgerSnapshot | None, configured: bool) -> Source:
    if snapshot is None:  # not configured: as NO_LANE or NO_LEDGER
        reason = WAITING if configured else f"no {name} configured"
        return Source(name, {}, Freshness("missing", reason=reason), reason)
    figures = snapshot.figures.figures if snapshot.figures else {}
    return Source(name, figures, snapshot.freshness, snapshot.freshness.reason or WAITING)

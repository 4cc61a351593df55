"""The vital strip (what the engine does now and over the window, or what is down since when),
the lane's GPUs, and the health line (each rule that fires, or `healthy`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from textual.content import Content

from cockpit.core.catalogue import FINISH_REASONS, WAIT_REASONS
from cockpit.core.figures import format_value
from cockpit.core.gpu_figures import GpuFigures
from cockpit.core.health import Finding, down_words
from cockpit.core.model import Figure
from cockpit.core.snapshot import LaneSnapshot
from cockpit.core.text import visible
from cockpit.core.timeutil import clock

from .pane import MISSING, TONE_STYLE, LinesWidget, Tone, figure_text, lane_source, short_reason
from .status import SEPARATOR, pack_items

Item = tuple[str, str, Tone]
"""(label, value, tone): `label value`, or the value alone (a message: `engine DOWN since …`)."""
GIB = 2**30
"""Memory in GiB, as nvidia-smi and the exporters' MiB read (an `80GB` H100 has 79.6)."""


@dataclass(frozen=True, slots=True)
class GpuView:
    """The GPU line two ways: a cell per GPU, and the GPUs together; `note` beside either."""

    cells: tuple[Item, ...] = ()
    together: tuple[Item, ...] = ()
    note: tuple[Item, ...] = ()


NO_GPU = GpuView()

FLAGGED_BY = {
    "gpu_xid_errors": "gpu",
    "gpu_memory_used_bytes": "mem",
    "gpu_power_throttled": "power",
}
"""A GPU health finding's figure -> the item of the together view it colours."""


def _memory(used: Figure | None, total: Figure | None) -> str:
    """`71.5/80 GiB`: in use of the memory there is."""
    if used is None or used.value is None:
        return MISSING
    gib = used.value / GIB
    shown = f"{gib:.1f}" if gib < 100 else f"{gib:,.0f}"
    if total is None or total.value is None:
        return f"{shown} GiB"
    return f"{shown}/{total.value / GIB:,.0f} GiB"


def _readings(figures: Mapping[str, Figure]) -> tuple[str, str, str, str]:
    get = figures.get
    return (
        figure_text(get("gpu_util")),
        _memory(get("gpu_memory_used_bytes"), get("gpu_memory_total_bytes")),
        figure_text(get("gpu_power_w")),
        figure_text(get("gpu_temp_max_c")),
    )


def gpu_view(gpu: GpuFigures | None, flagged: Mapping[str, Tone]) -> GpuView:
    """The lane's GPU line (None: no GPU source); a flagged item takes its rule's colour."""
    if gpu is None:
        return NO_GPU
    name = f"GPU {gpu.source}".rstrip() + ":"
    if not gpu.per_gpu:
        reason = short_reason(gpu.reason) or "no GPU read"
        return GpuView(note=((name, reason, "alarm" if gpu.reason else "muted"),))
    tones = {item: flagged[key] for key, item in FLAGGED_BY.items() if key in flagged}
    cells: tuple[Item, ...] = tuple(
        (f"GPU {one.id or one.uuid}", " ".join(_readings(figures)), "plain")
        for one, figures in gpu.per_gpu
    )
    util, memory, power, temp = _readings(gpu.figures)
    count = format_value(gpu.value("gpu_count"), "count")
    together: tuple[Item, ...] = (
        ("GPUs", count, tones.get("gpu", "plain")),
        ("util", util, "plain"),
        ("mem", memory, tones.get("mem", "plain")),
        ("power", power, tones.get("power", "plain")),
        ("hottest", temp, "plain"),
    )
    note: tuple[Item, ...] = (("", short_reason(gpu.reason), "warn"),) if gpu.reason else ()
    return GpuView(cells, together, note)


def message(text: str, tone: Tone = "muted") -> tuple[Item, ...]:
    return (("", text, tone),)


def _item_content(item: Item) -> Content:
    label, value, tone = item
    shown = (visible(value), TONE_STYLE[tone])
    if not label:
        return Content.styled(*shown)
    return Content.assemble((f"{visible(label)} ", "$text-muted"), shown)


def _contents(items: Iterable[Item]) -> list[Content]:
    return [_item_content(item) for item in items]


@lru_cache(maxsize=8)
def _lines(items: tuple[Item, ...], width: int) -> tuple[Content, ...]:
    """The items packed into `width` (remembered: asked for to compare and to draw)."""
    return tuple(pack_items(_contents(items), width))


@lru_cache(maxsize=8)
def gpu_line(view: GpuView, width: int) -> tuple[Content, ...]:
    """One line: a cell per GPU when they fit, else the GPUs together (cut with `…`)."""
    if view == NO_GPU:
        return ()
    line = Content(SEPARATOR).join(_contents((*view.cells, *view.note)))
    if not view.cells or line.cell_length > width:
        line = Content(SEPARATOR).join(_contents((*view.together, *view.note)))
    return (line.truncate(width, ellipsis=True),)


class PackedLine(LinesWidget):
    """Items on as few lines as the width allows, breaking only between items."""

    DEFAULT_CSS = """
    PackedLine {
        height: auto;
        padding: 0 1;
        text-wrap: nowrap;
    }
    """

    view: tuple[Item, ...] = message("waiting for the first read…")

    def lines_at(self, width: int) -> Sequence[Content]:
        return _lines(self.view, width)


# --- the vital strip ------------------------------------------------------------------------


def _rate(window: Figure | None, minute: Figure | None) -> str:
    """`5,556 tok/s · 1m 5,100`: the window's mean, then the last minute's."""
    return f"{figure_text(window)} · 1m {figure_text(minute).removesuffix(' tok/s')}"


def _waiting(figures: Mapping[str, Figure]) -> str:
    reasons = [
        f"{reason} {figure_text(figures[key])}"
        for reason in WAIT_REASONS
        if (key := f"waiting_now_{reason}") in figures and not figures[key].missing
    ]
    count = figure_text(figures.get("waiting_now"))
    return f"{count} ({', '.join(reasons)})" if reasons else count


def _finished(figures: Mapping[str, Figure]) -> str:
    """`1,000: stop 940 length 52 abort 6 error 2`."""
    shown = (figures.get(f"finished_{reason}") for reason in FINISH_REASONS)
    known = {f.key.removeprefix("finished_"): f.value for f in shown if f and f.value is not None}
    if not known:
        return MISSING
    parts = " ".join(f"{reason} {format_value(value, 'count')}" for reason, value in known.items())
    return f"{format_value(sum(known.values()), 'count')}: {parts}"


def vital_items(figures: Mapping[str, Figure], flagged: Mapping[str, Tone]) -> tuple[Item, ...]:
    """The strip's items; one whose figure a health rule flags takes the rule's colour."""
    get = figures.get
    items = [
        ("running", figure_text(get("running_now")), ("running_now",)),
        ("waiting", _waiting(figures), ("waiting_now",)),
        ("KV", figure_text(get("kv_usage_now")), ("kv_usage_now", "kv_usage")),
        ("req/s", _rate(get("requests_per_s"), get("requests_per_s_1m")), ()),
        ("prompt", _rate(get("prompt_tok_s"), get("prompt_tok_s_1m")), ()),
        ("gen", _rate(get("generation_tok_s"), get("generation_tok_s_1m")), ()),
        ("finished", _finished(figures), ("finished_failed_share",)),
        ("preempted", figure_text(get("preemptions")), ("preemptions",)),
    ]
    rejections = get("admission_rejections")
    if rejections is not None and not rejections.missing:  # only where the engine exposes it
        items.append(("rejected", figure_text(rejections), ("admission_rejections",)))
    return tuple(
        (label, value, next((flagged[key] for key in keys if key in flagged), "plain"))
        for label, value, keys in items
    )


def down_message(lane: LaneSnapshot) -> str:
    since = lane.freshness.since
    words = down_words(lane.freshness)
    head = f"{words} since {clock(since)} UTC" if since is not None else words
    reason = short_reason(lane.freshness.reason)
    return f"{head} · {reason}" if reason else head


def vitals_view(
    lane: LaneSnapshot | None, configured: bool = True, findings: Iterable[Finding] = ()
) -> tuple[Item, ...]:
    if not configured:
        return message("no lane configured")
    if lane is None:
        return message("lane: reading…")
    if lane.freshness.state != "ok":
        return message(down_message(lane), "alarm")
    flagged = {finding.figure_key: finding.severity for finding in reversed(tuple(findings))}
    return vital_items(lane_source(lane).figures, flagged)  # a figure's first finding wins


def lane_gpu_view(lane: LaneSnapshot | None, findings: Iterable[Finding] = ()) -> GpuView:
    """The lane's GPU line: none while the lane is down (the strip says what is)."""
    if lane is None or lane.freshness.state != "ok":
        return NO_GPU
    flagged: dict[str, Tone] = {finding.figure_key: finding.severity for finding in findings}
    return gpu_view(lane.gpu_figures(), flagged)


class VitalStrip(PackedLine):
    """Running / waiting, KV, rates, finish reasons, preemptions, or what is down; the GPUs."""

    DEFAULT_CSS = "VitalStrip:focus { background: $accent 25%; }"
    can_focus = True
    """Focused with the arrows: `enter`/`i` opens its figures' details."""

    gpu: GpuView = NO_GPU

    def show(
        self, lane: LaneSnapshot | None, configured: bool = True, findings: Iterable[Finding] = ()
    ) -> None:
        findings, old = tuple(findings), self.keys_now()
        self.view = vitals_view(lane, configured, findings)
        self.gpu = lane_gpu_view(lane, findings)
        self.redraw(old)

    def lines_at(self, width: int) -> Sequence[Content]:
        return [*_lines(self.view, width), *gpu_line(self.gpu, width)]


# --- the health line ------------------------------------------------------------------------


def health_view(findings: Sequence[Finding] | None) -> tuple[Item, ...]:
    """`healthy`, or each finding's text in its severity's colour."""
    if findings is None:
        return message("health: waiting for the first read")
    if not findings:
        return message("✓ healthy: no health rule fires", "good")
    return tuple(("", f"▲ {finding.text}", finding.severity) for finding in findings)


class HealthLine(PackedLine):
    """The health rules that fire now, each naming its figure and threshold."""

    def show(self, findings: Iterable[Finding] | None) -> None:
        old = self.keys_now()
        self.view = health_view(None if findings is None else tuple(findings))
        self.redraw(old)

"""The models a lane serves, a row each (`sum by (model_name)`), and its LoRA adapters now."""

from __future__ import annotations

from cockpit.core.figures import format_figure, format_value
from cockpit.core.model import Figure, LoraAdapters
from cockpit.core.models import MODEL_FIGURES, MODEL_TITLES, NO_MODELS_SEEN, model_rows
from cockpit.core.snapshot import LaneSnapshot
from cockpit.core.timeutil import clock

from .pane import Cells, Line, Note, Pane, PaneView, Source, lane_source

COLUMN = 10
NAME_CELLS = 20
HEADER = tuple(MODEL_TITLES[key] for key in MODEL_FIGURES)


def _cell(figure: Figure) -> str:
    """The figure as the panes read it, a rate without its unit (the heading says per s)."""
    return format_figure(figure).removesuffix(" tok/s")


def _lora_lines(engine: Source, lora: LoraAdapters | None, reason: str) -> list[Line]:
    if lora is None:
        return [Note(f"LoRA adapters: {reason}")]
    most = None if lora.max_lora is None else format_value(lora.max_lora, "count")
    return [
        engine.text(
            f"LoRA running (as of {clock(lora.stated_at)})", ", ".join(lora.running) or "none"
        ),
        engine.text("LoRA waiting", ", ".join(lora.waiting) or "none"),
        engine.text("LoRA max at once", most, "no max_lora label"),
    ]


def models_view(lane: LaneSnapshot | None, configured: bool = True) -> PaneView:
    engine = lane_source(lane, configured)
    totals = lane.totals if lane is not None else None
    if totals is None:
        return PaneView((Note(engine.absent),), (("lane", engine.freshness),))
    rows = model_rows(totals)
    lines: list[Line] = [Cells("model", HEADER, "primary", column=COLUMN, min_label=NAME_CELLS)]
    for row in rows:
        values = tuple(_cell(row.figures[key]) for key in MODEL_FIGURES)
        lines.append(Cells(row.model, values, stale=engine.stale, column=COLUMN,
                           min_label=NAME_CELLS))  # fmt: skip
    if not rows:
        lines.append(Note(f"per model: {totals.missing.get('models', NO_MODELS_SEEN)}"))
    lines += _lora_lines(engine, totals.lora, totals.missing.get("lora", ""))
    return PaneView(tuple(lines), (("lane", engine.freshness),))


class ModelsPane(Pane):
    """Req/s, tok/s, hit rate, TTFT p95 and token share per model; the LoRA adapters."""

    BORDER_TITLE = "Models"
    build = staticmethod(models_view)

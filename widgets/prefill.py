"""Prefill first: the rate at the real prompt length, what the cache saves, KV resident."""

from __future__ import annotations

from cockpit.core.catalogue import LENGTH_THRESHOLDS
from cockpit.core.figures import format_value
from cockpit.core.model import divide
from cockpit.core.snapshot import LaneSnapshot

from .pane import Pane, PaneView, Source, lane_source

ROWS = (
    ("mean_prompt", "Mean prompt / request"),
    ("mean_fresh_prefill", "Fresh prefill / request"),
    ("prompt_generated", "Prompt : generated"),
    ("computed_generated", "Computed : generated"),
    ("cache_off_prefill", "Prefill with cache off"),
    ("ttft_mean", "TTFT (mean)"),
    ("prompt_share_short", "Prompts ≤ {bound} tok"),
    ("prompt_share_long", "Prompts > {bound} tok"),
    ("prompt_share_huge", "Prompts > {bound} tok"),
    ("kv_resident_tokens", "KV tokens resident"),
)


def _label(engine: Source, key: str, pattern: str) -> str:
    if key not in LENGTH_THRESHOLDS:
        return pattern
    figure = engine.get(key)
    # The figure's label names the bucket bound the server actually has ("… ≤ 512 tokens").
    bound = figure.label.rsplit(" ", 2)[-2] if figure else f"{LENGTH_THRESHOLDS[key][1]:,.0f}"
    return pattern.format(bound=bound)


def prefill_view(lane: LaneSnapshot | None, lane_configured: bool = True) -> PaneView:
    engine = lane_source(lane, lane_configured)
    prompt, generated = engine.value("mean_prompt"), engine.value("mean_generated")
    context = None if prompt is None or generated is None else prompt + generated
    held = divide(engine.value("kv_resident_tokens"), context)
    lines = (
        engine.row("effective_prefill_rate", "Effective prefill rate", tone="primary"),
        *(engine.row(key, _label(engine, key, label)) for key, label in ROWS),
        engine.text(
            "Mean context (prompt + gen)",
            None if context is None else format_value(context, "tokens"),
            "needs mean prompt and generated",
        ),
        engine.text(
            "Mean contexts resident",
            None if held is None else f"{held:,.1f}",
            "needs KV resident and mean context",
        ),
    )
    return PaneView(lines, (("lane", engine.freshness),))


class PrefillPane(Pane):
    """Effective prefill rate, prompt vs fresh prefill, cache-off time, TTFT, lengths, KV."""

    BORDER_TITLE = "Prefill"
    build = staticmethod(prefill_view)

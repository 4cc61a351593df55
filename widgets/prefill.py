"""Prefill first: the rate at the real prompt length, what the cache saves, KV resident."""

from __future__ import annotations

from cockpit.core.catalogue import LENGTH_THRESHOLDS
from cockpit.core.figures import format_value
from cockpit.core.model import divide
from cockpit.core.snapshot import LaneSnapshot

from .pane import Line, Pane, PaneView, Row, Source, lane_source

LENGTH_SHARES: tuple[tuple[str, str], ...] = (
    ("prompt_share_short", "Prompts ≤ {bound}"),
    ("prompt_share_long", "Prompts > {bound}"),
    ("prompt_share_huge", "Prompts > {bound}"),
)


class PrefillPane(Pane):
    """Effective prefill rate, prompt vs fresh prefill, cache-off time, TTFT, lengths, KV."""

    BORDER_TITLE = "Prefill"

    def show(self, lane: LaneSnapshot | None, lane_configured: bool = True) -> None:
        self.view = prefill_view(lane, lane_configured)


def _share_label(engine: Source, key: str, pattern: str) -> str:
    figure = engine.get(key)
    # The figure's label names the bucket bound the server actually has ("… ≤ 512 tokens").
    bound = figure.label.rsplit(" ", 2)[-2] if figure else f"{LENGTH_THRESHOLDS[key][1]:,.0f}"
    return pattern.format(bound=bound) + " tok"


def _context_rows(engine: Source) -> tuple[Row, Row]:
    """The mean context (prompt + generated), and how many of it the KV cache holds."""
    prompt, generated = engine.value("mean_prompt"), engine.value("mean_generated")
    context = None if prompt is None or generated is None else prompt + generated
    held = divide(engine.value("kv_resident_tokens"), context)
    return (
        engine.missing("Mean context (prompt + gen)", "needs mean prompt and generated")
        if context is None
        else engine.text("Mean context (prompt + gen)", format_value(context, "tokens")),
        engine.missing("Mean contexts resident", "needs KV resident and mean context")
        if held is None
        else engine.text("Mean contexts resident", f"{held:,.1f}"),
    )


def prefill_view(lane: LaneSnapshot | None, lane_configured: bool = True) -> PaneView:
    engine = lane_source(lane, lane_configured)
    lines: tuple[Line, ...] = (
        engine.row("effective_prefill_rate", "Effective prefill rate", tone="primary"),
        engine.row("mean_prompt", "Mean prompt / request"),
        engine.row("mean_fresh_prefill", "Fresh prefill / request"),
        engine.row("prompt_generated", "Prompt : generated"),
        engine.row("computed_generated", "Computed : generated"),
        engine.row("cache_off_prefill", "Prefill with cache off"),
        engine.row("ttft_mean", "TTFT (mean)"),
        *(engine.row(key, _share_label(engine, key, pattern)) for key, pattern in LENGTH_SHARES),
        engine.row("kv_resident_tokens", "KV tokens resident"),
        *_context_rows(engine),
    )
    return PaneView(lines, (("lane", engine.freshness),))

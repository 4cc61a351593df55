"""Where a request's seconds go: queue, prefill, decode as one stacked bar, then decode."""

from __future__ import annotations

from cockpit.snapshot import LaneSnapshot

from .pane import Bar, Line, Pane, PaneView, Row, Segment, Source, Tone, lane_source

PHASES: tuple[tuple[str, str, Tone], ...] = (
    ("queue_mean", "queue", "warn"),
    ("prefill_mean", "prefill", "primary"),
    ("decode_mean", "decode", "accent"),
)
"""(figure, legend word, tone) in the order a request lives through them."""

GLYPHS = {"warn": "▒", "primary": "█", "accent": "▓"}
"""Each phase has its own glyph as well as its colour, so the bar reads in monochrome."""


class PhaseBar(Pane):
    """Queue / prefill / decode per-request means, TTFT, step, tokens per step, tok/s."""

    TITLE = "Phases & decode"

    def show(self, lane: LaneSnapshot | None, lane_configured: bool = True) -> None:
        self.view = phase_view(lane, lane_configured)


def _phase_bar(engine: Source) -> Bar:
    known = [(engine.value(key), tone) for key, _, tone in PHASES]
    total = sum(value for value, _ in known if value is not None)
    segments = tuple(
        Segment(value / total if total else 0.0, tone, GLYPHS[tone])
        for value, tone in known
        if value is not None
    )
    return Bar(segments, "per request" if total else "no timings", stale=engine.stale)


def _legend(engine: Source) -> tuple[Row, ...]:
    return tuple(
        engine.row(key, f"{GLYPHS[tone]} {word.capitalize()} (mean)", tone=tone)
        for key, word, tone in PHASES
    )


def phase_view(lane: LaneSnapshot | None, lane_configured: bool = True) -> PaneView:
    engine = lane_source(lane, lane_configured)
    lines: tuple[Line, ...] = (
        _phase_bar(engine),
        *_legend(engine),
        engine.row("ttft_mean", "TTFT (mean)"),
        engine.row("itl_mean", "Step (inter-token, mean)"),
        engine.row("tokens_per_step", "Tokens per step"),
        engine.row("stream_tok_s", "Decode tok/s per stream", tone="primary"),
        engine.row("decode_share", "Decode share"),
        engine.row("running", "Running requests (mean)"),
        *_spec_rows(engine),
    )
    return PaneView(lines, (("lane", engine.freshness),))


def _spec_rows(engine: Source) -> tuple[Row, ...]:
    """Draft acceptance, overall and per draft position: only on a lane that drafts."""
    acceptance = engine.get("draft_acceptance")
    if acceptance is None or acceptance.missing:
        return ()
    prefix = "draft_acceptance_pos_"
    shares = " ".join(
        f"{figure.value * 100:.0f}%"
        for key, figure in engine.figures.items()
        if key.startswith(prefix) and figure.value is not None
    )
    overall = engine.row("draft_acceptance", "Draft acceptance", tone="primary")
    if not shares:
        return (overall,)
    return (overall, Row("Acceptance by position", shares, stale=engine.stale))

"""Where a request's seconds go: queue, prefill, decode as one stacked bar, then decode."""

from __future__ import annotations

from cockpit.core.snapshot import LaneSnapshot

from .pane import Bar, Line, Pane, PaneView, Row, Segment, Source, Tone, lane_source

PHASES: tuple[tuple[str, str, Tone, str], ...] = (
    ("queue_mean", "Queue", "warn", "▒"),
    ("prefill_mean", "Prefill", "primary", "█"),
    ("decode_mean", "Decode", "accent", "▓"),
)
"""(figure, legend word, tone, glyph) in a request's order; a glyph each reads in monochrome."""


def _phase_bar(engine: Source) -> Bar:
    known = [(engine.value(key), tone, glyph) for key, _, tone, glyph in PHASES]
    total = sum(value for value, _, _ in known if value is not None)
    segments = tuple(
        Segment(value / total if total else 0.0, tone, glyph)
        for value, tone, glyph in known
        if value is not None
    )
    return Bar(segments, "per request" if total else "no timings", stale=engine.stale)


def phase_view(lane: LaneSnapshot | None, lane_configured: bool = True) -> PaneView:
    engine = lane_source(lane, lane_configured)
    lines: tuple[Line, ...] = (
        _phase_bar(engine),
        *(engine.row(key, f"{glyph} {word} (mean)", tone) for key, word, tone, glyph in PHASES),
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
    if engine.value("draft_acceptance") is None:
        return ()
    shares = " ".join(
        f"{figure.value * 100:.0f}%"
        for key, figure in engine.figures.items()
        if key.startswith("draft_acceptance_pos_") and figure.value is not None
    )
    overall = engine.row("draft_acceptance", "Draft acceptance", tone="primary")
    return (overall, engine.text("Acceptance by position", shares)) if shares else (overall,)


class PhaseBar(Pane):
    """Queue / prefill / decode per-request means, TTFT, step, tokens per step, tok/s."""

    BORDER_TITLE = "Phases & decode"
    build = staticmethod(phase_view)

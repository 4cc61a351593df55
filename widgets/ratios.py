"""Token ratios: what the agents send against what comes back, ledger and lane side by side."""

from __future__ import annotations

from cockpit.core.figures import format_value
from cockpit.core.ledger_figures import GroupRatio, ratio_range
from cockpit.core.model import divide
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot

from .pane import Line, Note, Pane, PaneView, Row, Source, cut, lane_source, ledger_source

NAME_WIDTH = 12
"""Group names are cut to this many cells so the ratio beside them always fits."""


def _range_rows(kind: str, groups: tuple[GroupRatio, ...], agent: Source) -> tuple[Row, ...]:
    extremes = ratio_range(groups)
    labels = (f"{kind.capitalize()} lowest", f"{kind.capitalize()} highest")
    if extremes is None:
        reason = agent.absent if not agent.figures else f"no {kind} with output in window"
        return tuple(agent.missing(label, reason) for label in labels)
    return tuple(
        agent.text(label, f"{format_value(g.prompt_output, 'ratio')} {cut(g.name, NAME_WIDTH)}")
        for label, g in zip(labels, extremes, strict=True)
    )


def _busiest_row(groups: tuple[GroupRatio, ...], agent: Source) -> Row:
    calls = sum(group.counts.api_calls for group in groups)
    if not calls:
        reason = agent.absent if not agent.figures else "no API calls in window"
        return agent.missing("Most calls", reason)
    busiest = groups[0]  # group_ratios puts the group with most calls first
    share = format_value(divide(busiest.counts.api_calls, calls), "share")
    return agent.text("Most calls", f"{cut(busiest.name, NAME_WIDTH)} {share}")


def ratios_view(
    lane: LaneSnapshot | None,
    ledger: LedgerSnapshot | None,
    ledger_configured: bool = True,
    lane_configured: bool = True,
) -> PaneView:
    agent = ledger_source(ledger, ledger_configured)
    figures = ledger.figures if ledger else None
    by_source = figures.by_source if figures else ()
    narrowed = figures.narrowed if figures else ""
    # narrowed to models: the ledger's sums per source are not by model, so none are shown
    per_source = (*_range_rows("source", by_source, agent), _busiest_row(by_source, agent))
    lines: tuple[Line, ...] = (
        Note("agent ledger, lane only" if narrowed else "agent ledger"),
        agent.row("prompt_output", "Prompt : output", tone="primary"),
        agent.row("fresh_output", "Fresh prefill : output"),
        agent.row("cache_read_share", "Cache-read share"),
        agent.row("mean_prompt_per_call", "Prompt per API call"),
        agent.row("mean_output_per_call", "Output per API call"),
        *(() if narrowed else per_source),
        *_range_rows("model", figures.by_model if figures else (), agent),
        *((Note(figures.skipped, "warn"),) if figures and figures.skipped else ()),
    )
    if not lane_configured:  # no lane: its rows are folded away, not dashes
        return PaneView(lines, (("ledger", agent.freshness),))
    engine = lane_source(lane, lane_configured)
    lines += (
        Note("lane"),
        engine.row("prompt_generated", "Prompt : generated", tone="primary"),
        engine.row("computed_generated", "Computed : generated"),
    )
    return PaneView(lines, (("ledger", agent.freshness), ("lane", engine.freshness)))


class RatiosPane(Pane):
    """Prompt : output, fresh : output, cache-read share, per-call means, per-group ranges."""

    BORDER_TITLE = "Token ratios"
    build = staticmethod(ratios_view)

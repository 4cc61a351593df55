"""Pure arithmetic for the agent ledger: session totals in, the seed's section-1 figures out.

Definitions follow DESIGN.md ("Figures", ledger). The TUI and `cockpit report` both use them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cockpit.model import Figure, LedgerTotals, TokenCounts, divide, frozen_map, make_figure


@dataclass(frozen=True, slots=True)
class Prices:
    """Spend-unit ratios per token bucket, input = 1 (the seed's public frontier-API set)."""

    input: float = 1.0
    cache_read: float = 0.1
    cache_write: float = 1.25
    output: float = 5.0


@dataclass(frozen=True, slots=True)
class GroupRatio:
    """One row of a per-source / per-model / per-profile table."""

    name: str
    counts: TokenCounts
    prompt_output: float | None
    fresh_output: float | None
    cache_read_share: float | None


@dataclass(frozen=True, slots=True)
class SpendRow:
    bucket: str
    tokens: int
    units: float
    share: float | None


@dataclass(frozen=True, slots=True)
class LedgerFigures:
    figures: Mapping[str, Figure]
    by_source: tuple[GroupRatio, ...]
    by_model: tuple[GroupRatio, ...]
    by_profile: tuple[GroupRatio, ...]
    spend: tuple[SpendRow, ...]
    busiest_source: str | None
    """The source that carries most API calls."""
    skipped: str = ""
    """`3 rows skipped: …`: ledger rows that could not be read ('' when none)."""

    def __getitem__(self, key: str) -> Figure:
        return self.figures[key]


def _group_ratio(name: str, counts: TokenCounts) -> GroupRatio:
    return GroupRatio(
        name,
        counts,
        divide(counts.prompt, counts.output),
        divide(counts.fresh_prefill, counts.output),
        divide(counts.cache_read, counts.prompt),
    )


def group_ratios(groups: Mapping[str, TokenCounts]) -> tuple[GroupRatio, ...]:
    """Per-group ratios, the group carrying most API calls first."""
    ordered = sorted(groups.items(), key=lambda item: (-item[1].api_calls, item[0]))
    return tuple(_group_ratio(name, counts) for name, counts in ordered)


def ratio_range(groups: Iterable[GroupRatio]) -> tuple[GroupRatio, GroupRatio] | None:
    """The groups with the lowest and the highest prompt : output ratio."""
    rated = [group for group in groups if group.prompt_output is not None]
    if not rated:
        return None
    rated.sort(key=lambda group: group.prompt_output or 0.0)
    return rated[0], rated[-1]


def spend_split(counts: TokenCounts, prices: Prices) -> tuple[SpendRow, ...]:
    buckets = (
        ("Input (fresh)", counts.input, prices.input),
        ("Cache read", counts.cache_read, prices.cache_read),
        ("Cache write", counts.cache_write, prices.cache_write),
        ("Output", counts.output, prices.output),
    )
    total = sum(tokens * price for _, tokens, price in buckets)
    return tuple(
        SpendRow(name, tokens, tokens * price, divide(tokens * price, total))
        for name, tokens, price in buckets
    )


def skipped_note(skipped: Mapping[str, int]) -> str:
    """`3 rows skipped: sessions: a negative token count ×2, …`, or '' when none were."""
    count = sum(skipped.values())
    if not count:
        return ""
    causes = ", ".join(f"{reason} ×{rows}" for reason, rows in skipped.items())
    return f"{count} row{'' if count == 1 else 's'} skipped: {causes}"


def ledger_window_sql(start: float, end: float) -> str:
    """A plain query that reproduces the ledger totals with the sqlite3 shell (read-only)."""
    return (
        "SELECT COUNT(*) AS sessions, SUM(api_call_count) AS api_calls, "
        "SUM(input_tokens) AS input, SUM(cache_read_tokens) AS cache_read, "
        "SUM(cache_write_tokens) AS cache_write, SUM(output_tokens) AS output, "
        "SUM(reasoning_tokens) AS reasoning FROM sessions "
        f"WHERE started_at > {start:.3f} AND started_at <= {end:.3f}"
    )


def ledger_figures(totals: LedgerTotals, prices: Prices | None = None) -> LedgerFigures:
    prices = prices or Prices()
    counts = totals.total
    no_output = "no output tokens in window"
    no_calls = "no API calls in window"
    prompt_units = (
        counts.input * prices.input
        + counts.cache_read * prices.cache_read
        + counts.cache_write * prices.cache_write
    )
    output_units = counts.output * prices.output
    uncached_prompt_units = counts.prompt * prices.input
    sql = ledger_window_sql(totals.end - totals.window_s, totals.end)
    rows = [
        make_figure("sessions", "Sessions", counts.sessions, "count", query=sql),
        make_figure("api_calls", "API calls", counts.api_calls, "count", query=sql),
        make_figure("prompt_tokens", "Prompt tokens (input + cache read + cache write)",
                    counts.prompt, "tokens", query=sql),
        make_figure("input_tokens", "Input tokens (uncached)", counts.input, "tokens", query=sql),
        make_figure("cache_read_tokens", "of which cache read", counts.cache_read, "tokens",
                    query=sql),
        make_figure("cache_write_tokens", "Cache write", counts.cache_write, "tokens", query=sql),
        make_figure("cache_read_share", "Cache-read share of prompt",
                    divide(counts.cache_read, counts.prompt), "share",
                    "no prompt tokens in window"),
        make_figure("fresh_prefill_tokens", "of which computed fresh (input + cache write)",
                    counts.fresh_prefill, "tokens", query=sql),
        make_figure("output_tokens", "Output tokens (incl. reasoning)", counts.output, "tokens",
                    query=sql),
        make_figure("reasoning_tokens", "Reasoning tokens (subset of output)",
                    None if "reasoning" in totals.missing else counts.reasoning, "tokens",
                    totals.missing.get("reasoning", ""), sql),
        make_figure("prompt_output", "Prompt : output", divide(counts.prompt, counts.output),
                    "ratio", no_output),
        make_figure("fresh_output", "Fresh prefill : output",
                    divide(counts.fresh_prefill, counts.output), "ratio", no_output),
        make_figure("mean_prompt_per_call", "Mean prompt tokens per API call",
                    divide(counts.prompt, counts.api_calls), "tokens", no_calls),
        make_figure("mean_output_per_call", "Mean output tokens per API call",
                    divide(counts.output, counts.api_calls), "tokens", no_calls),
        make_figure("spend_units", "Spend units", prompt_units + output_units, "units"),
        make_figure("prompt_side_share", "Prompt-side share of spend (caching as measured)",
                    divide(prompt_units, prompt_units + output_units), "share",
                    "no tokens in window"),
        make_figure("prompt_side_share_uncached",
                    "Prompt-side share without caching (every prompt token at input price)",
                    divide(uncached_prompt_units, uncached_prompt_units + output_units), "share",
                    "no tokens in window"),
    ]  # fmt: skip
    by_source = group_ratios(totals.by_source)
    return LedgerFigures(
        figures=frozen_map({figure.key: figure for figure in rows}),
        by_source=by_source,
        by_model=group_ratios(totals.by_model),
        by_profile=group_ratios(totals.by_profile),
        spend=spend_split(counts, prices),
        busiest_source=by_source[0].name if by_source and by_source[0].counts.api_calls else None,
        skipped=skipped_note(totals.skipped),
    )

"""The agent ledger's figures (DESIGN.md's section 1) from its session totals, USD for the
window (priced models apart from unpriced ones), and a lane's own models (`narrow`). Pure."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace

from cockpit.core.model import (
    NANO_USD,
    Figure,
    LedgerTotals,
    TokenCounts,
    Unit,
    divide,
    frozen_map,
    make_figure,
)

DEFINITIONS: Mapping[str, str] = {
    "sessions": "Agent sessions started in the window.",
    "api_calls": "API calls those sessions made.",
    "prompt_tokens": "Prompt tokens the sessions sent: input + cache read + cache write.",
    "input_tokens": "Prompt tokens sent uncached (input), as the ledger records them.",
    "cache_read_tokens": "Prompt tokens read from the provider's cache.",
    "cache_write_tokens": "Prompt tokens written to the provider's cache.",
    "cache_read_share": "Share of prompt tokens read from cache: cache read / prompt.",
    "fresh_prefill_tokens": "Prompt tokens computed fresh: input + cache write.",
    "output_tokens": "Output tokens, reasoning included.",
    "reasoning_tokens": "Reasoning tokens (a subset of output), where the ledger reports them.",
    "prompt_output": "Prompt tokens per output token.",
    "fresh_output": "Freshly computed prompt tokens (input + cache write) per output token.",
    "mean_prompt_per_call": "Mean prompt tokens per API call: prompt / API calls.",
    "mean_output_per_call": "Mean output tokens per API call: output / API calls.",
    "spend_units": "Spend in units of an input token: input×1 + cache read×0.1 + cache "
    "write×1.25 + output×5 (the ratios are the config's `prices`).",
    "prompt_side_share": "Share of spend units on the prompt side, with caching as measured.",
    "prompt_side_share_uncached": "Share of spend units on the prompt side if every prompt "
    "token were paid at the input price.",
    "cost_usd": "USD over the window: each session's actual cost where recorded, else "
    "Hermes's estimate (`actual_cost_usd`, `estimated_cost_usd`, `cost_status`).",
    "cost_usd_actual": "The part of the cost recorded as actually billed.",
    "cost_usd_estimated": "The part of the cost Hermes estimated (no actual cost recorded).",
    "paid_tokens": "Prompt + output tokens of models with a price.",
    "unpriced_tokens": "Prompt + output tokens of models without a price (local, or price 0): "
    "kept apart from the paid ones.",
}
"""Ledger figure key -> its meaning in a line, over sessions started in the window."""


def ledger_definition(key: str) -> str:
    return DEFINITIONS.get(key, "")


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
    tokens: int | None
    units: float | None
    share: float | None
    missing: str = ""
    """Why tokens (or the share) can't be known."""


@dataclass(frozen=True, slots=True)
class LedgerFigures:
    figures: Mapping[str, Figure]
    by_source: tuple[GroupRatio, ...]
    by_model: tuple[GroupRatio, ...]
    by_profile: tuple[GroupRatio, ...]
    spend: tuple[SpendRow, ...]
    busiest_source: str | None
    skipped: str = ""
    """`3 rows skipped: …`: ledger rows that could not be read ('' when none)."""
    narrowed: str = ""
    """The lane's own models the figures are narrowed to, as the ledger names them, or `no
    qwen3 in the window`; '' for the whole ledger."""

    def __getitem__(self, key: str) -> Figure:
        return self.figures[key]


def group_ratios(
    groups: Mapping[str, TokenCounts], missing: Mapping[str, str] | None = None
) -> tuple[GroupRatio, ...]:
    """Per-group ratios, the busiest group first; None where a ledger lacks a counter."""
    missing = missing or {}
    ordered = sorted(groups.items(), key=lambda item: (-item[1].api_calls, item[0]))
    no_prompt_output = bool(lacking(missing, *TOKEN_FIELDS))
    no_fresh_output = bool(lacking(missing, "input", "cache_write", "output"))
    no_read_share = bool(lacking(missing, *PROMPT_FIELDS))
    return tuple(
        GroupRatio(
            name,
            c,
            None if no_prompt_output else divide(c.prompt, c.output),
            None if no_fresh_output else divide(c.fresh_prefill, c.output),
            None if no_read_share else divide(c.cache_read, c.prompt),
        )
        for name, c in ordered
    )


def ratio_range(groups: Iterable[GroupRatio]) -> tuple[GroupRatio, GroupRatio] | None:
    """The groups with the lowest and the highest prompt : output ratio."""
    rated = [group for group in groups if group.prompt_output is not None]
    if not rated:
        return None
    rated.sort(key=lambda group: group.prompt_output or 0.0)
    return rated[0], rated[-1]


PROMPT_FIELDS = ("input", "cache_read", "cache_write")
TOKEN_FIELDS = (*PROMPT_FIELDS, "output")


def lacking(missing: Mapping[str, str], *fields: str) -> str:
    """Why a figure reading `fields` can't be computed ('' when the ledger has them all)."""
    return "; ".join(dict.fromkeys(missing[name] for name in fields if name in missing))


def spend_split(
    counts: TokenCounts, prices: Prices, missing: Mapping[str, str] | None = None
) -> tuple[SpendRow, ...]:
    """Tokens and spend units per bucket and each one's share; a counter column missing from
    the ledger makes its bucket missing and every share (their total is unknown)."""
    missing = missing or {}
    buckets = (
        ("Input (fresh)", "input", counts.input, prices.input),
        ("Cache read", "cache_read", counts.cache_read, prices.cache_read),
        ("Cache write", "cache_write", counts.cache_write, prices.cache_write),
        ("Output", "output", counts.output, prices.output),
    )
    no_total = lacking(missing, *TOKEN_FIELDS)
    total = sum(tokens * price for _, _, tokens, price in buckets)
    rows = []
    for name, field, tokens, price in buckets:
        if reason := lacking(missing, field):
            rows.append(SpendRow(name, None, None, None, reason))
        else:
            share = None if no_total else divide(tokens * price, total)
            rows.append(SpendRow(name, tokens, tokens * price, share, no_total))
    return tuple(rows)


def skipped_note(skipped: Mapping[str, int]) -> str:
    """`3 rows skipped: sessions: a negative token count ×2, …`, or '' when none were."""
    count = sum(skipped.values())
    if not count:
        return ""
    causes = ", ".join(f"{reason} ×{rows}" for reason, rows in skipped.items())
    return f"{count} row{'' if count == 1 else 's'} skipped: {causes}"


def priced(counts: TokenCounts) -> bool:
    """Hermes recorded a cost above 0 for it (one without is kept apart, never summed as $0)."""
    return counts.cost_actual + counts.cost_estimated > 0


def _usd(nano: int) -> float:
    return nano / NANO_USD


def _cost_note(counts: TokenCounts, side_calls: TokenCounts | None) -> str:
    actual, estimated = _usd(counts.cost_actual), _usd(counts.cost_estimated)
    if actual and estimated:
        note = f"actual ${actual:,.2f} + estimated ${estimated:,.2f}"
    else:
        note = "actual, as billed" if actual else "estimated by Hermes, no actual cost recorded"
    if side_calls is not None and side_calls.cost_usd:
        note += f"; side calls cost ${side_calls.cost_usd:,.4f} more (not included)"
    return note


def money_figures(totals: LedgerTotals, sql: str) -> list[Figure]:
    """USD for the window (the actual cost where recorded, else the estimate) and the tokens
    of priced models apart from those of unpriced ones."""
    counts, no_cost = totals.total, totals.missing.get("cost_usd", "")
    used = {name: c for name, c in totals.by_model.items() if c.prompt + c.output}
    paid = [c for c in used.values() if priced(c)]
    unpriced = {name: c for name, c in used.items() if not priced(c)}
    no_split = (
        no_cost or totals.missing.get("by_model", "") or lacking(totals.missing, *TOKEN_FIELDS)
    )
    unpriced_note = "models without a price: " + ", ".join(unpriced) if unpriced else ""
    if not no_cost and not priced(counts):
        no_cost = "no model with a price in the window"

    def tokens(groups: Iterable[TokenCounts]) -> int | None:
        return None if no_split else sum(c.prompt + c.output for c in groups)

    return [
        make_figure("cost_usd", "Cost (actual where recorded, else estimate)",
                    None if no_cost else counts.cost_usd, "usd", no_cost, sql,
                    _cost_note(counts, totals.side_calls)),
        make_figure("cost_usd_actual", "of which actual", None if no_cost else
                    _usd(counts.cost_actual), "usd", no_cost, sql),
        make_figure("cost_usd_estimated", "of which estimated", None if no_cost else
                    _usd(counts.cost_estimated), "usd", no_cost, sql),
        make_figure("paid_tokens", "Tokens of priced models (prompt + output)", tokens(paid),
                    "tokens", no_split, sql),
        make_figure("unpriced_tokens", "Tokens of models without a price (local, included)",
                    tokens(unpriced.values()), "tokens", no_split, sql, unpriced_note),
    ]  # fmt: skip


def model_matches(name: str, key: str) -> bool:
    """A `provider/model` name matches that by_model key; a bare model name matches the key's
    model under any provider. Case aside (`Qwen3-32B` is `qwen3-32b`)."""
    name, key = name.casefold(), key.casefold()
    return name == key or ("/" not in name and key.rsplit("/", 1)[-1] == name)


def narrow(totals: LedgerTotals, models: Collection[str]) -> LedgerTotals:
    """The ledger's figures for `models` only (a lane's own): their by_model sums become the
    total; the sums not split by model are left out and `missing` says why."""
    if not models:
        return totals
    kept = {k: c for k, c in totals.by_model.items() if any(model_matches(m, k) for m in models)}
    why = f"narrowed to models {', '.join(models)}: the ledger's sums per {{}} are not by model"
    missing = {
        **totals.missing,
        **{k: why.format(k.removeprefix("by_")) for k in ("by_source", "by_profile", "by_ledger")},
        "side_calls": why.format("side call"),
    }
    return replace(
        totals,
        total=sum(kept.values(), TokenCounts()),
        by_model=frozen_map(kept),
        by_source=frozen_map(),
        by_profile=frozen_map(),
        by_ledger=frozen_map(),
        side_calls=None,
        missing=frozen_map(missing),
        narrowed_to=tuple(models),
    )


def lane_models(ledger_models: Collection[str], model_filter: str | None) -> tuple[str, ...]:
    """The ledger models a lane's panes show: its `ledger_models`, else the `m` filter's model's
    last `/` part (the ledger names `Qwen/Qwen3-32B` `Qwen3-32B`), else none (all)."""
    if ledger_models:
        return tuple(ledger_models)
    return (model_filter.rsplit("/", 1)[-1],) if model_filter else ()


def ledger_window_sql(start: float, end: float, models: Collection[str] = ()) -> str:
    """A plain query that reproduces the ledger totals with the sqlite3 shell (read-only)."""
    narrowed = f" -- then only the models {', '.join(models)}" if models else ""
    return (
        "SELECT COUNT(*) AS sessions, SUM(api_call_count) AS api_calls, "
        "SUM(input_tokens) AS input, SUM(cache_read_tokens) AS cache_read, "
        "SUM(cache_write_tokens) AS cache_write, SUM(output_tokens) AS output, "
        "SUM(reasoning_tokens) AS reasoning FROM sessions "
        f"WHERE started_at > {start:.3f} AND started_at <= {end:.3f}{narrowed}"
    )


def cost_sql(window_sql: str) -> str:
    """The window's cost, as the sqlite3 shell would sum it (in floating point)."""
    cost = (
        "SUM(CASE WHEN actual_cost_usd <> 0 OR cost_status = 'actual' THEN actual_cost_usd "
        "ELSE estimated_cost_usd END) AS cost_usd FROM sessions"
    )
    return "SELECT " + cost + window_sql.partition("FROM sessions")[2]


def ledger_figures(totals: LedgerTotals, prices: Prices | None = None) -> LedgerFigures:
    """The ledger's figures; one that reads a counter the ledger has no column for is missing
    with that reason, never 0 (nor a sum or a ratio short of it)."""
    prices = prices or Prices()
    counts, missing = totals.total, totals.missing
    no_output = "no output tokens in window"
    no_calls = "no API calls in window"
    no_tokens = "no tokens in window"
    spend = spend_split(counts, prices, missing)
    units = [row.units for row in spend]
    prompt_units = None if None in units[:3] else sum(unit or 0.0 for unit in units[:3])
    output_units = units[3]
    uncached_prompt_units = counts.prompt * prices.input
    sql = ledger_window_sql(totals.end - totals.window_s, totals.end, totals.narrowed_to or ())

    def reading(
        key: str, label: str, value: float | None, unit: Unit, fields: tuple[str, ...], why: str
    ) -> Figure:
        reason = lacking(missing, *fields)
        return make_figure(key, label, None if reason else value, unit, reason or why, sql)

    def counted(key: str, label: str, value: int, fields: tuple[str, ...] = ()) -> Figure:
        return reading(key, label, value, "tokens", fields, "")

    prompt, fresh, calls = PROMPT_FIELDS, ("input", "cache_write"), ("api_calls",)
    rows = [
        make_figure("sessions", "Sessions", counts.sessions, "count", query=sql),
        reading("api_calls", "API calls", counts.api_calls, "count", calls, ""),
        counted("prompt_tokens", "Prompt tokens (input + cache read + cache write)",
                counts.prompt, prompt),
        counted("input_tokens", "Input tokens (uncached)", counts.input, ("input",)),
        counted("cache_read_tokens", "of which cache read", counts.cache_read, ("cache_read",)),
        counted("cache_write_tokens", "Cache write", counts.cache_write, ("cache_write",)),
        reading("cache_read_share", "Cache-read share of prompt",
                divide(counts.cache_read, counts.prompt), "share", prompt,
                "no prompt tokens in window"),
        counted("fresh_prefill_tokens", "of which computed fresh (input + cache write)",
                counts.fresh_prefill, fresh),
        counted("output_tokens", "Output tokens (incl. reasoning)", counts.output, ("output",)),
        counted("reasoning_tokens", "Reasoning tokens (subset of output)", counts.reasoning,
                ("reasoning",)),
        reading("prompt_output", "Prompt : output", divide(counts.prompt, counts.output),
                "ratio", TOKEN_FIELDS, no_output),
        reading("fresh_output", "Fresh prefill : output",
                divide(counts.fresh_prefill, counts.output), "ratio", (*fresh, "output"),
                no_output),
        reading("mean_prompt_per_call", "Mean prompt tokens per API call",
                divide(counts.prompt, counts.api_calls), "tokens", (*prompt, *calls), no_calls),
        reading("mean_output_per_call", "Mean output tokens per API call",
                divide(counts.output, counts.api_calls), "tokens", ("output", *calls), no_calls),
        reading("spend_units", "Spend units",
                (prompt_units or 0.0) + (output_units or 0.0), "units", TOKEN_FIELDS, ""),
        reading("prompt_side_share", "Prompt-side share of spend (caching as measured)",
                divide(prompt_units, (prompt_units or 0.0) + (output_units or 0.0)), "share",
                TOKEN_FIELDS, no_tokens),
        reading("prompt_side_share_uncached",
                "Prompt-side share without caching (every prompt token at input price)",
                divide(uncached_prompt_units, uncached_prompt_units + (output_units or 0.0)),
                "share", TOKEN_FIELDS, no_tokens),
        *money_figures(totals, cost_sql(sql)),
    ]  # fmt: skip
    by_source = group_ratios(totals.by_source, missing)
    return LedgerFigures(
        figures=frozen_map({figure.key: figure for figure in rows}),
        by_source=by_source,
        by_model=group_ratios(totals.by_model, missing),
        by_profile=group_ratios(totals.by_profile, missing),
        spend=spend,
        busiest_source=by_source[0].name if by_source and by_source[0].counts.api_calls else None,
        skipped=skipped_note(totals.skipped),
        narrowed=""
        if totals.narrowed_to is None
        else ", ".join(totals.by_model) or f"no {', '.join(totals.narrowed_to)} in the window",
    )

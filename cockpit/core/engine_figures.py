"""Lane figures from what the engine says beyond the seed's tables: how requests finished, why
they wait, which tier served the cached prompt, acceptance per draft position, sleep state,
end-to-end latency and tokens per engine step. Pure arithmetic, like `figures.py`.

A figure per label value the engine reports (`finished_stop`, `cached_host`, ...): the known
values always have a figure (missing with the reason when the engine says nothing), others
follow as the engine names them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cockpit.core.model import Figure, LaneTotals, Unit, divide, make_figure

Why = Callable[..., str]
"""Raw keys -> why their figure is missing (their merged reasons, or `no data in window`)."""

FINISH_REASONS = ("stop", "length", "abort", "error")
FAILED = ("abort", "error")
WAIT_REASONS = ("capacity", "deferred")
CACHE_TIERS = ("device", "host", "p2p", "disk", "external_unspecified")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")


def engine_figures(totals: LaneTotals, why: Why) -> list[Figure]:
    v = totals.values.get
    q = totals.queries.get
    finished = totals.groups.get("finished")
    failed = None if finished is None else sum(finished.get(r, 0.0) for r in FAILED)
    rejections = totals.groups.get("admission_rejections")
    drafts = v("spec_drafts")
    return [
        make_figure("e2e_mean", "End-to-end latency (mean)",
                    divide(v("e2e_sum"), v("e2e_count")), "seconds", why("e2e_sum"), q("e2e_sum")),
        make_figure("batch_tokens_per_step", "Tokens per engine step (whole batch, mean)",
                    divide(v("step_tokens_sum"), v("step_tokens_count")), "number",
                    why("step_tokens_sum"), q("step_tokens_sum")),
        *_each(totals, "finished", "finished", "Finished: {}", "count", FINISH_REASONS),
        make_figure("finished_failed_share", "Finished aborted or in error",
                    divide(failed, None if finished is None else sum(finished.values())), "share",
                    "no requests finished in window" if finished else why("finished"),
                    q("finished")),
        make_figure("admission_rejections", "Admission rejections (queue limits)",
                    None if rejections is None else sum(rejections.values()), "count",
                    why("admission_rejections"), q("admission_rejections"),
                    note=_split(rejections)),
        *_each(totals, "waiting_by_reason", "waiting", "Waiting, {} (mean)", "number",
               WAIT_REASONS),
        *_each(totals, "waiting_by_reason_now", "waiting_now", "Waiting, {} (now)", "number",
               WAIT_REASONS),
        *_each(totals, "cached_by_source", "cached", "Prompt tokens cached, tier {}", "tokens",
               CACHE_TIERS),
        *_each(totals, "prompt_by_source", "prompt_from", "Prompt tokens, {}", "tokens",
               PROMPT_SOURCES),
        make_figure("external_cache_hit_rate", "External prefix-cache hit rate (KV connector)",
                    divide(v("external_cache_hits"), v("external_cache_queries")), "share",
                    why("external_cache_hits", "external_cache_queries"), q("external_cache_hits")),
        *_each(totals, "spec_accepted_by_pos", "draft_acceptance_pos",
               "Draft acceptance at position {}", "share", (),
               lambda accepted: divide(accepted, drafts),
               "no drafts in window" if drafts is not None else why("spec_drafts")),
        *_each(totals, "sleep_state", "sleep", "Engine {} (share of window)", "share",
               SLEEP_STATES),
    ]  # fmt: skip


def _each(
    totals: LaneTotals,
    raw: str,
    prefix: str,
    label: str,
    unit: Unit,
    known: tuple[str, ...],
    value: Callable[[float], float | None] = lambda number: number,
    empty: str = "no data in window",
) -> list[Figure]:
    """One figure per label value of a grouped key (the known values when it is missing)."""
    group = totals.groups.get(raw)
    query = totals.queries.get(raw, "")
    if group is None:
        reason = totals.missing.get(raw, "no data in window")
        return [Figure(f"{prefix}_{n}", label.format(n), None, unit, reason, query) for n in known]
    names = [*(n for n in known if n in group), *sorted(set(group) - set(known), key=_natural)]
    return [
        make_figure(f"{prefix}_{n}", label.format(n or "(unlabelled)"), value(group[n]), unit,
                    empty, query)
        for n in names
    ]  # fmt: skip


def _natural(name: str) -> tuple[int, str]:
    """Draft positions in number order (`2` before `10`)."""
    return (len(name), name) if name.isdigit() else (1 << 30, name)


def _split(group: Mapping[str, float] | None) -> str:
    """`max_num_queued_reqs 3, max_num_queued_tokens 0`."""
    return ", ".join(f"{name} {count:,.0f}" for name, count in (group or {}).items())

"""Pure arithmetic: window totals in, figures out. The TUI and `cockpit report` both use it.
Definitions follow DESIGN.md ("Figures"). A figure whose inputs are absent is missing with a
reason, never zero; a ratio whose denominator is zero is missing too ("no output in window")."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from cockpit.core.engine_figures import engine_figures
from cockpit.core.model import (
    LAST_MINUTE_S,
    Bucket,
    Figure,
    LaneTotals,
    Unit,
    divide,
    frozen_map,
    make_figure,
)
from cockpit.core.tail_figures import tail_figures
from cockpit.engines.decode_pace import DecodePace, Derived, decode_pace
from cockpit.engines.dialects import DialectError, figure_notes
from cockpit.roofline.model import LaneLoad

# --- formatting ---------------------------------------------------------------------------

SI_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
"""Metric prefixes, largest first: one set for tokens, bytes and FLOPs (`1 GB/s`, `1.2 G`)."""


def si(value: float, digits: int = 4, unit: str = "") -> str:
    """`13.96 G`, `75.6 M`, `1 GB/s`, `950 B/s`: `digits` significant figures, trailing zeros
    dropped, the metric prefix on the unit."""
    for scale, prefix in SI_PREFIXES:
        if abs(value) >= scale * (1 - 0.5 * 10.0**-digits):  # 999,999 is `1 M`, not `1,000 k`
            return f"{_significant(value / scale, digits)} {prefix}{unit}"
    return f"{_significant(value, digits)} {unit}".rstrip()


def _significant(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


_SI_UNITS = {"flop/s": "FLOP/s", "bytes/s": "B/s", "bytes": "B", "watts": "W", "joules": "J"}


def format_value(value: float | None, unit: Unit, above: bool = False) -> str:
    """How a figure reads on screen and in receipts: `—` when missing, `> 60 s` if `above`."""
    if value is None:
        return "—"
    if above:
        return f"> {format_value(value, unit)}"
    if unit == "share":
        return f"{value * 100:.1f}%"
    if unit == "ratio":
        return f"{value:,.1f} : 1" if value < 100 else f"{value:,.0f} : 1"
    if unit == "seconds":
        return _seconds(value)
    if unit == "number":
        return _significant(value, 3)
    if unit in ("tokens", "count", "units"):
        return f"{value:,.0f}" if abs(value) < 1e6 else si(value)
    if unit == "tok/s":
        return f"{value:,.0f} tok/s" if value < 1e4 else f"{si(value)} tok/s"
    if unit in _SI_UNITS:
        return si(value, unit=_SI_UNITS[unit])
    if unit == "celsius":
        return f"{value:.0f} °C"
    if unit == "usd":  # a cost under a cent keeps its digits (not "$0.00")
        return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"
    return f"{value:,.3g}"


def _seconds(value: float) -> str:
    if 0 < value < 0.001:  # a queue of 37 µs is not "0.0 ms"
        return f"{value * 1e6:.0f} µs"
    if value < 0.1:
        return f"{value * 1000:.1f} ms"
    if value < 100:
        return f"{value:.2f} s"
    return f"{value:,.0f} s"


def format_figure(figure: Figure) -> str:
    return format_value(figure.value, figure.unit, figure.above)


# --- small helpers --------------------------------------------------------------------------


_CAUSE_AND_DETAIL = re.compile(r"^(?P<cause>.+) \((?P<detail>[^()]*)\)$")


def split_reason(reason: str) -> tuple[str, str]:
    """`not exposed by this engine (vllm:a)` -> (`not exposed by this engine`, `vllm:a`)."""
    match = _CAUSE_AND_DETAIL.match(reason)
    return (match["cause"], match["detail"]) if match else (reason, "")


def merge_reasons(reasons: Iterable[str]) -> str:
    """Reasons joined with `; `, each cause once, in first-seen order.
    `not exposed by this engine (vllm:a)` and `... (vllm:b)` read
    `not exposed by this engine (vllm:a, vllm:b)`; identical reasons appear once."""
    causes: dict[str, list[str]] = {}
    for reason in reasons:
        cause, detail = split_reason(reason)
        details = causes.setdefault(cause, [])
        if detail and detail not in details:
            details.append(detail)
    return "; ".join(
        f"{cause} ({', '.join(details)})" if details else cause for cause, details in causes.items()
    )


# --- the lane -------------------------------------------------------------------------------

LANE_VOLUME_TABLE: tuple[str, ...] = (
    "requests", "prompt_tokens", "generation_tokens", "prompt_generated",
    "prefix_cache_hits", "prefix_cache_queries", "prefix_cache_hit_rate",
    "prefill_computed", "computed_generated",
    "mean_prompt", "mean_fresh_prefill", "mean_generated",
    "prompt_share_short", "prompt_share_long", "prompt_share_huge",
    "gen_share_short", "gen_share_medium",
    "kv_usage", "kv_resident_tokens",
)  # fmt: skip
"""The seed's section-2 table, in its order."""

LANE_TIMING_TABLE: tuple[str, ...] = (
    "queue_mean", "prefill_mean", "decode_mean", "ttft_mean", "decode_share",
    "itl_mean", "tokens_per_step", "draft_acceptance", "stream_tok_s",
    "effective_prefill_rate", "cache_off_prefill",
    "running", "waiting", "preemptions", "measured_flops", "measured_bytes",
)  # fmt: skip
"""The seed's section-3 table (and what the lane adds), in its order."""

LENGTH_THRESHOLDS: Mapping[str, tuple[str, float, bool]] = frozen_map(
    {
        "prompt_share_short": ("prompt_len", 500, False),
        "prompt_share_long": ("prompt_len", 10_000, True),
        "prompt_share_huge": ("prompt_len", 100_000, True),
        "gen_share_short": ("gen_len", 500, False),
        "gen_share_medium": ("gen_len", 5_000, False),
    }
)
"""figure -> (histogram, threshold, above?); the nearest bound the server has is used."""


@dataclass(frozen=True, slots=True)
class LaneFigures:
    figures: Mapping[str, Figure] = field(default_factory=frozen_map)
    engine_keys: tuple[str, ...] = ()
    """The figures of `engine_figures`, in order (a receipt's third table)."""

    def __getitem__(self, key: str) -> Figure:
        return self.figures[key]

    def value(self, key: str) -> float | None:
        figure = self.figures.get(key)
        return figure.value if figure else None


def bucket_share(
    buckets: tuple[Bucket, ...], threshold: float, above: bool
) -> tuple[float | None, float | None]:
    """Share of observations ≤ (or >) the largest bucket bound ≤ threshold, and that bound.
    Bounds come from the server (`le` values), so a lane with custom buckets is read honestly:
    the bound actually used is returned for the label."""
    total = buckets[-1][1] if buckets and math.isinf(buckets[-1][0]) else None
    bounds = [(le, count) for le, count in buckets if le <= threshold]
    if not total or not bounds:
        return None, None
    bound, below = bounds[-1]
    share = below / total
    return (1 - share if above else share), bound


_MFU_AT_REST = "MFU counters exposed but not moving in the window"


def _length_label(key: str, bound: float, above: bool) -> str:
    return f"Requests with {_length_noun(key)} {'>' if above else '≤'} {bound:,.0f} tokens"


def lane_figures(totals: LaneTotals, host_kv_tokens: float = 0.0) -> LaneFigures:
    """Every lane figure of DESIGN.md from one refresh's raw totals."""
    v = totals.values.get
    q = totals.queries.get
    gone = totals.missing.get

    def why(*keys: str, empty: str = "no data in window") -> str:
        """The keys' missing reasons, else `empty`."""
        return merge_reasons(gone(key) or "" for key in keys if gone(key)) or empty

    def derived(key: str, label: str, d: Derived, unit: Unit, query: str = "") -> Figure:
        return make_figure(key, label, d.value, unit, why(*d.inputs, empty=d.empty), query, d.note)

    def raw(key: str, label: str, unit: Unit, of: str = "", per: float | None = None) -> Figure:
        """Raw key `of` (default `key`) as it was read, or per second over `per` seconds."""
        of = of or key
        value = v(of) if per is None else divide(v(of), per)
        return make_figure(key, label, value, unit, why(of), q(of, ""))

    def mean(prefix: str, per_request: float | None = None) -> float | None:
        """The mean of `prefix`'s sum and count, else `per_request` / requests."""
        value = divide(v(f"{prefix}_sum"), v(f"{prefix}_count"))
        return divide(per_request, v("requests")) if value is None else value

    def timed(key: str, label: str, prefix: str) -> Figure:
        return make_figure(key, label, mean(prefix), "seconds", why(f"{prefix}_sum"),
                           q(f"{prefix}_sum", ""))  # fmt: skip

    window = totals.covered_s or totals.window_s
    computed = v("prompt_computed")
    computed_query = q("prompt_computed", "")
    if computed is None and v("prefix_cache_queries") is not None and v("prefix_cache_hits"):
        computed = (v("prefix_cache_queries") or 0.0) - (v("prefix_cache_hits") or 0.0)
        computed_query = "queries − hits"
    mean_prompt = mean("prompt_len", v("prompt_tokens"))
    prefill_rate = divide(computed, v("prefill_sum"))
    pace = _decode_pace(totals)
    drafted, drafted_note = _draft_tokens(totals)
    drafted_from = ("spec_drafts", "spec_draft_len") if drafted_note else ("spec_draft_tokens",)
    capacity = totals.kv_capacity_tokens
    kv_usage = v("kv_usage")
    resident = None if kv_usage is None or capacity is None else kv_usage * capacity
    if resident is not None:
        resident += host_kv_tokens
    flops, bytes_moved = _measured(totals)

    rows = [
        raw("requests", "Requests completed", "count"),
        raw("prompt_tokens", "Prompt tokens", "tokens"),
        raw("generation_tokens", "Generated tokens", "tokens"),
        make_figure("prompt_generated", "Prompt : generated",
                    divide(v("prompt_tokens"), v("generation_tokens")), "ratio",
                    why("prompt_tokens", "generation_tokens")),
        raw("prefix_cache_hits", "Prefix-cache hits (tokens)", "tokens"),
        raw("prefix_cache_queries", "Prefix-cache queries (tokens)", "tokens"),
        make_figure("prefix_cache_hit_rate", "Prefix-cache hit rate",
                    divide(v("prefix_cache_hits"), v("prefix_cache_queries")), "share",
                    why("prefix_cache_hits", "prefix_cache_queries")),
        make_figure("prefill_computed", "Prefill actually computed", computed, "tokens",
                    why("prompt_computed", "prefix_cache_queries"), computed_query),
        make_figure("computed_generated", "Computed prefill : generated",
                    divide(computed, v("generation_tokens")), "ratio",
                    why("prompt_computed", "generation_tokens")),
        make_figure("mean_prompt", "Mean prompt per request", mean_prompt, "tokens",
                    why("prompt_len_sum")),
        make_figure("mean_fresh_prefill", "Mean fresh prefill per request",
                    mean("kv_computed", computed), "tokens", why("kv_computed_sum")),
        make_figure("mean_generated", "Mean generated per request",
                    mean("gen_len", v("generation_tokens")), "tokens", why("gen_len_sum")),
        timed("queue_mean", "Queue (mean)", "queue"),
        timed("prefill_mean", "Prefill (mean)", "prefill"),
        _decode_mean(totals, why) or timed("decode_mean", "Decode (mean)", "decode"),
        timed("ttft_mean", "Time to first token (mean)", "ttft"),
        make_figure("decode_share", "Decode share of inference time",
                    divide(v("decode_sum"), _sum(v("prefill_sum"), v("decode_sum"))), "share",
                    why("prefill_sum", "decode_sum")),
        derived("itl_mean", "Inter-token step (mean)", pace.step_s, "seconds", q("itl_sum", "")),
        derived("tokens_per_step", "Tokens per step", pace.tokens_per_step, "number"),
        make_figure("draft_acceptance", "Draft acceptance", divide(v("spec_accepted"), drafted),
                    "share", why("spec_accepted", *drafted_from), note=drafted_note),
        derived("stream_tok_s", "Decode tok/s per stream", pace.stream_tok_s, "tok/s"),
        make_figure("effective_prefill_rate", "Effective prefill rate", prefill_rate, "tok/s",
                    why("prompt_computed", "prefill_sum")),
        make_figure("cache_off_prefill", "Prefill per request with the cache off",
                    divide(mean_prompt, prefill_rate), "seconds", why("prefill_sum")),
        raw("running", "Running requests (mean)", "number"),
        raw("waiting", "Waiting requests (mean)", "number"),
        raw("kv_usage", "KV cache usage (mean)", "share"),
        make_figure("kv_capacity_tokens", "KV capacity (GPU)", capacity, "tokens",
                    why("kv_capacity_tokens")),
        make_figure("kv_resident_tokens", "KV tokens resident (GPU + host tier)", resident,
                    "tokens", why("kv_usage", "kv_capacity_tokens")),
        raw("preemptions", "Preemptions", "count"),
        make_figure("prompt_tok_s", "Prompt tok/s (window mean)",
                    divide(v("prompt_tokens"), window), "tok/s", why("prompt_tokens")),
        make_figure("generation_tok_s", "Generated tok/s (window mean)",
                    divide(v("generation_tokens"), window), "tok/s", why("generation_tokens")),
        raw("requests_per_s", "Requests/s (window mean)", "number", of="requests", per=window),
        raw("requests_per_s_1m", "Requests/s (last minute)", "number", of="requests_1m",
            per=LAST_MINUTE_S),
        raw("prompt_tok_s_1m", "Prompt tok/s (last minute)", "tok/s", of="prompt_tokens_1m",
            per=LAST_MINUTE_S),
        raw("generation_tok_s_1m", "Generated tok/s (last minute)", "tok/s",
            of="generation_tokens_1m", per=LAST_MINUTE_S),
        raw("running_now", "Running requests (now)", "number"),
        raw("waiting_now", "Waiting requests (now)", "number"),
        raw("kv_usage_now", "KV cache usage (now)", "share"),
        # Bytes count only while FLOPs move: their reasons name the FLOP counter too.
        make_figure("measured_flops", "Measured FLOP/s per GPU (engine estimate)",
                    divide(flops, window), "flop/s", why("flops", empty=_MFU_AT_REST)),
        make_figure("measured_bytes", "Measured bytes/s per GPU (engine estimate)",
                    divide(bytes_moved, window), "bytes/s",
                    why("read_bytes", "write_bytes", "flops", empty=_MFU_AT_REST)),
    ]  # fmt: skip
    rows.extend(_length_shares(totals))
    rows.extend(tail_figures(totals))
    engine = engine_figures(totals, why)
    notes = figure_notes(totals.dialect)
    rows = [_noted(f, notes.get(f.key, "")) for f in [*rows, *engine]]
    return LaneFigures(frozen_map({f.key: f for f in rows}), tuple(f.key for f in engine))


def _noted(figure: Figure, note: str) -> Figure:
    """The figure with `note` said beside its value (a missing one keeps its reason)."""
    if not note or figure.missing or figure.reason:
        return figure
    return replace(figure, reason=note)


def _decode_mean(totals: LaneTotals, why: Callable[..., str]) -> Figure | None:
    """Without a decode histogram (SGLang): e2e mean - TTFT mean, over the same requests."""
    v = totals.values.get
    if "decode_sum" not in totals.missing:
        return None
    e2e, ttft = divide(v("e2e_sum"), v("e2e_count")), divide(v("ttft_sum"), v("ttft_count"))
    if e2e is None or ttft is None:
        return None
    figure = make_figure("decode_mean", "Decode (mean)", e2e - ttft, "seconds", why("e2e_sum"))
    return _noted(figure, "derived: end-to-end mean − TTFT mean")


def _draft_tokens(totals: LaneTotals) -> tuple[float | None, str]:
    """Draft tokens proposed; where only verify steps are counted (SGLang), an estimate: each
    step drafts the configured draft tokens less the one it verifies."""
    v = totals.values.get
    if v("spec_draft_tokens") is not None or v("spec_draft_len") is None:
        return v("spec_draft_tokens"), ""
    steps, length = v("spec_drafts"), v("spec_draft_len") or 0.0
    estimate = None if steps is None else steps * max(length - 1, 0.0)
    return estimate, "estimate: verify steps × (spec_num_draft_tokens − 1)"


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _decode_pace(totals: LaneTotals) -> DecodePace:
    """The dialect's own reading of its ITL histogram (per step in vLLM, per token in SGLang)."""
    try:
        return decode_pace(totals.dialect, totals.values.get)
    except DialectError as error:
        unknown = Derived(None, (), str(error))
        return DecodePace(unknown, unknown, unknown)


def _measured(totals: LaneTotals) -> tuple[float | None, float | None]:
    """FLOPs and bytes from the engine's MFU counters, only when they moved in the window."""
    v = totals.values.get
    flops = v("flops")
    if flops is None or not flops > 0:  # NaN isn't moving either
        return None, None
    return flops, _sum(v("read_bytes"), v("write_bytes")) or None


def _length_shares(totals: LaneTotals) -> list[Figure]:
    shares: list[Figure] = []
    bounds_used: set[tuple[str, float, bool]] = set()
    for key, (histogram, threshold, above) in LENGTH_THRESHOLDS.items():
        figure, bound = _length_share(key, totals, histogram, threshold, above)
        if bound is not None and (histogram, bound, above) in bounds_used:
            # Two thresholds read at the same bucket bound: one row, not the same twice.
            what = _length_noun(key)
            reason = f"the engine has no {what} bucket between {bound:,.0f} and {threshold:,.0f}"
            label = _length_label(key, threshold, above)
            figure = Figure(key, label, None, "share", reason, figure.query)
        if bound is not None:
            bounds_used.add((histogram, bound, above))
        shares.append(figure)
    return shares


def _length_share(
    key: str, totals: LaneTotals, histogram: str, threshold: float, above: bool
) -> tuple[Figure, float | None]:
    """The share of requests past (or within) a threshold, and the bucket bound it used.
    Between bounds, the nearest bound below the threshold is used and named in the label. Past
    the largest finite bound the share is exact only when no request lies beyond that bound
    (0 % above, 100 % within); otherwise the buckets can't tell it."""
    buckets = totals.histograms.get(histogram, ())
    query = totals.queries.get(histogram, "")
    label = _length_label(key, threshold, above)
    finite = [(le, count) for le, count in buckets if math.isfinite(le)]
    total = buckets[-1][1] if buckets and math.isinf(buckets[-1][0]) else None
    if not finite or not total:
        reason = totals.missing.get(histogram, "no requests in window")
        return Figure(key, label, None, "share", reason, query), None
    what = _length_noun(key)
    largest, within = finite[-1]
    if threshold > largest:
        if within < total:
            reason = f"the engine's largest {what} bucket is {largest:,.0f}"
            return Figure(key, label, None, "share", reason, query), None
        note = f"no {what} above {largest:,.0f} tokens, the engine's largest {what} bucket"
        return Figure(key, label, 0.0 if above else 1.0, "share", note, query), None
    share, bound = bucket_share(buckets, threshold, above)
    if share is None or bound is None:
        reason = f"the engine's smallest {what} bucket is {finite[0][0]:,.0f}"
        return Figure(key, label, None, "share", reason, query), None
    return Figure(key, _length_label(key, bound, above), share, "share", "", query), bound


def _length_noun(key: str) -> str:
    return "prompt" if key.startswith("prompt") else "generation"


def lane_load(figures: LaneFigures, gpus: int = 1) -> LaneLoad:
    """The figures the roofline's operating points are made of, for the lane as a whole.
    The engine's MFU counters are per GPU; the lane's roof is all its GPUs together."""
    value = figures.value
    flops, moved = value("measured_flops"), value("measured_bytes")
    return LaneLoad(
        effective_prefill_rate=value("effective_prefill_rate"),
        mean_prompt=value("mean_prompt"),
        mean_fresh_prefill=value("mean_fresh_prefill"),
        mean_generated=value("mean_generated"),
        running=value("running"),
        itl_s=value("itl_mean"),
        tokens_per_step=value("tokens_per_step"),
        measured_flops_per_s=None if flops is None else flops * gpus,
        measured_bytes_per_s=None if moved is None else moved * gpus,
    )

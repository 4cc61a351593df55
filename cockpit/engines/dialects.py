"""Engine dialects: which metric answers each raw lane key, and how each engine counts.

Pure: no I/O. `cockpit.core.promql` renders these specs as PromQL for the Prometheus source; the
scrape source evaluates the same specs over its own samples, so both paths agree on names and
meanings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from cockpit.core.model import LANE_LAST_MINUTE, LANE_NOW

DIALECTS: tuple[str, ...] = ("vllm", "vllm-legacy", "sglang")
NO_ENGINE_METRICS = "no vllm: or sglang: metrics found for this lane"


class DialectError(ValueError):
    """An unknown dialect, or metric names that belong to no known engine."""


# --- specs ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Counter:
    """`sum(increase(metric{S,extra}[W]))`; `metric` is the exposed name (with `_total`).

    `by`: a label kept, so the value is a mapping label value -> increase (`sum by (by)`).
    `ranks`: a label whose series repeat one another (SGLang's `tp_rank` when every scheduler
    exports): the largest of them is taken before summing (`max without (ranks)`)."""

    metric: str
    extra: tuple[tuple[str, str], ...] = ()
    by: str = ""
    ranks: str = ""


@dataclass(frozen=True, slots=True)
class Difference:
    """`a - b` of counters (SGLang's computed prefill = prompt - cached)."""

    a: Counter | Difference
    b: Counter


@dataclass(frozen=True, slots=True)
class Gauge:
    """A gauge averaged over W: summed over series (`sum`) or a mean fraction (`avg`);
    `by` and `ranks` as for `Counter`."""

    metric: str
    across: Literal["sum", "avg"]
    by: str = ""
    ranks: str = ""


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative increase per `le` of `base_bucket`; `extra` and `ranks` as for `Counter`."""

    base: str
    extra: tuple[tuple[str, str], ...] = ()
    ranks: str = ""


@dataclass(frozen=True, slots=True)
class Now:
    """A gauge spec's value at the evaluation time (a direct scrape: its last scrape)."""

    of: Gauge | Either


@dataclass(frozen=True, slots=True)
class LastMinute:
    """A counter spec's increase over the minute before the evaluation time."""

    of: Counter


@dataclass(frozen=True, slots=True)
class Unavailable:
    """The engine has no metric for this key; `reason` says so."""

    reason: str


@dataclass(frozen=True, slots=True)
class Either:
    """The first of `options` that has a value (an older engine's name, a label only newer
    engines carry): PromQL `a or b`."""

    options: tuple[Spec, ...]


Spec = Counter | Difference | Gauge | Histogram | Now | LastMinute | Either | Unavailable


def first(*options: Spec) -> Either:
    return Either(options)


def required_metrics(spec: Spec) -> tuple[str, ...]:
    """The exposed sample names a spec reads (for the 'not exposed' check)."""
    if isinstance(spec, Counter | Gauge):
        return (spec.metric,)
    if isinstance(spec, Difference):
        return (*required_metrics(spec.a), spec.b.metric)
    if isinstance(spec, Histogram):
        return (f"{spec.base}_bucket",)
    if isinstance(spec, Either):
        return tuple(name for option in spec.options for name in required_metrics(option))
    if isinstance(spec, Now | LastMinute):
        return required_metrics(spec.of)
    return ()


def _phase(base: str) -> tuple[Counter, Counter]:
    return Counter(f"{base}_sum"), Counter(f"{base}_count")


def _vllm_specs() -> dict[str, Spec]:
    specs: dict[str, Spec] = {
        "requests": Counter("vllm:request_success_total"),
        "prompt_tokens": Counter("vllm:prompt_tokens_total"),
        "generation_tokens": Counter("vllm:generation_tokens_total"),
        "prefix_cache_queries": Counter("vllm:prefix_cache_queries_total"),
        "prefix_cache_hits": Counter("vllm:prefix_cache_hits_total"),
        "prompt_computed": Counter(
            "vllm:prompt_tokens_by_source_total", (("source", "local_compute"),)
        ),
        "spec_drafts": Counter("vllm:spec_decode_num_drafts_total"),
        "spec_draft_tokens": Counter("vllm:spec_decode_num_draft_tokens_total"),
        "spec_accepted": Counter("vllm:spec_decode_num_accepted_tokens_total"),
        "preemptions": Counter("vllm:num_preemptions_total"),
        "flops": Counter("vllm:estimated_flops_per_gpu_total"),
        "read_bytes": Counter("vllm:estimated_read_bytes_per_gpu_total"),
        "write_bytes": Counter("vllm:estimated_write_bytes_per_gpu_total"),
        "finished": Counter("vllm:request_success_total", by="finished_reason"),
        "admission_rejections": Counter("vllm:admission_rejections_total", by="reason"),
        "cached_by_source": Counter("vllm:prompt_tokens_cached_by_source_total", by="source"),
        "prompt_by_source": Counter("vllm:prompt_tokens_by_source_total", by="source"),
        "external_cache_queries": Counter("vllm:external_prefix_cache_queries_total"),
        "external_cache_hits": Counter("vllm:external_prefix_cache_hits_total"),
        "spec_accepted_by_pos": Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total", by="position"
        ),
        "running": Gauge("vllm:num_requests_running", "sum"),
        "waiting": Gauge("vllm:num_requests_waiting", "sum"),
        "waiting_by_reason": Gauge("vllm:num_requests_waiting_by_reason", "sum", by="reason"),
        "kv_usage": Gauge("vllm:kv_cache_usage_perc", "avg"),
        "sleep_state": Gauge("vllm:engine_sleep_state", "avg", by="sleep_state"),
        "spec_draft_len": Unavailable("vLLM counts its draft tokens"),
        "prompt_len": Histogram("vllm:request_prompt_tokens"),
        "gen_len": Histogram("vllm:request_generation_tokens"),
        "e2e": Histogram("vllm:e2e_request_latency_seconds"),
        "ttft": Histogram("vllm:time_to_first_token_seconds"),
        "itl": first(
            Histogram("vllm:inter_token_latency_seconds"),
            Histogram("vllm:time_per_output_token_seconds"),
        ),
        "queue": Histogram("vllm:request_queue_time_seconds"),
        "tpot": Histogram("vllm:request_time_per_output_token_seconds"),
    }
    phases = {
        "tpot": "vllm:request_time_per_output_token_seconds",
        "kv_computed": "vllm:request_prefill_kv_computed_tokens",
        "prompt_len": "vllm:request_prompt_tokens",
        "gen_len": "vllm:request_generation_tokens",
        "queue": "vllm:request_queue_time_seconds",
        "prefill": "vllm:request_prefill_time_seconds",
        "decode": "vllm:request_decode_time_seconds",
        "ttft": "vllm:time_to_first_token_seconds",
        "itl": "vllm:inter_token_latency_seconds",
        "e2e": "vllm:e2e_request_latency_seconds",
        "step_tokens": "vllm:iteration_tokens_total",
    }
    for key, base in phases.items():
        specs[f"{key}_sum"], specs[f"{key}_count"] = _phase(base)
    # 0.9.2-0.10.1 have the V1 names but time the step as time_per_output_token only.
    older = _phase("vllm:time_per_output_token_seconds")
    specs["itl_sum"], specs["itl_count"] = (
        first(*pair) for pair in zip(_phase(phases["itl"]), older, strict=True)
    )
    return _with_fresh(specs)


def _vllm_legacy_specs() -> dict[str, Spec]:
    specs = _vllm_specs()
    specs["prefix_cache_queries"] = Counter("vllm:gpu_prefix_cache_queries_total")
    specs["prefix_cache_hits"] = Counter("vllm:gpu_prefix_cache_hits_total")
    specs["kv_usage"] = Gauge("vllm:gpu_cache_usage_perc", "avg")
    specs["itl_sum"], specs["itl_count"] = _phase("vllm:time_per_output_token_seconds")
    specs["itl"] = Histogram("vllm:time_per_output_token_seconds")
    return _with_fresh(specs)


def _with_fresh(specs: dict[str, Spec]) -> dict[str, Spec]:
    """The keys read fresh at every refresh: the gauges now, the throughput counters over the
    last minute (the same metrics as their window keys)."""
    for key in LANE_NOW:
        gauge = specs[key.removesuffix("_now")]
        specs[key] = Now(gauge) if isinstance(gauge, Gauge | Either) else gauge
    for key in LANE_LAST_MINUTE:
        counter = specs[key.removesuffix("_1m")]
        specs[key] = LastMinute(counter) if isinstance(counter, Counter) else counter
    return specs


RANK = "tp_rank"
"""With `--enable-metrics-for-all-schedulers` every TP rank exports the scheduler's series."""


def _scheduler(metric: str, **extra: str) -> Counter:
    return Counter(metric, tuple(extra.items()), ranks=RANK)


def _streaming(kind: type[Counter | Histogram], metric: str) -> Either:
    """Streaming requests where the engine labels them (a non-streaming request observes its
    TTFT late, after 50 tokens or at finish), else every request."""
    return first(*(kind(metric, (("is_streaming", value),)) for value in ("true", "")))


def _sglang_specs() -> dict[str, Spec]:
    prompt = Counter("sglang:prompt_tokens_total")
    generated = Counter("sglang:generation_tokens_total")
    requests = Counter("sglang:num_requests_total")
    cached = Counter("sglang:cached_tokens_total")
    verify = Counter("sglang:spec_verify_calls_total")
    # Counted by the scheduler per prefill batch, without a retracted request's re-count:
    # mode = input (computed) | device_hit | host_hit | storage_hit.
    effective = _scheduler("sglang:prefill_effective_tokens_total")
    computed = _scheduler("sglang:prefill_effective_tokens_total", mode="input")
    realtime = _scheduler("sglang:realtime_tokens_total")
    no_decode = Unavailable("SGLang exposes no per-request decode time")
    specs: dict[str, Spec] = {
        "requests": requests,
        "prompt_tokens": prompt,
        "generation_tokens": generated,
        "prefix_cache_queries": first(
            effective, Difference(realtime, _scheduler(realtime.metric, mode="decode")), prompt
        ),
        "prefix_cache_hits": first(
            Difference(effective, computed),
            _scheduler(realtime.metric, mode="prefill_cache"),
            cached,
        ),
        "prompt_computed": first(
            computed,
            _scheduler(realtime.metric, mode="prefill_compute"),
            Difference(prompt, cached),
        ),
        # Verify calls are decode steps; each request's first token comes from its prefill.
        "spec_drafts": verify,
        "spec_draft_tokens": Unavailable("SGLang exposes no draft-token counter"),
        "spec_accepted": Difference(Difference(generated, verify), requests),
        "preemptions": _scheduler("sglang:num_retracted_requests_total"),
        "flops": Counter("sglang:estimated_flops_per_gpu_total"),
        "read_bytes": Counter("sglang:estimated_read_bytes_per_gpu_total"),
        "write_bytes": Counter("sglang:estimated_write_bytes_per_gpu_total"),
        "finished": Unavailable("SGLang does not count finished requests by reason"),
        "admission_rejections": Unavailable("SGLang exposes no admission-rejection counter"),
        "cached_by_source": Counter(cached.metric, by="cache_source"),
        "prompt_by_source": Unavailable("SGLang splits only its cached tokens by source"),
        "external_cache_queries": Unavailable("SGLang exposes no external prefix-cache counter"),
        "external_cache_hits": Unavailable("SGLang exposes no external prefix-cache counter"),
        "spec_accepted_by_pos": Unavailable("SGLang exposes no acceptance per draft position"),
        "running": Gauge("sglang:num_running_reqs", "sum", ranks=RANK),
        "waiting": Gauge("sglang:num_queue_reqs", "sum", ranks=RANK),
        "waiting_by_reason": Unavailable("SGLang does not split its queue by reason"),
        # token_usage is the largest of the full-attention, SWA and Mamba pools' use.
        "kv_usage": first(
            Gauge("sglang:full_token_usage", "avg", ranks=RANK),
            Gauge("sglang:token_usage", "avg", ranks=RANK),
        ),
        "sleep_state": Unavailable("SGLang exposes no sleep state"),
        "spec_draft_len": Gauge("sglang:spec_num_draft_tokens", "avg", ranks=RANK),
        "prompt_len": Histogram("sglang:prompt_tokens_histogram"),
        "gen_len": Histogram("sglang:generation_tokens_histogram"),
        "e2e": _streaming(Histogram, "sglang:e2e_request_latency_seconds"),
        "ttft": _streaming(Histogram, "sglang:time_to_first_token_seconds"),
        "itl": Histogram("sglang:inter_token_latency_seconds"),
        "queue": Histogram("sglang:queue_time_seconds", ranks=RANK),
        "tpot": Histogram("sglang:request_time_per_output_token_seconds"),
        "decode_sum": no_decode,
        "decode_count": no_decode,
        "step_tokens_sum": Unavailable("SGLang exposes no tokens-per-step histogram"),
        "step_tokens_count": Unavailable("SGLang exposes no tokens-per-step histogram"),
    }
    phases = {
        "kv_computed": "sglang:uncached_prompt_tokens_histogram",
        "prompt_len": "sglang:prompt_tokens_histogram",
        "gen_len": "sglang:generation_tokens_histogram",
        "itl": "sglang:inter_token_latency_seconds",
        "tpot": "sglang:request_time_per_output_token_seconds",
    }
    for key, base in phases.items():
        specs[f"{key}_sum"], specs[f"{key}_count"] = _phase(base)
    for key, base in (("ttft", "sglang:time_to_first_token_seconds"),
                      ("e2e", "sglang:e2e_request_latency_seconds")):  # fmt: skip
        specs[f"{key}_sum"] = _streaming(Counter, f"{base}_sum")
        specs[f"{key}_count"] = _streaming(Counter, f"{base}_count")
    for part in ("sum", "count"):
        specs[f"queue_{part}"] = _scheduler(f"sglang:queue_time_seconds_{part}")
        metric = f"sglang:per_stage_req_latency_seconds_{part}"
        specs[f"prefill_{part}"] = _scheduler(metric, stage="prefill_forward")
    return _with_fresh(specs)


STREAMING_NOTE = 'streaming requests (is_streaming="true") where the engine labels them'
_NOTES: dict[str, dict[str, str]] = {
    "sglang": {
        "ttft_mean": STREAMING_NOTE,
        "e2e_mean": STREAMING_NOTE,
        **{f"{key}_p{p}": STREAMING_NOTE for key in ("ttft", "e2e") for p in (50, 90, 95, 99)},
        "kv_usage": "the full-attention pool where exposed, else the fullest pool",
        "kv_usage_now": "the full-attention pool where exposed, else the fullest pool",
        "preemptions": "retracted requests",
    }
}


def figure_notes(dialect: str) -> Mapping[str, str]:
    """Figure key -> how this engine's value was found, said beside the value."""
    return _NOTES.get(dialect, {})


_SPECS: dict[str, dict[str, Spec]] = {
    "vllm": _vllm_specs(),
    "vllm-legacy": _vllm_legacy_specs(),
    "sglang": _sglang_specs(),
}
VLLM_CAPACITY = "vllm:cache_config_info"
"""vLLM's KV capacity: an info series whose labels give blocks × block size."""
SGLANG_CAPACITY = "sglang:max_total_num_tokens"
"""SGLang's KV capacity in tokens, a gauge per TP rank."""


def lane_specs(dialect: str, escaped: bool = False) -> Mapping[str, Spec]:
    """Raw lane key -> spec for a dialect (every raw key of `cockpit.core.model`); `escaped`: the
    names as stored after an OpenMetrics scrape turned `:` into `_` (see `names_escaped`)."""
    if dialect not in _SPECS:
        expected = ", ".join(DIALECTS)
        raise DialectError(f"unknown engine dialect {dialect!r} (expected one of {expected})")
    specs = _SPECS[dialect]
    return {key: _escaped_spec(spec) for key, spec in specs.items()} if escaped else specs


def escape_name(metric: str) -> str:
    """`vllm:x` -> `vllm_x`, as prometheus_client writes it under `escaping=underscores`."""
    return metric.replace(":", "_")


def _escaped_spec(spec: Spec) -> Spec:
    if isinstance(spec, Counter | Gauge):
        return replace(spec, metric=escape_name(spec.metric))
    if isinstance(spec, Difference):
        a = _escaped_spec(spec.a)
        assert isinstance(a, Counter | Difference)
        return Difference(a, replace(spec.b, metric=escape_name(spec.b.metric)))
    if isinstance(spec, Histogram):
        return replace(spec, base=escape_name(spec.base))
    if isinstance(spec, Now):
        of = _escaped_spec(spec.of)
        assert isinstance(of, Gauge | Either)
        return Now(of)
    if isinstance(spec, LastMinute):
        return LastMinute(replace(spec.of, metric=escape_name(spec.of.metric)))
    if isinstance(spec, Either):
        return Either(tuple(_escaped_spec(option) for option in spec.options))
    return spec


def names_escaped(metric_names: Iterable[str]) -> bool:
    """True when the engine's names arrived as `vllm_...`/`sglang_...` instead of `vllm:...`.

    prometheus_client (0.2x) answers an OpenMetrics scrape with `escaping=underscores` and
    replaces the colon in sample names (client_python issue #1177), so a Prometheus that
    negotiates OpenMetrics stores `vllm_prompt_tokens_total`.
    """
    names = list(metric_names)
    if any(name.startswith(("vllm:", "sglang:")) for name in names):
        return False
    return any(name.startswith(("vllm_", "sglang_")) for name in names)


def presence_metric(dialect: str, escaped: bool = False) -> str:
    """A gauge every lane of this dialect exposes, used to find when its data starts."""
    lane_specs(dialect)  # an unknown dialect raises
    metric = "sglang:num_running_reqs" if dialect == "sglang" else "vllm:num_requests_running"
    return escape_name(metric) if escaped else metric


def capacity_metric(dialect: str, escaped: bool = False) -> str:
    """The metric a dialect states its KV capacity in."""
    metric = SGLANG_CAPACITY if dialect == "sglang" else VLLM_CAPACITY
    return escape_name(metric) if escaped else metric


def detect_dialect(metric_names: Iterable[str]) -> str:
    """The dialect whose names these are: SGLang, vLLM V1, or vLLM before 0.12."""
    names = set(metric_names)
    if names_escaped(names):
        names = {re.sub(r"^(vllm|sglang)_", r"\1:", name) for name in names}
    if any(name.startswith("sglang:") for name in names):
        return "sglang"
    modern = {"vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total"}
    legacy = {"vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_queries_total"}
    if names & legacy and not names & modern:
        return "vllm-legacy"
    if any(name.startswith("vllm:") for name in names):
        return "vllm"
    raise DialectError(NO_ENGINE_METRICS)


def missing_reason(spec: Spec, exposed: Iterable[str] | None) -> str | None:
    """Why a key can't have a value before querying: unavailable, or a name not exposed."""
    if isinstance(spec, Unavailable):
        return spec.reason
    if exposed is None:
        return None
    if isinstance(spec, Now | LastMinute):
        return missing_reason(spec.of, exposed)
    names = set(exposed)
    if isinstance(spec, Either) and any(missing_reason(o, names) is None for o in spec.options):
        return None
    absent = [name for name in required_metrics(spec) if name not in names]
    if absent:
        return f"not exposed by this engine ({', '.join(dict.fromkeys(absent))})"
    return None


# --- reading answers --------------------------------------------------------------------


def parse_le(text: str) -> float:
    """A bucket bound as a float (`"1000.0"`, `"1e+03"`, `"+Inf"`)."""
    return float(text)


def sorted_buckets(pairs: Iterable[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """(le, cumulative count) sorted by bound, `inf` last."""
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


def capacity_from_info(labels: Mapping[str, str]) -> float | None:
    """Tokens of GPU KV from one `cache_config_info` label set, or None when unset."""
    size = _number(labels.get("kv_cache_size_tokens"))
    if size is not None:
        return size
    blocks = _number(labels.get("num_gpu_blocks"))
    block_size = _number(labels.get("block_size"))
    if blocks is None or block_size is None:
        return None
    return blocks * block_size


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None

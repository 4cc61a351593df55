"""SGLang (0.5.2x, `--enable-metrics`): its metric names and how it counts."""

from __future__ import annotations

from functools import partial

from cockpit.core.model import KV_TRANSFER_COUNTERS
from cockpit.engines.base import PER_TOKEN, Engine, lane_table
from cockpit.engines.specs import (
    Combined,
    Counter,
    Either,
    Gauge,
    Histogram,
    Spec,
    Unavailable,
    first,
    lacking,
    phases,
)

RANK = "tp_rank"
"""With `--enable-metrics-for-all-schedulers` every TP rank exports the scheduler's series."""


def _scheduler(metric: str, **extra: str) -> Counter:
    return Counter(metric, tuple(extra.items()), ranks=RANK)


def _streaming(kind: type[Counter | Histogram], metric: str) -> Either:
    """Streaming requests where the engine labels them (a non-streaming request observes its
    TTFT late, after 50 tokens or at finish), else every request."""
    return first(*(kind(metric, (("is_streaming", value),)) for value in ("true", "")))


def window_specs() -> dict[str, Spec]:
    """Raw key -> spec over the window (`lane_table` adds the fresh keys)."""
    prompt = Counter("sglang:prompt_tokens_total")
    generated = Counter("sglang:generation_tokens_total")
    requests = Counter("sglang:num_requests_total")
    cached = Counter("sglang:cached_tokens_total")
    # Its cache_source="total" series repeats the sum of the tiers: read it alone where it is.
    cached_total = Counter(cached.metric, (("cache_source", "total"),))
    verify = Counter("sglang:spec_verify_calls_total")
    # Counted by the scheduler per prefill batch, without a retracted request's re-count:
    # mode = input (computed) | device_hit | host_hit | storage_hit.
    effective = _scheduler("sglang:prefill_effective_tokens_total")
    computed = _scheduler("sglang:prefill_effective_tokens_total", mode="input")
    realtime = _scheduler("sglang:realtime_tokens_total")
    # fmt: off
    return {
        "requests": requests,
        "prompt_tokens": prompt,
        "generation_tokens": generated,
        "prefix_cache_queries": first(
            effective, Combined(realtime, _scheduler(realtime.metric, mode="decode")), prompt),
        "prefix_cache_hits": first(
            Combined(effective, computed), _scheduler(realtime.metric, mode="prefill_cache"),
            cached_total, cached),
        "prompt_computed": first(
            computed, _scheduler(realtime.metric, mode="prefill_compute"),
            Combined(prompt, cached_total), Combined(prompt, cached)),
        # Verify calls are decode steps; each request's first token comes from its prefill.
        "spec_drafts": verify,
        "spec_accepted": Combined(Combined(generated, verify), requests),
        "preemptions": _scheduler("sglang:num_retracted_requests_total"),
        "flops": Counter("sglang:estimated_flops_per_gpu_total"),
        "read_bytes": Counter("sglang:estimated_read_bytes_per_gpu_total"),
        "write_bytes": Counter("sglang:estimated_write_bytes_per_gpu_total"),
        "cached_by_source": Counter(cached.metric, by="cache_source"),
        "running": Gauge("sglang:num_running_reqs", "sum", ranks=RANK),
        "waiting": Gauge("sglang:num_queue_reqs", "sum", ranks=RANK),
        # token_usage is the largest of the full-attention, SWA and Mamba pools' use.
        "kv_usage": first(Gauge("sglang:full_token_usage", "avg", ranks=RANK),
                          Gauge("sglang:token_usage", "avg", ranks=RANK)),
        "spec_draft_len": Gauge("sglang:spec_num_draft_tokens", "avg", ranks=RANK),
        # HiCache (--enable-hierarchical-cache): the host pool's tokens in use.
        "host_kv_used": Gauge("sglang:hicache_host_used_tokens", "sum", ranks=RANK),
        "prompt_len": Histogram("sglang:prompt_tokens_histogram"),
        "gen_len": Histogram("sglang:generation_tokens_histogram"),
        "e2e": _streaming(Histogram, "sglang:e2e_request_latency_seconds"),
        "ttft": _streaming(Histogram, "sglang:time_to_first_token_seconds"),
        "itl": Histogram("sglang:inter_token_latency_seconds"),
        "queue": Histogram("sglang:queue_time_seconds", ranks=RANK),
        "tpot": Histogram("sglang:request_time_per_output_token_seconds"),
        **phases({"kv_computed": "sglang:uncached_prompt_tokens_histogram",
                  "prompt_len": "sglang:prompt_tokens_histogram",
                  "gen_len": "sglang:generation_tokens_histogram",
                  "itl": "sglang:inter_token_latency_seconds",
                  "tpot": "sglang:request_time_per_output_token_seconds"}),
        **phases({"ttft": "sglang:time_to_first_token_seconds",
                  "e2e": "sglang:e2e_request_latency_seconds"}, partial(_streaming, Counter)),
        **phases({"queue": "sglang:queue_time_seconds"}, _scheduler),
        **phases({"prefill": "sglang:per_stage_req_latency_seconds"},
                 partial(_scheduler, stage="prefill_forward")),
        **lacking("SGLang exposes no per-request decode time", "decode_sum", "decode_count"),
        **lacking("SGLang exposes no tokens-per-step histogram",
                  "step_tokens_sum", "step_tokens_count"),
        **lacking("SGLang exposes no external prefix-cache counter",
                  "external_cache_queries", "external_cache_hits"),
        "spec_draft_tokens": Unavailable("SGLang exposes no draft-token counter"),
        "finished": Unavailable("SGLang does not count finished requests by reason"),
        "admission_rejections": Unavailable("SGLang exposes no admission-rejection counter"),
        "prompt_by_source": Unavailable("SGLang splits only its cached tokens by source"),
        "spec_accepted_by_pos": Unavailable("SGLang exposes no acceptance per draft position"),
        "waiting_by_reason": Unavailable("SGLang does not split its queue by reason"),
        "sleep_state": Unavailable("SGLang exposes no sleep state"),
        # HiCache's host tier, as its radix cache times it (RadixCacheMetricsCollector).
        "offload_load_time": _scheduler("sglang:load_back_duration_seconds_sum"),
        "offload_store_time": _scheduler("sglang:eviction_duration_seconds_sum"),
        **lacking("SGLang's HiCache counts the tokens it moves, not bytes, failures or skips",
                  *(key for key in KV_TRANSFER_COUNTERS if key.startswith("offload_")
                    and not key.endswith("_time"))),
        "offload_cpu_usage": Unavailable("SGLang states its host tier in tokens "
                                         "(hicache_host_used_tokens), not as a share in use"),
        **lacking("SGLang exposes no NIXL transfer series",
                  *(key for key in KV_TRANSFER_COUNTERS if key.startswith("nixl_"))),
    }
    # fmt: on


STREAMING_NOTE = 'streaming requests (is_streaming="true") where the engine labels them'
POOL_NOTE = "the full-attention pool where exposed, else the fullest pool"

SGLANG = Engine(
    name="sglang",
    prefix="sglang:",
    priority=2,
    specs=lane_table(window_specs()),
    presence="sglang:num_running_reqs",
    capacity=Gauge("sglang:max_total_num_tokens", "sum", ranks=RANK),
    pace=PER_TOKEN,
    model_label="model_name",
    lora=Unavailable("SGLang exposes no LoRA adapter gauge"),
    notes={
        **dict.fromkeys(("ttft_mean", "e2e_mean"), STREAMING_NOTE),
        **{f"{key}_p{p}": STREAMING_NOTE for key in ("ttft", "e2e") for p in (50, 90, 95, 99)},
        **dict.fromkeys(("kv_usage", "kv_usage_now"), POOL_NOTE),
        "preemptions": "retracted requests",
        "offload_load_time_s": "HiCache load-back, host to GPU",
        "offload_store_time_s": "HiCache eviction, GPU to host",
    },
)

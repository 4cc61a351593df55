"""vLLM V1 (0.12 and later; 0.9.2 on for most names): its metric names and how it counts."""

from __future__ import annotations

import math
from collections.abc import Mapping

from cockpit.engines.base import PER_STEP, Engine, lane_table
from cockpit.engines.specs import (
    Counter,
    Gauge,
    Histogram,
    Info,
    Spec,
    Unavailable,
    first,
    phases,
)

PHASES = {
    "kv_computed": "vllm:request_prefill_kv_computed_tokens",
    "prompt_len": "vllm:request_prompt_tokens",
    "gen_len": "vllm:request_generation_tokens",
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "step_tokens": "vllm:iteration_tokens_total",
}
OLDER_ITL = "vllm:time_per_output_token_seconds"
"""0.9.2-0.10.1 have the V1 names but time the step as time_per_output_token only."""
KV_CONNECTOR_COUNTERS = {
    "offload_load_bytes": "vllm:kv_offload_load_bytes_total",
    "offload_load_time": "vllm:kv_offload_load_time_total",
    "offload_store_bytes": "vllm:kv_offload_store_bytes_total",
    "offload_store_time": "vllm:kv_offload_store_time_total",
    "offload_alloc_failures": "vllm:kv_offload_allocation_failure_total",
    "offload_stores_skipped": "vllm:kv_offload_stores_skipped_total",
    "nixl_xfer_sum": "vllm:nixl_xfer_time_seconds_sum",
    "nixl_xfer_count": "vllm:nixl_xfer_time_seconds_count",
    "nixl_bytes_sum": "vllm:nixl_bytes_transferred_sum",
    "nixl_failed_transfers": "vllm:nixl_num_failed_transfers_total",
    "nixl_failed_notifications": "vllm:nixl_num_failed_notifications_total",
    "nixl_expired_reqs": "vllm:nixl_num_kv_expired_reqs_total",
}
"""Registered only by the connector in use (`--kv-transfer-config`): the OffloadingConnector's
(`kv_connector/v1/offloading/metrics.py`, `v1/kv_offload/cpu/`) and NIXL's (`nixl/stats.py`)."""
HOST_TIER_PINNED = (
    "vLLM's offload gauges count only the host blocks pinned by transfers or hits "
    "(kv_offload_cpu_cache_usage_perc, simple_kv_offload_used_blocks), not the tokens its host "
    "tier holds"
)
"""`vllm/v1/kv_offload/cpu/manager.py` (`get_stats`: allocated − free − evictable blocks) and
`vllm/v1/simple_kv_offload/metrics.py` ("Evictable cached blocks are not counted")."""


def window_specs() -> dict[str, Spec]:
    """Raw key -> spec over the window (`lane_table` adds the fresh keys)."""
    itl, older = phases({"itl": PHASES["itl"]}), phases({"itl": OLDER_ITL})
    # fmt: off
    return {
        "requests": Counter("vllm:request_success_total"),
        "prompt_tokens": Counter("vllm:prompt_tokens_total"),
        "generation_tokens": Counter("vllm:generation_tokens_total"),
        "prefix_cache_queries": Counter("vllm:prefix_cache_queries_total"),
        "prefix_cache_hits": Counter("vllm:prefix_cache_hits_total"),
        "prompt_computed": Counter("vllm:prompt_tokens_by_source_total",
                                   (("source", "local_compute"),)),
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
        "host_kv_used": Unavailable(HOST_TIER_PINNED),
        "external_cache_queries": Counter("vllm:external_prefix_cache_queries_total"),
        "external_cache_hits": Counter("vllm:external_prefix_cache_hits_total"),
        "spec_accepted_by_pos": Counter("vllm:spec_decode_num_accepted_tokens_per_pos_total",
                                        by="position"),
        "running": Gauge("vllm:num_requests_running", "sum"),
        "waiting": Gauge("vllm:num_requests_waiting", "sum"),
        "waiting_by_reason": Gauge("vllm:num_requests_waiting_by_reason", "sum", by="reason"),
        "kv_usage": Gauge("vllm:kv_cache_usage_perc", "avg"),
        "offload_cpu_usage": Gauge("vllm:kv_offload_cpu_cache_usage_perc", "avg"),
        **{key: Counter(metric) for key, metric in KV_CONNECTOR_COUNTERS.items()},
        "sleep_state": Gauge("vllm:engine_sleep_state", "avg", by="sleep_state"),
        "spec_draft_len": Unavailable("vLLM counts its draft tokens"),
        **{key: Histogram(PHASES[key]) for key in ("prompt_len", "gen_len", "e2e", "ttft")},
        "itl": first(Histogram(PHASES["itl"]), Histogram(OLDER_ITL)),
        **{key: Histogram(PHASES[key]) for key in ("queue", "tpot")},
        **phases(PHASES),
        **{key: first(spec, older[key]) for key, spec in itl.items()},
    }
    # fmt: on


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


CAPACITY = Info("vllm:cache_config_info", capacity_from_info, unlabelled=("model_name",))
"""vLLM's KV capacity: an info series whose labels give blocks × block size."""

VLLM = Engine(
    name="vllm",
    prefix="vllm:",
    priority=0,
    specs=lane_table(window_specs()),
    presence="vllm:num_requests_running",
    capacity=CAPACITY,
    pace=PER_STEP,
    model_label="model_name",
    lora="vllm:lora_requests_info",
)

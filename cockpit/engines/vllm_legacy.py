"""vLLM before 0.12: the V1 names but for its prefix cache, KV use and step (`gpu_` names,
`time_per_output_token`)."""

from __future__ import annotations

from dataclasses import replace

from cockpit.engines.base import lane_table
from cockpit.engines.specs import Counter, Gauge, Histogram, phases
from cockpit.engines.vllm import OLDER_ITL, VLLM, window_specs

VLLM_LEGACY = replace(
    VLLM,
    name="vllm-legacy",
    priority=1,
    specs=lane_table(
        {
            **window_specs(),
            **phases({"itl": OLDER_ITL}),
            "prefix_cache_queries": Counter("vllm:gpu_prefix_cache_queries_total"),
            "prefix_cache_hits": Counter("vllm:gpu_prefix_cache_hits_total"),
            "kv_usage": Gauge("vllm:gpu_cache_usage_perc", "avg"),
            "itl": Histogram(OLDER_ITL),
        }
    ),
    requires=frozenset({"vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_queries_total"}),
    lacks=frozenset({"vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total"}),
)

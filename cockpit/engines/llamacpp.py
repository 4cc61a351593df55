"""llama.cpp's `llama-server --metrics`: counters and gauges, no labels, no histograms.

Names and meanings from `server_task_result_metrics::to_metrics()` (tools/server/
server-task.cpp, after ggml-org/llama.cpp#26920). Its `prompt_tokens_total` counts only the
tokens it computed; the ones reused from a slot's cache are `prompt_tokens_cached_total`.
Generated tokens and their time are added when a request's slot is released; prompt time is
counted per batch. There is no request counter, so nothing is per request.
"""

from __future__ import annotations

from cockpit.core.model import KV_TRANSFER_COUNTERS
from cockpit.engines.base import PER_TOKEN, Engine, lane_table
from cockpit.engines.specs import Combined, Counter, Gauge, Spec, Unavailable, lacking

NO_REQUESTS = "llama.cpp counts no requests"
NO_HISTOGRAMS = "llama.cpp keeps no per-request histograms: a request's timings are in its response"


def window_specs() -> dict[str, Spec]:
    """Raw key -> spec over the window (`lane_table` adds the fresh keys)."""
    computed = Counter("llamacpp:prompt_tokens_total")
    cached = Counter("llamacpp:prompt_tokens_cached_total")
    generated = Counter("llamacpp:tokens_predicted_total")
    histograms = ("prompt_len", "gen_len", "e2e", "ttft", "itl", "tpot", "queue")
    means = ("kv_computed", "prompt_len", "gen_len", "queue", "ttft", "tpot", "e2e")
    # fmt: off
    return {
        "prompt_tokens": Combined(computed, cached, "+"),
        "generation_tokens": generated,
        "prefix_cache_queries": Combined(computed, cached, "+"),
        "prefix_cache_hits": cached,
        "prompt_computed": computed,
        # The prompt's clock is the batches', shared by the slots in them.
        "prefill_sum": Counter("llamacpp:prompt_seconds_total"),
        # Generation time is summed per request, first token to last.
        "itl_sum": Counter("llamacpp:tokens_predicted_seconds_total"),
        "itl_count": generated,
        "step_tokens_sum": Combined(computed, generated, "+"),
        "step_tokens_count": Counter("llamacpp:n_decode_total"),
        "spec_drafts": Counter("llamacpp:spec_decode_num_drafts_total"),
        "spec_draft_tokens": Counter("llamacpp:spec_decode_num_draft_tokens_total"),
        "spec_accepted": Counter("llamacpp:spec_decode_num_accepted_tokens_total"),
        "spec_accepted_by_pos": Counter("llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
                                        by="position"),
        "running": Gauge("llamacpp:requests_processing", "sum"),
        "waiting": Gauge("llamacpp:requests_deferred", "sum"),
        # Only builds before #13660 (2025) state it.
        "kv_usage": Gauge("llamacpp:kv_cache_usage_ratio", "avg"),
        "host_kv_used": Unavailable("llama.cpp has no host KV tier"),
        **lacking(NO_REQUESTS, "requests", "prefill_count", "decode_count", "finished",
                  "admission_rejections"),
        **lacking(NO_HISTOGRAMS, *histograms,
                  *(f"{key}_{part}" for key in means for part in ("sum", "count"))),
        "decode_sum": Unavailable("llama.cpp times prompts per batch and generation per "
                                  "request: no decode time to set beside the prefill's"),
        "preemptions": Unavailable("llama.cpp does not preempt: a slot keeps its request"),
        **lacking("llama.cpp exposes no FLOP or byte estimates",
                  "flops", "read_bytes", "write_bytes"),
        **lacking("llama.cpp does not split its prompt tokens by cache tier",
                  "cached_by_source", "prompt_by_source"),
        **lacking("llama.cpp has no external KV cache",
                  "external_cache_queries", "external_cache_hits"),
        "waiting_by_reason": Unavailable("llama.cpp does not say why a request is deferred"),
        "sleep_state": Unavailable("llama.cpp states its sleep only in /props"),
        "spec_draft_len": Unavailable("llama.cpp counts its draft tokens"),
        **lacking("llama.cpp has no KV offload or transfer connector", *KV_TRANSFER_COUNTERS,
                  "offload_cpu_usage"),
    }
    # fmt: on


AT_RELEASE = "counted as each request ends"
PER_REQUEST = "generation time per request over its tokens, counted as it ends"

LLAMACPP = Engine(
    name="llamacpp",
    prefix="llamacpp:",
    priority=3,
    specs=lane_table(window_specs()),
    presence="llamacpp:requests_processing",
    capacity=Unavailable("llama.cpp states its context size in /props, not /metrics"),
    pace=PER_TOKEN,
    model_label=Unavailable("llama.cpp labels no series by model: a server serves one"),
    lora=Unavailable("llama.cpp states its LoRA adapters in /lora-adapters, not /metrics"),
    notes={
        **dict.fromkeys(("prompt_tokens", "prompt_tok_s", "prompt_tok_s_1m"), "computed + cached"),
        **dict.fromkeys(
            ("generation_tokens", "generation_tok_s", "generation_tok_s_1m"), AT_RELEASE
        ),
        **dict.fromkeys(("itl_mean", "itl_hist_mean", "stream_tok_s"), PER_REQUEST),
        **dict.fromkeys(("running", "running_now"), "busy slots"),
        **dict.fromkeys(("waiting", "waiting_now"), "deferred: no free slot"),
        "effective_prefill_rate": "per batch: a batch that mixes in decode counts whole",
        "batch_tokens_per_step": "(computed prompt + generated) / llama_decode() calls",
    },
)

"""What each figure on screen means, in a line: the details screen shows it beside the figure.
A name in backticks in a lane figure's line is the raw key it is read from: the details screen
shows that key's query (PromQL or scrape description) when the figure has none of its own.
No I/O, no Textual."""

from __future__ import annotations

import re

from cockpit.core.tail_figures import LATENCIES

LANE: dict[str, str] = {
    "requests": "Requests the engine finished in the window: `requests`.",
    "prompt_tokens": "Prompt tokens the engine received in the window: `prompt_tokens`.",
    "generation_tokens": "Tokens the engine generated in the window: `generation_tokens`.",
    "prompt_generated": "Prompt tokens per generated token: `prompt_tokens` / `generation_tokens`.",
    "prefix_cache_hits": "Prompt tokens found in the prefix cache: `prefix_cache_hits`.",
    "prefix_cache_queries": "Prompt tokens looked up in the prefix cache: `prefix_cache_queries`.",
    "prefix_cache_hit_rate": "Share of looked-up prompt tokens found in the prefix cache: "
    "`prefix_cache_hits` / `prefix_cache_queries` (red < 70 %, green > 90 %).",
    "prefill_computed": "Prompt tokens actually computed: `prompt_computed`, else "
    "`prefix_cache_queries` − `prefix_cache_hits`.",
    "computed_generated": "Computed prefill tokens per generated token: `prompt_computed` / "
    "`generation_tokens`.",
    "mean_prompt": "Mean prompt length per request: `prompt_len_sum` / `prompt_len_count`.",
    "mean_fresh_prefill": "Mean prompt tokens computed (not cached) per request: "
    "`kv_computed_sum` / `kv_computed_count`.",
    "mean_generated": "Mean tokens generated per request: `gen_len_sum` / `gen_len_count`.",
    "queue_mean": "Mean time a request waited in the queue: `queue_sum` / `queue_count`.",
    "prefill_mean": "Mean time computing a request's prompt: `prefill_sum` / `prefill_count`.",
    "decode_mean": "Mean time generating a request's tokens: `decode_sum` / `decode_count`.",
    "ttft_mean": "Mean time to first token: `ttft_sum` / `ttft_count`.",
    "decode_share": "Share of inference time spent decoding: decode / (prefill + decode), "
    "from `prefill_sum` and `decode_sum`.",
    "itl_mean": "Mean time between two steps that emit a request's tokens (inter-token "
    "latency): `itl_sum` / `itl_count`.",
    "itl_hist_mean": "Mean of the engine's inter-token histogram, the one its percentiles come "
    "from: `itl_sum` / `itl_count`. vLLM observes it once per engine step (it is the step); "
    "SGLang once per token (under speculative decoding, a fraction of the step).",
    "tokens_per_step": "Tokens a request gets per decode step (above 1 with speculative "
    "decoding): tokens after the first / `itl_count`.",
    "draft_acceptance": "Share of drafted tokens the target model accepted: `spec_accepted` / "
    "`spec_draft_tokens`.",
    "stream_tok_s": "Tokens per second one request sees while decoding: tokens after the "
    "first / decode time.",
    "effective_prefill_rate": "Prompt tokens computed per second of prefill: "
    "`prompt_computed` / `prefill_sum`.",
    "cache_off_prefill": "Prefill time per request if nothing were cached: mean prompt / "
    "effective prefill rate (what the cache saves).",
    "running": "Requests being served, averaged over the window: `running`.",
    "waiting": "Requests waiting to be scheduled, averaged over the window: `waiting`.",
    "kv_usage": "Share of the GPU's KV cache in use, averaged over the window: `kv_usage`.",
    "kv_capacity_tokens": "Tokens the GPU's KV cache holds, from the engine's cache config.",
    "kv_resident_tokens": "Tokens held in the KV cache: KV usage × capacity, plus the "
    "configured host tier.",
    "preemptions": "Requests the engine preempted (evicted to make room): `preemptions`.",
    "prompt_tok_s": "Prompt tokens per second over the window: `prompt_tokens` / window.",
    "generation_tok_s": "Generated tokens per second over the window: `generation_tokens` / "
    "window.",
    "measured_flops": "FLOP/s per GPU as the engine estimates them: `flops` / window.",
    "measured_bytes": "Bytes/s per GPU the engine estimates it moved: (`read_bytes` + "
    "`write_bytes`) / window.",
    "prompt_share_short": "Share of requests with a prompt ≤ 500 tokens (the nearest bucket "
    "bound of `prompt_len`).",
    "prompt_share_long": "Share of requests with a prompt > 10,000 tokens (`prompt_len` buckets).",
    "prompt_share_huge": "Share of requests with a prompt > 100,000 tokens (`prompt_len` buckets).",
    "gen_share_short": "Share of requests that generated ≤ 500 tokens (`gen_len` buckets).",
    "gen_share_medium": "Share of requests that generated ≤ 5,000 tokens (`gen_len` buckets).",
    "e2e_mean": "Mean time from a request's arrival to its last token: `e2e_sum` / `e2e_count`.",
    "batch_tokens_per_step": "Tokens the whole batch computes per engine step: "
    "`step_tokens_sum` / `step_tokens_count`.",
    "finished_failed_share": "Share of finished requests that were aborted or ended in error: "
    "`finished`.",
    "admission_rejections": "Requests refused by the engine's queue limits: "
    "`admission_rejections`.",
    "external_cache_hit_rate": "Share of prompt tokens found in an external KV cache "
    "(connector): `external_cache_hits` / `external_cache_queries`.",
    "running_now": "Requests being served at the evaluation time: `running_now`.",
    "waiting_now": "Requests waiting to be scheduled at the evaluation time: `waiting_now`.",
    "kv_usage_now": "Share of the GPU's KV cache in use at the evaluation time: `kv_usage_now`.",
    "requests_per_s": "Requests finished per second over the window: `requests` / window.",
    "requests_per_s_1m": "Requests finished per second over the last minute: `requests_1m`.",
    "prompt_tok_s_1m": "Prompt tokens per second over the last minute: `prompt_tokens_1m`.",
    "generation_tok_s_1m": "Generated tokens per second over the last minute: "
    "`generation_tokens_1m`.",
}
"""Lane figure key -> its meaning, from DESIGN.md's definitions."""

LEDGER: dict[str, str] = {
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
"""Ledger figure key -> its meaning, over sessions started in the window."""

TREND: dict[str, str] = {
    "hit_rate": "Prefix-cache hit rate within each step: hits / queries of the step.",
    "ttft_p95": "95th percentile of the time to first token within each step (its histogram).",
    "itl_step": "The inter-token step within each step, worked out as the window's.",
    "generation_tok_s": "Generated tokens per second within each step.",
    "running": "Requests being served, averaged within each step.",
    "waiting": "Requests waiting to be scheduled, averaged within each step.",
    "kv_usage": "Share of the GPU's KV cache in use, averaged within each step.",
}
"""Trend key -> what its sparkline follows (counters as increases within each step, so a
counter reset does not spike)."""

_WHAT = {latency.histogram: latency.label.lower() for latency in LATENCIES}
_QUANTILE = re.compile(rf"^({'|'.join(_WHAT)})_p(\d+)$")
_FAMILIES: tuple[tuple[str, str], ...] = (
    ("waiting_now_", "Requests waiting at the evaluation time because of {}: "
     "`waiting_by_reason_now`."),
    ("finished_", "Requests that finished with reason {} in the window: `finished`."),
    ("waiting_", "Requests waiting because of {}, averaged over the window: `waiting_by_reason`."),
    ("cached_", "Prompt tokens served from the {} cache tier: `cached_by_source`."),
    ("prompt_from_", "Prompt tokens from {}: `prompt_by_source`."),
    ("draft_acceptance_pos_", "Share of drafts accepted at draft position {}: "
     "`spec_accepted_by_pos` / `spec_drafts`."),
    ("sleep_", "Share of the window the engine spent {}: `sleep_state`."),
)  # fmt: skip
"""Figures made one per label value the engine reports: key prefix -> meaning."""

_RAW = re.compile(r"`([a-z0-9_]+)`")


def lane_definition(key: str) -> str:
    """The lane figure's meaning ('' for a key not described here)."""
    if key in LANE:
        return LANE[key]
    quantile = _QUANTILE.match(key)
    if quantile:
        base, percent = quantile.groups()
        return (
            f"{percent}th percentile of the {_WHAT[base]} over the window, from the engine's "
            f"`{base}` histogram as Prometheus's histogram_quantile reads it (`> x`: past the "
            "largest finite bucket)."
        )
    for prefix, text in _FAMILIES:
        if key.startswith(prefix):
            return text.format(key.removeprefix(prefix))
    return ""


def ledger_definition(key: str) -> str:
    """The ledger figure's meaning ('' for a key not described here)."""
    return LEDGER.get(key, "")


def trend_definition(key: str) -> str:
    return TREND.get(key, "")


def raw_keys(definition: str) -> list[str]:
    """The raw keys a definition names in backticks, in order."""
    return _RAW.findall(definition)

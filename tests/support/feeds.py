"""In-test feeds for the app and pane tests: fixed totals built from numbers written here.

They implement the feed protocol directly (they stand in for a source, not for a part of the
cockpit): `read()` returns or raises what the test scripted, optionally after a delay.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from cockpit.config.schema import Config, LaneConfig
from cockpit.core.gpu import Gpu, GpuTotals
from cockpit.core.model import (
    Bucket,
    LaneTotals,
    LedgerTotals,
    LoraAdapters,
    SourceFailure,
    TokenCounts,
    Trend,
    frozen_map,
)
from cockpit.core.models import Read, with_models
from cockpit.core.slo import NO_SLO, Slo
from cockpit.roofline.model import Hardware, ModelProfile
from cockpit.runtime.poller import Clocks

INF = float("inf")
EVAL_AT = 1_790_000_000.0
"""A fixed evaluation time (2026-09-21 14:13:20 UTC) so screens don't depend on the clock."""

H100 = Hardware("h100", "NVIDIA H100 SXM", 989e12, 3.35e12, 80e9)
LLAMA_8B = ModelProfile("llama-3.1-8b", "Llama 3.1 8B", 8.03e9, 8.03e9, 2.0, 32, 4096, 131072)


def lane_values(scale: float = 1.0) -> dict[str, float]:
    """A lane with 1,000 requests of 20k-token prompts, 91.6 % of it from the prefix cache."""
    return {
        "requests": 1000 * scale,
        "prompt_tokens": 20_000_000 * scale,
        "generation_tokens": 400_000 * scale,
        "prefix_cache_queries": 20_000_000 * scale,
        "prefix_cache_hits": 18_320_000 * scale,
        "prompt_computed": 1_680_000 * scale,
        "prompt_len_sum": 20_000_000 * scale,
        "prompt_len_count": 1000 * scale,
        "gen_len_sum": 400_000 * scale,
        "gen_len_count": 1000 * scale,
        "queue_sum": 50.0 * scale,
        "queue_count": 1000 * scale,
        "prefill_sum": 800.0 * scale,
        "prefill_count": 1000 * scale,
        "decode_sum": 8000.0 * scale,
        "decode_count": 1000 * scale,
        "ttft_sum": 900.0 * scale,
        "ttft_count": 1000 * scale,
        "itl_sum": 8000.0 * scale,
        "itl_count": 400_000 * scale,
        "running": 8.0,
        "waiting": 0.5,
        "kv_usage": 0.6,
        "e2e_sum": 9700.0 * scale,
        "e2e_count": 1000 * scale,
        "tpot_sum": 21.0 * scale,
        "tpot_count": 1000 * scale,
        "preemptions": 3 * scale,
        # now, and over the last minute
        "running_now": 7.0,
        "waiting_now": 2.0,
        "kv_usage_now": 0.64,
        "requests_1m": 18.0,
        "prompt_tokens_1m": 360_000.0,
        "generation_tokens_1m": 7_200.0,
    }


LATENCY_BUCKETS: dict[str, tuple[Bucket, ...]] = {
    "ttft": ((0.1, 300.0), (0.25, 550.0), (0.5, 780.0), (1.0, 900.0), (2.5, 970.0),
             (5.0, 990.0), (10.0, 998.0), (INF, 1000.0)),
    "itl": ((0.01, 40_000.0), (0.025, 300_000.0), (0.05, 370_000.0), (0.1, 392_000.0),
            (0.25, 399_000.0), (INF, 400_000.0)),
    # 1.5 % of requests took longer than the largest finite bucket: p99 reads `> 60 s`.
    "e2e": ((1.0, 50.0), (2.5, 150.0), (5.0, 350.0), (10.0, 700.0), (20.0, 900.0),
            (40.0, 960.0), (60.0, 985.0), (INF, 1000.0)),
    "queue": ((0.01, 600.0), (0.05, 800.0), (0.1, 900.0), (0.5, 980.0), (1.0, 995.0),
              (INF, 1000.0)),
    "tpot": ((0.01, 50.0), (0.025, 850.0), (0.05, 990.0), (0.1, 1000.0), (INF, 1000.0)),
}  # fmt: skip
"""The latency histograms' cumulative counts per `le` over the window (1,000 requests)."""

LANE_GROUPS: dict[str, dict[str, float]] = {
    "finished": {"stop": 940.0, "length": 52.0, "abort": 6.0, "error": 2.0},
    "waiting_by_reason_now": {"capacity": 2.0, "deferred": 0.0},
    # Of the 20 M prompt tokens, the 1.68 M computed and the 18.32 M hits; no KV connector.
    "prompt_by_source": {
        "local_compute": 1_680_000.0, "local_cache_hit": 18_320_000.0, "external_kv_transfer": 0.0
    },
    "cached_by_source": {
        "device": 18_000_000.0, "host": 320_000.0, "p2p": 0.0, "disk": 0.0,
        "external_unspecified": 0.0,
    },
}  # fmt: skip
SPEC_VALUES = {"spec_drafts": 100_000.0, "spec_draft_tokens": 300_000.0, "spec_accepted": 171_000.0}
SPEC_BY_POSITION = {"0": 78_000.0, "1": 56_000.0, "2": 37_000.0}
"""A lane drafting 3 tokens at a time (speculative decoding): 57 % of drafted tokens accepted."""

STEP_S = 60.0


def lane_trend(end: float = EVAL_AT, points: int = 60, gpu: bool = False) -> Trend:
    """An hour at a 1-minute step: load rising then easing, a gap of four minutes (no data);
    with `gpu`, the GPUs' utilisation following the load."""
    last = end - end % STEP_S

    def series(at: Callable[[int], float]) -> tuple[float | None, ...]:
        return tuple(None if 30 <= i < 34 else round(at(i), 6) for i in range(points))

    wave = [0.5 + 0.5 * math.sin(i / 9) for i in range(points)]
    return Trend(
        STEP_S,
        last,
        frozen_map({
            "hit_rate": series(lambda i: 0.93 - 0.05 * wave[i]),
            "ttft_p95": series(lambda i: 0.8 + 2.2 * wave[i]),
            "itl_step": series(lambda i: 0.018 + 0.01 * wave[i]),
            "generation_tok_s": series(lambda i: 60 + 90 * wave[i]),
            "running": series(lambda i: 2 + 8 * wave[i]),
            "waiting": series(lambda i: max(0.0, 6 * wave[i] - 3)),
            "kv_usage": series(lambda i: 0.3 + 0.4 * wave[i]),
            **({"gpu_util": series(lambda i: 0.45 + 0.5 * wave[i])} if gpu else {}),
        }),
    )  # fmt: skip


GIB = 2**30


def gpu_totals(count: int = 2, failed: str = "") -> GpuTotals:
    """`count` H100s as dcgm-exporter gives them, GPU 1 at its memory limit and held by its
    power limit; `failed`: the source's read failed, no GPU read."""
    if failed:
        return GpuTotals("", 'DCGM_FI_DEV_GPU_UTIL{job="dcgm"}', reason=failed)
    gpus = tuple(
        Gpu(str(i), f"GPU-{i:08x}", "NVIDIA H100 80GB HBM3", util=0.87 - 0.1 * i,
            memory_used_bytes=(71.5 + 8.0 * (i % 2)) * GIB, memory_total_bytes=79.6 * GIB,
            power_w=612.0 - 40 * i, temp_c=71.0 + 3 * i, energy_j=2.2e6 - 1e5 * i,
            dram_active=0.41, tensor_active=0.33, sm_active=0.8, xid=0.0,
            throttle_power=float(i % 2), throttle_thermal=0.0)
        for i in range(count)
    )  # fmt: skip
    return GpuTotals("dcgm-exporter", 'DCGM_FI_DEV_GPU_UTIL{job="dcgm"}', gpus)


PROMPT_BUCKETS = ((500.0, 100.0), (10_000.0, 400.0), (100_000.0, 990.0), (float("inf"), 1000.0))
"""Cumulative counts per `le`: 10 % of prompts ≤ 500, 60 % > 10k, 1 % > 100k."""
GEN_BUCKETS = ((500.0, 800.0), (5_000.0, 990.0), (float("inf"), 1000.0))


def lane_totals(
    name: str = "lane-a",
    window_s: float = 3600.0,
    end: float = EVAL_AT,
    scale: float = 1.0,
    spec: bool = False,
    gpu: GpuTotals | None = None,
) -> LaneTotals:
    """The lane's totals, with its trend; `spec`: a lane that decodes speculatively."""
    values = {**lane_values(scale), **(SPEC_VALUES if spec else {})}
    groups = {**LANE_GROUPS, **({"spec_accepted_by_pos": SPEC_BY_POSITION} if spec else {})}
    histograms = {"prompt_len": PROMPT_BUCKETS, "gen_len": GEN_BUCKETS, **LATENCY_BUCKETS}
    return LaneTotals(
        lane=name,
        dialect="vllm",
        window_s=window_s,
        end=end,
        values=frozen_map(values),
        missing=frozen_map({} if spec else {"spec_drafts": "no speculative decoding metrics"}),
        histograms=frozen_map(histograms),
        groups=frozen_map({key: frozen_map(group) for key, group in groups.items()}),
        kv_capacity_tokens=500_000.0,
        server="http://127.0.0.1:9090",
        trend=lane_trend(end, gpu=gpu is not None and bool(gpu.gpus)),
        gpu=gpu,
    )


MODEL_SPLIT = {"llama-3.1-8b": (0.75, 0.95), "llama-3.1-8b-sql-lora": (0.25, None)}
"""Model -> (its share of the lane's requests and tokens, its prefix-cache hit rate; None:
the rest of the lane's hits)."""
LORA = LoraAdapters(("llama-3.1-8b-sql-lora", "chat-lora"), ("summarise-lora",), 4.0, EVAL_AT - 30)


def with_two_models(
    totals: LaneTotals,
    split: Mapping[str, tuple[float, float | None]] = MODEL_SPLIT,
    queries: Mapping[str, str] = frozen_map(),
) -> LaneTotals:
    """The lane's totals split between a base model and its LoRA adapter (`split`, as
    `MODEL_SPLIT`), as `sum by (model_name)` reads them (`queries`, by raw key): the rows add
    up to the lane."""
    reads: dict[str, dict[str, Read]] = {}
    hits_left = totals.values["prefix_cache_hits"]
    for model, (part, rate) in split.items():
        own: dict[str, Read] = {
            key: totals.values[key] * part
            for key in ("requests", "prompt_tokens", "generation_tokens", "prefix_cache_queries")
        }
        own["prefix_cache_hits"] = hits_left if rate is None else own["prefix_cache_queries"] * rate
        hits_left -= own["prefix_cache_hits"]
        own["ttft"] = tuple((le, count * part) for le, count in totals.histograms["ttft"])
        reads[model] = own
    return with_models(totals, reads, queries, LORA)


def ledger_totals(window_s: float = 3600.0, end: float = EVAL_AT) -> LedgerTotals:
    cli = TokenCounts(30, 1500, 600_000, 24_000_000, 1_500_000, 120_000, 40_000)
    cron = TokenCounts(10, 500, 400_000, 6_000_000, 500_000, 60_000, 10_000)
    return LedgerTotals(
        window_s=window_s,
        end=end,
        total=cli + cron,
        by_source=frozen_map({"cli": cli, "cron": cron}),
        by_model=frozen_map({"claude-sonnet-4": cli, "qwen3-32b": cron}),
        queries=("SELECT ... FROM sessions",),
    )


@dataclass(eq=False)
class ScriptedLaneFeed:
    """A lane feed whose reads return fixed totals, or raise, as the test says."""

    name: str = "lane-a"
    hardware: Hardware | None = H100
    model: ModelProfile | None = LLAMA_8B
    host_kv_tokens: float = 0.0
    slo: Slo = NO_SLO
    chunk_tokens: int | None = None
    gpus: int = 1
    delay_s: float = 0.0
    failure: Exception | None = None
    scale: float = 1.0
    spec: bool = False
    """The lane decodes speculatively (draft acceptance figures)."""
    gpu: GpuTotals | None = None
    """What the lane's GPU source read (None: the lane has no GPU source)."""
    changes: dict[str, float] = field(default_factory=dict)
    """Raw values that differ from `lane_values()`."""
    reads: list[tuple[float, float | None]] = field(default_factory=list)
    closed: bool = False

    model_filter: str | None = None

    def filter_model(self, model: str | None) -> None:
        self.model_filter = model or None

    async def read(self, window_s: float, end: float | None) -> LaneTotals:
        self.reads.append((window_s, end))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.failure is not None:
            raise self.failure
        at = EVAL_AT if end is None else end
        totals = with_two_models(
            lane_totals(self.name, window_s, at, self.scale, self.spec, self.gpu)
        )
        if not self.changes:
            return totals
        return replace(totals, values=frozen_map({**totals.values, **self.changes}))

    async def close(self) -> None:
        self.closed = True


@dataclass(eq=False)
class ScriptedLedgerFeed:
    delay_s: float = 0.0
    failure: Exception | None = None
    reads: list[tuple[float, float | None]] = field(default_factory=list)
    closed: bool = False

    async def read(self, window_s: float, end: float | None) -> LedgerTotals:
        self.reads.append((window_s, end))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.failure is not None:
            raise self.failure
        return ledger_totals(window_s, EVAL_AT if end is None else end)

    async def close(self) -> None:
        self.closed = True


class SourceDown(SourceFailure):
    """What a real source raises: a one-line reason."""


def fixed_clocks(wall: float = EVAL_AT + 5, latency_s: float = 0.012) -> Clocks:
    """A wall clock that stands still; every read appears to take `latency_s`."""
    return Clocks(wall=lambda: wall, monotonic=_stepping(latency_s))


def _stepping(step: float) -> Callable[[], float]:
    """Calls alternate start, end, start, end …, each end `step` after its start."""
    calls = [0]

    def monotonic() -> float:
        calls[0] += 1
        pair, is_end = divmod(calls[0] - 1, 2)
        return pair * 1000.0 + (step if is_end else 0.0)

    return monotonic


def config(*lanes: str, window: str = "1h", refresh_s: float = 3600.0, **extra: object) -> Config:
    return Config(
        lanes=tuple(LaneConfig(name) for name in lanes),
        window=window,
        refresh_s=refresh_s,
        **extra,  # type: ignore[arg-type]
    )

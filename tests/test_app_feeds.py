"""In-test feeds for the app and pane tests: fixed totals built from numbers written here.

They implement the feed protocol directly (they stand in for a source, not for a part of the
cockpit): `read()` returns or raises what the test scripted, optionally after a delay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from cockpit.config import Config, LaneConfig
from cockpit.model import LaneTotals, LedgerTotals, SourceFailure, TokenCounts, frozen_map
from cockpit.poller import Clocks
from cockpit.roofline import Hardware, ModelProfile

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
    }


PROMPT_BUCKETS = ((500.0, 100.0), (10_000.0, 400.0), (100_000.0, 990.0), (float("inf"), 1000.0))
"""Cumulative counts per `le`: 10 % of prompts ≤ 500, 60 % > 10k, 1 % > 100k."""
GEN_BUCKETS = ((500.0, 800.0), (5_000.0, 990.0), (float("inf"), 1000.0))


PROMPT_BUCKETS = ((500.0, 100.0), (10_000.0, 400.0), (100_000.0, 990.0), (float("inf"), 1000.0))
"""Cumulative counts per `le`: 10 % of prompts ≤ 500, 60 % > 10k, 1 % > 100k."""
GEN_BUCKETS = ((500.0, 800.0), (5_000.0, 990.0), (float("inf"), 1000.0))


def lane_totals(
    name: str = "lane-a", window_s: float = 3600.0, end: float = EVAL_AT, scale: float = 1.0
) -> LaneTotals:
    return LaneTotals(
        lane=name,
        dialect="vllm",
        window_s=window_s,
        end=end,
        values=frozen_map(lane_values(scale)),
        missing=frozen_map({"spec_drafts": "no speculative decoding metrics"}),
        histograms=frozen_map({"prompt_len": PROMPT_BUCKETS, "gen_len": GEN_BUCKETS}),
        kv_capacity_tokens=500_000.0,
        server="http://127.0.0.1:9090",
    )


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
    chunk_tokens: int | None = None
    gpus: int = 1
    delay_s: float = 0.0
    failure: Exception | None = None
    scale: float = 1.0
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
        totals = lane_totals(self.name, window_s, EVAL_AT if end is None else end, self.scale)
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

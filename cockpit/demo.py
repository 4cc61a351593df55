"""The embedded demo: a simulated vLLM lane and a simulated Hermes agent, on loopback.

`SimulatedLane` serves a vLLM V1 `/metrics` exposition (prometheus_client, its own registry)
whose counters and histograms advance with time in the agent-era shape: long prompts, short
answers, most of the prompt served from the prefix cache. `SimulatedHermes` writes a `state.db`
the way Hermes does (WAL, `BEGIN IMMEDIATE`, counters incremented in place per API call).
`Demo` starts both in a temp folder, optionally with a real Prometheus scraping the lanes, and
removes everything on `stop()`. Nothing here imports Textual.
"""

from __future__ import annotations

import bisect
import json
import math
import random
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, ThreadingWSGIServer
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from cockpit.config import Config, parse_config
from cockpit.roofline import Hardware, ModelProfile

LOOPBACK = "127.0.0.1"
DAY = 86400.0

# --- vLLM's default histogram bounds (vllm/v1/metrics/buckets.py) --------------------------

REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKETS: tuple[float, ...] = (
    1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
)  # fmt: skip
PARAMS_N_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 20)
PREEMPTIONS_BUCKETS: tuple[float, ...] = (1, 2, 3, 4, 5, 10, 20)


def request_token_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 series up to `max_model_len` (the request-tokens family)."""
    bounds: list[float] = []
    magnitude = 1
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * magnitude
            if value > max_model_len:
                return tuple(bounds)
            bounds.append(float(value))
        magnitude *= 10


# --- lane presets -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LanePreset:
    """The shape of one simulated lane: its hardware, its model and its traffic."""

    name: str
    served_model: str
    hardware: str
    model: str
    gpus: int
    request_rate: float
    """Requests per second arriving at the lane."""
    prompt_mix: tuple[tuple[float, int, int], ...]
    """(share, low, high): prompt lengths drawn log-uniform in [low, high]."""
    max_model_len: int
    hit_mean: float
    """Mean fraction of a prompt found in the prefix cache."""
    hit_concentration: float
    gen_median: float
    gen_sigma: float
    long_gen_share: float
    max_tokens: int
    spec_accept_by_pos: tuple[float, ...]
    """P(draft position j accepted); empty means no speculative decoding."""
    step_s: float
    prefill_rate: float
    """Effective prefill tokens per second per request."""
    queue_mean_s: float
    chunk_tokens: int
    block_size: int
    num_gpu_blocks: int
    gpu_memory_utilization: float
    active_params: float
    layers: int
    hidden: int
    kv_bytes_per_token: int
    weight_bytes_per_step: float
    """HBM bytes of weights read per engine step, whole lane."""

    @property
    def spec_k(self) -> int:
        return len(self.spec_accept_by_pos)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size


AGENT_PROMPT_MIX: tuple[tuple[float, int, int], ...] = (
    (0.50, 40, 500),
    (0.36, 500, 10_000),
    (0.08, 10_000, 100_000),
    (0.06, 100_000, 500_000),
)

PRESETS: dict[str, LanePreset] = {
    "gb300-dsv4": LanePreset(
        name="gb300-dsv4",
        served_model="deepseek-ai/DeepSeek-V3",
        hardware="gb300",
        model="deepseek-v3",
        gpus=4,
        request_rate=1.5,
        prompt_mix=AGENT_PROMPT_MIX,
        max_model_len=1_048_576,
        hit_mean=0.916,
        hit_concentration=60.0,
        gen_median=140.0,
        gen_sigma=1.0,
        long_gen_share=0.03,
        max_tokens=8192,
        # 1 + sum = 2.76 tokens/step; sum / k = 44 % of draft tokens accepted
        spec_accept_by_pos=(0.70, 0.50, 0.33, 0.23),
        step_s=0.0263,
        prefill_rate=7500.0,
        queue_mean_s=0.24,
        chunk_tokens=8192,
        block_size=64,
        num_gpu_blocks=68_824,
        gpu_memory_utilization=0.92,
        active_params=37e9,
        layers=61,
        hidden=7168,
        kv_bytes_per_token=70_272,
        weight_bytes_per_step=120e9,
    ),
    "h100-llama8b": LanePreset(
        name="h100-llama8b",
        served_model="meta-llama/Llama-3.1-8B-Instruct",
        hardware="h100",
        model="llama-3.1-8b",
        gpus=1,
        request_rate=1.2,
        prompt_mix=(
            (0.55, 40, 500),
            (0.35, 500, 10_000),
            (0.08, 10_000, 60_000),
            (0.02, 60_000, 120_000),
        ),
        max_model_len=131_072,
        hit_mean=0.65,
        hit_concentration=14.0,
        gen_median=160.0,
        gen_sigma=1.0,
        long_gen_share=0.02,
        max_tokens=4096,
        spec_accept_by_pos=(),
        step_s=0.0118,
        prefill_rate=11_000.0,
        queue_mean_s=0.05,
        chunk_tokens=2048,
        block_size=16,
        num_gpu_blocks=26_700,
        gpu_memory_utilization=0.9,
        active_params=8.03e9,
        layers=32,
        hidden=4096,
        kv_bytes_per_token=131_072,
        weight_bytes_per_step=16.06e9,
    ),
}
"""Two lanes of different shape, keyed by lane name."""


# --- the lane's state -------------------------------------------------------------------


def _go_float(value: float) -> str:
    """A bucket bound as prometheus_client writes `le` (`1.0`, `+Inf`)."""
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


class _Hist:
    """A histogram kept as plain numbers, so a step can add many observations at once."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def add(self, value: float, n: int = 1) -> None:
        if n <= 0:
            return
        self.counts[bisect.bisect_left(self.bounds, value)] += n
        self.total += value * n

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += count
            out.append((_go_float(bound), float(running)))
        return out


@dataclass(slots=True)
class _Request:
    """One request's whole timeline, drawn when it arrives."""

    arrival: float
    frontend_s: float
    queue_s: float
    prefill_s: float
    decode_s: float
    prompt: int
    cached: int
    gen: int
    steps: int
    accepted: int
    itl_s: float
    reason: str
    preemptions: int

    @property
    def scheduled_at(self) -> float:
        return self.arrival + self.frontend_s + self.queue_s

    @property
    def first_token_at(self) -> float:
        return self.scheduled_at + self.prefill_s

    @property
    def finish_at(self) -> float:
        return self.first_token_at + self.decode_s

    @property
    def computed(self) -> int:
        return self.prompt - self.cached


FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHED_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
COUNTER_KEYS = (
    "prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits",
    "preemptions", "spec_drafts", "spec_draft_tokens", "spec_accepted",
    "flops", "read_bytes", "write_bytes",
)  # fmt: skip


class _LaneState:
    """Counters, histograms and in-flight requests of one simulated lane."""

    def __init__(self, preset: LanePreset, rng: random.Random, start: float) -> None:
        self.preset = preset
        self.rng = rng
        self.now = start
        self.next_arrival = start + rng.expovariate(preset.request_rate)
        self.in_flight: list[_Request] = []
        self.counters: dict[str, float] = dict.fromkeys(COUNTER_KEYS, 0.0)
        self.success: dict[str, int] = dict.fromkeys(FINISHED_REASONS, 0)
        self.per_pos = [0] * preset.spec_k
        self.step_carry = 0.0
        self.pending_steps = 0
        latency = REQUEST_LATENCY_BUCKETS
        tokens = request_token_buckets(preset.max_model_len)
        self.hists: dict[str, _Hist] = {
            "time_to_first_token_seconds": _Hist(TTFT_BUCKETS),
            "inter_token_latency_seconds": _Hist(ITL_BUCKETS),
            "request_time_per_output_token_seconds": _Hist(ITL_BUCKETS),
            "e2e_request_latency_seconds": _Hist(latency),
            "request_queue_time_seconds": _Hist(latency),
            "request_inference_time_seconds": _Hist(latency),
            "request_prefill_time_seconds": _Hist(latency),
            "request_decode_time_seconds": _Hist(latency),
            "request_prompt_tokens": _Hist(tokens),
            "request_generation_tokens": _Hist(tokens),
            "request_prefill_kv_computed_tokens": _Hist(tokens),
            "request_max_num_generation_tokens": _Hist(tokens),
            "request_params_max_tokens": _Hist(tokens),
            "request_params_n": _Hist(PARAMS_N_BUCKETS),
            "request_num_preemptions": _Hist(PREEMPTIONS_BUCKETS),
            "iteration_tokens_total": _Hist(ITERATION_TOKENS_BUCKETS),
        }
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0

    # - drawing requests -

    def _prompt_len(self) -> int:
        pick = self.rng.random()
        low, high = self.preset.prompt_mix[-1][1:]
        for share, lo, hi in self.preset.prompt_mix:
            pick -= share
            if pick <= 0:
                low, high = lo, hi
                break
        value = math.exp(self.rng.uniform(math.log(low), math.log(high)))
        return max(1, min(int(value), self.preset.max_model_len - self.preset.max_tokens))

    def _gen_len(self) -> int:
        p = self.preset
        if self.rng.random() < p.long_gen_share:
            value = math.exp(self.rng.uniform(math.log(1000), math.log(8000)))
        else:
            value = self.rng.lognormvariate(math.log(p.gen_median), p.gen_sigma)
        return max(1, int(value))

    def _cached(self, prompt: int) -> int:
        p = self.preset
        a = p.hit_mean * p.hit_concentration
        fraction = self.rng.betavariate(a, p.hit_concentration - a)
        blocks = int(prompt * fraction) // p.block_size
        return max(0, min(prompt - 1, blocks * p.block_size))

    def _decode_steps(self, gen: int) -> tuple[int, int]:
        """(decode steps, accepted draft tokens) to emit `gen` tokens; the first is from prefill."""
        decoded = gen - 1
        k = self.preset.spec_k
        if decoded <= 0:
            return 0, 0
        if k == 0:
            return decoded, 0
        mean_accepted = sum(self.preset.spec_accept_by_pos)
        per_step = min(float(k), max(0.0, self.rng.gauss(mean_accepted, 0.25)))
        steps = max(math.ceil(decoded / (k + 1)), min(decoded, round(decoded / (1 + per_step))))
        return steps, decoded - steps

    def new_request(self, arrival: float) -> _Request:
        p, rng = self.preset, self.rng
        prompt = self._prompt_len()
        cached = self._cached(prompt)
        gen = self._gen_len()
        reason = "stop"
        if gen >= p.max_tokens:
            gen, reason = p.max_tokens, "length"
        elif rng.random() < 0.005:
            reason = "abort"
        steps, accepted = self._decode_steps(gen)
        itl = p.step_s * rng.lognormvariate(0.0, 0.12) * (1 + prompt / 2_000_000)
        prefill = (prompt - cached) / p.prefill_rate * rng.lognormvariate(0.0, 0.2) + p.step_s / 2
        return _Request(
            arrival=arrival,
            frontend_s=rng.uniform(0.003, 0.012),
            queue_s=rng.expovariate(1.0 / p.queue_mean_s),
            prefill_s=prefill,
            decode_s=steps * itl,
            prompt=prompt,
            cached=cached,
            gen=gen,
            steps=steps,
            accepted=accepted,
            itl_s=itl,
            reason=reason,
            preemptions=1 if rng.random() < 0.002 else 0,
        )

    # - advancing -

    def advance(self, dt: float) -> None:
        end = self.now + dt
        while self.next_arrival <= end:
            self.in_flight.append(self.new_request(self.next_arrival))
            self.next_arrival += self.rng.expovariate(self.preset.request_rate)
        busy = any(r.scheduled_at < end and r.finish_at > self.now for r in self.in_flight)
        if busy:
            self.step_carry += dt / self.preset.step_s
            whole = int(self.step_carry)
            self.step_carry -= whole
            self.pending_steps += whole
        done = [r for r in self.in_flight if r.finish_at <= end]
        if done:
            self.in_flight = [r for r in self.in_flight if r.finish_at > end]
            for request in done:
                self._complete(request)
            self._engine_steps(sum(r.computed for r in done), sum(r.gen for r in done))
        self.now = end
        self._update_gauges()

    def _complete(self, r: _Request) -> None:
        c, h, p = self.counters, self.hists, self.preset
        c["prompt_tokens"] += r.prompt
        c["prefix_cache_queries"] += r.prompt
        c["prefix_cache_hits"] += r.cached
        c["generation_tokens"] += r.gen
        c["preemptions"] += r.preemptions
        self.success[r.reason] += 1
        ttft = r.frontend_s + r.queue_s + r.prefill_s
        h["time_to_first_token_seconds"].add(ttft)
        h["e2e_request_latency_seconds"].add(ttft + r.decode_s + 0.002)
        h["request_queue_time_seconds"].add(r.queue_s)
        h["request_prefill_time_seconds"].add(r.prefill_s)
        h["request_decode_time_seconds"].add(r.decode_s)
        h["request_inference_time_seconds"].add(r.prefill_s + r.decode_s)
        h["request_time_per_output_token_seconds"].add(
            r.decode_s / (r.gen - 1) if r.gen > 1 else 0.0
        )
        self._add_itl(r)
        h["request_prompt_tokens"].add(r.prompt)
        h["request_generation_tokens"].add(r.gen)
        h["request_prefill_kv_computed_tokens"].add(r.computed)
        h["request_max_num_generation_tokens"].add(r.gen)
        h["request_params_max_tokens"].add(p.max_tokens)
        h["request_params_n"].add(1)
        h["request_num_preemptions"].add(r.preemptions)
        if p.spec_k and r.steps:
            c["spec_drafts"] += r.steps
            c["spec_draft_tokens"] += r.steps * p.spec_k
            c["spec_accepted"] += r.accepted
            for j, n in enumerate(split_accepted(r.accepted, r.steps, p.spec_accept_by_pos)):
                self.per_pos[j] += n
        self._add_work(r)

    def _add_itl(self, r: _Request) -> None:
        """One ITL observation per decode step: a quarter fast, a quarter slow, half at the mean."""
        itl = self.hists["inter_token_latency_seconds"]
        side = r.steps // 4
        itl.add(r.itl_s * 0.8, side)
        itl.add(r.itl_s * 1.2, side)
        itl.add(r.itl_s, r.steps - 2 * side)

    def _add_work(self, r: _Request) -> None:
        """FLOPs and HBM bytes per GPU of one request (weights read per step: `_engine_steps`)."""
        p, c = self.preset, self.counters
        tokens = r.computed + r.gen
        attention_pairs = r.computed * (r.cached + r.computed / 2) + r.gen * (r.prompt + r.gen / 2)
        c["flops"] += (
            2 * p.active_params * tokens + 4 * p.layers * p.hidden * attention_pairs
        ) / p.gpus
        kv_read = (r.cached + r.steps * (r.prompt + r.gen / 2)) * p.kv_bytes_per_token
        c["read_bytes"] += kv_read / p.gpus
        c["write_bytes"] += tokens * p.kv_bytes_per_token / p.gpus

    def _engine_steps(self, computed: int, generated: int) -> None:
        """Observe the pending engine steps, carrying the tokens of the requests just finished."""
        p = self.preset
        tokens = computed + generated
        steps = max(1, min(self.pending_steps, tokens))
        self.pending_steps = 0
        prefill_steps = min(steps, math.ceil(computed / p.chunk_tokens))
        decode_share = generated / steps
        hist = self.hists["iteration_tokens_total"]
        if prefill_steps:
            hist.add(computed / prefill_steps + decode_share, prefill_steps)
        hist.add(decode_share, steps - prefill_steps)
        self.counters["read_bytes"] += steps * p.weight_bytes_per_step / p.gpus

    def _update_gauges(self) -> None:
        p, now = self.preset, self.now
        running = waiting = 0
        kv_tokens = 0
        for r in self.in_flight:
            if r.arrival + r.frontend_s <= now < r.scheduled_at:
                waiting += 1
            elif r.scheduled_at <= now < r.finish_at:
                running += 1
                if now < r.first_token_at:
                    done = (now - r.scheduled_at) / r.prefill_s
                    context = r.cached + r.computed * done
                else:
                    context = r.prompt + r.gen * (now - r.first_token_at) / max(r.decode_s, 1e-9)
                kv_tokens += math.ceil(context / p.block_size) * p.block_size
        self.running, self.waiting = running, waiting
        self.kv_usage = min(1.0, kv_tokens / p.kv_capacity_tokens)


def split_accepted(accepted: int, steps: int, weights: Sequence[float]) -> list[int]:
    """Accepted draft tokens per position: about proportional to `weights`, each at most `steps`."""
    out: list[int] = []
    remaining = accepted
    for j, weight in enumerate(weights):
        if j == len(weights) - 1:
            out.append(remaining)
            break
        n = min(steps, remaining, round(remaining * weight / sum(weights[j:])))
        out.append(n)
        remaining -= n
    excess = out[-1] - steps if out else 0
    for j in range(len(out) - 1):
        if excess <= 0:
            break
        moved = min(steps - out[j], excess)
        out[j] += moved
        excess -= moved
    if out and out[-1] > steps:
        out[-1] = steps
    return out


# --- the exposition ---------------------------------------------------------------------


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=labels)


def _with_created(family: Metric, labels: dict[str, str], created: float) -> None:
    family.samples.append(Sample(family.name + "_created", labels, created))


class _LaneCollector(Collector):
    """Renders a lane's state as vLLM V1 writes it (names, help texts, labels, `_created`)."""

    def __init__(self, lane: SimulatedLane) -> None:
        self._lane = lane

    def collect(self) -> Iterator[Metric]:
        return iter(self._lane.families())


def lane_families(state: _LaneState, created: float) -> list[Metric]:
    """Every metric family of the lane, in vLLM's order."""
    p = state.preset
    base = ["engine", "model_name"]
    values = ["0", p.served_model]
    labelled = dict(zip(base, values, strict=True))
    fams: list[Metric] = []

    def counter(name: str, doc: str, value: float) -> None:
        fam = _counter(name, doc, base)
        fam.add_metric(values, value, created=created)
        fams.append(fam)

    def gauge(name: str, doc: str, value: float) -> None:
        fam = GaugeMetricFamily(name, doc, labels=base)
        fam.add_metric(values, value)
        fams.append(fam)

    c = state.counters
    if p.spec_k:
        counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", c["spec_drafts"])
        counter(
            "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", c["spec_draft_tokens"]
        )
        counter(
            "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", c["spec_accepted"]
        )
        fam = _counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            [*base, "position"],
        )
        for j, n in enumerate(state.per_pos):
            fam.add_metric([*values, str(j)], n, created=created)
        fams.append(fam)
    mfu = "(for Model Flops Utilization calculations)."
    counter(
        "vllm:estimated_flops_per_gpu_total",
        f"Estimated number of floating point operations per GPU {mfu}",
        c["flops"],
    )
    counter(
        "vllm:estimated_read_bytes_per_gpu_total",
        f"Estimated number of bytes read from memory per GPU {mfu}",
        c["read_bytes"],
    )
    counter(
        "vllm:estimated_write_bytes_per_gpu_total",
        f"Estimated number of bytes written to memory per GPU {mfu}",
        c["write_bytes"],
    )
    gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.", state.running
    )
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", state.waiting)
    waiting = GaugeMetricFamily(
        "vllm:num_requests_waiting_by_reason",
        "Number of waiting requests by reason.",
        labels=[*base, "reason"],
    )
    waiting.add_metric([*values, "capacity"], state.waiting)
    waiting.add_metric([*values, "deferred"], 0)
    fams.append(waiting)
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", state.kv_usage)
    counter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        c["prefix_cache_queries"],
    )
    counter(
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        c["prefix_cache_hits"],
    )
    counter(
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector cross-instance cache sharing, "
        "in terms of number of queried tokens.",
        0,
    )
    counter(
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector cross-instance cache sharing, "
        "in terms of number of cached tokens.",
        0,
    )
    counter(
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        c["preemptions"],
    )
    counter("vllm:prompt_tokens", "Number of prefill tokens processed.", c["prompt_tokens"])
    hits = c["prefix_cache_hits"]
    by_source = {
        "local_compute": c["prompt_tokens"] - hits,
        "local_cache_hit": hits,
        "external_kv_transfer": 0.0,
    }
    fam = _counter(
        "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", [*base, "source"]
    )
    for source in PROMPT_SOURCES:
        fam.add_metric([*values, source], by_source[source], created=created)
    fams.append(fam)
    counter(
        "vllm:prompt_tokens_cached",
        "Number of cached prompt tokens (local + external).",
        hits,
    )
    fam = _counter(
        "vllm:prompt_tokens_cached_by_source",
        "Prefix-cache hit tokens by the cache tier that supplied them.",
        [*base, "source"],
    )
    for source in CACHED_SOURCES:
        fam.add_metric([*values, source], hits if source == "device" else 0.0, created=created)
    fams.append(fam)
    counter(
        "vllm:generation_tokens", "Number of generation tokens processed.", c["generation_tokens"]
    )
    fam = _counter(
        "vllm:request_success",
        "Count of successfully processed requests.",
        [*base, "finished_reason"],
    )
    for reason in FINISHED_REASONS:
        fam.add_metric([*values, reason], state.success[reason], created=created)
    fams.append(fam)
    for key, doc in HISTOGRAM_DOCS:
        hist = state.hists[key]
        hfam = HistogramMetricFamily(f"vllm:{key}", doc, labels=base)
        hfam.add_metric(values, hist.cumulative(), hist.total)
        _with_created(hfam, labelled, created)
        fams.append(hfam)
    fams.append(cache_config_info(p))
    return fams


HISTOGRAM_DOCS: tuple[tuple[str, str], ...] = (
    ("request_prompt_tokens", "Number of prefill tokens processed."),
    ("request_generation_tokens", "Number of generation tokens processed."),
    ("iteration_tokens_total", "Histogram of number of tokens per engine_step."),
    ("request_max_num_generation_tokens",
     "Histogram of maximum number of requested generation tokens."),
    ("request_params_n", "Histogram of the n request parameter."),
    ("request_params_max_tokens", "Histogram of the max_tokens request parameter."),
    ("time_to_first_token_seconds", "Histogram of time to first token in seconds."),
    ("inter_token_latency_seconds", "Histogram of inter-token latency in seconds."),
    ("request_time_per_output_token_seconds",
     "Histogram of time_per_output_token_seconds per request."),
    ("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."),
    ("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."),
    ("request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request."),
    ("request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request."),
    ("request_decode_time_seconds", "Histogram of time spent in DECODE phase for request."),
    ("request_num_preemptions", "Histogram of the number of times a request was preempted."),
    (
        "request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
    ),
)  # fmt: skip


def cache_config_info(p: LanePreset) -> GaugeMetricFamily:
    """`vllm:cache_config_info`: CacheConfig fields as string labels + `engine`, no model_name."""
    labels = {
        "block_size": str(p.block_size),
        "cache_dtype": "auto",
        "enable_prefix_caching": "True",
        "engine": "0",
        "gpu_memory_utilization": str(p.gpu_memory_utilization),
        "is_attention_free": "False",
        "kv_cache_max_concurrency": str(round(p.kv_capacity_tokens / p.max_model_len, 2)),
        "kv_cache_size_tokens": str(p.kv_capacity_tokens),
        "kv_offloading_backend": "native",
        "kv_offloading_size": "None",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(p.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_caching_hash_algo": "sha256",
        "sliding_window": "None",
    }
    fam = GaugeMetricFamily(
        "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(labels)
    )
    fam.add_metric(list(labels.values()), 1.0)
    return fam


# --- the simulated lane -----------------------------------------------------------------


class _QuietHandler(WSGIRequestHandler):
    """No request log on stderr: the demo shares its terminal with the cockpit."""

    def log_message(self, format: str, *args: Any) -> None:
        return


def serve_metrics(
    registry: CollectorRegistry, port: int = 0
) -> tuple[ThreadingWSGIServer, threading.Thread]:
    """Serve the registry on 127.0.0.1 in a daemon thread, always as text format 0.0.4.

    vLLM's `/metrics` negotiates: asked for OpenMetrics 1.0 (Prometheus 2.x asks first),
    prometheus_client 0.26 writes `vllm_prompt_tokens_total` for `vllm:prompt_tokens_total`
    on sample lines. The demo serves the classic text so its names are the catalogue's.
    """

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO", "/") not in ("/metrics", "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: try /metrics\n"]
        body = generate_latest(registry)
        # a fresh header list each time: wsgiref appends Content-Length to the one it is given
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)])
        return [body]

    server = make_server(LOOPBACK, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="demo-metrics", daemon=True)
    thread.start()
    return server, thread


class SimulatedLane:
    """A vLLM V1 lane on a free loopback port whose metrics advance with time.

    `warm_start` seconds of traffic are simulated at construction, so counters are non-zero
    from the first scrape. `start()` serves `/metrics` and steps the simulation in a daemon
    thread every `interval` seconds; `step(dt)` advances it by hand (tests, benchmarks).
    """

    def __init__(
        self,
        preset: LanePreset | str = "gb300-dsv4",
        *,
        seed: int | None = 0,
        warm_start: float = 300.0,
        interval: float = 0.25,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.preset = PRESETS[preset] if isinstance(preset, str) else preset
        self.interval = interval
        self._clock = clock
        self._created = clock() - warm_start
        self._state = _LaneState(self.preset, random.Random(seed), self._created)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stepper: threading.Thread | None = None
        self._server: ThreadingWSGIServer | None = None
        self._server_thread: threading.Thread | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_LaneCollector(self))
        whole = int(warm_start)
        for _ in range(whole):
            self._state.advance(1.0)
        self._state.advance(warm_start - whole)

    @property
    def name(self) -> str:
        return self.preset.name

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"lane {self.name} is not serving; call start() first")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/metrics"

    def step(self, dt: float) -> None:
        """Advance the simulation by `dt` seconds."""
        with self._lock:
            self._state.advance(dt)

    def families(self) -> list[Metric]:
        with self._lock:
            return lane_families(self._state, self._created)

    def render(self) -> str:
        """The exposition text a scrape would return now."""
        return generate_latest(self.registry).decode()

    def start(self, port: int = 0) -> str:
        """Serve `/metrics` on 127.0.0.1 (port 0: any free one), start stepping; return the URL."""
        self._server, self._server_thread = serve_metrics(self.registry, port)
        self._stop.clear()
        self._stepper = threading.Thread(
            target=self._run, name=f"demo-lane-{self.name}", daemon=True
        )
        self._stepper.start()
        return self.url

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            self.step(now - last)
            last = now

    def stop(self) -> None:
        """Stop stepping and serving; frees the port."""
        self._stop.set()
        if self._stepper is not None:
            self._stepper.join(timeout=5)
            self._stepper = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._server_thread is not None:
                self._server_thread.join(timeout=5)
            self._server = None
            self._server_thread = None

    def __enter__(self) -> SimulatedLane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --- the simulated Hermes ---------------------------------------------------------------

HERMES_SCHEMA_VERSION = 22

# Copied from a schema-22 ledger's sqlite_master (FTS shadow tables and autoindexes are
# made by SQLite itself; long lines re-wrapped, the statements are unchanged).
HERMES_SCHEMA_V22 = """
CREATE TABLE schema_version (
    version INTEGER NOT NULL
);

CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    session_key TEXT,
    chat_id TEXT,
    chat_type TEXT,
    thread_id TEXT,
    display_name TEXT,
    origin_json TEXT,
    expiry_finalized INTEGER DEFAULT 0,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    cwd TEXT,
    git_branch TEXT,
    git_repo_root TEXT,
    billing_provider TEXT,
    billing_base_url TEXT,
    billing_mode TEXT,
    estimated_cost_usd REAL,
    actual_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    pricing_version TEXT,
    title TEXT,
    api_call_count INTEGER DEFAULT 0,
    handoff_state TEXT,
    handoff_platform TEXT,
    handoff_error TEXT,
    compression_failure_cooldown_until REAL,
    compression_failure_error TEXT,
    compression_fallback_streak INTEGER NOT NULL DEFAULT 0,
    profile_name TEXT,
    rewind_count INTEGER NOT NULL DEFAULT 0,
    archived INTEGER NOT NULL DEFAULT 0,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    effect_disposition TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    reasoning_content TEXT,
    reasoning_details TEXT,
    codex_reasoning_items TEXT,
    codex_message_items TEXT,
    platform_message_id TEXT,
    observed INTEGER DEFAULT 0,
    active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0,
    api_content TEXT
);

CREATE TABLE session_model_usage (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    billing_provider TEXT NOT NULL DEFAULT '',
    billing_base_url TEXT NOT NULL DEFAULT '',
    billing_mode TEXT NOT NULL DEFAULT '',
    task TEXT NOT NULL DEFAULT '',
    api_call_count INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    estimated_cost_usd REAL NOT NULL DEFAULT 0,
    actual_cost_usd REAL NOT NULL DEFAULT 0,
    cost_status TEXT,
    cost_source TEXT,
    first_seen REAL,
    last_seen REAL,
    PRIMARY KEY (session_id, model, billing_provider, billing_base_url, billing_mode, task)
);

CREATE TABLE state_meta (
    key TEXT PRIMARY KEY,
    value TEXT
);

CREATE TABLE gateway_routing (
    scope TEXT NOT NULL DEFAULT '',
    session_key TEXT NOT NULL,
    entry_json TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (scope, session_key)
);

CREATE TABLE compression_locks (
    session_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    acquired_at REAL NOT NULL,
    expires_at REAL NOT NULL
);

CREATE TABLE async_delegations (
    delegation_id TEXT PRIMARY KEY,
    origin_session TEXT NOT NULL,
    origin_ui_session_id TEXT NOT NULL DEFAULT '',
    parent_session_id TEXT,
    state TEXT NOT NULL,
    dispatched_at REAL NOT NULL,
    completed_at REAL,
    updated_at REAL NOT NULL,
    event_json TEXT,
    result_json TEXT,
    delivery_state TEXT NOT NULL DEFAULT 'pending',
    delivery_attempts INTEGER NOT NULL DEFAULT 0,
    delivered_at REAL,
    owner_pid INTEGER,
    owner_started_at INTEGER,
    task_json TEXT,
    delivery_claim TEXT,
    delivery_claimed_at REAL
);

CREATE INDEX idx_sessions_source ON sessions(source);

CREATE INDEX idx_sessions_source_id ON sessions(source, id);

CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);

CREATE INDEX idx_sessions_started ON sessions(started_at DESC);

CREATE INDEX idx_messages_session ON messages(session_id, timestamp);

CREATE INDEX idx_compression_locks_expires ON compression_locks(expires_at);

CREATE INDEX idx_session_model_usage_session ON session_model_usage(session_id);

CREATE INDEX idx_session_model_usage_model ON session_model_usage(model);

CREATE INDEX idx_async_delegations_delivery
    ON async_delegations(delivery_state, completed_at);

CREATE INDEX idx_messages_platform_msg_id ON messages(session_id, platform_message_id)
    WHERE platform_message_id IS NOT NULL;

CREATE INDEX idx_messages_session_active
    ON messages(session_id, active, timestamp);

CREATE INDEX idx_messages_active_null
    ON messages(active) WHERE active IS NULL;

CREATE INDEX idx_sessions_session_key
    ON sessions(session_key, started_at DESC);

CREATE INDEX idx_sessions_gateway_peer
    ON sessions(source, user_id, chat_id, chat_type, thread_id, started_at DESC);

CREATE INDEX idx_sessions_handoff_state
    ON sessions(handoff_state, started_at);

CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL;

CREATE VIRTUAL TABLE messages_fts USING fts5(
    content
);

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (
        new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' '
            || COALESCE(new.tool_calls, '')
    );
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
    INSERT INTO messages_fts(rowid, content) VALUES (
        new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' '
            || COALESCE(new.tool_calls, '')
    );
END;

CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(
    content,
    tokenize='trigram'
);

CREATE TRIGGER messages_fts_trigram_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (
        new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' '
            || COALESCE(new.tool_calls, '')
    );
END;

CREATE TRIGGER messages_fts_trigram_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts_trigram WHERE rowid = old.id;
END;

CREATE TRIGGER messages_fts_trigram_update AFTER UPDATE ON messages BEGIN
    DELETE FROM messages_fts_trigram WHERE rowid = old.id;
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (
        new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' '
            || COALESCE(new.tool_calls, '')
    );
END;

"""

CREATE_SESSION_SQL = """INSERT OR IGNORE INTO sessions (
                   id, source, user_id, model, model_config, parent_session_id, started_at,
                   cwd, chat_id, chat_type, profile_name
               ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""

TOKEN_UPDATE_DELTA_SQL = """UPDATE sessions SET
                   input_tokens = input_tokens + ?,
                   output_tokens = output_tokens + ?,
                   cache_read_tokens = cache_read_tokens + ?,
                   cache_write_tokens = cache_write_tokens + ?,
                   reasoning_tokens = reasoning_tokens + ?,
                   estimated_cost_usd = COALESCE(estimated_cost_usd, 0) + COALESCE(?, 0),
                   actual_cost_usd = CASE
                       WHEN ? IS NULL THEN actual_cost_usd
                       ELSE COALESCE(actual_cost_usd, 0) + ?
                   END,
                   cost_status = COALESCE(?, cost_status),
                   cost_source = COALESCE(?, cost_source),
                   pricing_version = COALESCE(?, pricing_version),
                   billing_provider = COALESCE(billing_provider, ?),
                   billing_base_url = COALESCE(billing_base_url, ?),
                   billing_mode = COALESCE(billing_mode, ?),
                   model = COALESCE(model, ?),
                   api_call_count = COALESCE(api_call_count, 0) + ?
                   WHERE id = ?"""

MODEL_USAGE_UPSERT_SQL = """INSERT INTO session_model_usage (
                   session_id, model, billing_provider, billing_base_url, billing_mode,
                   task, api_call_count, input_tokens, output_tokens,
                   cache_read_tokens, cache_write_tokens, reasoning_tokens,
                   estimated_cost_usd, actual_cost_usd, cost_status, cost_source,
                   first_seen, last_seen
               ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT(session_id, model, billing_provider, billing_base_url, billing_mode,
                           task)
               DO UPDATE SET
                   api_call_count = api_call_count + excluded.api_call_count,
                   input_tokens = input_tokens + excluded.input_tokens,
                   output_tokens = output_tokens + excluded.output_tokens,
                   cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
                   cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
                   reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
                   estimated_cost_usd = estimated_cost_usd + excluded.estimated_cost_usd,
                   actual_cost_usd = actual_cost_usd + excluded.actual_cost_usd,
                   cost_status = COALESCE(excluded.cost_status, cost_status),
                   cost_source = COALESCE(excluded.cost_source, cost_source),
                   last_seen = excluded.last_seen"""

END_SESSION_SQL = (
    "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL"
)
SET_TITLE_SQL = "UPDATE sessions SET title = ? WHERE id = ?"


@dataclass(frozen=True, slots=True)
class Route:
    """A model as Hermes stores it, and how it is billed."""

    model: str
    provider: str
    base_url: str
    prices: tuple[float, float, float, float] | None
    """$ per million (input, cache read, cache write, output); None when unknown (local)."""
    reasoning_share: float
    context: int
    reports_cache: bool = True


ROUTES: dict[str, Route] = {
    r.model: r
    for r in (
        Route("claude-sonnet-4.6", "anthropic", "https://api.anthropic.invalid",
              (3.0, 0.30, 3.75, 15.0), 0.15, 400_000),
        Route("openrouter/anthropic/claude-sonnet-4.6", "openrouter",
              "https://openrouter.invalid/api/v1", (3.0, 0.30, 3.75, 15.0), 0.15, 400_000),
        Route("gpt-5.4", "openai", "https://api.openai.invalid/v1",
              (1.25, 0.125, 0.0, 10.0), 0.40, 400_000),
        Route("openrouter/qwen/qwen3-coder", "openrouter", "https://openrouter.invalid/api/v1",
              (0.22, 0.022, 0.0, 0.95), 0.0, 256_000),
        Route("deepseek-ai/DeepSeek-V3", "custom", "http://127.0.0.1:8000/v1",
              None, 0.20, 500_000, reports_cache=False),
        Route("meta-llama/Llama-3.1-8B-Instruct", "custom", "http://127.0.0.1:8001/v1",
              None, 0.0, 120_000, reports_cache=False),
    )
}  # fmt: skip
"""Includes the two demo lanes' models (provider `custom`) and provider-prefixed names."""

SOURCE_ROUTES: dict[str, dict[str, int]] = {
    "desktop": {"claude-sonnet-4.6": 6, "openrouter/anthropic/claude-sonnet-4.6": 1, "gpt-5.4": 4,
                "deepseek-ai/DeepSeek-V3": 1},
    "cli": {"claude-sonnet-4.6": 4, "gpt-5.4": 2, "openrouter/qwen/qwen3-coder": 2,
            "deepseek-ai/DeepSeek-V3": 1},
    "tui": {"claude-sonnet-4.6": 3, "deepseek-ai/DeepSeek-V3": 1,
            "meta-llama/Llama-3.1-8B-Instruct": 1},
    "telegram": {"gpt-5.4": 3, "openrouter/anthropic/claude-sonnet-4.6": 1,
                 "meta-llama/Llama-3.1-8B-Instruct": 1},
    "cron": {"meta-llama/Llama-3.1-8B-Instruct": 2, "openrouter/qwen/qwen3-coder": 2, "gpt-5.4": 1},
    "subagent": {"openrouter/qwen/qwen3-coder": 3, "deepseek-ai/DeepSeek-V3": 1,
                 "claude-sonnet-4.6": 2},
}  # fmt: skip
SOURCE_WEIGHTS: dict[str, int] = {
    "desktop": 80, "cli": 55, "tui": 30, "telegram": 30, "cron": 35, "subagent": 50,
}  # fmt: skip
CALLS_MEDIAN: dict[str, float] = {
    "desktop": 24, "cli": 28, "tui": 18, "telegram": 8, "cron": 5, "subagent": 14,
}  # fmt: skip
END_REASONS: dict[str, str] = {
    "desktop": "agent_close", "cli": "cli_close", "tui": "cli_close",
    "telegram": "session_reset", "cron": "cron_complete", "subagent": "agent_close",
}  # fmt: skip
INTERACTIVE = frozenset({"desktop", "cli", "tui", "telegram"})
TITLE_VERBS = (
    "Fix",
    "Refactor",
    "Review",
    "Debug",
    "Draft",
    "Plan",
    "Benchmark",
    "Profile",
    "Trace",
)
TITLE_NOUNS = (
    "ledger tailer", "prefix cache stats", "CI pipeline", "config loader", "GPU memory spike",
    "retry policy", "metrics scrape", "tmux layout", "roofline plot", "queue latency",
)  # fmt: skip
TITLE_ROUTE = Route("gemini-3-flash", "google", "https://generativelanguage.invalid/v1beta",
                    (0.30, 0.03, 0.0, 2.50), 0.0, 1_000_000)  # fmt: skip


@dataclass(slots=True)
class _Session:
    """A session being written: what it will do and how far it got."""

    id: str
    source: str
    route: Route
    calls: int
    base: int
    growth: int
    started_at: float
    parent_id: str | None = None
    done: int = 0
    prev_prompt: int = 0


@dataclass(frozen=True, slots=True)
class CallUsage:
    """One API call's usage delta, as Hermes adds it to the session row."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    prompt: int

    def cost(self, route: Route) -> float | None:
        if route.prices is None:
            return None
        p_in, p_read, p_write, p_out = route.prices
        return (
            self.input_tokens * p_in
            + self.cache_read_tokens * p_read
            + self.cache_write_tokens * p_write
            + self.output_tokens * p_out
        ) / 1e6


def _is_lock_error(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SimulatedHermes:
    """Writes a Hermes schema-22 `state.db` with Hermes's statements: history, then live calls.

    `start()` seeds `history_sessions` sessions over the past `history_days` days (a few left
    open), then writes one API call every ~`interval` seconds in a daemon thread until `close()`.
    """

    WRITE_RETRIES = 15
    CHECKPOINT_EVERY = 50
    LIVE_SESSIONS = 3

    def __init__(
        self,
        path: Path | str,
        *,
        seed: int | None = 0,
        history_sessions: int = 200,
        history_days: float = 30.0,
        open_sessions: int = 3,
        interval: float = 0.3,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.interval = interval
        self.history_sessions = history_sessions
        self.history_days = history_days
        self.open_sessions = open_sessions
        self._clock = clock
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: list[_Session] = []
        self._titles: set[str] = set()
        self._conn = sqlite3.connect(
            self.path, timeout=1.0, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self.writes = 0
        """Committed write transactions."""
        self.busy_errors = 0
        """Write attempts that met SQLITE_BUSY / `database is locked` (then retried)."""
        self.error = ""
        """Why the live writer stopped early, if it did."""
        self._create_schema()

    # - writing, the way Hermes does -

    def _create_schema(self) -> None:
        if self._conn.execute("SELECT name FROM sqlite_master WHERE name='sessions'").fetchone():
            return
        self._conn.executescript(HERMES_SCHEMA_V22)
        self._execute_write(
            lambda c: c.execute(
                "INSERT INTO schema_version (version) VALUES (?)", (HERMES_SCHEMA_VERSION,)
            )
        )

    def _execute_write(self, work: Callable[[sqlite3.Connection], object]) -> None:
        """One `BEGIN IMMEDIATE` transaction, retried with jitter when the database is locked."""
        with self._lock:
            for attempt in range(self.WRITE_RETRIES):
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    if not _is_lock_error(exc) or attempt == self.WRITE_RETRIES - 1:
                        raise
                    self.busy_errors += 1
                    time.sleep(self._rng.uniform(0.02, 0.15))
                    continue
                try:
                    work(self._conn)
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                break
            self.writes += 1
            if self.writes % self.CHECKPOINT_EVERY == 0:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _create_session(self, c: sqlite3.Connection, s: _Session) -> None:
        rng = self._rng
        config = json.dumps({"provider": s.route.provider, "max_iterations": 90})
        cwd = rng.choice(("/home/dev/src/cockpit", "/home/dev/src/api", "/home/dev/notes"))
        telegram = s.source == "telegram"
        c.execute(
            CREATE_SESSION_SQL,
            (
                s.id, s.source, str(700100 + rng.randrange(3)) if telegram else None,
                s.route.model, config, s.parent_id, s.started_at,
                None if telegram or s.source == "cron" else cwd,
                str(-100200 - rng.randrange(4)) if telegram else None,
                "dm" if telegram else None,
                "work" if rng.random() < 0.25 else None,
            ),
        )  # fmt: skip

    def _call_usage(self, s: _Session) -> CallUsage:
        """The next call of a session: the context grows each turn and mostly hits the cache."""
        rng, route = self._rng, s.route
        prompt = min(s.base + s.done * s.growth + rng.randrange(0, 3000), route.context)
        if not route.reports_cache:
            cached = int(prompt * rng.uniform(0.0, 0.04))
        elif s.done == 0:
            cached = int(s.base * rng.uniform(0.0, 0.7))
        else:
            cached = int(min(s.prev_prompt, prompt) * rng.uniform(0.80, 0.99))
        fresh = prompt - cached
        anthropic = route.provider == "anthropic" or "anthropic/" in route.model
        cache_write = int(fresh * rng.uniform(0.6, 0.95)) if anthropic else 0
        output = max(1, int(rng.lognormvariate(math.log(480), 1.0)))
        reasoning = min(output, int(output * route.reasoning_share * rng.uniform(0.5, 1.5)))
        return CallUsage(fresh - cache_write, output, cached, cache_write, reasoning, prompt)

    def _record_call(self, c: sqlite3.Connection, s: _Session, when: float) -> None:
        """`update_token_counts(..., api_call_count=1)`: the session row and the per-model row."""
        u = self._call_usage(s)
        route = s.route
        cost = u.cost(route)
        status = "unknown" if cost is None else "estimated"
        source = "none" if cost is None else "official_docs_snapshot"
        c.execute(
            TOKEN_UPDATE_DELTA_SQL,
            (
                u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens,
                u.reasoning_tokens, cost, None, None, status, source, None,
                route.provider, route.base_url, None, route.model, 1, s.id,
            ),
        )  # fmt: skip
        self._upsert_model_usage(c, s.id, route, u, cost, status, source, "", when)
        s.done += 1
        s.prev_prompt = u.prompt

    def _upsert_model_usage(
        self,
        c: sqlite3.Connection,
        session_id: str,
        route: Route,
        u: CallUsage,
        cost: float | None,
        status: str | None,
        source: str | None,
        task: str,
        when: float,
    ) -> None:
        c.execute(
            MODEL_USAGE_UPSERT_SQL,
            (
                session_id, route.model, route.provider, route.base_url, "", task, 1,
                u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens,
                u.reasoning_tokens, float(cost or 0.0), 0.0, status, source, when, when,
            ),
        )  # fmt: skip

    def _title(self, c: sqlite3.Connection, s: _Session, when: float) -> None:
        """Title generation: a side call recorded only in `session_model_usage`, then the title."""
        rng = self._rng
        u = CallUsage(300 + rng.randrange(500), 8 + rng.randrange(16), 0, 0, 0, 0)
        self._upsert_model_usage(
            c, s.id, TITLE_ROUTE, u, u.cost(TITLE_ROUTE), None, None, "title_generation", when
        )
        title = f"{rng.choice(TITLE_VERBS)} {rng.choice(TITLE_NOUNS)}"
        suffix = 2
        candidate = title
        while candidate in self._titles:
            candidate = f"{title} #{suffix}"
            suffix += 1
        self._titles.add(candidate)
        c.execute(SET_TITLE_SQL, (candidate, s.id))

    # - planning sessions -

    def _new_session(self, started_at: float, source: str | None = None) -> _Session:
        rng = self._rng
        if source is None:
            source = _pick(rng, SOURCE_WEIGHTS)
        route = ROUTES[_pick(rng, SOURCE_ROUTES[source])]
        calls = int(rng.lognormvariate(math.log(CALLS_MEDIAN[source]), 0.7))
        stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(started_at))
        if source == "cron":
            sid = f"cron_{rng.getrandbits(48):012x}_{stamp}"
        else:
            sid = f"{stamp}_{rng.getrandbits(24):06x}"
        return _Session(
            id=sid,
            source=source,
            route=route,
            calls=max(1, min(120, calls)),
            base=rng.randrange(12_000, 30_000),
            growth=rng.randrange(4_000, 12_000),
            started_at=started_at,
        )

    def _plan_history(self, now: float) -> list[_Session]:
        rng = self._rng
        sessions: list[_Session] = []
        for _ in range(self.history_sessions):
            while True:
                t = now - rng.uniform(2 * 3600, self.history_days * DAY)
                if 7 <= time.gmtime(t).tm_hour <= 23 or rng.random() < 0.2:
                    break
            sessions.append(self._new_session(t))
        parents = [s for s in sessions if s.source in ("desktop", "cli", "tui")]
        for s in sessions:
            if s.source == "subagent" and parents:
                parent = rng.choice(parents)
                s.parent_id = parent.id
                s.started_at = parent.started_at + rng.uniform(60, 900)
        sessions.sort(key=lambda s: s.started_at)
        interactive = [s for s in sessions if s.source in INTERACTIVE]
        for s in rng.sample(interactive, min(self.open_sessions, len(interactive))):
            s.started_at = now - rng.uniform(5 * 60, 50 * 60)  # inside the default 1h window
            s.calls = max(s.calls, 40)  # still going: the live writer continues it
            self._live.append(s)
        return sessions

    def seed_history(self) -> None:
        """Write the past sessions (one transaction; timestamps from the plan, not the clock)."""
        now = self._clock()
        sessions = self._plan_history(now)
        live_ids = {s.id for s in self._live}

        def work(c: sqlite3.Connection) -> None:
            for s in sessions:
                self._create_session(c, s)
                t = s.started_at
                calls = s.calls if s.id not in live_ids else s.calls // 3
                for _ in range(calls):
                    t += self._rng.uniform(15, 150)
                    if t > now - 30:
                        break
                    self._record_call(c, s, t)
                if s.source in INTERACTIVE and self._rng.random() < 0.6:
                    self._title(c, s, s.started_at + self._rng.uniform(3, 12))
                if s.id not in live_ids:
                    c.execute(END_SESSION_SQL, (min(t + 30, now - 30), END_REASONS[s.source], s.id))

        self._execute_write(work)

    # - live writing -

    def write_call(self) -> None:
        """One live step: maybe open a session, then one API call (ending the session when done)."""
        now = self._clock()
        if len(self._live) < self.LIVE_SESSIONS or self._rng.random() < 0.01:
            s = self._new_session(now)
            self._execute_write(lambda c: self._create_session(c, s))
            self._live.append(s)
        s = self._rng.choice(self._live)
        self._execute_write(lambda c: self._record_call(c, s, now))
        if s.done == 1 and s.source in INTERACTIVE and self._rng.random() < 0.6:
            self._execute_write(lambda c: self._title(c, s, now))
        if s.done >= s.calls:
            self._live.remove(s)
            self._execute_write(
                lambda c: c.execute(END_SESSION_SQL, (now, END_REASONS[s.source], s.id))
            )

    def start(self) -> SimulatedHermes:
        """Seed the history (if the ledger is empty) and start writing live."""
        if not self._conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchone():
            self.seed_history()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="demo-hermes", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval * self._rng.uniform(0.5, 1.5)):
            try:
                self.write_call()
            except sqlite3.Error as exc:
                self.error = f"the simulated Hermes stopped writing {self.path}: {exc}"
                return

    def close(self) -> None:
        """Stop the writer and close the ledger (the file stays)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SimulatedHermes:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _pick(rng: random.Random, weights: dict[str, int]) -> str:
    keys = list(weights)
    return rng.choices(keys, [weights[k] for k in keys])[0]


# --- a real Prometheus scraping the lanes (optional) ------------------------------------


def free_port() -> int:
    """A loopback port free right now (the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _loopback_get(url: str, timeout: float = 1.0) -> bytes:
    """GET a loopback URL, never through a proxy from the environment."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        body: bytes = response.read()
        return body


def prometheus_config(targets: dict[str, str], interval_s: float = 1.0) -> str:
    """A Prometheus config scraping each `name -> host:port` as job `name`."""
    config = {
        "global": {"scrape_interval": f"{interval_s:g}s", "evaluation_interval": "15s"},
        "scrape_configs": [
            {"job_name": name, "static_configs": [{"targets": [target]}]}
            for name, target in targets.items()
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


class DemoPrometheus:
    """Debian's `prometheus` on a free loopback port, with temp config and storage."""

    def __init__(self, binary: str, folder: Path, targets: dict[str, str]) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "prometheus.yml"
        config.write_text(prometheus_config(targets))
        self._log = (folder / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address={LOOPBACK}:{self.port}",
                "--storage.tsdb.retention.time=1d",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited with {self._process.returncode}; "
                    f"see {self.folder / 'prometheus.log'}"
                )
            try:
                _loopback_get(f"{self.url}/-/ready", timeout=0.5)
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        raise RuntimeError(f"prometheus was not ready on {self.url} within {timeout:g} s")

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)
        self._log.close()


# --- the whole demo ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DemoLaneConfig:
    """What the cockpit's config needs to read one demo lane."""

    name: str
    engine: str
    hardware: str
    model: str
    metrics_url: str
    prometheus_url: str | None
    selector: str
    gpus: int
    chunk_tokens: int


@dataclass(slots=True)
class Demo:
    """Both simulated lanes and the simulated Hermes in a temp folder; `stop()` removes it all.

    Use as a context manager or call `start()` / `stop()`. With `with_prometheus=True` and a
    `prometheus` binary on PATH, a real Prometheus scrapes the lanes every second.
    """

    presets: tuple[str, ...] = ("gb300-dsv4", "h100-llama8b")
    seed: int | None = 0
    warm_start: float = 300.0
    with_prometheus: bool = False
    history_sessions: int = 200
    folder: Path | None = None
    lanes: dict[str, SimulatedLane] = field(default_factory=dict)
    lane_urls: dict[str, str] = field(default_factory=dict)
    hermes: SimulatedHermes | None = None
    prometheus: DemoPrometheus | None = None
    prometheus_note: str = ""
    """Why there is no Prometheus when one was asked for."""

    @property
    def ledger_path(self) -> Path:
        if self.folder is None:
            raise RuntimeError("the demo is not started")
        return self.folder / "state.db"

    @property
    def prometheus_url(self) -> str | None:
        return self.prometheus.url if self.prometheus is not None else None

    def start(self) -> Demo:
        self.folder = Path(tempfile.mkdtemp(prefix="lane-cockpit-demo-"))
        try:
            for i, name in enumerate(self.presets):
                seed = None if self.seed is None else self.seed + i
                lane = SimulatedLane(name, seed=seed, warm_start=self.warm_start)
                self.lanes[name] = lane
                self.lane_urls[name] = lane.start()
            self.hermes = SimulatedHermes(
                self.ledger_path, seed=self.seed, history_sessions=self.history_sessions
            ).start()
            if self.with_prometheus:
                self._start_prometheus()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_prometheus(self) -> None:
        binary = shutil.which("prometheus")
        if binary is None or self.folder is None:
            self.prometheus_note = "prometheus is not on PATH; the lanes are scraped directly"
            return
        targets = {name: f"{LOOPBACK}:{lane.port}" for name, lane in self.lanes.items()}
        self.prometheus = DemoPrometheus(binary, self.folder / "prometheus", targets)
        self.prometheus.wait_ready()

    def lane_configs(self) -> list[DemoLaneConfig]:
        return [
            DemoLaneConfig(
                name=name,
                engine="vllm",
                hardware=lane.preset.hardware,
                model=lane.preset.model,
                metrics_url=self.lane_urls[name],
                prometheus_url=self.prometheus_url,
                selector=f'job="{name}"',
                gpus=lane.preset.gpus,
                chunk_tokens=lane.preset.chunk_tokens,
            )
            for name, lane in self.lanes.items()
        ]

    def stop(self) -> None:
        """Stop Prometheus, the lanes and the writer, then remove the temp folder."""
        if self.prometheus is not None:
            self.prometheus.stop()
            self.prometheus = None
        for lane in self.lanes.values():
            lane.stop()
        self.lanes.clear()
        self.lane_urls.clear()
        if self.hermes is not None:
            self.hermes.close()
            self.hermes = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> Demo:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def demo_config_data(demo: Demo) -> dict[str, Any]:
    """The demo as config data: each lane (Prometheus + selector, or its /metrics), the ledger."""
    lanes: list[dict[str, Any]] = []
    for lane in demo.lane_configs():
        entry: dict[str, Any] = {
            "name": lane.name,
            "engine": lane.engine,
            "hardware": lane.hardware,
            "model": lane.model,
            "gpus": lane.gpus,
            "chunk_tokens": lane.chunk_tokens,
        }
        if lane.prometheus_url is not None:
            entry["prometheus"] = lane.prometheus_url
            entry["selector"] = lane.selector
        else:
            entry["metrics_url"] = lane.metrics_url
        lanes.append(entry)
    return {"lanes": lanes, "ledgers": [str(demo.ledger_path)]}


def demo_config_yaml(demo: Demo) -> str:
    """`demo_config_data` as config-file YAML."""
    return yaml.safe_dump(demo_config_data(demo), sort_keys=False)


def demo_config(
    demo: Demo,
    hardware: Mapping[str, Hardware] | None = None,
    models: Mapping[str, ModelProfile] | None = None,
) -> Config:
    """The cockpit's config for the running demo, parsed like a config file would be."""
    return parse_config(demo_config_yaml(demo), "<cockpit demo>", hardware, models)

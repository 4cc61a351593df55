"""A simulated vLLM V1 lane: `/metrics` on loopback, moving in the agent-era shape."""

from __future__ import annotations

import bisect
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

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

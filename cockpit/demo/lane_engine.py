"""A simulated vLLM V1 engine: requests drawn from a lane preset, its counters and histograms
advanced with simulated time. No I/O: `cockpit.demo.lane` serves it as `/metrics`."""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from prometheus_client.utils import floatToGoString

from cockpit.demo.lane_presets import (
    ITERATION_TOKENS_BUCKETS,
    ITL_BUCKETS,
    LOOKUP_SYNC_BUCKETS,
    NIXL_BYTES_BUCKETS,
    NIXL_DESCRIPTOR_BUCKETS,
    NIXL_POST_BUCKETS,
    PARAMS_N_BUCKETS,
    PREEMPTIONS_BUCKETS,
    REQUEST_LATENCY_BUCKETS,
    TRANSFER_SIZE_BUCKETS,
    TTFT_BUCKETS,
    ConnectorShape,
    LanePreset,
    request_token_buckets,
)


def _go_float(value: float) -> str:
    """A bucket bound as prometheus_client writes `le` (`1.0`, `+Inf`)."""
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


class Histogram:
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
    kv: KvMoves | None = None

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
    def external(self) -> int:
        return self.kv.loaded if self.kv else 0

    @property
    def computed(self) -> int:
        return self.prompt - self.cached - self.external


@dataclass(frozen=True, slots=True)
class KvMoves:
    """What one request's KV connectors did (sizes in tokens, times in seconds)."""

    queried: int
    """Prompt tokens the connectors were asked for: those the GPU cache lacked."""
    lookup_s: float
    host: int = 0
    """Prompt tokens loaded from the CPU tier."""
    p2p: int = 0
    """Prompt tokens read from the prefill peer over NIXL."""
    load_s: float = 0.0
    xfer_s: float = 0.0
    post_s: float = 0.0
    nixl_failed: bool = False
    notify_failed: bool = False
    stored: int = 0
    store_s: float = 0.0
    skipped_blocks: int = 0
    alloc_failed: bool = False

    @property
    def loaded(self) -> int:
        """Prompt tokens whose KV the connectors brought: not computed here."""
        return self.host + self.p2p

    @property
    def wait_s(self) -> float:
        """Time the request waits for its KV before its prefill computes."""
        return self.load_s + self.xfer_s


class ConnectorState:
    """The connectors' counters and histograms, drawn from their own generator so a lane's
    traffic is the same with or without them."""

    def __init__(self, shape: ConnectorShape, preset: LanePreset, rng: random.Random) -> None:
        self.shape, self.preset, self.rng = shape, preset, rng
        self.counters: dict[str, float] = dict.fromkeys(CONNECTOR_KEYS, 0.0)
        self.hists = {
            "load_size": Histogram(TRANSFER_SIZE_BUCKETS),
            "store_size": Histogram(TRANSFER_SIZE_BUCKETS),
            "lookup_sync_delay_seconds": Histogram(LOOKUP_SYNC_BUCKETS),
            "xfer_time_seconds": Histogram(NIXL_POST_BUCKETS[1:]),
            "post_time_seconds": Histogram(NIXL_POST_BUCKETS),
            "bytes_transferred": Histogram(NIXL_BYTES_BUCKETS),
            "num_descriptors": Histogram(NIXL_DESCRIPTOR_BUCKETS),
        }
        self.cpu_blocks = shape.cpu_bytes // (preset.block_size * preset.kv_bytes_per_token)
        self.usage = 0.0

    def _seconds(self, tokens: int, bytes_s: float) -> float:
        jitter = self.rng.lognormvariate(0.0, 0.15)
        return tokens * self.preset.kv_bytes_per_token / bytes_s * jitter

    def draw(self, prompt: int, cached: int) -> KvMoves:
        """The connectors' part in one request: the peer's KV or the CPU tier's, then the
        new whole blocks stored to the CPU tier. One prompt token is always computed."""
        shape, rng, block = self.shape, self.rng, self.preset.block_size
        lacked = (prompt - cached - 1) // block * block
        moves = KvMoves(prompt - cached, rng.lognormvariate(math.log(4e-5), 0.5))
        if lacked > 0 and rng.random() < shape.p2p_share:
            moves = self._from_peer(moves, lacked)
        elif lacked > 0:
            share = rng.betavariate(6 * shape.host_hit_mean, 6 * (1 - shape.host_hit_mean))
            host = int(lacked * share) // block * block
            moves = replace(moves, host=host, load_s=self._seconds(host, shape.load_bytes_s))
        new_blocks = (prompt - cached - moves.host) // block
        if new_blocks and rng.random() < shape.skip_share:
            return replace(moves, skipped_blocks=new_blocks)
        if new_blocks and rng.random() < shape.alloc_failure_p:
            return replace(moves, alloc_failed=True)
        stored = new_blocks * block
        return replace(moves, stored=stored, store_s=self._seconds(stored, shape.store_bytes_s))

    def _from_peer(self, moves: KvMoves, tokens: int) -> KvMoves:
        """The prompt's KV read from the prefill peer over NIXL; a failed read is recomputed."""
        shape, rng = self.shape, self.rng
        failed = rng.random() < shape.nixl_failure_p
        xfer = 0.0 if failed else shape.nixl_latency_s + self._seconds(tokens, shape.nixl_bytes_s)
        return replace(
            moves,
            p2p=0 if failed else tokens,
            xfer_s=xfer,
            post_s=rng.lognormvariate(math.log(3e-4), 0.3),
            nixl_failed=failed,
            notify_failed=rng.random() < shape.notify_failure_p,
        )

    def record(self, m: KvMoves) -> None:
        c, h, per_token = self.counters, self.hists, self.preset.kv_bytes_per_token
        c["queries"] += m.queried
        c["host"] += m.host
        c["p2p"] += m.p2p
        h["lookup_sync_delay_seconds"].add(m.lookup_s)
        for way, tokens, seconds in (("load", m.host, m.load_s), ("store", m.stored, m.store_s)):
            if tokens:
                c[f"{way}_bytes"] += tokens * per_token
                c[f"{way}_time"] += seconds
                h[f"{way}_size"].add(tokens * per_token)
        c["stores_skipped"] += m.skipped_blocks
        c["allocation_failure"] += m.alloc_failed
        c["num_failed_transfers"] += m.nixl_failed
        c["num_failed_notifications"] += m.notify_failed
        if m.p2p:
            h["xfer_time_seconds"].add(m.xfer_s)
            h["post_time_seconds"].add(m.post_s)
            h["bytes_transferred"].add(m.p2p * per_token)
            # one descriptor per block in each region NIXL registered: a layer's K, its V
            h["num_descriptors"].add(m.p2p // self.preset.block_size * 2 * self.preset.layers)

    def pinned_blocks(self, m: KvMoves) -> float:
        """CPU blocks a request's transfers hold while its prefill runs."""
        return (m.host + m.stored) / self.preset.block_size


FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHED_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
CONNECTOR_KEYS = (
    "queries", "host", "p2p", "load_bytes", "load_time", "store_bytes", "store_time",
    "stores_skipped", "allocation_failure", "num_failed_transfers", "num_failed_notifications",
)  # fmt: skip
COUNTER_KEYS = (
    "prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits",
    "preemptions", "spec_drafts", "spec_draft_tokens", "spec_accepted",
    "flops", "read_bytes", "write_bytes",
)  # fmt: skip


class LaneState:
    """Counters, histograms and in-flight requests of one simulated lane."""

    def __init__(
        self,
        preset: LanePreset,
        rng: random.Random,
        start: float,
        connector: ConnectorState | None = None,
    ) -> None:
        self.preset = preset
        self.rng = rng
        self.connector = connector
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
        self.hists: dict[str, Histogram] = {
            "time_to_first_token_seconds": Histogram(TTFT_BUCKETS),
            "inter_token_latency_seconds": Histogram(ITL_BUCKETS),
            "request_time_per_output_token_seconds": Histogram(ITL_BUCKETS),
            "e2e_request_latency_seconds": Histogram(latency),
            "request_queue_time_seconds": Histogram(latency),
            "request_inference_time_seconds": Histogram(latency),
            "request_prefill_time_seconds": Histogram(latency),
            "request_decode_time_seconds": Histogram(latency),
            "request_prompt_tokens": Histogram(tokens),
            "request_generation_tokens": Histogram(tokens),
            "request_prefill_kv_computed_tokens": Histogram(tokens),
            "request_max_num_generation_tokens": Histogram(tokens),
            "request_params_max_tokens": Histogram(tokens),
            "request_params_n": Histogram(PARAMS_N_BUCKETS),
            "request_num_preemptions": Histogram(PREEMPTIONS_BUCKETS),
            "iteration_tokens_total": Histogram(ITERATION_TOKENS_BUCKETS),
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
        kv = self.connector.draw(prompt, cached) if self.connector else None
        computed = prompt - cached - (kv.loaded if kv else 0)
        gen = self._gen_len()
        reason = "stop"
        if gen >= p.max_tokens:
            gen, reason = p.max_tokens, "length"
        elif rng.random() < 0.005:
            reason = "abort"
        steps, accepted = self._decode_steps(gen)
        itl = p.step_s * rng.lognormvariate(0.0, 0.12) * (1 + prompt / 2_000_000)
        prefill = computed / p.prefill_rate * rng.lognormvariate(0.0, 0.2) + p.step_s / 2
        prefill += kv.wait_s if kv else 0.0
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
            kv=kv,
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
        if self.connector and r.kv:
            self.connector.record(r.kv)
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
        present = r.prompt - r.computed  # KV already there: the GPU's hit and what was loaded
        attention_pairs = r.computed * (present + r.computed / 2) + r.gen * (r.prompt + r.gen / 2)
        c["flops"] += (
            2 * p.active_params * tokens + 4 * p.layers * p.hidden * attention_pairs
        ) / p.gpus
        kv_read = (present + r.steps * (r.prompt + r.gen / 2)) * p.kv_bytes_per_token
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
        pinned = 0.0
        for r in self.in_flight:
            if r.arrival + r.frontend_s <= now < r.scheduled_at:
                waiting += 1
            elif r.scheduled_at <= now < r.finish_at:
                running += 1
                if now < r.first_token_at:
                    done = (now - r.scheduled_at) / r.prefill_s
                    context = r.prompt - r.computed + r.computed * done
                    if self.connector and r.kv:
                        pinned += self.connector.pinned_blocks(r.kv)
                else:
                    context = r.prompt + r.gen * (now - r.first_token_at) / max(r.decode_s, 1e-9)
                kv_tokens += math.ceil(context / p.block_size) * p.block_size
        self.running, self.waiting = running, waiting
        self.kv_usage = min(1.0, kv_tokens / p.kv_capacity_tokens)
        if self.connector:
            self.connector.usage = min(1.0, pinned / self.connector.cpu_blocks)


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

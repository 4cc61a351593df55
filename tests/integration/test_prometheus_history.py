"""PrometheusSource against a real Prometheus loaded with generated history (promtool).

Expected figures are computed here from the generated samples with Prometheus's documented
`increase()` rule (range inclusive at both ends in 2.x, extrapolation to the window edges).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator

import pytest

from cockpit.sources.prometheus import FRESH_KEYS, PrometheusSource
from tests.support.promharness import (
    OpenMetricsWriter,
    PromServer,
    remote_write,
)

pytestmark = pytest.mark.prometheus

STEP = 60
END = 1_790_000_000 - (1_790_000_000 % 3600)
"""Evaluation time: a whole hour, well in the past, so every sample sits on a STEP multiple."""
START = END - 3 * 3600
WINDOW = 3600
RESET_AT = END - 1800
SWAP_AT = END - 2400
LEGACY_FROM = END - 1800

Series = list[tuple[float, float]]


def prom_increase(samples: Series, start: float, end: float) -> float | None:
    """Prometheus 2.x `increase()` of one series over [start, end]."""
    points = [(t, v) for t, v in samples if start <= t <= end]
    if len(points) < 2:
        return None
    raw = points[-1][1] - points[0][1]
    raw += sum(prev for (_, prev), (_, cur) in itertools.pairwise(points) if cur < prev)
    sampled = points[-1][0] - points[0][0]
    average = sampled / (len(points) - 1)
    to_start = points[0][0] - start
    to_end = end - points[-1][0]
    if raw > 0 and points[0][1] >= 0:
        to_start = min(to_start, sampled * points[0][1] / raw)
    threshold = average * 1.1
    extrapolated = sampled
    extrapolated += to_start if to_start < threshold else average / 2
    extrapolated += to_end if to_end < threshold else average / 2
    return raw * extrapolated / sampled


def gauge_mean(
    series: list[Series], combine: Callable[[list[float]], float], start: int, end: int
) -> float:
    """Prometheus's `avg_over_time(combine(x)[W:15s])`: per 15 s step, the newest sample of
    each series within the 5 m lookback (inclusive), combined, then averaged over the steps."""
    step, lookback = 15, 300
    values = []
    for at in range(-(-start // step) * step, end + 1, step):
        seen = []
        for samples in series:
            recent = [v for t, v in samples if at - lookback <= t <= at]
            if recent:
                seen.append(recent[-1])
        if seen:
            values.append(combine(seen))
    return sum(values) / len(values)


def counter(rng: random.Random, times: list[int], reset_at: int | None = None) -> Series:
    value, series = float(rng.randint(0, 50)), []
    for t in times:
        if reset_at is not None and t == reset_at:
            value = 0.0
        value += rng.randint(0, 40)
        series.append((float(t), value))
    return series


class History:
    """Generated series, kept by (sample name, labels) for the expected values."""

    def __init__(self) -> None:
        self.writer = OpenMetricsWriter()
        self.series: list[tuple[str, dict[str, str], Series]] = []

    def add(self, family: str, kind: str, name: str, labels: dict[str, str], s: Series) -> None:
        self.writer.add(family, kind, name, labels, s)
        self.series.append((name, labels, s))

    def matching(self, name: str, **labels: str) -> Iterator[Series]:
        for sample_name, sample_labels, samples in self.series:
            if sample_name == name and all(sample_labels.get(k) == v for k, v in labels.items()):
                yield samples

    def increase(self, name: str, **labels: str) -> float | None:
        found = [prom_increase(s, END - WINDOW, END) for s in self.matching(name, **labels)]
        numbers = [f for f in found if f is not None]
        return sum(numbers) if numbers else None


LEN_BOUNDS = ("10.0", "100.0", "1000.0", "+Inf")
VLLM_COUNTERS = (
    "vllm:request_success_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
)
VLLM_PHASES = (
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_prefill_kv_computed_tokens",
)


def _histogram(
    h: History,
    rng: random.Random,
    base: str,
    labels: dict[str, str],
    times: list[int],
    reset_at: int | None,
) -> None:
    per_bucket = [counter(rng, times, reset_at) for _ in LEN_BOUNDS]
    cumulative: list[Series] = []
    running = [(float(t), 0.0) for t in times]
    for bucket in per_bucket:
        running = [(t, acc + v) for (t, acc), (_, v) in zip(running, bucket, strict=True)]
        cumulative.append(running)
    for le, series in zip(LEN_BOUNDS, cumulative, strict=True):
        h.add(base, "histogram", f"{base}_bucket", {**labels, "le": le}, series)
    h.add(base, "histogram", f"{base}_count", labels, cumulative[-1])
    h.add(base, "histogram", f"{base}_sum", labels, counter(rng, times, reset_at))


def _vllm_instance(
    h: History,
    rng: random.Random,
    labels: dict[str, str],
    times: list[int],
    reset_at: int | None = None,
) -> None:
    for name in VLLM_COUNTERS:
        h.add(name.removesuffix("_total"), "counter", name, labels, counter(rng, times, reset_at))
    for source in ("local_compute", "local_cache_hit"):
        h.add(
            "vllm:prompt_tokens_by_source",
            "counter",
            "vllm:prompt_tokens_by_source_total",
            {**labels, "source": source},
            counter(rng, times, reset_at),
        )
    zero = [(float(t), 0.0) for t in times]
    h.add("vllm:num_preemptions", "counter", "vllm:num_preemptions_total", labels, zero)
    old = [t for t in times if t < END - 2 * WINDOW]
    h.add(
        "vllm:estimated_flops_per_gpu",
        "counter",
        "vllm:estimated_flops_per_gpu_total",
        labels,
        counter(rng, old),
    )
    for base in ("vllm:request_prompt_tokens", "vllm:request_generation_tokens", *VLLM_PHASES):
        _histogram(h, rng, base, labels, times, reset_at)
    for gauge in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
        h.add(gauge, "gauge", gauge, labels, [(float(t), float(rng.randint(0, 9))) for t in times])
    h.add(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "vllm:kv_cache_usage_perc",
        labels,
        [(float(t), rng.random()) for t in times],
    )


def build_history() -> History:
    rng = random.Random(7)
    h = History()
    times = list(range(START, END + 1, STEP))
    lane_a = {"job": "history-a", "model_name": "m1", "engine": "0"}
    _vllm_instance(h, rng, {**lane_a, "instance": "a1"}, times, reset_at=RESET_AT)
    _vllm_instance(h, rng, {**lane_a, "instance": "a2"}, [t for t in times if t < SWAP_AT])
    swapped_in = [t for t in times if t > SWAP_AT]
    a3 = {**lane_a, "instance": "a3"}
    _vllm_instance(h, rng, a3, swapped_in)
    info = [(float(t), 1.0) for t in times]
    h.add(
        "vllm:cache_config_info",
        "gauge",
        "vllm:cache_config_info",
        {
            "job": "history-a",
            "instance": "a1",
            "engine": "0",
            "kv_cache_size_tokens": "1048576",
            "num_gpu_blocks": "8192",
            "block_size": "128",
        },
        info,
    )
    h.add(
        "vllm:cache_config_info",
        "gauge",
        "vllm:cache_config_info",
        {
            "job": "history-a",
            "instance": "a3",
            "engine": "0",
            "kv_cache_size_tokens": "None",
            "num_gpu_blocks": "100",
            "block_size": "16",
        },
        [(float(t), 1.0) for t in swapped_in],
    )

    legacy = {"job": "history-c", "instance": "c1", "model_name": "old", "engine": "0"}
    late = [t for t in times if t >= LEGACY_FROM]
    for name in (
        "vllm:gpu_prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_hits_total",
        "vllm:prompt_tokens_total",
    ):
        h.add(name.removesuffix("_total"), "counter", name, legacy, counter(rng, late))
    _histogram(h, rng, "vllm:time_per_output_token_seconds", legacy, late, None)
    for gauge in ("vllm:num_requests_running", "vllm:gpu_cache_usage_perc"):
        h.add(gauge, "gauge", gauge, legacy, [(float(t), rng.random()) for t in late])

    sg = {"job": "history-b", "instance": "b1", "model_name": "qwen", "tp_rank": "0"}
    for name in (
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:num_requests_total",
        "sglang:spec_verify_calls_total",
    ):
        h.add(name.removesuffix("_total"), "counter", name, sg, counter(rng, times))
    for source in ("device", "host"):
        h.add(
            "sglang:cached_tokens",
            "counter",
            "sglang:cached_tokens_total",
            {**sg, "cache_source": source},
            counter(rng, times),
        )
    for stage in ("prefill_forward", "decode_loop"):
        _histogram(
            h, rng, "sglang:per_stage_req_latency_seconds", {**sg, "stage": stage}, times, None
        )
    _histogram(h, rng, "sglang:queue_time_seconds", sg, times, None)
    for gauge in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage"):
        h.add(gauge, "gauge", gauge, sg, [(float(t), rng.random()) for t in times])
    h.add(
        "sglang:max_total_num_tokens",
        "gauge",
        "sglang:max_total_num_tokens",
        sg,
        [(float(t), 500000.0) for t in times],
    )

    for model, value in ((WEIRD, 3.0), ('we"ird', 5.0), ("we\\ird", 7.0)):
        h.add(
            "vllm:num_requests_running",
            "gauge",
            "vllm:num_requests_running",
            {"job": "lane-esc", "instance": "e1", "model_name": model},
            [(float(t), value) for t in times],
        )
    return h


WEIRD = 'we"ird\\na\nme'


@pytest.fixture(scope="module")
def history() -> History:
    return build_history()


@pytest.fixture(scope="module")
def server(history: History, prometheus: PromServer) -> PromServer:
    remote_write(prometheus, history.writer)
    return prometheus


@pytest.fixture
async def source(server: PromServer) -> Iterator[PrometheusSource]:  # type: ignore[misc]
    src = PrometheusSource(server.url, stats=True)
    yield src
    await src.aclose()


VLLM_KEYS: dict[str, Callable[[History], float | None]] = {
    "requests": lambda h: h.increase("vllm:request_success_total", job="history-a"),
    "prompt_tokens": lambda h: h.increase("vllm:prompt_tokens_total", job="history-a"),
    "generation_tokens": lambda h: h.increase("vllm:generation_tokens_total", job="history-a"),
    "prefix_cache_queries": lambda h: h.increase(
        "vllm:prefix_cache_queries_total", job="history-a"
    ),
    "prefix_cache_hits": lambda h: h.increase("vllm:prefix_cache_hits_total", job="history-a"),
    "prompt_computed": lambda h: h.increase(
        "vllm:prompt_tokens_by_source_total", job="history-a", source="local_compute"
    ),
    "kv_computed_sum": lambda h: h.increase(
        "vllm:request_prefill_kv_computed_tokens_sum", job="history-a"
    ),
    "queue_count": lambda h: h.increase("vllm:request_queue_time_seconds_count", job="history-a"),
    "decode_sum": lambda h: h.increase("vllm:request_decode_time_seconds_sum", job="history-a"),
    "itl_sum": lambda h: h.increase("vllm:inter_token_latency_seconds_sum", job="history-a"),
    "prompt_len_count": lambda h: h.increase("vllm:request_prompt_tokens_count", job="history-a"),
}


async def test_vllm_lane_counters_match_increase(
    source: PrometheusSource, history: History
) -> None:
    totals = await source.read_lane("a", None, '{job="history-a"}', WINDOW, END)
    assert totals.dialect == "vllm"
    for key, expected in VLLM_KEYS.items():
        want = expected(history)
        assert want is not None and want > 0
        assert totals.values.get(key) == pytest.approx(want, rel=1e-9), key


async def test_reset_and_swap_are_counted(history: History) -> None:
    # The expected value must differ from a naive last-minus-first, or the test proves nothing.
    a1 = next(history.matching("vllm:prompt_tokens_total", instance="a1"))
    in_window = [v for t, v in a1 if END - WINDOW <= t <= END]
    assert in_window[-1] - in_window[0] < history.increase(
        "vllm:prompt_tokens_total", instance="a1"
    )  # type: ignore[operator]


async def test_one_request_per_refresh(source: PrometheusSource) -> None:
    await source.read_lane("a", None, '{job="history-a"}', WINDOW, END)
    for refresh in range(1, 4):
        before = source.requests
        totals = await source.read_lane("a", None, '{job="history-a"}', WINDOW, END + 5 * refresh)
        assert source.requests - before == 1
        assert totals.end == END + 5 * refresh


async def test_a_refresh_sooner_than_the_reevaluation_interval_reuses_the_totals(
    source: PrometheusSource,
) -> None:
    week = 7 * 86400.0
    first = await source.read_lane("a", None, '{job="history-a"}', week, END)
    before = source.requests
    again = await source.read_lane("a", None, '{job="history-a"}', week, END + 60)
    assert source.requests == before + 1  # only the cheap one: are the lane's targets up?
    # The window's totals are the first's; only the lane now and its last minute are read anew.
    window = [{k: v for k, v in t.values.items() if k not in FRESH_KEYS} for t in (first, again)]
    assert window[0] == window[1] and again.histograms == first.histograms
    assert FRESH_KEYS & set(again.values)
    assert again.end == END  # the screen says when it was evaluated
    later = await source.read_lane("a", None, '{job="history-a"}', week, END + 601)
    assert source.requests == before + 2 and later.end == END + 601


async def test_real_zero_versus_missing(source: PrometheusSource) -> None:
    totals = await source.read_lane("a", None, '{job="history-a"}', WINDOW, END)
    assert totals.values["preemptions"] == 0.0
    assert "preemptions" not in totals.missing
    assert "flops" not in totals.values
    assert totals.missing["flops"] == "no samples in window"
    assert "spec_drafts" not in totals.values
    assert totals.missing["spec_drafts"].startswith("not exposed by this engine")
    assert "vllm:spec_decode_num_drafts_total" in totals.missing["spec_drafts"]


async def test_gauges_and_histograms(source: PrometheusSource, history: History) -> None:
    totals = await source.read_lane("a", "vllm", '{job="history-a"}', WINDOW, END)
    running = list(history.matching("vllm:num_requests_running", job="history-a"))
    assert len(running) == 3  # a1, and a2 swapped for a3 inside the window
    want = gauge_mean(running, sum, END - WINDOW, END)
    assert totals.values["running"] == pytest.approx(want, rel=1e-12)
    usage = list(history.matching("vllm:kv_cache_usage_perc", job="history-a"))
    want = gauge_mean(usage, lambda seen: sum(seen) / len(seen), END - WINDOW, END)
    assert totals.values["kv_usage"] == pytest.approx(want, rel=1e-12)
    buckets = totals.histograms["prompt_len"]
    assert [le for le, _ in buckets] == [10.0, 100.0, 1000.0, math.inf]
    for le_text, (_, count) in zip(LEN_BOUNDS, buckets, strict=True):
        want = history.increase("vllm:request_prompt_tokens_bucket", job="history-a", le=le_text)
        assert count == pytest.approx(want, rel=1e-9)


async def test_capacity_from_info_labels_ignores_model_filter(source: PrometheusSource) -> None:
    totals = await source.read_lane("a", "vllm", '{job="history-a",model_name="m1"}', WINDOW, END)
    assert totals.kv_capacity_tokens == 1048576 + 100 * 16
    assert totals.covered_s is None and totals.coverage_note == ""


async def test_legacy_lane_detected_and_partial(source: PrometheusSource, history: History) -> None:
    totals = await source.read_lane("c", None, '{job="history-c"}', WINDOW, END)
    assert totals.dialect == "vllm-legacy"
    want = history.increase("vllm:gpu_prefix_cache_hits_total", job="history-c")
    assert totals.values["prefix_cache_hits"] == pytest.approx(want, rel=1e-9)
    want_itl = history.increase("vllm:time_per_output_token_seconds_count", job="history-c")
    assert totals.values["itl_count"] == pytest.approx(want_itl, rel=1e-9)
    assert totals.covered_s == pytest.approx(END - LEGACY_FROM)
    assert totals.coverage_note.startswith("data since ")
    assert "prompt_computed" in totals.missing


async def test_sglang_lane(source: PrometheusSource, history: History) -> None:
    totals = await source.read_lane("b", None, '{job="history-b"}', WINDOW, END)
    assert totals.dialect == "sglang"
    prompt = history.increase("sglang:prompt_tokens_total", job="history-b")
    cached = history.increase("sglang:cached_tokens_total", job="history-b")
    generated = history.increase("sglang:generation_tokens_total", job="history-b")
    verify = history.increase("sglang:spec_verify_calls_total", job="history-b")
    assert prompt and cached and generated and verify
    assert totals.values["prefix_cache_hits"] == pytest.approx(cached, rel=1e-9)
    assert totals.values["prefix_cache_queries"] == pytest.approx(prompt, rel=1e-9)
    assert totals.values["prompt_computed"] == pytest.approx(prompt - cached, rel=1e-9)
    assert totals.values["spec_drafts"] == pytest.approx(verify, rel=1e-9)
    requests = history.increase("sglang:num_requests_total", job="history-b") or 0.0
    # Each request's first token comes from its prefill, not from a verify step.
    assert totals.values["spec_accepted"] == pytest.approx(generated - verify - requests, rel=1e-9)
    prefill = history.increase(
        "sglang:per_stage_req_latency_seconds_sum", job="history-b", stage="prefill_forward"
    )
    assert totals.values["prefill_sum"] == pytest.approx(prefill, rel=1e-9)
    assert totals.missing["decode_sum"].startswith("SGLang exposes no")
    assert totals.kv_capacity_tokens == 500000.0


@pytest.mark.parametrize("model, value", [(WEIRD, 3.0), ('we"ird', 5.0), ("we\\ird", 7.0)])
async def test_escaped_label_values_match_exactly(
    source: PrometheusSource, model: str, value: float
) -> None:
    from cockpit.core.promql import selector_with

    selector = selector_with('{job="lane-esc"}', model_name=model)
    totals = await source.read_lane("esc", "vllm", selector, WINDOW, END)
    assert totals.values["running"] == value


async def test_stats_and_timing_recorded(source: PrometheusSource) -> None:
    totals = await source.read_lane("a", None, '{job="history-a"}', WINDOW, END)
    assert totals.eval_seconds is not None and totals.eval_seconds >= 0
    assert totals.server == source.url
    assert "label_replace" not in totals.queries["requests"]


async def test_every_refresh_of_a_lane_asks_the_same_query(source: PrometheusSource) -> None:
    """The query text is the provenance a receipt shows: the same from refresh to refresh."""
    first = await source.read_lane("a", None, '{job="history-a"}', WINDOW, END)
    second = await source.read_lane("a", None, '{job="history-a"}', WINDOW, END + 5)
    assert first.queries == second.queries
    half = await source.read_lane("a", None, '{job="history-a"}', WINDOW / 2, END + 5)
    assert (
        half.queries["requests"]
        == 'sum(increase(vllm:request_success_total{job="history-a"}[30m]))'
    )

"""Tails and the lane now, against a real Prometheus loaded with generated history (promtool).

The percentiles must be Prometheus's own `histogram_quantile` over the window's bucket
increases, for a lane with vLLM's full bucket sets (two engines, one restarting inside the
window) and one with a few custom buckets whose tail runs past the largest. The direct scrape
ingests the same samples as expositions and must give the same numbers.

Samples sit every 15 s on multiples of the step, with one at each window edge: Prometheus 2.x's
`increase()` (range inclusive at both ends) then extrapolates nothing, and a direct scrape's
increase (no extrapolation) is the same number.
"""

from __future__ import annotations

import functools
import math
import random
import re

import pytest

from cockpit.core.figures import format_figure, lane_figures
from cockpit.core.model import LaneTotals
from cockpit.sources.prometheus import PrometheusSource
from cockpit.sources.scrape import ScrapeSource
from tests.support.promharness import (
    OpenMetricsWriter,
    PromServer,
    instant_value,
    remote_write,
)
from tests.support.repo import FIXTURES, require_fixture

pytestmark = pytest.mark.prometheus

STEP = 15
END = 1_790_000_000 - (1_790_000_000 % 3600)
"""Evaluation time: a whole hour, well in the past."""
START = END - 2 * 3600
WINDOW = 3600
RESET_AT = END - 1200
"""Engine 1 of the full lane restarts here (every counter back to zero)."""

TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
E2E = "vllm:e2e_request_latency_seconds"
QUEUE = "vllm:request_queue_time_seconds"
LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
FULL_BUCKETS: dict[str, tuple[float, ...]] = {
    TTFT: (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
           7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
    ITL: (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
          10.0, 20.0, 40.0, 80.0),
    E2E: LATENCY,
    QUEUE: LATENCY,
}  # fmt: skip
OLDER_ITL = "vllm:time_per_output_token_seconds"
"""What vLLM before 0.10.2 timed its step by; later ones may still expose it beside ITL."""
FEW_BUCKETS: dict[str, tuple[float, ...]] = {
    **dict.fromkeys(FULL_BUCKETS, (0.5, 1.0, 2.0)),
    OLDER_ITL: (0.1, 0.3),  # other bounds: mixed into ITL's buckets, its tails would move
}
DRAWS = {TTFT: (-1.0, 1.0), ITL: (-3.5, 0.5), E2E: (1.5, 1.0), QUEUE: (-3.0, 1.5)}
"""Log-normal (mu, sigma) of each latency on the full lane; the few-bucket lane draws (0, 1):
about a quarter of it lies past its largest bucket, 2 s."""
HISTOGRAMS = {"ttft": TTFT, "itl": ITL, "e2e": E2E, "queue": QUEUE}
SGLANG_TTFT = "sglang:time_to_first_token_seconds"
SGLANG_ITL = "sglang:inter_token_latency_seconds"
SGLANG_E2E = "sglang:e2e_request_latency_seconds"
SGLANG_QUEUE = "sglang:queue_time_seconds"
SGLANG_HISTOGRAMS = {
    "ttft": (SGLANG_TTFT, ',is_streaming="true"'),
    "itl": (SGLANG_ITL, ""),
    "e2e": (SGLANG_E2E, ',is_streaming="true"'),
    "queue": (SGLANG_QUEUE, ',tp_rank="0"'),
}
"""The SGLang lane's histograms and the series the cockpit must read them from: streaming
requests' TTFT and end-to-end latency (as their means), and one TP rank of the queue time
(both ranks export the same)."""

Labels = tuple[tuple[str, str], ...]
Series = dict[tuple[str, Labels], dict[float, float]]
"""(sample name, labels) -> time -> value."""


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


class Recorder:
    """A lane's samples as its engines count them, at the time `t` of the current step."""

    def __init__(self) -> None:
        self.series: Series = {}
        self.counts: dict[tuple[str, Labels], float] = {}
        self.t = 0.0

    def put(self, name: str, labels: dict[str, str], value: float) -> None:
        self.series.setdefault((name, tuple(sorted(labels.items()))), {})[self.t] = value

    def count(self, name: str, labels: dict[str, str], amount: float) -> None:
        key = (name, tuple(sorted(labels.items())))
        self.counts[key] = self.counts.get(key, 0.0) + amount
        self.put(name, labels, self.counts[key])

    def observe(
        self, base: str, labels: dict[str, str], bounds: tuple[float, ...], seen: list[float]
    ) -> None:
        for bound in (*bounds, math.inf):
            within = sum(1 for x in seen if x <= bound)
            self.count(f"{base}_bucket", {**labels, "le": _le(bound)}, within)
        self.count(f"{base}_count", labels, len(seen))
        self.count(f"{base}_sum", labels, sum(seen))

    def restart(self, labels: dict[str, str]) -> None:
        """The engine with these labels restarts: its counters start again from zero."""
        mine = set(labels.items())
        self.counts = {k: v for k, v in self.counts.items() if not mine <= set(k[1])}


def vllm_lane(
    rng: random.Random,
    buckets: dict[str, tuple[float, ...]],
    draws: dict[str, tuple[float, float]],
    engines: int,
) -> Series:
    """vLLM engines `0`.. at every step from START to END; engine 1 restarts at RESET_AT."""
    lane = Recorder()
    for t in range(START, END + 1, STEP):
        lane.t, step = float(t), (t - START) // STEP
        for number in range(engines):
            labels = {"model_name": "m", "engine": str(number)}
            if number == 1 and t == RESET_AT:
                lane.restart(labels)
            requests = rng.randint(0, 5)
            for base, bounds in buckets.items():
                seen = [rng.lognormvariate(*draws[base]) for _ in range(requests)]
                lane.observe(base, labels, bounds, seen)
            stop = {**labels, "finished_reason": "stop"}
            lane.count("vllm:request_success_total", stop, requests)
            lane.count("vllm:prompt_tokens_total", labels, requests * rng.randint(100, 2000))
            lane.count("vllm:generation_tokens_total", labels, requests * rng.randint(10, 500))
            lane.put("vllm:num_requests_running", labels, float(step % 7 + number))
            lane.put("vllm:num_requests_waiting", labels, float(step % 3))
            by_reason = "vllm:num_requests_waiting_by_reason"
            lane.put(by_reason, {**labels, "reason": "capacity"}, float(step % 2))
            lane.put(by_reason, {**labels, "reason": "deferred"}, float(step % 3 == 0))
            lane.put("vllm:kv_cache_usage_perc", labels, (step % 10) / 10)
    return lane.series


def fixture_bounds(base: str) -> tuple[float, ...]:
    """A histogram's finite bucket bounds as the recorded SGLang exposition has them."""
    text = require_fixture(FIXTURES / "sglang" / "metrics_tp2.txt").read_text()
    bounds = {float(le) for le in re.findall(rf'^{base}_bucket{{[^}}]*le="([^"]+)"', text, re.M)}
    return tuple(sorted(b for b in bounds if math.isfinite(b)))


def sglang_lane(rng: random.Random) -> Series:
    """SGLang, TP 2: the tokenizer's histograms split by `is_streaming` (a non-streaming
    request's TTFT is observed late), the scheduler's queue time and gauges exported alike
    by both ranks."""
    lane = Recorder()
    tokenizer = {"model_name": "m", "engine_type": "unified"}
    ranks = [{**tokenizer, "tp_rank": rank, "pp_rank": "0"} for rank in ("0", "1")]
    draws = {SGLANG_TTFT: (-1.0, 1.0), SGLANG_ITL: (-4.0, 0.5), SGLANG_E2E: (1.5, 1.0)}
    for t in range(START, END + 1, STEP):
        lane.t, step = float(t), (t - START) // STEP
        queued: list[float] = []
        for streaming, late in (("true", 0.0), ("false", 2.0)):
            labels = {**tokenizer, "is_streaming": streaming}
            requests = rng.randint(0, 4)
            for base, (mu, sigma) in draws.items():
                mu += late if base == SGLANG_TTFT else 0.0
                seen = [rng.lognormvariate(mu, sigma) for _ in range(requests)]
                lane.observe(base, labels, fixture_bounds(base), seen)
            lane.count("sglang:num_requests_total", labels, requests)
            lane.count("sglang:prompt_tokens_total", labels, requests * rng.randint(100, 2000))
            lane.count("sglang:generation_tokens_total", labels, requests * rng.randint(10, 500))
            queued += [rng.lognormvariate(-1.0, 1.5) for _ in range(requests)]
        for labels in ranks:
            lane.observe(SGLANG_QUEUE, labels, fixture_bounds(SGLANG_QUEUE), queued)
            lane.put("sglang:num_running_reqs", labels, float(step % 7))
            lane.put("sglang:num_queue_reqs", labels, float(step % 3))
            lane.put("sglang:token_usage", labels, 0.9)
            lane.put("sglang:full_token_usage", labels, (step % 10) / 10)
    return lane.series


def build() -> dict[str, Series]:
    """job -> its series (the engines' own labels, without `job`)."""
    rng = random.Random(16)
    return {
        "tails-full": vllm_lane(rng, FULL_BUCKETS, DRAWS, engines=2),
        "tails-few": vllm_lane(rng, FEW_BUCKETS, dict.fromkeys(FEW_BUCKETS, (0.0, 1.0)), 1),
        "tails-sglang": sglang_lane(rng),
    }


LANES = build()


def exposition(series: Series, at: float) -> str:
    """The engine's /metrics text at `at`, as a direct scrape reads it."""
    lines = []
    for (name, labels), samples in series.items():
        value = samples.get(at)
        if value is not None:
            text = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"{name}{{{text}}} {value!r}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus(prometheus: PromServer) -> PromServer:
    """The run's Prometheus with this module's lanes written to it."""
    writer = OpenMetricsWriter()
    for job, series in LANES.items():
        for (name, labels), samples in series.items():
            family = name.removesuffix("_total").rsplit("_bucket", 1)[0]
            points = list(samples.items())
            writer.add(family, "unknown", name, {**dict(labels), "job": job}, points)
    remote_write(prometheus, writer)
    return prometheus


def server_quantile(server: PromServer, q: float, base: str, job: str, extra: str = "") -> float:
    buckets = f'sum by (le) (increase({base}_bucket{{job="{job}"{extra}}}[1h]))'
    return instant_value(server, f"histogram_quantile({q}, {buckets})", END)


async def read_prometheus(
    server: PromServer, job: str, window: float = WINDOW, at: float = END
) -> LaneTotals:
    source = PrometheusSource(server.url)
    try:
        return await source.read_lane(job, None, f'{{job="{job}"}}', window, at)
    finally:
        await source.aclose()


@functools.cache
def read_scrape(job: str, until: float = END) -> LaneTotals:
    """The lane read by a direct scrape that took every exposition since before the window."""
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for at in range(END - WINDOW - STEP, int(until) + 1, STEP):
        source.ingest(exposition(LANES[job], at), at)
    return source.totals(job, '{model_name="m"}', WINDOW, until)


@pytest.mark.parametrize("job", ["tails-full", "tails-few", "tails-sglang"])
async def test_percentiles_are_prometheus_histogram_quantile(
    prometheus: PromServer, job: str
) -> None:
    figures = lane_figures(await read_prometheus(prometheus, job)).figures
    scraped = lane_figures(read_scrape(job)).figures
    histograms = (
        SGLANG_HISTOGRAMS if job == "tails-sglang"
        else {short: (base, "") for short, base in HISTOGRAMS.items()}
    )  # fmt: skip
    if job == "tails-sglang":  # the streaming rule matters: the others' TTFT is later
        streaming = server_quantile(prometheus, 0.5, SGLANG_TTFT, job, ',is_streaming="true"')
        assert server_quantile(prometheus, 0.5, SGLANG_TTFT, job) > streaming * 1.5
    for short, (base, extra) in histograms.items():
        for percentile in (50, 90, 95, 99):
            expected = server_quantile(prometheus, percentile / 100, base, job, extra)
            key = f"{short}_p{percentile}"
            assert figures[key].value == pytest.approx(expected, rel=1e-9), key
            assert scraped[key].value == pytest.approx(expected, rel=1e-9), key


@pytest.mark.parametrize("read", ["prometheus", "scrape"])
async def test_a_quantile_past_the_largest_bucket_is_a_lower_bound(
    prometheus: PromServer, read: str
) -> None:
    totals = (
        await read_prometheus(prometheus, "tails-few") if read == "prometheus"
        else read_scrape("tails-few")
    )  # fmt: skip
    figures = lane_figures(totals).figures
    # A quarter of the few-bucket lane's TTFTs lie past 2 s: its p90 and p99 are only "> 2 s",
    # where Prometheus answers the largest finite bound; its median is interpolated.
    assert server_quantile(prometheus, 0.99, TTFT, "tails-few") == 2.0
    for key in ("ttft_p90", "ttft_p99"):
        assert (figures[key].value, figures[key].above) == (2.0, True)
        assert format_figure(figures[key]) == "> 2.00 s"
    median = figures["ttft_p50"]
    assert not median.above and 0.5 < (median.value or 0) < 2.0
    assert not format_figure(median).startswith(">")
    # The full lane's buckets reach far enough: every tail is a value, none a bound.
    full = lane_figures(await read_prometheus(prometheus, "tails-full")).figures
    assert not any(full[f"{short}_p99"].above for short in HISTOGRAMS)


def expected_now(job: str, at: float) -> dict[str, float]:
    """The lane's gauges at `at` (sum, KV: mean over engines) and its counters' last minute."""
    series = LANES[job]

    def values(name: str, **extra: str) -> list[float]:
        return [
            samples[at]
            for (sample, labels), samples in series.items()
            if sample == name and all((k, v) in labels for k, v in extra.items())
        ]

    def minute(name: str) -> float:
        return sum(
            samples[at] - samples[at - 60]
            for (sample, _), samples in series.items()
            if sample == name
        )

    kv = values("vllm:kv_cache_usage_perc")
    by_reason = "vllm:num_requests_waiting_by_reason"
    return {
        "running_now": sum(values("vllm:num_requests_running")),
        "waiting_now": sum(values("vllm:num_requests_waiting")),
        "waiting_now_capacity": sum(values(by_reason, reason="capacity")),
        "waiting_now_deferred": sum(values(by_reason, reason="deferred")),
        "kv_usage_now": sum(kv) / len(kv),
        "requests_per_s_1m": minute("vllm:request_success_total") / 60,
        "prompt_tok_s_1m": minute("vllm:prompt_tokens_total") / 60,
        "generation_tok_s_1m": minute("vllm:generation_tokens_total") / 60,
    }  # fmt: skip


async def test_now_and_last_minute_on_both_paths(prometheus: PromServer) -> None:
    expected = expected_now("tails-full", END)
    assert expected["requests_per_s_1m"] > 0 and expected["running_now"] > 0
    for totals in (await read_prometheus(prometheus, "tails-full"), read_scrape("tails-full")):
        figures = lane_figures(totals).figures
        for key, value in expected.items():
            assert figures[key].value == pytest.approx(value, rel=1e-9), (totals.server, key)
        requests = figures["requests"].value or 0
        assert figures["requests_per_s"].value == pytest.approx(requests / WINDOW)


async def test_a_reused_long_window_still_reads_the_lane_now(prometheus: PromServer) -> None:
    """A week's totals are reused for minutes; its now and last-minute figures are not."""
    week, before = 7 * 86400.0, END - 300
    source = PrometheusSource(prometheus.url)
    try:
        first = await source.read_lane("full", None, '{job="tails-full"}', week, before)
        second = await source.read_lane("full", None, '{job="tails-full"}', week, END)
    finally:
        await source.aclose()
    assert second.end == first.end == before  # the window's totals were reused
    assert second.values["requests"] == first.values["requests"]
    then, now = expected_now("tails-full", before), expected_now("tails-full", END)
    assert then["running_now"] != now["running_now"]
    for totals, expected in ((first, then), (second, now)):
        figures = lane_figures(totals).figures
        for key, value in expected.items():
            assert figures[key].value == pytest.approx(value, rel=1e-9), key


async def test_sglang_now_counts_each_tp_rank_once(prometheus: PromServer) -> None:
    series = LANES["tails-sglang"]
    step = (END - START) // STEP
    minute = sum(
        samples[END] - samples[END - 60]
        for (name, _), samples in series.items()
        if name == "sglang:num_requests_total"
    )
    expected = {
        "running_now": float(step % 7),  # both ranks say it: once, not twice
        "waiting_now": float(step % 3),
        "kv_usage_now": (step % 10) / 10,  # the full-attention pool where exposed
        "requests_per_s_1m": minute / 60,
    }
    assert minute > 0 and step % 7 > 0
    for totals in (await read_prometheus(prometheus, "tails-sglang"), read_scrape("tails-sglang")):
        figures = lane_figures(totals).figures
        for key, value in expected.items():
            assert figures[key].value == pytest.approx(value, rel=1e-9), (totals.server, key)


async def test_a_lane_gone_quiet_has_no_value_now(prometheus: PromServer) -> None:
    """Read 10 minutes after its last sample: the window's means remain, the lane now has
    no value (never the last one seen, never 0)."""
    totals = await read_prometheus(prometheus, "tails-full", WINDOW, END + 600)
    figures = lane_figures(totals).figures
    assert figures["running"].value is not None and figures["running_now"].value is None
    assert figures["running_now"].reason == "no sample at the evaluation time"
    assert figures["kv_usage_now"].value is None and figures["ttft_p50"].value is not None


async def test_a_tail_s_query_reads_as_where_it_came_from(prometheus: PromServer) -> None:
    """Read from Prometheus, a tail's query is PromQL that gives its value; from a direct
    scrape, it names the percentile and the scrape (no PromQL wrapped around a URL)."""
    figures = lane_figures(await read_prometheus(prometheus, "tails-full")).figures
    for key in ("ttft_p50", "itl_p99"):
        assert figures[key].query.startswith("histogram_quantile(")
        expected = instant_value(prometheus, figures[key].query, END)
        assert figures[key].value == pytest.approx(expected, rel=1e-9), key
    scraped = read_scrape("tails-full")
    tail = lane_figures(scraped).figures["ttft_p50"]
    assert tail.query == f"p50 of {scraped.queries['ttft']}"
    assert tail.query.startswith("p50 of scrape http://127.0.0.1:1/metrics: ")

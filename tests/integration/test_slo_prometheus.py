"""SLO attainment and goodput against a real Prometheus loaded with generated history.

At a bucket bound the attainment must be Prometheus's own bucket arithmetic,
`increase(…_bucket{le="T"}[W]) / increase(…_count[W])`; between bounds the linear interpolation
inside the bucket that `histogram_quantile` makes (its quantile at the share is the target);
the goodput the requests that met the TTFT target over the window's seconds. A direct scrape of
the same samples reads the same numbers.

Samples sit every 15 s with one at each window edge, so `increase()` extrapolates nothing.
"""

from __future__ import annotations

import math
import random

import pytest

from cockpit.core.figures import lane_figures
from cockpit.core.model import LaneTotals
from cockpit.core.slo import Slo
from cockpit.sources.prometheus import PrometheusSource
from cockpit.sources.scrape import ScrapeSource
from tests.support.promharness import OpenMetricsWriter, PromServer, instant_value, remote_write

pytestmark = pytest.mark.prometheus

STEP = 15
END = 1_790_000_000 - (1_790_000_000 % 3600)
START = END - 2 * 3600
WINDOW = 3600
JOB = "slo-lane"
TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
E2E = "vllm:e2e_request_latency_seconds"
BUCKETS: dict[str, tuple[float, ...]] = {
    TTFT: (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
           7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
    ITL: (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
          10.0, 20.0, 40.0, 80.0),
    E2E: (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0),
}  # fmt: skip
DRAWS = {TTFT: (-1.0, 1.0), ITL: (-3.5, 0.5), E2E: (1.5, 1.0)}
"""Log-normal (mu, sigma) of each latency."""
KEYS = {"ttft": TTFT, "itl": ITL, "e2e": E2E}
AT_BOUNDS = Slo(ttft_s=0.5, itl_s=0.05, e2e_s=10.0)
BETWEEN = Slo(ttft_s=0.4, itl_s=0.06, e2e_s=3.0)
"""Each between two of its histogram's bounds: (0.25, 0.5), (0.05, 0.075), (2.5, 5)."""

Labels = tuple[tuple[str, str], ...]
Series = dict[tuple[str, Labels], dict[float, float]]


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


def build() -> Series:
    """One vLLM engine's histograms and counters at every step from START to END."""
    rng, series, counts = random.Random(27), Series(), dict[tuple[str, Labels], float]()

    def count(name: str, labels: dict[str, str], amount: float, t: float) -> None:
        key = (name, tuple(sorted(labels.items())))
        counts[key] = counts.get(key, 0.0) + amount
        series.setdefault(key, {})[t] = counts[key]

    labels = {"model_name": "m"}
    for t in map(float, range(START, END + 1, STEP)):
        requests = rng.randint(0, 6)
        for base, bounds in BUCKETS.items():
            seen = [rng.lognormvariate(*DRAWS[base]) for _ in range(requests)]
            for bound in (*bounds, math.inf):
                within = sum(1 for x in seen if x <= bound)
                count(f"{base}_bucket", {**labels, "le": _le(bound)}, within, t)
            count(f"{base}_count", labels, len(seen), t)
            count(f"{base}_sum", labels, sum(seen), t)
        count("vllm:request_success_total", {**labels, "finished_reason": "stop"}, requests, t)
        count("vllm:prompt_tokens_total", labels, requests * 300, t)
        count("vllm:generation_tokens_total", labels, requests * 40, t)
    return series


SERIES = build()


@pytest.fixture(scope="module")
def prometheus(prometheus: PromServer) -> PromServer:
    writer = OpenMetricsWriter()
    for (name, labels), samples in SERIES.items():
        family = name.removesuffix("_total").rsplit("_bucket", 1)[0]
        writer.add(family, "unknown", name, {**dict(labels), "job": JOB}, list(samples.items()))
    remote_write(prometheus, writer)
    return prometheus


def promql(server: PromServer, query: str) -> float:
    return instant_value(server, query, END)


def increase(base: str, le: float | None = None) -> str:
    """`sum(increase(…_bucket{le="T"}[1h]))`, or of `_count` without a bound."""
    if le is None:
        return f'sum(increase({base}_count{{job="{JOB}"}}[1h]))'
    return f'sum(increase({base}_bucket{{job="{JOB}",le="{_le(le)}"}}[1h]))'


async def read_prometheus(server: PromServer) -> LaneTotals:
    source = PrometheusSource(server.url)
    try:
        return await source.read_lane(JOB, None, f'{{job="{JOB}"}}', WINDOW, END)
    finally:
        await source.aclose()


def read_scrape() -> LaneTotals:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for at in map(float, range(END - WINDOW - STEP, END + 1, STEP)):
        lines = []
        for (name, labels), samples in SERIES.items():
            text = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"{name}{{{text}}} {samples[at]!r}")
        source.ingest("\n".join(lines) + "\n", at)
    return source.totals(JOB, '{model_name="m"}', WINDOW, END)


def target(slo: Slo, short: str) -> float:
    value = getattr(slo, f"{short}_s")
    assert isinstance(value, float)
    return value


async def test_at_a_bound_attainment_is_prometheus_s_bucket_arithmetic(
    prometheus: PromServer,
) -> None:
    for totals in (await read_prometheus(prometheus), read_scrape()):
        figures = lane_figures(totals, slo=AT_BOUNDS).figures
        for short, base in KEYS.items():
            t = target(AT_BOUNDS, short)
            expected = promql(prometheus, f"{increase(base, t)} / {increase(base)}")
            assert 0 < expected < 1, short
            figure = figures[f"{short}_slo_attainment"]
            assert figure.value == pytest.approx(expected, rel=1e-9), (totals.server, short)
            assert figure.reason == "" and not figure.above  # exact: no note


async def test_between_bounds_it_is_histogram_quantile_s_interpolation(
    prometheus: PromServer,
) -> None:
    figures = lane_figures(await read_prometheus(prometheus), slo=BETWEEN).figures
    scraped = lane_figures(read_scrape(), slo=BETWEEN).figures
    for short, base in KEYS.items():
        t = target(BETWEEN, short)
        low = max(b for b in BUCKETS[base] if b < t)
        high = min(b for b in BUCKETS[base] if b > t)
        lo, hi = increase(base, low), increase(base, high)
        arithmetic = f"({lo} + ({hi} - {lo}) * {(t - low) / (high - low)!r}) / {increase(base)}"
        expected = promql(prometheus, arithmetic)
        figure = figures[f"{short}_slo_attainment"]
        assert figure.value == pytest.approx(expected, rel=1e-9), short
        assert scraped[f"{short}_slo_attainment"].value == pytest.approx(expected, rel=1e-9)
        between = f"interpolated between the engine's buckets {low:g} s and {high:g} s"
        assert figure.reason == between
        # histogram_quantile at that share answers the target again
        buckets = f'sum by (le) (increase({base}_bucket{{job="{JOB}"}}[1h]))'
        quantile = promql(prometheus, f"histogram_quantile({figure.value!r}, {buckets})")
        assert quantile == pytest.approx(t, rel=1e-9), short


async def test_goodput_is_the_requests_that_met_the_ttft_target_per_second(
    prometheus: PromServer,
) -> None:
    bucket = SERIES[(f"{TTFT}_bucket", (("le", "0.5"), ("model_name", "m")))]
    met = bucket[END] - bucket[END - WINDOW]  # counted by the engine within the window
    assert met > 0
    assert promql(prometheus, increase(TTFT, 0.5)) == met
    for totals in (await read_prometheus(prometheus), read_scrape()):
        goodput = lane_figures(totals, slo=AT_BOUNDS).figures["ttft_goodput_req_s"]
        assert goodput.value == pytest.approx(met / WINDOW, rel=1e-9), totals.server

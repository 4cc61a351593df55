"""Histograms whose buckets lie: a bucket set that changes inside the window, and counts that
are not cumulative, read through a real Prometheus (remote write) and a direct scrape.

Every request of these lanes takes at most 1.8 s. A window mixing two bucket sets must read its
quantiles over the bounds both sets have (what Prometheus answers for those bounds alone) and
say so; non-cumulative counts must be marked; neither may fire the health line's TTFT rule.
"""

from __future__ import annotations

import functools
import math
import random

import httpx
import pytest

from cockpit.core.figures import format_figure, lane_figures
from cockpit.core.health import Thresholds, check
from cockpit.core.model import LaneTotals
from cockpit.core.snapshot import LaneSnapshot
from cockpit.sources.prometheus import PrometheusSource
from cockpit.sources.scrape import ScrapeSource
from tests.support.promharness import OpenMetricsWriter, PromServer, remote_write

pytestmark = pytest.mark.prometheus

STEP = 15
END = 1_790_000_000 - (1_790_000_000 % 3600)
WINDOW = 3600
START = END - WINDOW - 4 * STEP
CHANGE = END - 1800
"""The engine restarts here with other buckets."""
TTFT = "vllm:time_to_first_token_seconds"
OLD = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
       10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
"""vLLM's default TTFT bounds."""
NEW = (0.3, 0.5, 1.0, 1.5)
"""`--custom-histogram-buckets` after the restart: shares 0.5 and 1.0 with OLD."""
SHARED = (0.5, 1.0)
SLO = Thresholds(ttft_p99_slo=5.0)

Labels = tuple[tuple[str, str], ...]
Series = dict[tuple[str, Labels], dict[float, float]]


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


def _lane(engines: dict[str, tuple[tuple[float, ...], tuple[float, ...]]], jumble: bool) -> Series:
    """Engines -> (bounds before CHANGE, bounds from it): each restarts at CHANGE when its
    bounds change. `jumble`: the exposed bucket counts are not cumulative (each bucket
    counts only its own slice, as a broken exporter does)."""
    rng = random.Random(29)
    series: Series = {}
    counts: dict[tuple[str, Labels], float] = {}
    for t in range(START, END + 1, STEP):
        for engine, (before, after) in engines.items():
            labels = (("engine", engine), ("model_name", "m"))
            bounds = before if t < CHANGE else after
            if t == CHANGE and before != after:
                counts = {key: value for key, value in counts.items() if key[1][:2] != labels}
            seen = [rng.uniform(0.05, 1.8) for _ in range(rng.randint(1, 6))]
            edges = (*bounds, math.inf)
            for k, bound in enumerate(edges):
                low = edges[k - 1] if jumble and k else -math.inf
                within = sum(1 for x in seen if low < x <= bound)
                key = (f"{TTFT}_bucket", (*labels, ("le", _le(bound))))
                counts[key] = counts.get(key, 0.0) + within
                series.setdefault(key, {})[float(t)] = counts[key]
            for part, amount in (("count", len(seen)), ("sum", sum(seen))):
                key = (f"{TTFT}_{part}", labels)
                counts[key] = counts.get(key, 0.0) + amount
                series.setdefault(key, {})[float(t)] = counts[key]
            key = ("vllm:num_requests_running", labels)
            series.setdefault(key, {})[float(t)] = 3.0
    return series


LANES: dict[str, Series] = {
    "restarted": _lane({"0": (OLD, NEW)}, jumble=False),
    "two-sets": _lane({"0": (OLD, OLD), "1": (NEW, NEW)}, jumble=False),
    "disjoint": _lane({"0": ((0.1, 0.2), (0.4, 0.8))}, jumble=False),
    "jumbled": _lane({"0": ((0.25, 0.5, 1.0, 2.5), (0.25, 0.5, 1.0, 2.5))}, jumble=True),
}


def exposition(series: Series, at: float) -> str:
    lines = []
    for (name, labels), samples in series.items():
        if at in samples:
            text = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"{name}{{{text}}} {samples[at]!r}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus(prometheus: PromServer) -> PromServer:
    """The run's Prometheus, holding each lane under its name as `job`."""
    writer = OpenMetricsWriter()
    for job, series in LANES.items():
        for (name, labels), samples in series.items():
            family = name.rsplit("_bucket", 1)[0].removesuffix("_count").removesuffix("_sum")
            writer.add(family, "unknown", name, {**dict(labels), "job": job}, list(samples.items()))
    remote_write(prometheus, writer)
    return prometheus


def server_quantile(server: PromServer, q: float, job: str, le: str = "") -> float:
    matcher = f',le=~"{le}"' if le else ""
    buckets = f'sum by (le) (increase({TTFT}_bucket{{job="{job}"{matcher}}}[1h]))'
    query = f"histogram_quantile({q}, {buckets})"
    body = httpx.get(f"{server.url}/api/v1/query", params={"query": query, "time": END}).json()
    return float(body["data"]["result"][0]["value"][1])


async def read_prometheus(server: PromServer, job: str) -> LaneTotals:
    source = PrometheusSource(server.url)
    try:
        return await source.read_lane(job, "vllm", f'{{job="{job}"}}', WINDOW, END)
    finally:
        await source.aclose()


@functools.cache
def read_scrape(job: str) -> LaneTotals:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for at in range(START, END + 1, STEP):
        source.ingest(exposition(LANES[job], at), at)
    return source.totals(job, '{model_name="m"}', WINDOW, END)


async def both(server: PromServer, job: str) -> list[LaneTotals]:
    return [await read_prometheus(server, job), read_scrape(job)]


def no_ttft_alert(totals: LaneTotals) -> None:
    lane = LaneSnapshot(totals.lane, "1h", totals, lane_figures(totals), None, None)
    assert not [f for f in check(lane, SLO) if f.rule == "ttft_slo"], totals.server


@pytest.mark.parametrize("job", ["restarted", "two-sets"])
async def test_a_changed_bucket_set_reads_over_the_bounds_the_sets_share(
    prometheus: PromServer, job: str
) -> None:
    # What Prometheus itself answers over every bound: a p99 past 2,560 s for 1.8 s requests.
    assert server_quantile(prometheus, 0.99, job) == 2560.0
    shared = "|".join([*(repr(b) for b in SHARED), r"\\+Inf"])
    for totals in await both(prometheus, job):
        figures = lane_figures(totals).figures
        for percentile in (50, 90, 99):
            figure = figures[f"ttft_p{percentile}"]
            expected = server_quantile(prometheus, percentile / 100, job, shared)
            assert figure.value == pytest.approx(expected, rel=1e-6), (totals.server, figure)
            assert figure.value is not None and figure.value <= 1.0
            assert figure.doubtful and "bucket sets changed in the window" in figure.reason
            assert "2 of " in figure.reason, figure.reason
        engines = 2 if job == "two-sets" else 1
        assert figures["ttft_mean"].value is not None and figures["running"].value == 3 * engines
        no_ttft_alert(totals)


async def test_bucket_sets_that_share_no_finite_bound_are_unreadable(
    prometheus: PromServer,
) -> None:
    for totals in await both(prometheus, "disjoint"):
        figures = lane_figures(totals).figures
        figure = figures["ttft_p99"]
        assert figure.value is None, (totals.server, figure)
        assert (
            figure.reason == "bucket sets changed in the window and the sets share no finite bound"
        )
        assert figures["ttft_mean"].value is not None  # the rest of the lane stays
        no_ttft_alert(totals)


async def test_buckets_that_are_not_cumulative_are_marked(prometheus: PromServer) -> None:
    for totals in await both(prometheus, "jumbled"):
        figures = lane_figures(totals).figures
        for percentile in (50, 90, 99):
            figure = figures[f"ttft_p{percentile}"]
            # The value is still what Prometheus answers (it mends the counts silently)...
            expected = server_quantile(prometheus, percentile / 100, "jumbled")
            assert figure.value == pytest.approx(expected, rel=1e-6), (totals.server, figure)
            # ...but now it says so, and raises no alarm.
            assert figure.doubtful, figure
            assert "buckets not cumulative (le=" in figure.reason, figure.reason
            assert "made monotonic as Prometheus does" in figure.reason
        no_ttft_alert(totals)
        assert format_figure(figures["ttft_p99"]) != "—"


async def test_honest_buckets_carry_no_mark(prometheus: PromServer) -> None:
    """The restarted lane before its restart: one bucket set, cumulative."""
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for at in range(START, CHANGE, STEP):
        source.ingest(exposition(LANES["restarted"], at), at)
    scraped = source.totals("restarted", '{model_name="m"}', 1200, CHANGE - STEP)
    served = await PrometheusSource(prometheus.url).read_lane(
        "restarted", "vllm", '{job="restarted"}', 1200, CHANGE - STEP
    )
    for totals in (scraped, served):
        assert not totals.bucket_notes, totals.server
        figure = lane_figures(totals).figures["ttft_p99"]
        assert figure.value is not None and not figure.doubtful

"""Long windows: the figures Prometheus's own increase() gives, at a fraction of the load."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import AsyncIterator

import pytest

from cockpit.core.promql import gauge_step
from cockpit.core.timeutil import stamp
from cockpit.core.trends import trend_step
from cockpit.sources.prometheus import PrometheusSource
from tests.support.promharness import (
    OpenMetricsWriter,
    PromServer,
    long_history,
    remote_write,
)

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

END = 1_790_000_000 - (1_790_000_000 % 86400) + 5 * 3600 + 1234
WEEK = 7 * 86400
TREND_STEP = trend_step(WEEK)
SELECTOR = '{job="lane-long"}'
HISTORY = {"days": 7.05, "interval": 120}


def prom_increase(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Prometheus 2.x `increase()` of one series over [start, end]."""
    points = [(t, v) for t, v in samples if start <= t <= end]
    if len(points) < 2:
        return None
    raw = points[-1][1] - points[0][1]
    raw += sum(prev for (_, prev), (_, cur) in itertools.pairwise(points) if cur < prev)
    sampled = points[-1][0] - points[0][0]
    average = sampled / (len(points) - 1)
    to_start, to_end = points[0][0] - start, end - points[-1][0]
    if raw > 0 and points[0][1] >= 0:
        to_start = min(to_start, sampled * points[0][1] / raw)
    threshold = average * 1.1
    extrapolated = sampled + (to_start if to_start < threshold else average / 2)
    extrapolated += to_end if to_end < threshold else average / 2
    return raw * extrapolated / sampled


@pytest.fixture(scope="module")
def history() -> list[tuple[str, dict[str, str], list[tuple[float, float]]]]:
    return long_history(END, **HISTORY)[1]


Series = list[tuple[float, float]]
SHORT = {"lane-short": 130, "lane-hours": 9000}
"""Lanes whose history began this many seconds before END (first sample on the 15 s grid)."""
SHORT_INTERVAL = 5
ASKED_AT = END - 20
"""Like `cockpit report --at=-20s` right after a Prometheus started."""
WINDOWS = (300, 3600, 6 * 3600, 86400, WEEK, 30 * 86400, 90 * 86400)


def short_history(job: str, seconds: int) -> dict[str, Series]:
    """Two engines of a lane that came up `seconds` before END: running gauges and a counter."""
    rng = random.Random(job)
    first = (END - seconds) // FINE * FINE
    times = [float(t) for t in range(first, END + 1, SHORT_INTERVAL)]
    lanes: dict[str, Series] = {}
    for instance in ("a", "b"):
        lanes[instance] = [(t, float(rng.randint(0, 8))) for t in times]
    return lanes


def add_short_lanes(writer: OpenMetricsWriter) -> None:
    for job, seconds in SHORT.items():
        for instance, gauge in short_history(job, seconds).items():
            labels = {"job": job, "instance": instance, "model_name": "m", "engine": "0"}
            running = "vllm:num_requests_running"
            writer.add(running, "gauge", running, labels, gauge)
            tokens = [(t, 10.0 * i) for i, (t, _) in enumerate(gauge)]
            writer.add("vllm:prompt_tokens", "counter", "vllm:prompt_tokens_total", labels, tokens)


FINE = 15
LOOKBACK = 300


def grid_mean(series: list[Series], start: float, end: float, step: int = FINE) -> float:
    """The time mean of the sum across series, sampled every `step` s (aligned to the epoch)
    in [start, end], each point seeing every series' newest sample of the last 5 min."""
    sums: list[float] = []
    for at in range(math.ceil(start / step) * step, math.floor(end) + 1, step):
        seen = [[v for t, v in samples if at - LOOKBACK < t <= at][-1:] for samples in series]
        if any(seen):
            sums.append(sum(v for found in seen for v in found))
    return sum(sums) / len(sums)


@pytest.fixture(scope="module")
def server(prometheus: PromServer) -> PromServer:
    writer = long_history(END, **HISTORY)[0]
    add_short_lanes(writer)
    remote_write(prometheus, writer)
    return prometheus


@pytest.fixture
async def source(server: PromServer) -> AsyncIterator[PrometheusSource]:
    prom = PrometheusSource(server.url, stats=True)
    yield prom
    await prom.aclose()


async def test_a_week_matches_increase_at_every_refresh(
    source: PrometheusSource,
    history: list[tuple[str, dict[str, str], list[tuple[float, float]]]],
) -> None:
    """Refreshes between two evaluations show the last one: still right to a thousandth."""
    for end in (END, END + 60, END + 3 * 3600):
        totals = await source.read_lane("long", None, SELECTOR, WEEK, end)
        truth = [
            prom_increase(s, end - WEEK, end)
            for name, _, s in history
            if name == "vllm:prompt_tokens_total"
        ]
        expected = sum(t for t in truth if t is not None)
        assert totals.values["prompt_tokens"] == pytest.approx(expected, rel=1e-3)
        assert totals.histograms["prompt_len"] and totals.values["running"] > 0
        assert totals.coverage_note == ""


async def test_six_hours_of_refreshes_cost_under_five_percent_of_naive_queries(
    source: PrometheusSource,
) -> None:
    """Every 5 s for 6 hours (of evaluation time): the samples Prometheus touches, against a
    full-window query at every refresh (each touching what one evaluation touches)."""
    await source.read_lane("long", None, SELECTOR, WEEK, END - 6 * 3600)  # names, first read
    refreshes, evaluations, samples, touched = 0, 0, 0, []
    for at in range(END - 6 * 3600 + 5, END + 1, 5):
        before = source.requests
        totals = await source.read_lane("long", None, SELECTOR, WEEK, at)
        new_step = at // TREND_STEP != (at - 5) // TREND_STEP  # the trend's history asks it
        assert source.requests - before == 1 + new_step
        refreshes += 1
        samples += source.last_samples or 0
        if totals.end == at:
            evaluations += 1
            touched.append(source.last_samples or 0)
    naive = refreshes * sum(touched) / len(touched)
    assert samples / naive <= 0.05, (samples, naive)
    assert evaluations == pytest.approx(6 * 3600 / 600, abs=2)


@pytest.mark.parametrize("job", list(SHORT))
async def test_a_history_shorter_than_the_window_reads_alike_in_every_window(
    server: PromServer, job: str
) -> None:
    """Coverage starts at the first sample, and the gauge mean is that of the data there is,
    as a short window computes it, however long the window."""
    engines = list(short_history(job, SHORT[job]).values())
    first = engines[0][0][0]
    selector = f'{{job="{job}"}}'
    for window in WINDOWS:
        source = PrometheusSource(server.url)
        try:
            totals = await source.read_lane("short", None, selector, window, ASKED_AT)
        finally:
            await source.aclose()
        partial = ASKED_AT - window < first
        assert totals.coverage_note == (f"data since {stamp(first)}" if partial else ""), window
        assert totals.covered_s == (pytest.approx(ASKED_AT - first) if partial else None)
        step = int(gauge_step(window, totals.covered_s))  # a short span: finer than 15 s
        mean = grid_mean(engines, max(first, ASKED_AT - window), ASKED_AT, step)
        assert totals.values["running"] == pytest.approx(mean, rel=1e-9), window


async def test_a_week_read_after_an_hour_is_the_week_a_fresh_source_reads(
    server: PromServer,
) -> None:
    source, fresh = PrometheusSource(server.url), PrometheusSource(server.url)
    try:
        await source.read_lane("long", None, SELECTOR, 3600, END)
        week = await source.read_lane("long", None, SELECTOR, WEEK, END + 30)
        alone = await fresh.read_lane("long", None, SELECTOR, WEEK, END + 30)
    finally:
        await source.aclose()
        await fresh.aclose()
    assert week.values == alone.values and week.histograms == alone.histograms
    assert week.coverage_note == alone.coverage_note == ""

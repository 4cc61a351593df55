"""Long windows from cached blocks: same figures as the naive query, a fraction of the work."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from promharness import (
    OpenMetricsWriter,
    PromServer,
    create_blocks_by_day,
    long_history,
    start_prometheus,
)

from cockpit.sources.prometheus import PrometheusSource
from cockpit.timeutil import stamp

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

END = 1_790_000_000 - (1_790_000_000 % 86400) + 5 * 3600 + 1234
WEEK = 7 * 86400
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
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromServer]:
    workdir: Path = tmp_path_factory.mktemp("prom-long")
    writer = long_history(END, **HISTORY)[0]
    add_short_lanes(writer)
    create_blocks_by_day(writer, workdir / "tsdb")
    prom = start_prometheus(workdir)
    yield prom
    prom.stop()


@pytest.fixture
async def sources(server: PromServer) -> AsyncIterator[tuple[PrometheusSource, PrometheusSource]]:
    cached = PrometheusSource(server.url, stats=True)
    naive = PrometheusSource(server.url, stats=True, block_cache=False)
    yield cached, naive
    await cached.aclose()
    await naive.aclose()


async def test_week_from_blocks_matches_naive_within_a_thousandth(
    sources: tuple[PrometheusSource, PrometheusSource],
    history: list[tuple[str, dict[str, str], list[tuple[float, float]]]],
) -> None:
    cached, naive = sources
    for end in (END, END + 60, END + 3 * 3600):  # refreshes, one after a block closes
        fast = await cached.read_lane("long", None, SELECTOR, WEEK, end)
        slow = await naive.read_lane("long", None, SELECTOR, WEEK, end)
        for key in ("prompt_tokens", "generation_tokens", "running"):
            assert fast.values[key] == pytest.approx(slow.values[key], rel=1e-3), key
        for (le, got), (le_naive, want) in zip(
            fast.histograms["prompt_len"], slow.histograms["prompt_len"], strict=True
        ):
            assert le == le_naive and got == pytest.approx(want, rel=1e-3)
        truth = [
            prom_increase(s, end - WEEK, end)
            for name, _, s in history
            if name == "vllm:prompt_tokens_total"
        ]
        expected = sum(t for t in truth if t is not None)
        assert fast.values["prompt_tokens"] == pytest.approx(expected, rel=1e-3)


async def test_steady_refresh_touches_under_five_percent(
    sources: tuple[PrometheusSource, PrometheusSource],
) -> None:
    cached, naive = sources
    await cached.read_lane("long", None, SELECTOR, WEEK, END)  # fills the block cache
    await naive.read_lane("long", None, SELECTOR, WEEK, END)  # learns the data start
    before = cached.requests
    await cached.read_lane("long", None, SELECTOR, WEEK, END + 30)
    assert cached.requests - before == 1
    steady = cached.last_samples
    await naive.read_lane("long", None, SELECTOR, WEEK, END + 30)
    full = naive.last_samples
    assert steady is not None and full is not None and full > 0
    assert steady / full <= 0.05, (steady, full)


@pytest.mark.parametrize("job", list(SHORT))
async def test_a_history_shorter_than_the_window_reads_alike_in_every_window(
    server: PromServer, job: str
) -> None:
    """Coverage starts at the first sample, and the gauge mean is that of the data there is,
    as a short window computes it, however long the window (blocks from 1 d on)."""
    engines = list(short_history(job, SHORT[job]).values())
    first = engines[0][0][0]
    selector = f'{{job="{job}"}}'
    for window in WINDOWS:
        source = PrometheusSource(server.url)
        try:
            totals = await source.read_lane("short", None, selector, window, ASKED_AT)
            before = source.requests
            again = await source.read_lane("short", None, selector, window, ASKED_AT)
            assert source.requests - before == 1
        finally:
            await source.aclose()
        partial = ASKED_AT - window < first
        note = f"data since {stamp(first)}" if partial else ""
        mean = grid_mean(engines, max(first, ASKED_AT - window), ASKED_AT)
        for read in (totals, again):
            assert read.coverage_note == note, window
            assert read.covered_s == (pytest.approx(ASKED_AT - first) if partial else None)
            assert read.values["running"] == pytest.approx(mean, rel=1e-9), window


async def test_a_week_after_an_hour_fills_its_blocks_once(server: PromServer) -> None:
    """The hour's data start only bounds the week's: the week's gauges are not sampled as if
    the history were an hour long (which would fill the blocks again at the next refresh)."""
    source = PrometheusSource(server.url)
    naive = PrometheusSource(server.url, block_cache=False)
    try:
        await source.read_lane("long", None, SELECTOR, 3600, END)
        week = await source.read_lane("long", None, SELECTOR, WEEK, END)
        before = source.requests
        again = await source.read_lane("long", None, SELECTOR, WEEK, END + 30)
        assert source.requests - before == 1
        slow = await naive.read_lane("long", None, SELECTOR, WEEK, END + 30)
    finally:
        await source.aclose()
        await naive.aclose()
    assert week.coverage_note == again.coverage_note == ""
    assert again.values["running"] == pytest.approx(slow.values["running"], rel=1e-6)

"""Long windows from cached blocks: same figures as the naive query, a fraction of the work."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from promharness import PromServer, create_blocks_by_day, long_history, start_prometheus

from cockpit.sources.prometheus import PrometheusSource

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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromServer]:
    workdir: Path = tmp_path_factory.mktemp("prom-long")
    create_blocks_by_day(long_history(END, **HISTORY)[0], workdir / "tsdb")
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

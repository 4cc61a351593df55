"""A gauge's mean over a short window, as a real Prometheus answers the lane's query: sampled
at the lane's scrapes, not at three 15 s instants."""

from __future__ import annotations

import pytest

from cockpit.core.figures import lane_figures
from cockpit.core.promql import gauge_step
from cockpit.sources.prometheus import PrometheusSource
from tests.support.promharness import OpenMetricsWriter, PromServer, remote_write

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

END = 1_790_000_010
"""Ten seconds past a multiple of 15 s: the window's 15 s instants fall on idle seconds."""
BUSY = range(1, 8)
"""The seconds of each 15 s in which a request runs (7 of 15: a mean of 0.47)."""


def bursts() -> OpenMetricsWriter:
    """A lane scraped every second for ten minutes: one request running in short bursts,
    never at a multiple of 15 s, and the KV cache 40 % used while it runs."""
    writer = OpenMetricsWriter()
    times = range(END - 600, END + 1)
    running = [(t, 1.0 if t % 15 in BUSY else 0.0) for t in times]
    labels = {"job": "bursty", "model_name": "m"}
    writer.add("vllm:num_requests_running", "gauge", "vllm:num_requests_running", labels, running)
    kv = [(t, 0.4 * value) for t, value in running]
    writer.add("vllm:kv_cache_usage_perc", "gauge", "vllm:kv_cache_usage_perc", labels, kv)
    return writer


@pytest.fixture(scope="module")
def server(prometheus: PromServer) -> PromServer:
    """The run's Prometheus, holding the bursty lane."""
    remote_write(prometheus, bursts())
    return prometheus


def test_a_short_windows_gauges_are_sampled_finer_than_15_s() -> None:
    assert gauge_step(45.0, None) == 1.0
    assert gauge_step(300.0, None) == 5.0
    assert gauge_step(3600.0, None) == 15.0


async def test_running_and_kv_means_over_45_s_follow_the_scrapes(server: PromServer) -> None:
    source = PrometheusSource(server.url)
    try:
        totals = await source.read_lane("bursty", "vllm", '{job="bursty"}', 45.0, END)
    finally:
        await source.aclose()
    figures = lane_figures(totals)
    busy = sum(1 for t in range(END - 44, END + 1) if t % 15 in BUSY) / 45
    assert figures.value("running") == pytest.approx(busy, abs=0.05)
    assert figures.value("kv_usage") == pytest.approx(0.4 * busy, abs=0.02)

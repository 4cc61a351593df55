"""A real vLLM's series in a real Prometheus, the engine gone before the evaluation instant:
what the window saw (its KV capacity, MFU counters at rest) is said, with checked reasons."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.core.figures import lane_figures
from cockpit.sources.prometheus import STALE, PrometheusSource
from tests.support.promharness import (
    OpenMetricsWriter,
    PromServer,
    remote_write,
)
from tests.support.repo import VLLM_FIXTURES

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

FIXTURE = VLLM_FIXTURES / "metrics_real.txt"
END = 1_790_000_000
STOPPED = END - 900
"""The engine's last scrape: 15 minutes before END, so no instant lookup (5 m) sees it."""
SELECTOR = '{job="real"}'


def real_history() -> OpenMetricsWriter:
    """The recorded exposition scraped every 15 s for 40 minutes, then the engine gone."""
    writer = OpenMetricsWriter()
    times = range(STOPPED - 2400, STOPPED + 1, 15)
    for family in text_string_to_metric_families(FIXTURE.read_text()):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels = {**sample.labels, "job": "real"}
            writer.add(sample.name, "unknown", sample.name, labels,
                       [(t, sample.value) for t in times])  # fmt: skip
    return writer


@pytest.fixture(scope="module")
def server(prometheus: PromServer) -> PromServer:
    remote_write(prometheus, real_history())
    return prometheus


@pytest.fixture
async def source(server: PromServer) -> AsyncIterator[PrometheusSource]:
    source = PrometheusSource(server.url)
    yield source
    await source.aclose()


async def test_kv_capacity_is_the_last_seen_in_the_window(source: PrometheusSource) -> None:
    totals = await source.read_lane("real", "vllm", SELECTOR, 3600.0, END)
    assert totals.kv_capacity_tokens == 1048576  # kv_cache_size_tokens of cache_config_info
    assert totals.warnings == (STALE,)  # the engine's series ended inside the window
    figures = lane_figures(totals, 0.0)
    resident = figures["kv_resident_tokens"]
    assert resident.value == pytest.approx(totals.values["kv_usage"] * 1048576)
    # The CPU build exposes the MFU counters at 0: said as seen, not guessed at.
    flops = figures["measured_flops"]
    assert flops.value is None
    assert flops.reason == "MFU counters exposed but not moving in the window"


async def test_a_window_without_the_capacity_says_so(source: PrometheusSource) -> None:
    totals = await source.read_lane("real", "vllm", SELECTOR, 300.0, END)
    assert totals.kv_capacity_tokens is None
    reason = "no vllm:cache_config_info sample in the window"
    assert totals.missing["kv_capacity_tokens"] == reason
    figures = lane_figures(totals, 0.0)
    assert figures["kv_capacity_tokens"].reason == reason

"""The engine's labelled metrics (finish reasons, cache tiers, draft positions, TP ranks) read
the same through a real Prometheus as by direct scrape, and the demo lane exposes them all."""

from __future__ import annotations

import pytest

from cockpit.core.figures import lane_figures
from cockpit.demo import SimulatedLane
from cockpit.sources.prometheus import PrometheusSource
from cockpit.sources.scrape import ScrapeSource
from tests.support.promharness import (
    PromServer,
    remote_write,
)
from tests.support.replayed import END, START, WINDOW, history, scraped
from tests.support.repo import FIXTURES, require_fixture

EXPOSITIONS = {"vllm": "vllm/metrics_real_specdec.txt", "sglang": "sglang/metrics_tp2.txt"}


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {job: require_fixture(FIXTURES / path).read_text() for job, path in EXPOSITIONS.items()}


@pytest.fixture(scope="module")
def server(texts: dict[str, str], prometheus: PromServer) -> PromServer:
    remote_write(prometheus, history(texts))
    return prometheus


@pytest.mark.parametrize("job", sorted(EXPOSITIONS))
async def test_prometheus_and_direct_scrape_agree_on_labelled_metrics(
    server: PromServer, texts: dict[str, str], job: str
) -> None:
    direct = scraped(texts[job])
    source = PrometheusSource(server.url)
    try:
        through = await source.read_lane("lane", None, f'{{job="{job}"}}', WINDOW, END)
    finally:
        await source.aclose()
    assert through.dialect == direct.dialect == job
    assert set(through.values) == set(direct.values)
    for key, value in direct.values.items():
        assert through.values[key] == pytest.approx(value, rel=1e-6), key
    flat = {(k, label): v for k, g in through.groups.items() for label, v in g.items()}
    want = {(k, label): v for k, g in direct.groups.items() for label, v in g.items()}
    assert flat == pytest.approx(want, rel=1e-6)
    assert through.kv_capacity_tokens == direct.kv_capacity_tokens
    figures, expected = lane_figures(through), lane_figures(direct)
    assert figures.engine_keys == expected.engine_keys
    if job == "vllm":  # a quarter of the traffic falls before the window
        assert set(through.groups) >= {"finished", "cached_by_source", "spec_accepted_by_pos"}
        assert through.groups["finished"]["length"] == pytest.approx(96 * 0.75)
        assert through.groups["sleep_state"]["awake"] == 1.0
    else:  # two TP ranks export the same gauges: one counts
        assert through.values["running"] == 6 and through.kv_capacity_tokens == 80_000
        assert through.values["preemptions"] == pytest.approx(3 * 0.75)


def test_the_demo_lane_exposes_every_engine_figure() -> None:
    lane = SimulatedLane("gb300-dsv4", seed=5, warm_start=600.0, clock=lambda: START)
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for k in range(4):
        source.ingest(lane.render(), START + 60 * k)
        lane.step(60)
    figures = lane_figures(source.totals("demo", "", 3600, START + 180))
    missing = {k: figures[k].reason for k in figures.engine_keys if figures[k].missing}
    # The demo has no KV connector: nothing is looked up in an external cache.
    assert missing == {"external_cache_hit_rate": "no data in window"}
    assert figures.value("sleep_awake") == 1.0 and figures.value("admission_rejections") == 0
    assert (figures.value("finished_stop") or 0) > 0

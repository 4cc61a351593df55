"""The fleet against real servers: a backfilled history of six lanes (vLLM and SGLang, three
engines each) found by `job` under its own `fleet="live"` (the servers hold other modules'
series too), read at pinned times, every column checked against the lane panes' own figure
for that lane (PrometheusSource.read_lane + lane_figures) at the same time.

The same tests run on Prometheus and on VictoriaMetrics (skipped only where its binary is
absent; under CI=true a missing binary fails): the run's servers (tests/conftest.py).
"""

from __future__ import annotations

import json
import math

import httpx
import pytest

from cockpit.cli.main import main
from cockpit.config.schema import LaneConfig
from cockpit.core.figures import lane_figures
from cockpit.core.fleet import AGE, FIGURE_COLUMNS, SLO_COLUMNS, FleetView
from cockpit.core.slo import Slo
from cockpit.runtime.feeds import prometheus_source
from cockpit.sources.fleet import FleetSource
from cockpit.sources.prometheus import PARTIAL, PrometheusSource
from tests.support.faultproxy import FaultProxy, json_answer
from tests.support.fleet import (
    END,
    FIRST,
    LANES,
    LAST_SAMPLE,
    MATCH,
    WINDOW_S,
    lane_selector,
    row_of,
)
from tests.support.promharness import PromServer

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

SLO = Slo(ttft_s=0.5)
"""A TTFT target (a bound of the simulated buckets): the overview's TTFT SLO column."""


async def _views(url: str) -> tuple[FleetView, FleetView, int]:
    fleet = FleetSource(PrometheusSource(url), "job", MATCH, slo=SLO)
    try:
        first = await fleet.read(WINDOW_S, FIRST)
        before = fleet.source.requests
        second = await fleet.read(WINDOW_S, END)
        return first, second, fleet.source.requests - before
    finally:
        await fleet.aclose()


async def test_lanes_found_added_and_gone(fleet_server: PromServer) -> None:
    first, second, requests = await _views(fleet_server.url)
    assert requests == 1  # the whole fleet, one request
    assert [row.lane for row in first.rows] == ["lane-a", "lane-b", "lane-c", "lane-down",
                                                "lane-legacy", "lane-old"]  # fmt: skip
    assert all(row.up and not row.gone for row in first.rows)
    states = {row.lane: (row.up, row.gone) for row in second.rows}
    assert states == {
        "lane-a": (True, False),
        "lane-b": (True, False),
        "lane-c": (True, False),
        "lane-down": (False, False),
        "lane-legacy": (True, False),
        "lane-new": (True, False),
        "lane-old": (False, True),  # kept, said gone
    }
    down = row_of(second, "lane-down")
    assert down is not None and "up == 0" in down.down_reason
    assert {row.lane: row.dialect for row in second.rows if row.up} == {
        "lane-a": "vllm", "lane-b": "vllm", "lane-c": "sglang", "lane-new": "sglang",
        "lane-legacy": "vllm-legacy",
    }  # fmt: skip
    past = {"ttft_p95" in row.above for row in second.rows if row.up}
    assert past == {True, False}  # p95 within the buckets on some lanes, past them on others
    assert all(
        len(row.history("requests_per_s")) == 2 for row in second.rows if row.lane != "lane-new"
    )


@pytest.mark.parametrize("lane", ["lane-a", "lane-b", "lane-c", "lane-legacy", "lane-new"])
async def test_every_column_is_the_lane_panes_figure(fleet_server: PromServer, lane: str) -> None:
    _, view, _ = await _views(fleet_server.url)
    row = row_of(view, lane)
    assert row is not None
    source = PrometheusSource(fleet_server.url)
    try:
        totals = await source.read_lane(lane, None, f"{{{lane_selector(lane)}}}", WINDOW_S, END)
    finally:
        await source.aclose()
    figures = lane_figures(totals, slo=SLO)
    assert row.dialect == totals.dialect
    assert row.targets == {"ttft_slo_attainment"}
    for key in FIGURE_COLUMNS:
        expected = figures[key]
        if key in SLO_COLUMNS and key not in row.targets:  # no target: missing in both, why
            assert row.values[key] is None and expected.value is None
            assert row.reasons[key] == expected.reason
            continue
        if key == "decode_share" and totals.dialect == "sglang":  # it has no decode time
            assert row.values[key] is None and expected.value is None
            assert row.reasons[key] == expected.reason  # missing in both, and why
            continue
        assert expected.value is not None, f"{key}: {expected.reason}"
        assert row.values[key] == pytest.approx(expected.value, rel=1e-9), key
        assert (key in row.above) == expected.above, key
    age = row.values[AGE]
    assert age is not None and math.isclose(age, END - LAST_SAMPLE[lane])


async def test_tenant_header_and_a_partial_answer_are_carried(fleet_server: PromServer) -> None:
    """Mimir reads the tenant from X-Scope-OrgID; a Thanos or VictoriaMetrics cluster whose
    stores did not all answer says so (`isPartial`, `warnings`): the view shows it."""
    query = {"query": f"up{{{MATCH}}}", "time": str(END)}
    real = httpx.post(f"{fleet_server.url}/api/v1/query", data=query)
    partial = {**real.json(), "isPartial": True, "warnings": ["store eu-1 timed out"]}
    with FaultProxy(fleet_server.url) as proxy:
        lane = LaneConfig("", prometheus=proxy.url, tenant="team-a")
        fleet = FleetSource(prometheus_source(lane), "job", MATCH)
        try:
            view = await fleet.read(WINDOW_S, END)
            assert proxy.seen[-1].headers.get("x-scope-orgid") == "team-a"
            assert not view.partial and view.warnings == ()
            assert len(view.rows) == len(LANES)
            proxy.canned["/api/v1/query"] = json_answer(partial)
            view = await fleet.read(WINDOW_S, END)
        finally:
            await fleet.aclose()
    assert view.partial
    assert view.warnings == ("server warning: store eu-1 timed out", PARTIAL)
    assert {row.lane for row in view.rows} == {lane.name for lane in LANES}  # kept, gone


async def test_victoria_metrics_increase_does_not_extrapolate(
    fleet_prometheus: PromServer, fleet_victoria_metrics: PromServer
) -> None:
    """Prometheus's `increase()` extrapolates the first and last samples in the window to its
    edges; VictoriaMetrics' takes the sample just before the window as the base and does not
    extrapolate. With a sample every 15 s over 1 h they differ by at most one interval's
    worth of counts, 15 s / 3600 s ≈ 0.42 % of the window (plus a counter step's noise):
    the two servers' counter columns agree to 1 %, not to the last bit, and that is why."""
    prometheus, victoria = fleet_prometheus, fleet_victoria_metrics
    _, on_prometheus, _ = await _views(prometheus.url)
    _, on_victoria, _ = await _views(victoria.url)
    for lane in ("lane-a", "lane-b", "lane-c"):
        a, b = row_of(on_prometheus, lane), row_of(on_victoria, lane)
        assert a is not None and b is not None
        for key in ("requests_per_s", "generation_tok_s"):
            assert a.values[key] != b.values[key]  # they do differ...
            assert b.values[key] == pytest.approx(a.values[key], rel=0.01)  # ...by an interval
        for key in ("running_now", "waiting_now", "kv_usage_now"):  # gauges: the same sample
            assert b.values[key] == pytest.approx(a.values[key], rel=1e-9)


@pytest.mark.parametrize("form", ["md", "json"])
def test_report_fleet_lists_every_lane(
    fleet_server: PromServer, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", "--fleet", "--prometheus", fleet_server.url, "--lanes-by", "job",
            "--selector", MATCH, "--window", "1h", "--at", str(END), "--format", form]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    if form == "json":
        lanes = {lane["lane"]: lane for lane in json.loads(out)["lanes"]}
        assert {name: lane["state"] for name, lane in lanes.items()} == {
            "lane-a": "up", "lane-b": "up", "lane-c": "up", "lane-down": "down",
            "lane-legacy": "up", "lane-new": "up", "lane-old": "gone",
        }  # fmt: skip
        assert lanes["lane-c"]["values"]["decode_share"] is None
        assert "SGLang" in lanes["lane-c"]["reasons"]["decode_share"]
        return
    assert out.startswith("# Fleet — 7 lanes (5 up, 1 down, 1 gone)\n")
    rows = [line for line in out.splitlines() if line.startswith("| lane-")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| lane-a", "| lane-b", "| lane-c", "| lane-down", "| lane-legacy", "| lane-new",
        "| lane-old",
    ]  # fmt: skip
    assert "- lane-down: its 3 scrape target(s) are down (up == 0)" in out

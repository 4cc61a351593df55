"""KV offload and transfer figures against a real Prometheus and a direct scrape.

Three lanes are made of vLLM's expositions (tests/fixtures/vllm, README there): the real plain
lane alone, with the OffloadingConnector's series appended, with NIXL's appended; a fourth has
both connectors but its failure counters never move. Every counter and histogram climbs
linearly from 0 at START to the fixture's value at END (a failure counter by whole failures),
gauges hold the fixture's value, one sample every 15 s with one at each window edge, so
`increase()` extrapolates nothing. Each figure must equal Prometheus's own arithmetic over the
same series, on both paths.
"""

from __future__ import annotations

import math
from functools import cache

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.core.catalogue import pane_keys
from cockpit.core.compare import compare
from cockpit.core.figures import LaneFigures, lane_figures
from cockpit.core.health import Thresholds, check
from cockpit.core.model import Figure, LaneTotals, frozen_map
from cockpit.core.promql import lane_plan
from cockpit.core.snapshot import LaneSnapshot
from cockpit.runtime.report import json_receipt, markdown_receipt
from cockpit.sources.prometheus import PrometheusSource
from cockpit.sources.scrape import ScrapeSource
from cockpit.widgets.offload import offload_view
from tests.support.promharness import OpenMetricsWriter, PromServer, instant_value, remote_write
from tests.support.repo import VLLM_FIXTURES, require_fixture

pytestmark = pytest.mark.prometheus

STEP = 15
END = 1_796_400_000 - (1_796_400_000 % 3600)
START = END - 2 * 3600
WINDOW = 3600
FAILURE_COUNTERS = {
    "offload_alloc_failures": "vllm:kv_offload_allocation_failure_total",
    "nixl_failed_transfers": "vllm:nixl_num_failed_transfers_total",
    "nixl_failed_notifications": "vllm:nixl_num_failed_notifications_total",
    "nixl_expired_reqs": "vllm:nixl_num_kv_expired_reqs_total",
}
"""Each failure figure and the counter it reads."""
SAID = {
    "offload_alloc_failures": "KV offload allocation failures in the window",
    "nixl_failed_transfers": "NIXL failed transfers in the window",
    "nixl_failed_notifications": "NIXL failed notifications in the window",
    "nixl_expired_reqs": "NIXL requests whose KV expired in the window",
}
"""How the health line names each counter."""


def _fixture(name: str) -> str:
    return require_fixture(VLLM_FIXTURES / name).read_text()


PLAIN = _fixture("metrics_real.txt")
OFFLOAD = _fixture("metrics_offload_connector.txt")
NIXL = _fixture("metrics_nixl_connector.txt")
SGLANG = require_fixture(VLLM_FIXTURES.parent / "sglang" / "metrics_tp2.txt").read_text()
HICACHE = require_fixture(VLLM_FIXTURES.parent / "sglang" / "metrics_hicache.txt").read_text()
LANES = {
    "kvoff-plain": (PLAIN, False),
    "kvoff-offload": (PLAIN + OFFLOAD, False),
    "kvoff-nixl": (PLAIN + NIXL, False),
    "kvoff-quiet": (PLAIN + OFFLOAD + NIXL, True),
    "kvoff-sglang": (SGLANG + HICACHE, False),
}
"""Job -> its exposition at END, and whether its failure counters stand still in the window."""

Labels = tuple[tuple[str, str], ...]
Sample = tuple[str, Labels, float, bool]
"""(name, labels, value at END, whether it climbs: a counter or a histogram's part)."""


def samples(text: str, still: bool) -> list[Sample]:
    """The exposition's engine samples, without the `_created` series."""
    found = []
    for family in text_string_to_metric_families(text):
        climbs = family.type in ("counter", "histogram")
        for s in family.samples:
            if not s.name.startswith(("vllm:", "sglang:")) or s.name.endswith("_created"):
                continue
            moves = climbs and not (still and s.name in FAILURE_COUNTERS.values())
            found.append((s.name, tuple(sorted(s.labels.items())), s.value, moves))
    return found


def value_at(sample: Sample, t: float) -> float:
    """A failure counter counts whole failures; the rest climb smoothly."""
    name, _, value, climbs = sample
    if not climbs:
        return value
    reached = value * (t - START) / (END - START)
    return float(math.floor(reached)) if name in FAILURE_COUNTERS.values() else reached


SAMPLES = {job: samples(text, still) for job, (text, still) in LANES.items()}


@pytest.fixture(scope="module")
def prometheus(prometheus: PromServer) -> PromServer:
    writer, times = OpenMetricsWriter(), range(START, END + 1, STEP)
    for job, found in SAMPLES.items():
        for sample in found:
            name, labels = sample[0], {**dict(sample[1]), "job": job}
            family = name.removesuffix("_total").rsplit("_bucket", 1)[0]
            writer.add(family, "unknown", name, labels, [(t, value_at(sample, t)) for t in times])
    remote_write(prometheus, writer)
    return prometheus


def promql(server: PromServer, query: str) -> float:
    return instant_value(server, query, END)


async def read_prometheus(server: PromServer, job: str) -> LaneTotals:
    source = PrometheusSource(server.url)
    try:
        return await source.read_lane(job, None, f'{{job="{job}"}}', WINDOW, END)
    finally:
        await source.aclose()


@cache
def read_scrape(job: str) -> LaneTotals:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for at in map(float, range(END - WINDOW - STEP, END + 1, STEP)):
        lines = []
        for sample in SAMPLES[job]:
            labels = ",".join(f'{k}="{v}"' for k, v in sample[1])
            lines.append(f"{sample[0]}{{{labels}}} {value_at(sample, at)!r}")
        source.ingest("\n".join(lines) + "\n", at)
    return source.totals(job, "", WINDOW, END)


async def both(server: PromServer, job: str) -> list[dict[str, Figure]]:
    """The lane's figures read through Prometheus and through a direct scrape."""
    totals = (await read_prometheus(server, job), read_scrape(job))
    return [dict(lane_figures(each).figures) for each in totals]


def inc(metric: str, job: str) -> str:
    return f'sum(increase({metric}{{job="{job}"}}[1h]))'


def offload_expected(server: PromServer, job: str) -> dict[str, float]:
    """Each offload figure as PromQL works it out."""
    expected = {}
    for way in ("load", "store"):
        moved, spent = (
            inc(f"vllm:kv_offload_{way}_bytes_total", job),
            inc(f"vllm:kv_offload_{way}_time_total", job),
        )
        expected[f"offload_{way}_bytes_s"] = promql(server, f"{moved} / {WINDOW}")
        expected[f"offload_{way}_time_s"] = promql(server, f"{spent} / {WINDOW}")
        expected[f"offload_{way}_bandwidth"] = promql(server, f"{moved} / {spent}")
    usage = f'avg(avg_over_time(vllm:kv_offload_cpu_cache_usage_perc{{job="{job}"}}[1h]))'
    expected["offload_cpu_usage"] = promql(server, usage)
    expected["offload_alloc_failures"] = promql(
        server, inc(FAILURE_COUNTERS["offload_alloc_failures"], job)
    )
    expected["offload_stores_skipped"] = promql(
        server, inc("vllm:kv_offload_stores_skipped_total", job)
    )
    return expected


def nixl_expected(server: PromServer, job: str) -> dict[str, float]:
    xfer = "vllm:nixl_xfer_time_seconds"
    expected = {
        "nixl_xfer_mean": promql(
            server, f"{inc(xfer + '_sum', job)} / {inc(xfer + '_count', job)}"
        ),
        "nixl_bytes_s": promql(server, f"{inc('vllm:nixl_bytes_transferred_sum', job)} / {WINDOW}"),
    }
    for key in ("nixl_failed_transfers", "nixl_failed_notifications", "nixl_expired_reqs"):
        expected[key] = promql(server, inc(FAILURE_COUNTERS[key], job))
    return expected


async def test_offload_figures_are_prometheus_s_arithmetic(prometheus: PromServer) -> None:
    expected = offload_expected(prometheus, "kvoff-offload")
    # By hand from the fixture: half its 3.2 GB of loads fall in the last of two hours.
    assert expected["offload_load_bytes_s"] == pytest.approx(3.2e9 / 2 / 3600)
    assert expected["offload_load_bandwidth"] == pytest.approx(3.2e9 / 1.6)
    for figures in await both(prometheus, "kvoff-offload"):
        for key, value in expected.items():
            assert figures[key].value == pytest.approx(value, rel=1e-9), key
        assert all(figures[key].missing for key in nixl_expected_keys())


def nixl_expected_keys() -> tuple[str, ...]:
    return tuple(key for key in pane_keys("offload") if key.startswith("nixl_"))


async def test_nixl_figures_are_prometheus_s_arithmetic(prometheus: PromServer) -> None:
    expected = nixl_expected(prometheus, "kvoff-nixl")
    assert expected["nixl_xfer_mean"] == pytest.approx(3.9 / 250)  # 200 × 12 ms + 50 × 30 ms
    for figures in await both(prometheus, "kvoff-nixl"):
        for key, value in expected.items():
            assert figures[key].value == pytest.approx(value, rel=1e-9), key
        offload = [key for key in pane_keys("offload") if key.startswith("offload_")]
        assert all(figures[key].missing for key in offload)


async def test_sglang_s_hicache_times_its_host_tier_as_prometheus_does(
    prometheus: PromServer,
) -> None:
    """Both TP ranks export the same series: the larger is taken, never their sum."""
    job, per = "kvoff-sglang", 'max without (tp_rank) (increase({}{{job="kvoff-sglang"}}[1h]))'
    expected = {
        "offload_load_time_s": per.format("sglang:load_back_duration_seconds_sum"),
        "offload_store_time_s": per.format("sglang:eviction_duration_seconds_sum"),
    }
    for figures in await both(prometheus, job):
        for key, query in expected.items():
            value = promql(prometheus, f"sum({query}) / {WINDOW}")
            assert figures[key].value == pytest.approx(value, rel=1e-9), key
            assert figures[key].reason.startswith("HiCache")  # how SGLang's was found
        assert figures["offload_load_time_s"].value == pytest.approx(0.72 / 2 / WINDOW)
        assert "not bytes" in figures["offload_load_bytes_s"].reason
        lane = snapshot(job, figures, read_scrape(job))
        shown = [line.label for line in offload_view(lane).lines]
        assert shown and not any(label.startswith("NIXL") for label in shown)


def snapshot(job: str, figures: dict[str, Figure], totals: LaneTotals) -> LaneSnapshot:
    return LaneSnapshot(job, "1h", totals, LaneFigures(frozen_map(figures)), None, None)


async def test_a_plain_lane_has_no_offload_pane_no_rule_and_no_receipt_table(
    prometheus: PromServer,
) -> None:
    totals = (await read_prometheus(prometheus, "kvoff-plain"), read_scrape("kvoff-plain"))
    for each in totals:
        figures = dict(lane_figures(each).figures)
        for key in pane_keys("offload"):
            assert figures[key].missing and "not exposed" in figures[key].reason, key
        lane = snapshot("kvoff-plain", figures, each)
        assert offload_view(lane).lines == ()
        assert "KV offload" not in markdown_receipt(lane, None)
        assert not {f.rule for f in check(lane, Thresholds())} & RULES


RULES = {"offload_failing", "transfer_failing", "notify_failing", "kv_expiring"}


async def test_each_failure_counter_that_moves_lights_its_rule(prometheus: PromServer) -> None:
    for job in ("kvoff-offload", "kvoff-nixl"):
        for figures in await both(prometheus, job):
            lane = snapshot(job, figures, read_scrape(job))
            found = {f.figure_key: f for f in check(lane, Thresholds()) if f.rule in RULES}
            moved = {key for key in FAILURE_COUNTERS if (figures[key].value or 0) > 0}
            assert moved and set(found) == moved, job
            for key in moved:  # the counter's words and its increase over the window
                increase = promql(prometheus, inc(FAILURE_COUNTERS[key], job))
                assert found[key].text == f"{SAID[key]}: {increase:,.0f} (alert at > 0)"


async def test_failure_counters_that_stand_still_light_nothing(prometheus: PromServer) -> None:
    for figures in await both(prometheus, "kvoff-quiet"):
        assert all(figures[key].value == 0 for key in FAILURE_COUNTERS)
        lane = snapshot("kvoff-quiet", figures, read_scrape("kvoff-quiet"))
        assert not {f.rule for f in check(lane, Thresholds())} & RULES
        assert len(offload_view(lane).lines) == len(pane_keys("offload"))  # both connectors


def test_receipts_and_card_compare_carry_the_figures() -> None:
    lanes = []
    for job in ("kvoff-quiet", "kvoff-offload"):
        totals = read_scrape(job)
        lanes.append(snapshot(job, dict(lane_figures(totals).figures), totals))
    quiet, offload = lanes
    text, data = markdown_receipt(quiet, None), json_receipt(quiet, None)
    table = text.split("### KV offload and transfer (1h)", 1)[1]
    for key in pane_keys("offload"):
        figure = quiet.figures.figures[key] if quiet.figures else None
        assert figure is not None and f"| {figure.label} |" in table, key
        assert data["lane"]["figures"][key]["value"] == figure.value, key
    other = json_receipt(offload, None)["lane"]["figures"]
    rows = {row.key: row for row in compare(data["lane"]["figures"], other)}
    moved = rows["offload_alloc_failures"]
    assert offload.figures is not None
    assert (moved.a, moved.b) == (0.0, offload.figures["offload_alloc_failures"].value)
    assert moved.b == 2  # of its 4 failures over two hours, 2 in the last
    assert rows["nixl_xfer_mean"].b is None  # that lane has no NIXL


def names(text: str) -> frozenset[str]:
    return frozenset(s.name for f in text_string_to_metric_families(text) for s in f.samples)


def test_a_plain_lane_asks_prometheus_for_no_connector_series() -> None:
    """The plan of a lane's one query leaves out the series its engine doesn't expose."""
    selector = '{job="lane"}'
    plain = lane_plan("vllm", selector, WINDOW, names(PLAIN), False)
    assert "kv_offload" not in plain.query and "nixl" not in plain.query
    assert set(CONNECTOR_KEYS) <= set(plain.missing)
    both_connectors = lane_plan("vllm", selector, WINDOW, names(PLAIN + OFFLOAD + NIXL), False)
    assert set(CONNECTOR_KEYS) <= set(both_connectors.exprs)
    assert "vllm:kv_offload_load_bytes_total" in both_connectors.query


CONNECTOR_KEYS = ("offload_load_bytes", "offload_cpu_usage", "nixl_xfer_sum", "nixl_expired_reqs")

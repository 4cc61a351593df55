"""The demo's lane with KV connectors (vLLM's NixlConnector and OffloadingConnector with a CPU
tier, `cockpit.demo.lane_presets.DEMO_CONNECTORS`) read like a real one: two of its expositions
through the cockpit's scrape parser, its offload pane's and cache pane's figures against hand
arithmetic over the same two texts, and its series shaped as vLLM's source defines them
(`kv_connector/v1/offloading/metrics.py`, `v1/kv_offload/cpu/spec.py`, `nixl/stats.py`,
`v1/metrics/loggers.py`; tests/fixtures/vllm/README.md)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache

import pytest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from cockpit.config.schema import Config, LaneConfig
from cockpit.core.catalogue import SOURCE_WORDS, pane_keys
from cockpit.core.figures import LaneFigures, lane_figures
from cockpit.core.model import LaneTotals
from cockpit.core.snapshot import LaneSnapshot
from cockpit.demo import Demo
from cockpit.demo.lane import SimulatedLane, serve_metrics
from cockpit.demo.lane_presets import DEMO_CONNECTORS
from cockpit.runtime.feeds import read_once
from cockpit.runtime.report import markdown_receipt
from cockpit.sources.scrape import ScrapeSource
from cockpit.widgets.cache_gauge import cache_view
from cockpit.widgets.offload import offload_view
from cockpit.widgets.pane import Row
from tests.support.loopback import Scrape

LANE = "h100-llama8b"
T0 = 1_796_400_000.0
STEP_S = 120.0
WINDOW_S = 300.0
KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2
"""Llama 3.1 8B in bf16: 32 layers × 8 KV heads × 128 dims × (K, V) × 2 bytes."""
DESCRIPTORS_PER_BLOCK = 32 * 2
"""NIXL reads one descriptor per block in each registered region: a layer's K, its V."""
BLOCK = 16
FLAT_COUNTERS = {
    "offload_load_bytes": "vllm:kv_offload_load_bytes_total",
    "offload_load_time": "vllm:kv_offload_load_time_total",
    "offload_store_bytes": "vllm:kv_offload_store_bytes_total",
    "offload_store_time": "vllm:kv_offload_store_time_total",
}

NIXL_FAILURES = {
    "nixl_failed_transfers": "vllm:nixl_num_failed_transfers_total",
    "nixl_failed_notifications": "vllm:nixl_num_failed_notifications_total",
    "nixl_expired_reqs": "vllm:nixl_num_kv_expired_reqs_total",
}


def connector_lane(seed: int = 5, clock: Callable[[], float] = lambda: T0) -> SimulatedLane:
    return SimulatedLane(
        LANE, seed=seed, warm_start=900.0, clock=clock, kv_connector=DEMO_CONNECTORS[LANE]
    )


@dataclass(frozen=True)
class Read:
    """Two expositions STEP_S apart and what the cockpit made of them."""

    first: Scrape
    second: Scrape
    figures: LaneFigures
    snapshot: LaneSnapshot

    def delta(self, name: str, **labels: str) -> float:
        return self.second.total(name, **labels) - self.first.total(name, **labels)


def rows_of(lines: Iterable[object]) -> dict[str, Row]:
    """A pane's `label … value` rows by label."""
    return {line.label: line for line in lines if isinstance(line, Row)}


@cache
def read() -> Read:
    lane = connector_lane()
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    first = lane.render()
    source.ingest(first, T0)
    lane.step(STEP_S)
    second = lane.render()
    source.ingest(second, T0 + STEP_S)
    totals = source.totals(LANE, "", WINDOW_S, T0 + STEP_S)
    figures = lane_figures(totals)
    snapshot = LaneSnapshot(LANE, "5m", totals, figures, None, None)
    return Read(Scrape(first), Scrape(second), figures, snapshot)


def offload_by_hand(r: Read) -> dict[str, float]:
    """Each offload-pane figure from the two texts: increases over the STEP_S between them."""
    expected = {}
    for way in ("load", "store"):
        moved = r.delta(f"vllm:kv_offload_{way}_bytes_total")
        spent = r.delta(f"vllm:kv_offload_{way}_time_total")
        expected |= {f"offload_{way}_bytes_s": moved / STEP_S,
                     f"offload_{way}_time_s": spent / STEP_S,
                     f"offload_{way}_bandwidth": moved / spent}  # fmt: skip
    usage = "vllm:kv_offload_cpu_cache_usage_perc"
    expected["offload_cpu_usage"] = (r.first.total(usage) + r.second.total(usage)) / 2
    expected["offload_alloc_failures"] = r.delta("vllm:kv_offload_allocation_failure_total")
    expected["offload_stores_skipped"] = r.delta("vllm:kv_offload_stores_skipped_total")
    xfer = "vllm:nixl_xfer_time_seconds"
    expected["nixl_xfer_mean"] = r.delta(f"{xfer}_sum") / r.delta(f"{xfer}_count")
    expected["nixl_bytes_s"] = r.delta("vllm:nixl_bytes_transferred_sum") / STEP_S
    for key, name in NIXL_FAILURES.items():
        expected[key] = r.delta(name)
    return expected


def test_the_offload_pane_shows_each_figure_as_hand_arithmetic_over_two_expositions() -> None:
    r = read()
    expected = offload_by_hand(r)
    assert set(expected) == set(pane_keys("offload"))  # both connectors, every figure
    assert expected["offload_load_bytes_s"] > 0 and expected["offload_store_bytes_s"] > 0
    assert expected["nixl_bytes_s"] > 0 and expected["offload_stores_skipped"] > 0
    rows = rows_of(offload_view(r.snapshot).lines)
    assert len(rows) == len(expected)
    for key, value in expected.items():
        figure = r.figures[key]
        assert not figure.missing, (key, figure.reason)
        assert figure.value == pytest.approx(value, rel=1e-9), key
        assert rows[figure.label].figure is figure, key
    # the report's receipt carries the table (`cockpit report`)
    receipt = markdown_receipt(r.snapshot, None)
    assert "### KV offload and transfer (5m)" in receipt
    assert f"| {r.figures['offload_load_bandwidth'].label} |" in receipt


def test_bytes_moved_are_the_tokens_the_tiers_served() -> None:
    """A load moves the host tier's hit tokens, NIXL the peer's: KV bytes per token each."""
    r = read()
    cached = "vllm:prompt_tokens_cached_by_source_total"
    host, p2p = r.delta(cached, source="host"), r.delta(cached, source="p2p")
    assert host > 0 and p2p > 0
    assert r.delta("vllm:kv_offload_load_bytes_total") == host * KV_BYTES_PER_TOKEN
    assert r.delta("vllm:nixl_bytes_transferred_sum") == p2p * KV_BYTES_PER_TOKEN
    assert r.delta("vllm:nixl_num_descriptors_sum") == p2p / BLOCK * DESCRIPTORS_PER_BLOCK
    stored = r.delta("vllm:kv_offload_store_bytes_total") / KV_BYTES_PER_TOKEN
    assert stored > 0 and stored % BLOCK == 0  # whole blocks only
    for text in (r.first, r.second):  # the deprecated series vLLM still writes for a CPU tier
        for way, transfer in (("load", "CPU_to_GPU"), ("store", "GPU_to_CPU")):
            for suffix in ("bytes", "time"):
                flat = text.total(f"vllm:kv_offload_{way}_{suffix}_total")
                old = f"vllm:kv_offload_total_{suffix}_total"
                assert text.total(old, transfer_type=transfer) == flat
            sizes = f"vllm:kv_offload_{way}_size_count"
            assert text.total("vllm:kv_offload_size_count", transfer_type=transfer) == (
                text.total(sizes)
            )


def test_the_prompt_split_and_the_cache_tiers_agree() -> None:
    r = read()
    by_source = "vllm:prompt_tokens_by_source_total"
    tiers = {s: r.delta("vllm:prompt_tokens_cached_by_source_total", source=s)
             for s in ("device", "host", "p2p", "disk", "external_unspecified")}  # fmt: skip
    external = r.delta(by_source, source="external_kv_transfer")
    local = r.delta(by_source, source="local_cache_hit")
    assert tiers["disk"] == tiers["external_unspecified"] == 0
    assert tiers["device"] == local == r.delta("vllm:prefix_cache_hits_total")
    assert (
        tiers["host"] + tiers["p2p"] == external == r.delta("vllm:external_prefix_cache_hits_total")
    )
    assert sum(tiers.values()) == r.delta("vllm:prompt_tokens_cached_total") == local + external
    prompt = r.delta("vllm:prompt_tokens_total")
    assert r.delta(by_source) == prompt
    # the connectors are asked for what the GPU cache lacked
    assert r.delta("vllm:external_prefix_cache_queries_total") == prompt - local
    assert r.delta("vllm:request_prefill_kv_computed_tokens_sum") == r.delta(
        by_source, source="local_compute"
    )
    # the cache pane: a row per tier that served tokens, its tokens and share by hand
    rows = rows_of(cache_view(r.snapshot, None, False).lines)
    whole = sum(tiers.values())
    for tier in ("device", "host", "p2p"):
        figure = r.figures[f"cached_{tier}"]
        assert figure.value == tiers[tier]
        assert r.figures[f"cached_share_{tier}"].value == pytest.approx(tiers[tier] / whole)
        assert rows[f"Cached: {SOURCE_WORDS.get(tier, tier)}"].figure is figure
    assert not any(label.endswith(SOURCE_WORDS.get("disk", "disk")) for label in rows)
    assert r.figures.value("external_cache_hit_rate") == pytest.approx(external / (prompt - local))


def test_connector_series_are_named_typed_and_labelled_as_vllm_writes_them() -> None:
    text = read().second.text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    types = {
        "vllm:kv_offload_load_bytes": "counter", "vllm:kv_offload_load_time": "counter",
        "vllm:kv_offload_store_bytes": "counter", "vllm:kv_offload_store_time": "counter",
        "vllm:kv_offload_allocation_failure": "counter",
        "vllm:kv_offload_stores_skipped": "counter",
        "vllm:kv_offload_load_size": "histogram", "vllm:kv_offload_store_size": "histogram",
        "vllm:kv_offload_lookup_sync_delay_seconds": "histogram",
        "vllm:kv_offload_cpu_cache_usage_perc": "gauge",
        "vllm:kv_offload_total_bytes": "counter", "vllm:kv_offload_total_time": "counter",
        "vllm:kv_offload_size": "histogram",
        "vllm:nixl_xfer_time_seconds": "histogram", "vllm:nixl_post_time_seconds": "histogram",
        "vllm:nixl_bytes_transferred": "histogram", "vllm:nixl_num_descriptors": "histogram",
        "vllm:nixl_num_failed_transfers": "counter",
        "vllm:nixl_num_failed_notifications": "counter",
        "vllm:nixl_num_kv_expired_reqs": "counter",
    }  # fmt: skip
    assert {name: families[name].type for name in types} == types
    for name in types:
        for s in families[name].samples:
            extra = {"le", "transfer_type"} & set(s.labels)
            assert set(s.labels) - extra == {"engine", "model_name"}, s
    assert f"# TYPE {'vllm:kv_offload_load_bytes_total'} counter" in text
    assert "vllm:kv_offload_load_bytes_created" in text
    # bounds from the connectors' source: bytes 1e6 … 2e8; NIXL 2 KiB … 8 GiB by ×4, 5 ms … 5 s
    assert bounds(families["vllm:kv_offload_load_size"])[:2] == ["1e+06", "5e+06"]
    assert bounds(families["vllm:kv_offload_load_size"])[-2:] == ["2e+08", "+Inf"]
    nixl_bytes = [float(b) for b in bounds(families["vllm:nixl_bytes_transferred"])[:-1]]
    assert nixl_bytes == [2048.0 * 4**i for i in range(12)]
    xfer = bounds(families["vllm:nixl_xfer_time_seconds"])
    assert (xfer[0], xfer[-2], len(xfer)) == ("0.005", "5.0", 13)
    assert len(bounds(families["vllm:nixl_post_time_seconds"])) == 14  # 0.001 first
    usage = families["vllm:kv_offload_cpu_cache_usage_perc"].samples[0].value
    assert 0 <= usage <= 1  # a fraction, not a percentage


def bounds(family: Metric) -> list[str]:
    found = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")]
    return list(dict.fromkeys(found))


def test_the_connectors_keep_the_seeded_determinism() -> None:
    assert connector_lane(seed=5).render() == connector_lane(seed=5).render()
    assert connector_lane(seed=5).render() != connector_lane(seed=6).render()
    plain = SimulatedLane(LANE, seed=5, warm_start=900.0, clock=lambda: T0).render()
    assert "vllm:kv_offload_" not in plain and "vllm:nixl_" not in plain
    # their own generator: the traffic the lane draws is the same with or without them
    with_kv = Scrape(connector_lane(seed=5).render())
    alone = Scrape(plain)
    for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"):
        settled = alone.total(name) - with_kv.total(name)
        assert abs(settled) <= 0.05 * alone.total(name), name  # the last seconds' completions


def test_the_demo_runs_the_connectors_on_its_second_lane_only() -> None:
    with Demo(warm_start=30.0, history_sessions=5) as demo:
        texts = {name: lane.render() for name, lane in demo.lanes.items()}
    assert set(DEMO_CONNECTORS) == {LANE} and set(texts) == {"gb300-dsv4", LANE}
    assert "vllm:kv_offload_load_bytes_total" in texts[LANE]
    assert "vllm:nixl_xfer_time_seconds_count" in texts[LANE]
    assert "vllm:kv_offload_" not in texts["gb300-dsv4"] and "vllm:nixl_" not in texts["gb300-dsv4"]


class CountedLane(SimulatedLane):
    """The connector lane, noting each scrape; it moves only when stepped."""

    def __init__(self) -> None:
        super().__init__(LANE, seed=5, warm_start=900.0, kv_connector=DEMO_CONNECTORS[LANE])
        self.first = threading.Event()

    def families(self) -> list[Metric]:
        families = super().families()
        self.first.set()
        return families


async def test_report_reads_the_served_lane_s_connectors() -> None:
    """`cockpit report --metrics-url`'s read: two scrapes of the served lane, stepped between."""
    lane = CountedLane()
    server, _ = serve_metrics(lane.registry, 0)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    config = Config(source="<test>", lanes=(LaneConfig("sim", metrics_url=url),), window="5m")
    try:
        before = lane.render()
        lane.first.clear()
        reading = asyncio.create_task(read_once(config, None, None, 1.0))
        await asyncio.to_thread(lane.first.wait, 10)
        lane.step(STEP_S)
        after = lane.render()
        snapshot, _, errors = await reading
    finally:
        server.shutdown()
        server.server_close()
    assert errors == [] and snapshot is not None and snapshot.totals is not None
    totals: LaneTotals = snapshot.totals
    first, second = Scrape(before), Scrape(after)
    for key, name in FLAT_COUNTERS.items():
        assert totals.values[key] == second.total(name) - first.total(name) > 0, key
    labels = {line.label for line in offload_view(snapshot).lines}
    assert snapshot.figures is not None
    assert labels == {snapshot.figures[key].label for key in pane_keys("offload")}

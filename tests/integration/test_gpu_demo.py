"""The demo's simulated dcgm-exporters: each lane's GPUs, read by direct scrape and through
the demo's Prometheus in the lane's query, give the GPU figures and the roofline's G."""

from __future__ import annotations

import asyncio
import time

import pytest

from cockpit.core.snapshot import LaneSnapshot
from cockpit.demo import Demo, demo_config
from cockpit.roofline.profiles import hardware_profiles, model_profiles
from cockpit.runtime.feeds import build_lane_feeds
from cockpit.runtime.poller import LanePoller, close_all
from tests.support.repo import require_binary


def snapshots(demo: Demo, reads: int = 2) -> list[LaneSnapshot]:
    config = demo_config(demo, hardware_profiles(), model_profiles())
    feeds = build_lane_feeds(config)

    async def cycles() -> list[LaneSnapshot]:
        pollers = [LanePoller(feed, 1.0) for feed in feeds]
        try:
            taken = []
            for _ in range(reads):
                taken = [await poller.cycle("5m") for poller in pollers]
                await asyncio.sleep(0.2)
            return taken
        finally:
            await close_all(feeds, None)

    return asyncio.run(cycles())


def gpu_source(snapshot: LaneSnapshot) -> str:
    figures = snapshot.gpu_figures()
    return figures.source if figures is not None else ""


def check(snapshot: LaneSnapshot, gpus: dict[str, int]) -> None:
    figures = snapshot.gpu_figures()
    assert figures is not None and figures.source == "dcgm-exporter", snapshot.freshness
    assert figures.value("gpu_count") == gpus[snapshot.lane]
    for key in ("gpu_util", "gpu_power_w", "dram_active", "tensor_active", "sm_active"):
        assert figures.value(key) is not None, (key, figures.figures[key].reason)
    assert 0 < (figures.value("gpu_util") or 0) <= 1
    view = snapshot.roofline()
    assert view is not None and view.points is not None and view.points.gpu is not None


def test_the_demo_lanes_gpus_by_direct_scrape() -> None:
    with Demo(warm_start=30.0, history_sessions=5) as demo:
        gpus = {name: lane.preset.gpus for name, lane in demo.lanes.items()}
        taken = snapshots(demo)
    assert len(taken) == 2
    for snapshot in taken:
        check(snapshot, gpus)
        figures = snapshot.gpu_figures()
        assert figures is not None and (figures.value("gpu_energy_j") or 0) > 0


def test_the_demo_lanes_gpus_through_its_prometheus() -> None:
    require_binary("prometheus")
    with Demo(warm_start=30.0, history_sessions=5, with_prometheus=True) as demo:
        assert demo.prometheus is not None
        gpus = {name: lane.preset.gpus for name, lane in demo.lanes.items()}
        deadline = time.monotonic() + 30
        while True:  # until its 1 s scrapes have both the engines and the exporters
            taken = snapshots(demo, reads=1)
            ready = all(s.freshness.state == "ok" for s in taken)
            if ready and all(gpu_source(s) for s in taken):
                break
            assert time.monotonic() < deadline, [s.freshness for s in taken]
            time.sleep(1.0)
    for snapshot in taken:
        check(snapshot, gpus)
        assert snapshot.totals is not None and "gpu.dcgm.util" in snapshot.totals.riders


@pytest.mark.parametrize("hardware", ["h100", "gb300"])
def test_the_simulated_exporter_names_the_lanes_gpus(hardware: str) -> None:
    from cockpit.demo.dcgm import GPUS, SimulatedDcgm
    from cockpit.demo.lane_presets import PRESETS

    preset = next(p for p in PRESETS.values() if p.hardware == hardware)
    families = {f.name: f for f in SimulatedDcgm(preset).families()}
    util = families["DCGM_FI_DEV_GPU_UTIL"].samples
    assert len(util) == preset.gpus
    assert {s.labels["modelName"] for s in util} == {GPUS[hardware][0]}
    assert set(util[0].labels) == {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"}

"""The GPU beside the lanes on the run's Prometheus: the trends' GPU sparkline, the overview's
GPU and SLO attainment columns for a listed and a discovered lane, and `cockpit check`'s GPU
line. The GPU series are the dcgm-exporter fixture's (tests/fixtures/gpu/dcgm.txt: its names,
units and labels) on two hosts, remote-written every 15 s.

GPU utilisation moves at every scrape until ten minutes before the end, then holds the
fixture's values (host A) or values of our own (host B), so a five-minute overview reads the
served values, and a one-hour trend has steps that differ."""

from __future__ import annotations

import asyncio
import ctypes.util
import importlib.util
import random
import time
from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.cli.main import main
from cockpit.config.schema import Config, Discover, GpuConfig, LaneConfig
from cockpit.core.fleet import FleetRow, FleetView
from cockpit.core.gpu_figures import GPU_TREND
from cockpit.core.model import LaneTotals, Trend
from cockpit.core.slo import Slo
from cockpit.core.trends import point_times
from cockpit.runtime.feeds import build_lane_feeds, prometheus_source
from cockpit.runtime.listed_fleet import ListedFleet
from cockpit.sources.fleet import FleetSource
from cockpit.sources.gpu import ScrapeGpu
from cockpit.sources.gpu_nvml import NO_DRIVER, NO_PACKAGE
from tests.support.promharness import (
    OpenMetricsWriter,
    PromServer,
    add_engine,
    instant_value,
    remote_write,
)
from tests.support.repo import FIXTURES, require_fixture

pytestmark = pytest.mark.prometheus

STEP = 15
END_DATA = 1_789_000_000 - (1_789_000_000 % 3600)
"""The last sample (a multiple of the trend's 60 s step)."""
START = END_DATA - 3600 - 900
END = END_DATA + 7.5
HELD_FROM = END_DATA - 600
"""From here on every GPU holds its served values."""
TREND_WINDOW = 3600.0
OVERVIEW_WINDOW = 300.0
SUITE = 'suite="gpufleet"'
DCGM_JOB = "gpufleet-dcgm"
SLO = Slo(ttft_s=0.5)
"""A bound of the simulated TTFT buckets: the attainment is exact bucket arithmetic."""
HOSTS = {"a": "gpufleet-a", "b": "gpufleet-b"}
HELD = {"a": {"util": (87.0, 62.0), "power": (612.5, 455.25)},
        "b": {"util": (40.0, 20.0), "power": (300.0, 200.0)}}  # fmt: skip
"""What each host's two GPUs serve from HELD_FROM: host A the fixture's own values."""
LANES = {"gpufleet-listed": "gpufleet-a:8000", "gpufleet-found": "gpufleet-b:8000",
         "gpufleet-bare": "gpufleet-c:8000"}  # fmt: skip
"""Lane (job) -> its engine's instance: A's and B's hosts have GPUs, C's none."""


def moving_util(k: int, gpu: int) -> float:
    """A GPU's utilisation (%) at scrape `k` before HELD_FROM: a different value each scrape."""
    return round(random.Random(k * 2 + gpu).uniform(0, 100), 1)


def fixture_gpus() -> list[tuple[str, dict[str, str], float]]:
    """The fixture's GPU utilisation and power samples: (name, labels, value)."""
    text = require_fixture(FIXTURES / "gpu" / "dcgm.txt").read_text()
    wanted = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE")
    return [
        (sample.name, dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        if family.name in wanted
        for sample in family.samples
    ]


def served(host: str, at: float, k: int) -> list[tuple[str, dict[str, str], float]]:
    """Host `host`'s dcgm-exporter samples at scrape `k` (time `at`)."""
    samples = []
    for name, labels, value in fixture_gpus():
        gpu = int(labels["gpu"])
        reading = "util" if name == "DCGM_FI_DEV_GPU_UTIL" else "power"
        value = HELD[host][reading][gpu]
        if reading == "util" and at < HELD_FROM:
            value = moving_util(k, gpu)
        own = {**labels, "Hostname": HOSTS[host], "UUID": f"{labels['UUID']}-{host}"}
        samples.append((name, {**own, "instance": f"{HOSTS[host]}:9400", "job": DCGM_JOB}, value))
    return samples


def history(times: Iterable[float], suffix: str = "") -> OpenMetricsWriter:
    writer = OpenMetricsWriter()
    times = list(times)
    keys = ("requests", "prompt_tokens", "generation_tokens", "running", "ttft")
    for seed, (lane, instance) in enumerate(LANES.items()):
        labels = {
            "job": lane + suffix,
            "instance": instance,
            "model_name": "m",
            "suite": "gpufleet",
        }
        add_engine(writer, "vllm", labels, times, keys, seed)
    for host in HOSTS:
        for k, at in enumerate(times):
            for name, labels, value in served(host, at, k):
                labels = {**labels, "job": labels["job"] + suffix}
                writer.add(name, "gauge", name, labels, [(at, value)])
    return writer


@pytest.fixture(scope="module")
def prometheus(prometheus: PromServer) -> PromServer:
    remote_write(prometheus, history(map(float, range(START, END_DATA + 1, STEP))))
    return prometheus


def promql_range(server: PromServer, query: str, start: float, end: float, step: float) -> dict:
    form = {"query": query, "start": start, "end": end, "step": step}
    body = httpx.post(f"{server.url}/api/v1/query_range", data=form).json()
    (series,) = body["data"]["result"]
    return {float(t): float(v) for t, v in series["values"]}


def listed_lane(server: PromServer, suffix: str = "", **gpu: object) -> LaneConfig:
    selector = f'job="{DCGM_JOB}{suffix}",Hostname="{HOSTS["a"]}"'
    return LaneConfig(
        "gpufleet-listed",
        prometheus=server.url,
        selector=f'job="gpufleet-listed{suffix}"',
        gpu=GpuConfig(**gpu) if gpu else GpuConfig(selector=selector),  # type: ignore[arg-type]
        slo=SLO,
    )


def read_lane(lane: LaneConfig, window_s: float, end: float | None) -> LaneTotals:
    (feed,) = build_lane_feeds(Config(lanes=(lane,)))

    async def read() -> LaneTotals:
        try:
            return await feed.read(window_s, end)
        finally:
            await feed.close()

    return asyncio.run(read())


# --- the trends' GPU sparkline ------------------------------------------------------------


def test_the_sparkline_is_promql_s_mean_over_the_gpus_per_step(prometheus: PromServer) -> None:
    trend = read_lane(listed_lane(prometheus), TREND_WINDOW, END).trend
    assert trend is not None and trend.step_s == 60
    points = trend.series[GPU_TREND.key]
    times = point_times(TREND_WINDOW, END)
    assert len(points) == len(times) == 60
    util = f'DCGM_FI_DEV_GPU_UTIL{{job="{DCGM_JOB}",Hostname="gpufleet-a"}}'
    by_hand = f"avg(avg_over_time({util}[60s])) / 100"  # each GPU's mean in the step, then all
    expected = promql_range(prometheus, by_hand, times[0], times[-1], 60)
    assert [expected.get(t) for t in times] == pytest.approx(points, rel=1e-12)
    assert len(set(points[:-12])) > 10  # steps that moved
    assert points[-1] == pytest.approx((87 + 62) / 200)  # the held, served values


def test_the_sparkline_from_a_direct_scrape_is_each_step_s_mean_by_hand() -> None:
    source = ScrapeGpu("http://127.0.0.1:1/metrics")
    times = [float(t) for t in range(START, END_DATA + 1, STEP)]
    step = 60.0
    points_at = point_times(TREND_WINDOW, END)
    trend = Trend(step, points_at[-1], {"hit_rate": (None,) * len(points_at)})
    for k, at in enumerate(times):
        lines = []
        for name, labels, value in served("a", at, k):
            text = ",".join(f'{key}="{v}"' for key, v in labels.items())
            lines.append(f"{name}{{{text}}} {value!r}")
        source.ingest("\n".join(lines) + "\n", at)
        if k == len(times) // 2:  # read half way: the steps not closed yet are read again
            source.trend_points(trend)
    points = source.trend_points(trend)
    for t, point in zip(points_at, points, strict=True):
        # the scrapes in (t - 60 s, t]: k with t - 60 < START + 15 k <= t
        ks = [k for k, at in enumerate(times) if t - step < at <= t]
        per_gpu = [
            sum(HELD["a"]["util"][g] if times[k] >= HELD_FROM else moving_util(k, g) for k in ks)
            / len(ks)
            for g in (0, 1)
        ]
        assert point == pytest.approx(sum(per_gpu) / 2 / 100, rel=1e-12), t


def test_a_lane_without_a_gpu_source_has_no_gpu_series(prometheus: PromServer) -> None:
    lane = LaneConfig("gpufleet-listed", prometheus=prometheus.url,
                      selector='job="gpufleet-listed"')  # fmt: skip
    totals = read_lane(lane, TREND_WINDOW, END)
    assert totals.gpu is None and totals.trend is not None
    assert GPU_TREND.key not in totals.trend.series


# --- the overview's GPU and attainment columns -------------------------------------------


def overview(server: PromServer) -> FleetView:
    discover = Discover("job", LaneConfig("", prometheus=server.url, selector=SUITE, slo=SLO))
    lanes = build_lane_feeds(Config(lanes=(listed_lane(server),)))
    found = FleetSource(prometheus_source(discover.server), "job", SUITE, SLO)
    fleet = ListedFleet(lanes, found)

    async def read() -> FleetView:
        try:
            return await fleet.read(OVERVIEW_WINDOW, END)
        finally:
            await fleet.aclose()
            for lane in lanes:
                await lane.close()

    return asyncio.run(read())


def rows(view: FleetView) -> dict[str, FleetRow]:
    return {row.lane: row for row in view.rows}


def promql(server: PromServer, query: str) -> float:
    return instant_value(server, query, END)


def test_gpu_columns_are_the_served_values_listed_and_discovered(prometheus: PromServer) -> None:
    found = rows(overview(prometheus))
    assert set(LANES) <= set(found)
    for lane, host in (("gpufleet-listed", "a"), ("gpufleet-found", "b")):
        row = found[lane]
        assert row.has_gpu, lane
        assert row.values["gpu_util"] == pytest.approx(sum(HELD[host]["util"]) / 200), lane
        assert row.values["gpu_power_w"] == pytest.approx(sum(HELD[host]["power"])), lane
    bare = found["gpufleet-bare"]
    assert bare.values["gpu_util"] is None and bare.values["gpu_power_w"] is None
    assert bare.reasons["gpu_util"] == (
        "no GPU exporter's series (DCGM_FI_*, nvidia_smi_*) at Hostname or instance gpufleet-c"
    )


def test_a_host_two_lanes_share_says_why_its_gpus_are_not_shown() -> None:
    from cockpit.core.fleet import FleetGpus

    gpus = FleetGpus({}, {"x": frozenset({"node-1"}), "y": frozenset({"node-1", "node-2"})})
    values, reasons = gpus.cells("x")
    assert values == {"gpu_util": None, "gpu_power_w": None}
    assert reasons["gpu_util"] == (
        "its hosts (node-1) serve lane(s) y too: Hostname/instance can't tell their GPUs apart"
    )


def test_the_attainment_column_is_prometheus_s_bucket_arithmetic(prometheus: PromServer) -> None:
    found = rows(overview(prometheus))
    window = f"{OVERVIEW_WINDOW:.0f}s"
    for lane in LANES:
        row = found[lane]
        bucket = "vllm:time_to_first_token_seconds_bucket"
        met = f'sum(increase({bucket}{{job="{lane}",le="0.5"}}[{window}]))'
        total = f'sum(increase({bucket}{{job="{lane}",le="+Inf"}}[{window}]))'
        expected = promql(prometheus, f"{met} / {total}")
        assert 0 < expected < 1, lane
        assert row.values["ttft_slo_attainment"] == pytest.approx(expected, rel=1e-9), lane
        assert row.targets == {"ttft_slo_attainment"}
        assert row.values["itl_slo_attainment"] is None


# --- cockpit check's GPU line ---------------------------------------------------------------


@pytest.fixture(scope="module")
def now_written(prometheus: PromServer) -> str:
    """The same fleet written up to now (check reads the present), its jobs suffixed; and a
    GPU exporter whose scrape targets are down (`up` 0, no series)."""
    suffix = "-now"
    now = time.time() // STEP * STEP
    writer = history((now - STEP * k for k in range(20, -1, -1)), suffix)
    up = [(now - STEP * k, 0.0) for k in range(20, -1, -1)]
    writer.add("up", "gauge", "up", {"job": "gpufleet-dcgm-down", "instance": "x:9400"}, up)
    remote_write(prometheus, writer)
    return suffix


def check_lines(lane: LaneConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    import yaml

    gpu = {key: value for key, value in vars_of(lane.gpu).items() if value}
    config = {"lanes": [{"name": lane.name, "prometheus": lane.prometheus,
                         "selector": lane.selector, "gpu": gpu}]}  # fmt: skip
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    code = main(["check", "--config", str(path)])
    lines = capsys.readouterr().out.splitlines()
    assert code == (0 if all(not line.startswith("FAIL") for line in lines) else 1)
    return [line for line in lines if " gpu " in f" {line[5:]}"]


def vars_of(gpu: GpuConfig | None) -> dict[str, object]:
    assert gpu is not None
    return {"selector": gpu.selector, "metrics_url": gpu.metrics_url, "nvml": gpu.nvml}


def test_check_names_the_gpu_source_and_its_gpus(
    prometheus: PromServer, now_written: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (line,) = check_lines(listed_lane(prometheus, now_written), tmp_path, capsys)
    where = f'{{job="{DCGM_JOB}{now_written}",Hostname="gpufleet-a"}}'
    assert line == f"ok   gpu gpufleet-listed: dcgm-exporter at {where} (2 GPUs)"


def test_check_says_no_selector_matched(
    prometheus: PromServer, now_written: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lane = listed_lane(prometheus, now_written, selector='job="no-such-exporter"')
    (line,) = check_lines(lane, tmp_path, capsys)
    assert line == (
        'FAIL gpu gpufleet-listed: GPU exporter at {job="no-such-exporter"}: no selector '
        'matched: no GPU exporter\'s series and no scrape target at {job="no-such-exporter"}'
    )


def test_check_says_the_exporter_is_down(
    prometheus: PromServer, now_written: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lane = listed_lane(prometheus, now_written, selector='job="gpufleet-dcgm-down"')
    (line,) = check_lines(lane, tmp_path, capsys)
    where = '{job="gpufleet-dcgm-down"}'
    assert line == (
        f"FAIL gpu gpufleet-listed: GPU exporter at {where}: the GPU exporter is down: its "
        f"scrape targets at {where} have up == 0"
    )


def test_check_says_a_scraped_exporter_is_unreachable(
    prometheus: PromServer, now_written: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lane = listed_lane(prometheus, now_written, metrics_url="http://127.0.0.1:1/metrics")
    (line,) = check_lines(lane, tmp_path, capsys)
    assert line.startswith("FAIL gpu gpufleet-listed: GPU exporter at http://127.0.0.1:1/metrics: ")
    assert "refused" in line or "connect" in line


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None,
                    reason="this machine has libnvidia-ml: run e2e/gpu_check.py")  # fmt: skip
def test_check_says_there_is_no_nvidia_driver(
    prometheus: PromServer, now_written: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (line,) = check_lines(listed_lane(prometheus, now_written, nvml=True), tmp_path, capsys)
    words = NO_DRIVER if importlib.util.find_spec("pynvml") else NO_PACKAGE
    assert line == f"FAIL gpu gpufleet-listed: NVML at this machine: {words}"


def test_check_says_which_lanes_found_have_their_gpus(
    prometheus: PromServer, now_written: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    config = {"discover": {"prometheus": prometheus.url, "label": "job", "match": SUITE}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["check", "--config", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"ok   discover job on {prometheus.url}: 3 lanes found" in lines
    bare = "no GPU exporter's series (DCGM_FI_*, nvidia_smi_*) at Hostname or instance gpufleet-c"
    said = f"GPU columns for 2 of 3 lanes found; gpufleet-bare{now_written}: {bare}"
    assert f"ok   gpu (lanes found): {said}" in lines

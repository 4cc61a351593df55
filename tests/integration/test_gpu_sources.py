"""Every GPU figure equals what the exporters served: a dcgm-exporter and an
nvidia_gpu_exporter (tests/fixtures/gpu) beside a vLLM lane, read by a real Prometheus and a
real VictoriaMetrics in the lane's one query, and by a direct scrape of the exporter.

The history is nine scrapes 15 s apart, the energy counters growing by a fixed step per
scrape and the gauges held; the window (120 s, ending 7.5 s after the last scrape) holds the
last eight steps, for `increase()` (extrapolated) and VictoriaMetrics (from the sample before
the window) alike."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.config.schema import Config, GpuConfig, LaneConfig
from cockpit.core.gpu import GpuTotals
from cockpit.core.gpu_figures import GpuFigures, gpu_figures
from cockpit.core.model import LaneTotals
from cockpit.runtime.feeds import PrometheusLaneFeed, build_lane_feeds
from cockpit.sources.gpu import ScrapeGpu, parse_exposition
from tests.support.promharness import (
    OpenMetricsWriter,
    PromServer,
    add_engine,
    import_history,
    remote_write,
)
from tests.support.repo import FIXTURES, require_fixture

MIB = 2**20
STEP = 15
SCRAPES = 9
START = 1_800_000_040  # a multiple of 15 s: subquery steps fall on the scrapes
WINDOW = 120.0
STEPS_IN_WINDOW = 8
ENERGY = {
    # per GPU: the counter's growth per scrape, in the exporter's unit (mJ, J)
    "dcgm": re.compile(r"^(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\{[^}]*gpu=\"(\d)\"[^}]*\}) (\S+)$"),
    "nvidia_smi": re.compile(r"^(nvidia_smi_energy_joules_total\{uuid=\"([^\"]+)\"\}) (\S+)$"),
}
GROWTH = {"dcgm": [9_000_000.0, 6_500_000.0], "nvidia_smi": [8_800.0, 5_700.0]}
TO_JOULES = {"dcgm": 0.001, "nvidia_smi": 1.0}


def served(exporter: str, k: int) -> str:
    """The exporter's answer at scrape `k`: its fixture, the energy counters `k` steps on."""
    text = require_fixture(FIXTURES / "gpu" / f"{exporter}.txt").read_text()
    growth = GROWTH[exporter]
    lines = []
    for line in text.splitlines():
        match = ENERGY[exporter].match(line)
        if match:
            gpu = 0 if match.group(2) in ("0", "4b9e7d1c-2a3f-4e5d-8c7b-6a5f4e3d2c1b") else 1
            line = f"{match.group(1)} {float(match.group(3)) + k * growth[gpu]!r}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def energy_served(exporter: str) -> float:
    """The window's energy in J, as served: eight steps of both GPUs' counters."""
    return STEPS_IN_WINDOW * sum(GROWTH[exporter]) * TO_JOULES[exporter]


def end_of(start: float) -> float:
    """The read's time: 7.5 s after the last scrape."""
    return start + STEP * (SCRAPES - 1) + 7.5


def history(start: float) -> OpenMetricsWriter:
    writer = OpenMetricsWriter()
    times = [float(start + STEP * k) for k in range(SCRAPES)]
    keys = ("requests", "prompt_tokens", "generation_tokens", "running")
    lane = {"job": "gpu-lane", "instance": "e0", "model_name": "m"}
    add_engine(writer, "vllm", lane, times, keys, 1)
    for exporter in ("dcgm", "nvidia_smi"):
        for k, stamp in enumerate(times):
            for line in served(exporter, k).splitlines():
                if line.startswith("#") or not line.strip():
                    continue
                for family in text_string_to_metric_families(line + "\n"):
                    for sample in family.samples:
                        counter = sample.name.endswith("_total")
                        name = sample.name.removesuffix("_total") if counter else sample.name
                        labels = {**sample.labels, "job": f"gpu-{exporter}"}
                        kind = "counter" if counter else "unknown"
                        writer.add(name, kind, sample.name, labels, [(stamp, sample.value)])
    return writer


Served = tuple[PromServer, float]
"""A server and when its history starts."""


def _prometheus(server: PromServer) -> float:
    remote_write(server, history(START))
    return START


def _victoria_metrics(server: PromServer) -> float:
    # VictoriaMetrics 1.79 lists label values of the last day only (the lane's metric names):
    # its history ends a few minutes ago, on the 15 s grid.
    start = time.time() // STEP * STEP - 300
    import_history(server, history(start))
    return start


SERVERS: dict[str, tuple[str, Callable[[PromServer], float]]] = {
    "prometheus": ("prometheus", _prometheus),
    "victoria-metrics": ("victoria_metrics", _victoria_metrics),
}
"""Each server: the run's session fixture of it, and how the history goes in (its start)."""


@pytest.fixture(scope="module", params=sorted(SERVERS))
def server(request: pytest.FixtureRequest) -> Served:
    """The run's Prometheus, then its VictoriaMetrics, holding the history under jobs `gpu-*`."""
    fixture, load = SERVERS[request.param]
    shared: PromServer = request.getfixturevalue(fixture)
    return shared, load(shared)


def read_lane(served_by: Served, gpu: GpuConfig | None) -> tuple[LaneTotals, int]:
    """The lane read once through its feed (its GPUs riding along), and the HTTP requests."""
    server, start = served_by
    lane = LaneConfig("lane", prometheus=server.url, selector='job="gpu-lane"', gpu=gpu)
    (feed,) = build_lane_feeds(Config(lanes=(lane,)))
    assert isinstance(feed, PrometheusLaneFeed) and feed.source is not None

    async def read() -> tuple[LaneTotals, int]:
        try:
            assert feed.source is not None
            totals = await feed.read(WINDOW, end_of(start))
            return totals, feed.source.requests
        finally:
            await feed.close()

    return asyncio.run(read())


def figures_of(totals: LaneTotals) -> GpuFigures:
    figures = gpu_figures(totals.gpu, totals.get("generation_tokens"), totals.get("prompt_tokens"))
    assert figures is not None
    return figures


def check_dcgm(figures: GpuFigures, lane: LaneTotals) -> None:
    value = figures.value
    assert figures.source == "dcgm-exporter" and value("gpu_count") == 2
    assert value("gpu_util") == pytest.approx((0.87 + 0.62) / 2)
    assert value("gpu_power_w") == pytest.approx(612.5 + 455.25)
    assert value("gpu_memory_used_bytes") == (61440 + 40960) * MIB
    assert value("gpu_memory_total_bytes") == 2 * (61440 + 19566 + 553) * MIB
    assert value("gpu_temp_max_c") == 67
    assert value("dram_active") == pytest.approx((0.731234 + 0.512345) / 2)
    assert value("tensor_active") == pytest.approx((0.421234 + 0.182345) / 2)
    assert value("sm_active") == pytest.approx((0.881234 + 0.602345) / 2)
    assert value("gpu_xid_errors") == 0
    assert value("gpu_energy_j") == pytest.approx(energy_served("dcgm"))
    generated = lane.get("generation_tokens")
    assert generated is not None and generated > 0
    assert value("joules_per_generated_token") == pytest.approx(energy_served("dcgm") / generated)
    prompt = lane.get("prompt_tokens")
    assert prompt is not None
    per_1k = value("joules_per_1k_prompt_tokens")
    assert per_1k == pytest.approx(1000 * energy_served("dcgm") / prompt)
    (first, own), (second, _) = figures.per_gpu
    assert (first.id, first.name, second.id) == ("0", "NVIDIA H100 80GB HBM3", "1")
    assert own["gpu_power_w"].value == 612.5
    assert own["gpu_energy_j"].value == pytest.approx(8 * 9_000_000 * 0.001)
    reason = figures.figures["gpu_power_throttled"].reason
    assert "DCGM_FI_DEV_POWER_VIOLATION" in reason


def check_nvidia_smi(figures: GpuFigures) -> None:
    value = figures.value
    assert figures.source == "nvidia_gpu_exporter" and value("gpu_count") == 2
    assert value("gpu_util") == pytest.approx((1 + 0.64) / 2)
    assert value("gpu_power_w") == pytest.approx(631.95 + 402.5)
    assert value("gpu_memory_used_bytes") == 2.0780679168e10 + 6.4238911488e10
    assert value("gpu_memory_total_bytes") == 2 * 8.5520809984e10
    assert value("gpu_temp_max_c") == 71
    assert value("gpu_energy_j") == pytest.approx(energy_served("nvidia_smi"))
    assert value("gpu_power_throttled") == 1 and value("gpu_thermal_throttled") == 0
    assert [gpu.name for gpu, _ in figures.per_gpu] == ["NVIDIA H100 80GB HBM3"] * 2
    for key in ("dram_active", "tensor_active", "sm_active"):
        assert figures.figures[key].missing
        assert "no activity counters" in figures.figures[key].reason


def test_dcgm_exporter_figures_ride_in_the_lanes_one_query(server: Served) -> None:
    lane, requests = read_lane(server, GpuConfig(selector='job="gpu-dcgm",pod="vllm-llama-0"'))
    check_dcgm(figures_of(lane), lane)
    _, alone = read_lane(server, None)
    assert requests == alone  # the GPUs cost no request of their own
    assert "gpu.dcgm.util" in lane.riders


def test_nvidia_gpu_exporter_figures_from_prometheus(server: Served) -> None:
    lane, _ = read_lane(server, GpuConfig(selector='job="gpu-nvidia_smi"'))
    check_nvidia_smi(figures_of(lane))


def test_a_selector_matching_no_gpu_says_so_and_the_lane_reads(server: Served) -> None:
    lane, _ = read_lane(server, GpuConfig(selector='job="no-such-exporter"'))
    figures = figures_of(lane)
    assert lane.get("generation_tokens") and figures.value("gpu_count") is None
    assert "no GPU exporter's series" in figures.figures["gpu_util"].reason


@pytest.mark.parametrize("exporter", ["dcgm", "nvidia_smi"])
def test_a_direct_scrape_reads_the_same_figures(exporter: str) -> None:
    source = ScrapeGpu("http://127.0.0.1:1/metrics")
    for k in range(SCRAPES):
        source.ingest(served(exporter, k), START + STEP * k)
    totals = source.totals(WINDOW, end_of(START))
    tokens = {"generation_tokens": 1e4, "prompt_tokens": 1e6}
    lane = LaneTotals("lane", "vllm", WINDOW, end_of(START), values=tokens)
    figures = gpu_figures(totals, *tokens.values())
    assert figures is not None and totals.coverage_note == ""
    if exporter == "dcgm":
        check_dcgm(figures, lane)
    else:
        check_nvidia_smi(figures)


@pytest.mark.parametrize("exporter", ["dcgm", "nvidia_smi"])
def test_a_series_seen_before_has_only_its_value_read_and_reads_as_the_parser_reads_it(
    exporter: str,
) -> None:
    names = ScrapeGpu("http://127.0.0.1:1/metrics").buffer.names
    _, known = parse_exposition(served(exporter, 0), names)
    later = served(exporter, 1)
    quick, _ = parse_exposition(later, names, known)
    by_parser, _ = parse_exposition(later, names)  # every line through the parser
    assert known and by_parser and quick == by_parser


class _Exporter(ThreadingHTTPServer):
    """dcgm.txt on loopback, its energy counters one step on at each GET."""

    scrapes = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Exporter

    def do_GET(self) -> None:
        body = served("dcgm", self.server.scrapes).encode()
        self.server.scrapes += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def test_a_scrape_over_http_reads_the_exporter_and_survives_it_going_away() -> None:
    exporter = _Exporter(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=exporter.serve_forever, daemon=True)
    thread.start()
    source = ScrapeGpu(f"http://127.0.0.1:{exporter.server_address[1]}/metrics")

    async def reads() -> list[GpuTotals]:
        try:
            first = await source.read(3600.0, None, {})
            second = await source.read(3600.0, None, {})
            exporter.shutdown()
            exporter.server_close()
            return [first, second, await source.read(3600.0, None, {})]
        finally:
            await source.close()

    first, second, gone = asyncio.run(reads())
    assert first.gpus[0].energy_j is None  # one read: no increase yet
    figures = gpu_figures(second, 100.0, None)
    assert figures is not None and figures.value("gpu_power_w") == pytest.approx(1067.75)
    assert figures.value("gpu_energy_j") == pytest.approx(sum(GROWTH["dcgm"]) / 1000)
    assert figures.value("joules_per_generated_token") == pytest.approx(15_500.0 / 100)
    assert "since start" in figures.figures["gpu_energy_j"].reason
    assert gone.reason and "127.0.0.1" in gone.reason  # said, and the last reads kept
    assert [g.power_w for g in gone.gpus] == [612.5, 455.25]

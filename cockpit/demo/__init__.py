"""The embedded demo: a simulated vLLM lane and a simulated Hermes agent, on loopback.

`SimulatedLane` serves a vLLM V1 `/metrics` exposition (prometheus_client, its own registry)
whose counters and histograms advance with time in the agent-era shape: long prompts, short
answers, most of the prompt served from the prefix cache; the lanes in `DEMO_CONNECTORS` also
run KV connectors (NIXL from a prefill peer, a CPU offload tier). `SimulatedHermes` writes a
`state.db` the way Hermes does (WAL, `BEGIN IMMEDIATE`, counters incremented in place per API call).
`Demo` starts both in a temp folder, optionally with a real Prometheus scraping the lanes, and
removes everything on `stop()`. Nothing here imports Textual."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from cockpit.demo.dcgm import SimulatedDcgm
from cockpit.demo.hermes import SimulatedHermes
from cockpit.demo.lane import LOOPBACK, SimulatedLane
from cockpit.demo.lane_presets import DEMO_CONNECTORS, PRESETS, LanePreset
from cockpit.demo.prometheus import DemoPrometheus

if TYPE_CHECKING:
    from cockpit.config.schema import Config
    from cockpit.roofline.model import Hardware, ModelProfile

__all__ = [
    "PRESETS",
    "Demo",
    "DemoLaneConfig",
    "LanePreset",
    "SimulatedHermes",
    "SimulatedLane",
    "demo_config",
    "demo_config_data",
    "demo_config_yaml",
]


@dataclass(frozen=True, slots=True)
class DemoLaneConfig:
    """What the cockpit's config needs to read one demo lane."""

    name: str
    engine: str
    hardware: str
    model: str
    metrics_url: str
    prometheus_url: str | None
    selector: str
    gpus: int
    chunk_tokens: int
    gpu_metrics_url: str = ""
    """The lane's simulated dcgm-exporter."""


@dataclass(slots=True)
class Demo:
    """Both simulated lanes and the simulated Hermes in a temp folder; `stop()` removes it all.

    Use as a context manager or call `start()` / `stop()`. With `with_prometheus=True` and a
    `prometheus` binary on PATH, a real Prometheus scrapes the lanes every second.
    """

    presets: tuple[str, ...] = ("gb300-dsv4", "h100-llama8b")
    seed: int | None = 0
    warm_start: float = 300.0
    record_every: int = 0
    """Keep each lane's exposition every this many seconds of its warm start (0: none)."""
    with_prometheus: bool = False
    history_sessions: int = 200
    folder: Path | None = None
    lanes: dict[str, SimulatedLane] = field(default_factory=dict)
    lane_urls: dict[str, str] = field(default_factory=dict)
    exporters: dict[str, SimulatedDcgm] = field(default_factory=dict)
    """Each lane's simulated dcgm-exporter."""
    hermes: SimulatedHermes | None = None
    prometheus: DemoPrometheus | None = None
    prometheus_note: str = ""
    """Why there is no Prometheus when one was asked for."""

    @property
    def ledger_path(self) -> Path:
        if self.folder is None:
            raise RuntimeError("the demo is not started")
        return self.folder / "state.db"

    @property
    def prometheus_url(self) -> str | None:
        return self.prometheus.url if self.prometheus is not None else None

    def start(self) -> Demo:
        self.folder = Path(tempfile.mkdtemp(prefix="lane-cockpit-demo-"))
        try:
            for i, name in enumerate(self.presets):
                seed = None if self.seed is None else self.seed + i
                lane = SimulatedLane(
                    name,
                    seed=seed,
                    warm_start=self.warm_start,
                    record_every=self.record_every,
                    kv_connector=DEMO_CONNECTORS.get(name),
                )
                self.lanes[name] = lane
                self.lane_urls[name] = lane.start()
                self.exporters[name] = SimulatedDcgm(lane.preset)
                self.exporters[name].start()
            self.hermes = SimulatedHermes(
                self.ledger_path, seed=self.seed, history_sessions=self.history_sessions
            ).start()
            if self.with_prometheus:
                self._start_prometheus()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_prometheus(self) -> None:
        binary = shutil.which("prometheus")
        if binary is None or self.folder is None:
            self.prometheus_note = "prometheus is not on PATH; the lanes are scraped directly"
            return
        targets = {name: f"{LOOPBACK}:{lane.port}" for name, lane in self.lanes.items()}
        targets |= {f"{name}-dcgm": f"{LOOPBACK}:{e.port}" for name, e in self.exporters.items()}
        self.prometheus = DemoPrometheus(binary, self.folder / "prometheus", targets)
        self.prometheus.wait_ready()

    def lane_configs(self) -> list[DemoLaneConfig]:
        return [
            DemoLaneConfig(
                name=name,
                engine="vllm",
                hardware=lane.preset.hardware,
                model=lane.preset.model,
                metrics_url=self.lane_urls[name],
                prometheus_url=self.prometheus_url,
                selector=f'job="{name}"',
                gpus=lane.preset.gpus,
                chunk_tokens=lane.preset.chunk_tokens,
                gpu_metrics_url=f"http://{LOOPBACK}:{self.exporters[name].port}/metrics",
            )
            for name, lane in self.lanes.items()
        ]

    def stop(self) -> None:
        """Stop Prometheus, the lanes and the writer, then remove the temp folder."""
        if self.prometheus is not None:
            self.prometheus.stop()
            self.prometheus = None
        for lane in self.lanes.values():
            lane.stop()
        for exporter in self.exporters.values():
            exporter.stop()
        self.exporters.clear()
        self.lanes.clear()
        self.lane_urls.clear()
        if self.hermes is not None:
            self.hermes.close()
            self.hermes = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> Demo:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def demo_config_data(demo: Demo) -> dict[str, Any]:
    """The demo as config data: each lane (Prometheus + selector, or its /metrics), the ledger."""
    lanes: list[dict[str, Any]] = []
    for lane in demo.lane_configs():
        entry: dict[str, Any] = {
            "name": lane.name,
            "engine": lane.engine,
            "hardware": lane.hardware,
            "model": lane.model,
            "gpus": lane.gpus,
            "chunk_tokens": lane.chunk_tokens,
        }
        if lane.prometheus_url is not None:
            entry["prometheus"] = lane.prometheus_url
            entry["selector"] = lane.selector
            entry["gpu"] = {"selector": f'job="{lane.name}-dcgm"'}
        else:
            entry["metrics_url"] = lane.metrics_url
            entry["gpu"] = {"metrics_url": lane.gpu_metrics_url}
        lanes.append(entry)
    return {"lanes": lanes, "ledgers": [str(demo.ledger_path)]}


def demo_config_yaml(demo: Demo) -> str:
    """`demo_config_data` as config-file YAML."""
    import yaml

    return yaml.safe_dump(demo_config_data(demo), sort_keys=False)


def demo_config(
    demo: Demo,
    hardware: Mapping[str, Hardware] | None = None,
    models: Mapping[str, ModelProfile] | None = None,
) -> Config:
    """The cockpit's config for the running demo, parsed like a config file would be."""
    from cockpit.config.schema import parse_config

    return parse_config(demo_config_yaml(demo), "<cockpit demo>", hardware, models)

"""Fleets for the tests: scripted overview views and feeds, and the live fleet's history (six
lanes of vLLM and SGLang, three engines each, found by `job`) with the servers that hold it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from cockpit.config.schema import Discover, LaneConfig
from cockpit.core.fleet import NUMERIC_COLUMNS, RAW_KEYS, FleetRow, FleetView
from cockpit.core.model import frozen_map
from tests.support.feeds import EVAL_AT
from tests.support.promharness import (
    PromServer,
    SimLane,
    create_blocks,
    fleet_history,
    import_history,
    start_prometheus,
    start_victoria_metrics,
)

# --- scripted: fixed views of a fleet -------------------------------------------------------

HEALTHY = {
    "running_now": 8.0,
    "waiting_now": 0.0,
    "kv_usage_now": 0.6,
    "requests_per_s": 0.278,
    "generation_tok_s": 111.1,
    "prefix_cache_hit_rate": 0.916,
    "mean_fresh_prefill": 1680.0,
    "ttft_p95": 1.8,
    "itl_mean": 0.021,
    "decode_share": 0.9,
    "age": 4.0,
}


SHARES = ("kv_usage_now", "prefix_cache_hit_rate", "decode_share")


def fleet_row(lane: str, scale: float = 1.0, *, up: bool = True, **changes: float) -> FleetRow:
    """A lane's row: the healthy figures (but shares) times `scale`, then `changes`; twelve
    refreshes of history rising to them."""
    values: dict[str, float | None] = {
        key: value if key in SHARES else value * scale for key, value in HEALTHY.items()
    }
    values.update(changes)
    refreshes = tuple(
        {key: None if value is None else value * (i + 1) / 12 for key, value in values.items()}
        for i in range(12)
    )
    return FleetRow(
        lane,
        up=up,
        values=frozen_map(values),
        dialect="vllm",
        refreshes=refreshes,
        down_reason="" if up else "its 1 scrape target(s) are down (up == 0)",
    )


def gone_row(lane: str) -> FleetRow:
    """A lane whose series vanished: no values, the row kept."""
    return FleetRow(
        lane,
        up=False,
        values=frozen_map(dict.fromkeys(NUMERIC_COLUMNS)),
        gone=True,
        reasons=frozen_map(dict.fromkeys(NUMERIC_COLUMNS, "the server has no live series")),
        down_reason="the server has no live series of it",
    )


def fleet_view(*rows: FleetRow) -> FleetView:
    return FleetView(
        rows=rows,
        window_s=3600.0,
        end=EVAL_AT,
        server="http://127.0.0.1:9090",
        query="sum by (job) (vllm:num_requests_running) or ...",
    )


FLEET = fleet_view(
    fleet_row("lane-a"),
    fleet_row("lane-b", 2.0, kv_usage_now=0.95, waiting_now=3.0),  # KV ≥ 90 %, queue building
    fleet_row("lane-c", 0.5, prefix_cache_hit_rate=0.42),  # hit rate < 70 %
    fleet_row("lane-d", up=False),
    gone_row("lane-e"),
)


@dataclass(eq=False)
class ScriptedFleetFeed:
    """A fleet feed whose reads return the scripted views (or raise) in turn, the last again."""

    views: Sequence[FleetView | Exception] = (FLEET,)
    reads: list[tuple[float, float | None]] = field(default_factory=list)
    closed: bool = False

    async def read(self, window_s: float, end: float | None) -> FleetView:
        self.reads.append((window_s, end))
        view = self.views[min(len(self.reads), len(self.views)) - 1]
        if isinstance(view, Exception):
            raise view
        return replace(view, window_s=window_s)

    async def aclose(self) -> None:
        self.closed = True


DISCOVER = Discover("job", LaneConfig("fleet", prometheus="http://127.0.0.1:9"))


# --- live: a backfilled history on real servers ---------------------------------------------

END = 1_790_000_000 - (1_790_000_000 % 86400) + 5 * 3600 + 1234
"""The second read (pinned; the history is backfilled around it, never the wall clock)."""
FIRST = END - 1800
"""The first read, half an hour before."""
WINDOW_S = 3600.0
SINCE = END - 3 * 3600
LANES = (
    SimLane("lane-a", "vllm", SINCE, END),
    SimLane("lane-b", "vllm", SINCE, END, up_until=END),
    SimLane("lane-c", "sglang", SINCE, END),
    SimLane("lane-legacy", "vllm-legacy", SINCE, END),
    SimLane("lane-old", "vllm", SINCE, FIRST + 300),
    SimLane("lane-new", "sglang", FIRST + 600, END),
    SimLane("lane-down", "vllm", SINCE, FIRST + 300, up_until=END),
)
"""lane-old's series end after the first read (gone at the second); lane-new's begin after
it; lane-down's engines stop while their scrape targets stay, `up == 0` (down, not gone)."""
KEYS = (*RAW_KEYS, "ttft")
"""The raw keys the engines' simulated series answer."""
LAST_SAMPLE = {lane.name: lane.stop // 15 * 15 for lane in LANES}


def start_fleet_prometheus(workdir: Path) -> PromServer:
    create_blocks(fleet_history(LANES, KEYS).render(), workdir / "tsdb")
    return start_prometheus(workdir, tsdb=workdir / "tsdb")


def start_fleet_victoria_metrics(workdir: Path) -> PromServer:
    server = start_victoria_metrics(workdir)
    import_history(server, fleet_history(LANES, KEYS))
    return server


FLEET_SERVERS: dict[str, Callable[[Path], PromServer]] = {
    "prometheus": start_fleet_prometheus,
    "victoria-metrics": start_fleet_victoria_metrics,
}


def row_of(view: FleetView, lane: str) -> FleetRow | None:
    """The view's row of `lane`, if it has one."""
    return next((row for row in view.rows if row.lane == lane), None)

"""Fleets for the tests: scripted overview views and feeds, and the live fleet's history (seven
lanes of vLLM and SGLang, three engines each, found by `job` under `fleet="live"`), written into
the run's Prometheus and VictoriaMetrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from cockpit.config.schema import Discover, LaneConfig
from cockpit.core.fleet import NUMERIC_COLUMNS, RAW_KEYS, FleetRow, FleetView
from cockpit.core.model import frozen_map
from tests.support.feeds import EVAL_AT
from tests.support.promharness import (
    OpenMetricsWriter,
    PromServer,
    SimLane,
    fleet_history,
    import_history,
    remote_write,
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


FLEET_LABEL = {"fleet": "live"}
MATCH = 'fleet="live"'
"""The live fleet's own label: the run's servers hold every test module's series, so the fleet
is found under this matcher (`discover: match:`), not as every `job` on the server."""


def lane_selector(lane: str) -> str:
    """The matchers of one of the live fleet's lanes (what its discovery gives the lane)."""
    return f'{MATCH},job="{lane}"'


LOADERS: dict[str, Callable[[PromServer, OpenMetricsWriter], None]] = {
    "prometheus": remote_write,
    "victoria-metrics": import_history,
}
"""How the live fleet's history goes into each kind of server."""


def load_fleet(server: PromServer, kind: str) -> PromServer:
    """`server` (a LOADERS `kind`) with the live fleet's history written in."""
    LOADERS[kind](server, fleet_history(LANES, KEYS, common=FLEET_LABEL))
    return server


def row_of(view: FleetView, lane: str) -> FleetRow | None:
    """The view's row of `lane`, if it has one."""
    return next((row for row in view.rows if row.lane == lane), None)

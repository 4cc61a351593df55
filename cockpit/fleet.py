"""The fleet: every lane of one Prometheus-API server in one table, from one query.

Pure: no I/O. `fleet_plan` builds the ONE instant query that asks every lane's figures at once
(`sum by (<label>) (...)` of each engine's specs, vLLM and SGLang together); `read_fleet` turns
its answer into one `FleetRow` per lane, each column computed by `figures.lane_figures` from the
lane's own raw totals, so a column is the very figure the lane's panes show. `Discovery` keeps
the lanes seen: a lane whose series vanish stays, marked gone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from cockpit.config import Discover, LaneConfig
from cockpit.model import Unit, frozen_map
from cockpit.promql import selector_with

# --- what the overview shows ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FleetColumn:
    """One column of the overview: `key` in `FleetRow.values` (a lane figure's key where the
    lane panes have that figure), its heading, and the unit `figures.format_value` formats a
    value with (None: not a number: the lane's name, up/down, the trend)."""

    key: str
    title: str
    unit: Unit | None


LANE = "lane"
"""Column key of the lane's name (`FleetRow.lane`)."""
UP = "up"
"""Column key of the engine's state (`FleetRow.up`, `FleetRow.gone`)."""
AGE = "age"
"""Column key of the freshness: seconds from the newest sample of the lane to the view's end."""
TREND = "trend"
"""Column key of the small trend (`FleetRow.history[view.trend_key]`)."""

FLEET_COLUMNS: tuple[FleetColumn, ...] = (
    FleetColumn(LANE, "Lane", None),
    FleetColumn(UP, "Engine", None),
    FleetColumn("running_now", "Running", "number"),
    FleetColumn("waiting_now", "Waiting", "number"),
    FleetColumn("kv_usage_now", "KV", "share"),
    FleetColumn("requests_per_s", "Req/s", "number"),
    FleetColumn("generation_tok_s", "Gen tok/s", "tok/s"),
    FleetColumn("prefix_cache_hit_rate", "Hit rate", "share"),
    FleetColumn("mean_fresh_prefill", "Fresh prefill", "tokens"),
    FleetColumn("ttft_p95", "TTFT p95", "seconds"),
    FleetColumn("itl_mean", "Step", "seconds"),
    FleetColumn("decode_share", "Decode", "share"),
    FleetColumn(AGE, "Age", "seconds"),
    FleetColumn(TREND, "Trend", None),
)
"""The overview's columns, left to right. Numeric columns (unit not None) are lane figure keys
(`running_now`, ... `decode_share`: the same figure as in the lane's panes, so the same
thresholds colour them) plus `age`."""

FIGURE_COLUMNS: tuple[str, ...] = tuple(
    c.key for c in FLEET_COLUMNS if c.unit is not None and c.key != AGE
)
"""The columns that are lane figures (`figures.lane_figures` keys)."""
NUMERIC_COLUMNS: tuple[str, ...] = (*FIGURE_COLUMNS, AGE)
"""Every column with a number in `FleetRow.values` (and a history for the trend)."""
COLUMN_BY_KEY: Mapping[str, FleetColumn] = frozen_map({c.key: c for c in FLEET_COLUMNS})
DEFAULT_TREND = "generation_tok_s"
"""The column the trend follows unless the user picks another (any of NUMERIC_COLUMNS)."""
HISTORY_POINTS = 60
"""How many refreshes the trend remembers per lane (one point per refresh, oldest first)."""


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One lane of the overview, as one refresh read it.

    `values[key]` for every key of NUMERIC_COLUMNS: a number, or None when missing, then
    `reasons[key]` says why (never shown as 0). `up`: True when the lane has a live engine
    sample and its scrape targets (when `up` carries the lane's label) are not all down; False
    when down; None only for a row never read. `gone`: the server no longer has the lane's
    series (no live sample, no scrape target): the row stays, its values None, so a lane that
    vanished is seen, not silently dropped."""

    lane: str
    up: bool | None
    values: Mapping[str, float | None] = field(default_factory=frozen_map)
    gone: bool = False
    reasons: Mapping[str, str] = field(default_factory=frozen_map)
    """Column key -> why its value is missing (or a note beside it: how it was found)."""
    above: frozenset[str] = frozenset()
    """Columns whose value is a lower bound (TTFT p95 past the largest bucket: `> 60 s`)."""
    dialect: str = ""
    """`vllm`, `vllm-legacy` or `sglang` (empty when the answer did not say)."""
    down_reason: str = ""
    """Why `up` is False, or why the row is gone, in a few words."""
    history: Mapping[str, tuple[float | None, ...]] = field(default_factory=frozen_map)
    """NUMERIC_COLUMNS key -> its values at the last refreshes (≤ HISTORY_POINTS, oldest
    first, None for a refresh without a value): the trend column draws one of them."""

    def value(self, key: str) -> float | None:
        return self.values.get(key)


@dataclass(frozen=True, slots=True)
class FleetView:
    """The overview at one refresh: every lane's row, and what the server said of the answer.

    `warnings`: the server's own warnings and a partial answer's note (VictoriaMetrics'
    `isPartial`, a Thanos store that didn't answer), each one line, shown, never hidden.
    `server`: the URL (without credentials). `label`: the label lanes are found by (`job`)."""

    rows: tuple[FleetRow, ...]
    window_s: float
    end: float
    warnings: tuple[str, ...] = ()
    server: str = ""
    label: str = "job"
    partial: bool = False
    """The server said its answer is partial (some stores or shards did not answer)."""
    query: str = ""
    """The one PromQL expression asked, for the receipt."""
    query_seconds: float | None = None
    """Client wall time of the refresh's one HTTP request."""
    eval_seconds: float | None = None
    """Server-side evaluation time, when the server reports query stats."""
    trend_key: str = DEFAULT_TREND

    def row(self, lane: str) -> FleetRow | None:
        return next((row for row in self.rows if row.lane == lane), None)


def sort_rows(
    rows: Iterable[FleetRow], column: str, reverse: bool = False, trend_key: str = DEFAULT_TREND
) -> list[FleetRow]:
    """Rows ordered by a column of FLEET_COLUMNS: numbers ascending (descending with
    `reverse`), `lane` by name, `up` down-first (gone, then down, then up), `trend` as
    `trend_key`'s latest value. Rows without a value come last either way; ties keep name
    order."""
    by_name = sorted(rows, key=lambda row: row.lane)
    if column == LANE:
        return sorted(by_name, key=lambda row: row.lane, reverse=reverse)
    column = trend_key if column == TREND else column
    keyed = [(_sort_value(row, column), row) for row in by_name]
    known = [(value, row) for value, row in keyed if value is not None]
    ordered = sorted(known, key=lambda pair: pair[0], reverse=reverse)
    return [row for _, row in ordered] + [row for value, row in keyed if value is None]


def _sort_value(row: FleetRow, column: str) -> float | None:
    if column == UP:
        return 0.0 if row.gone else 1.0 if row.up is False else 2.0 if row.up else None
    value = row.values.get(column)
    return value if value is not None and not math.isnan(value) else None


def filter_rows(rows: Iterable[FleetRow], text: str) -> list[FleetRow]:
    """The rows whose lane name contains `text` (case-insensitive; blank keeps every row)."""
    wanted = text.strip().casefold()
    return [row for row in rows if wanted in row.lane.casefold()]


def format_cell(row: FleetRow, column: FleetColumn) -> str:
    """A cell's text: the figure formatted as the lane panes format it (`> 60 s` for a lower
    bound), `up`/`down`/`gone` for the engine, `—` when missing; the trend is left to the
    screen (a sparkline of `row.history`), so it reads empty here."""
    from cockpit.figures import format_value

    if column.key == LANE:
        return row.lane
    if column.key == UP:
        return "gone" if row.gone else "up" if row.up else "down" if row.up is False else "—"
    if column.unit is None:
        return ""
    text = format_value(row.values.get(column.key), column.unit)
    return f"> {text}" if column.key in row.above else text


# --- discovery -------------------------------------------------------------------------


def lane_config(discover: Discover, lane: str) -> LaneConfig:
    """The discovered lane as a normal lane: the discovery's server and settings, its selector
    the series matcher plus `<label>="<lane>"` (so opening it asks for that lane alone)."""
    selector = selector_with(discover.server.selector, **{discover.label: lane})
    return replace(discover.server, name=lane, selector=selector[1:-1])


def with_discovered(
    explicit: Sequence[LaneConfig], discover: Discover, lanes: Iterable[str]
) -> tuple[LaneConfig, ...]:
    """The listed lanes, then each discovered lane not already listed under its name."""
    listed = {lane.name for lane in explicit}
    found = [lane_config(discover, name) for name in sorted(lanes) if name not in listed]
    return (*explicit, *found)


def _points(history: Sequence[float | None], value: float | None) -> tuple[float | None, ...]:
    return (*history, value)[-HISTORY_POINTS:]

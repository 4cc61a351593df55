"""The fleet: every lane of one Prometheus-API server in one table, from one query. Pure: no I/O.

`fleet_plan` asks every lane's figures at once (`sum by (<label>)` of the lane panes' PromQL);
`Discovery.rows` makes a `FleetRow` per lane, each column the catalogue's figure evaluated over
the lane's part of the answer (only the columns' figures). A lane whose series vanish stays,
gone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from cockpit import engines
from cockpit.config.schema import Discover, LaneConfig
from cockpit.core import promql
from cockpit.core.catalogue import FIGURES, NO_REQUESTS, evaluate
from cockpit.core.figures import format_value
from cockpit.core.gpu_figures import GpuFigures
from cockpit.core.model import LaneTotals, Missing, Unit, frozen_map
from cockpit.core.promql import NO_SAMPLES, selector_with
from cockpit.core.timeutil import promql_duration
from cockpit.engines import Engine
from cockpit.engines.specs import Unavailable

# --- what the overview shows ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FleetColumn:
    """A column: its key in `FleetRow.values`, heading, and unit (None: not a number)."""

    key: str
    title: str
    unit: Unit | None


# Keys of the columns that aren't lane figures: the name, the engine's state, the seconds from
# the lane's newest sample to the view's end, the trend of a numeric column.
LANE, UP, AGE, TREND = "lane", "up", "age", "trend"
# Plan keys besides the raw lane keys: the TTFT p95, present when it lies past the largest
# finite bucket, the lane's newest presence sample, when its data starts (asked only of a lane
# younger than the window), and the names an engine is told apart by (`Engine.requires`).
TTFT_P95, TTFT_ABOVE, NEWEST, START, MARKED = "ttft_p95", "ttft_above", "newest", "start", "marked"


def _figure(key: str, title: str) -> FleetColumn:
    """A column that is a catalogue figure, worked out by its formula."""
    return FleetColumn(key, title, FIGURES[key].unit)


FLEET_COLUMNS: tuple[FleetColumn, ...] = (
    FleetColumn(LANE, "Lane", None),
    FleetColumn(UP, "Engine", None),
    _figure("running_now", "Running"),
    _figure("waiting_now", "Waiting"),
    _figure("kv_usage_now", "KV"),
    _figure("requests_per_s", "Req/s"),
    _figure("generation_tok_s", "Gen tok/s"),
    _figure("prefix_cache_hit_rate", "Hit rate"),
    _figure("mean_fresh_prefill", "Fresh prefill"),
    _figure(TTFT_P95, "TTFT p95"),
    _figure("itl_mean", "Step"),
    _figure("decode_share", "Decode"),
    FleetColumn("gpu_util", "GPU", "share"),
    FleetColumn("gpu_power_w", "Power", "watts"),
    FleetColumn(AGE, "Age", "seconds"),
    FleetColumn(TREND, "Trend", None),
)
"""Left to right; the numeric ones are lane figure keys (the same thresholds colour them)."""

GPU_COLUMNS: tuple[str, ...] = ("gpu_util", "gpu_power_w")
"""The lane's GPU figures (`gpu_figures`), read only for a lane listed with a GPU source."""
FIGURE_COLUMNS: tuple[str, ...] = tuple(
    c.key for c in FLEET_COLUMNS if c.unit is not None and c.key not in (AGE, *GPU_COLUMNS)
)
"""The columns that are catalogue figures."""
NUMERIC_COLUMNS: tuple[str, ...] = (*FIGURE_COLUMNS, *GPU_COLUMNS, AGE)
NO_GPU_SOURCE = "no GPU source (the lane has no `gpu:` block)"
NOT_IN_FLEET_QUERY = "not in the fleet's one query: list the lane with a `gpu:` block"
COLUMN_BY_KEY: Mapping[str, FleetColumn] = frozen_map({c.key: c for c in FLEET_COLUMNS})
DEFAULT_TREND = "generation_tok_s"
HISTORY_POINTS = 60
"""How many refreshes the trend remembers per lane."""


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One lane of the overview, as one refresh read it.

    `values[key]` for every NUMERIC_COLUMNS key: a number, or None (`reasons[key]` says why).
    `up`: a live engine sample and not every scrape target down (else `down_reason`). `gone`:
    the server has no series of it now; its row stays (now-figures None): a vanished lane shows."""

    lane: str
    up: bool | None
    values: Mapping[str, float | None] = field(default_factory=frozen_map)
    gone: bool = False
    reasons: Mapping[str, str] = field(default_factory=frozen_map)
    above: frozenset[str] = frozenset()
    """Columns whose value is a lower bound (TTFT p95 past the largest bucket: `> 60 s`)."""
    dialect: str = ""
    down_reason: str = ""
    refreshes: tuple[Mapping[str, float | None], ...] = ()
    """The lane's values at its last refreshes (≤ HISTORY_POINTS, oldest first)."""
    has_gpu: bool = False
    """The lane was read with its GPU source (a lane listed with a `gpu:` block)."""

    def history(self, key: str) -> tuple[float | None, ...]:
        """Column `key` at the last refreshes, oldest first (the trend draws one)."""
        return tuple(values.get(key) for values in self.refreshes)


@dataclass(frozen=True, slots=True)
class FleetView:
    """The overview at one refresh: every lane's row, and what the server said of the answer."""

    rows: tuple[FleetRow, ...]
    window_s: float
    end: float
    warnings: tuple[str, ...] = ()
    """The server's warnings and a partial answer's note, one line each, shown, never hidden."""
    server: str = ""
    """The server's URL, without credentials."""
    label: str | None = "job"
    """The label lanes are found by; None for a fleet of only the lanes listed in the config."""
    partial: bool = False
    query: str = ""
    eval_seconds: float | None = None
    """Server-side evaluation time, when the server reports query stats."""
    listed: Mapping[str, str] = field(default_factory=frozen_map)
    """Lane listed in the config -> where its own query read it, or why it wasn't."""


def gpu_cells(gpu: GpuFigures | None) -> tuple[dict[str, float | None], dict[str, str]]:
    """The GPU columns' values of a lane read with its GPU source (None: it has none), and
    why each missing one is."""
    if gpu is None:
        return dict.fromkeys(GPU_COLUMNS), dict.fromkeys(GPU_COLUMNS, NO_GPU_SOURCE)
    values = {key: gpu.value(key) for key in GPU_COLUMNS}
    reasons = {key: gpu.figures[key].reason for key in GPU_COLUMNS if values[key] is None}
    return values, reasons


def shown_columns(rows: Iterable[FleetRow]) -> tuple[FleetColumn, ...]:
    """The columns, the GPU ones only when a lane has a GPU source."""
    if any(row.has_gpu for row in rows):
        return FLEET_COLUMNS
    return tuple(column for column in FLEET_COLUMNS if column.key not in GPU_COLUMNS)


def sort_rows(
    rows: Iterable[FleetRow], column: str, reverse: bool = False, trend_key: str = DEFAULT_TREND
) -> list[FleetRow]:
    """Rows by a column: numbers ascending (descending with `reverse`), `lane` by name, `up`
    trouble first (gone, down, up), `trend` by `trend_key` now. Rows without a value come last
    either way; ties keep name order."""
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


def age_text(seconds: float) -> str:
    """The Age column: `now` for a lane sampled within the second, else whole seconds."""
    return "now" if seconds < 1 else f"{seconds:,.0f} s"


def rate_text(per_s: float) -> str:
    """The Req/s column: two decimals on every row, so the column reads as one."""
    return f"{per_s:,.2f}"


COLUMN_FORMATS: dict[str, Callable[[float], str]] = {AGE: age_text, "requests_per_s": rate_text}
"""Columns with a format of their own; the others are formatted as the lane panes do."""


def format_cell(row: FleetRow, column: FleetColumn) -> str:
    """A cell's text as the lane panes format it (`> 60 s` for a lower bound), `—` when
    missing; empty for the trend (the screen draws it)."""
    if column.key == LANE:
        return row.lane
    if column.key == UP:
        return "gone" if row.gone else "up" if row.up else "down" if row.up is False else "—"
    if column.unit is None:
        return ""
    value = row.values.get(column.key)
    own = COLUMN_FORMATS.get(column.key)
    text = own(value) if own and value is not None else format_value(value, column.unit)
    return f"> {text}" if column.key in row.above else text


# --- the one query ---------------------------------------------------------------------

RAW_KEYS: tuple[str, ...] = (
    "running_now", "waiting_now", "kv_usage_now", "requests", "generation_tokens",
    "prefix_cache_queries", "prefix_cache_hits", "prompt_computed", "kv_computed_sum",
    "kv_computed_count", "itl_sum", "itl_count", "spec_drafts", "spec_accepted", "prefill_sum",
    "decode_sum",
)  # fmt: skip
"""The raw lane keys (`Engine.specs`) the columns are made of, besides the TTFT histogram,
whose p95 the server works out."""
SPECULATION = ("spec_drafts", "spec_accepted")
"""Asked only of engines whose step reads them (`PaceReading.step_inputs`)."""
QUANTILE = 0.95
_INF = 'label_replace(vector(1), "le", "+Inf", "", "")'


@dataclass(frozen=True, slots=True)
class FleetPlan:
    """The fleet's one instant query and how to read it back."""

    label: str
    window_s: float
    query: str
    figs: Mapping[str, Mapping[str, str]]
    """Dialect -> plan key -> the `fig` label of its sample (dialects reading alike share one)."""
    unavailable: Mapping[str, Mapping[str, str]]
    """Dialect -> raw key -> why the engine has no metric for it."""
    state: Mapping[str, str]
    """TARGETS, TARGETS_UP (0, asked only when every target is down) -> fig."""


@lru_cache(maxsize=16)
def fleet_plan(label: str, match: str, window_s: float) -> FleetPlan:
    """Every lane's raw keys in one expression, each spec of each dialect `sum by (<label>)`,
    `fig`-labelled as `combined_query` does; the TTFT p95 is the server's `histogram_quantile`.
    The answer is most of a refresh's cost: a fig is a short number (every sample repeats it)
    and nothing is asked that tells nothing (vLLM's draft counters, old lanes' data start)."""
    window = promql_duration(window_s)
    figs_of: dict[str, str] = {}  # expression -> its fig: asked once when dialects share it

    def ask(expression: str) -> str:
        return figs_of.setdefault(expression, str(len(figs_of)))

    figs: dict[str, Mapping[str, str]] = {}
    unavailable: dict[str, Mapping[str, str]] = {}
    for engine in engines.engines():
        specs = engine.specs
        keys: dict[str, str] = {}
        for key in RAW_KEYS:
            if key in SPECULATION and key not in engine.pace.step_inputs:
                continue
            expression = promql.spec_expression(specs[key], match, window, by=label)
            if expression is not None:
                keys[key] = ask(expression)
        buckets = promql.spec_expression(specs["ttft"], match, window, by=label)
        if buckets is not None:
            keys[TTFT_P95] = ask(f"histogram_quantile({QUANTILE}, {buckets})")
            keys[TTFT_ABOVE] = ask(_past_buckets(buckets, label))
        presence = engine.presence + selector_with(match)
        keys[NEWEST] = ask(f"max by ({label}) (timestamp({presence}))")
        start = promql.data_start_expression(engine.name, match, window_s, by=label)
        keys[START] = ask(f"{start} > time() - {window_s - promql.subquery_step(window_s):.3f}")
        if engine.requires or engine.lacks:
            keys[MARKED] = ask(_marked(engine, label, match))
        figs[engine.name] = frozen_map(keys)
        unavailable[engine.name] = frozen_map(
            {k: s.reason for k in (*RAW_KEYS, "ttft") if isinstance(s := specs[k], Unavailable)}
        )
    up = "up" + promql.selector_without(match, "model_name")
    state = {
        promql.TARGETS: ask(f"count by ({label}) ({up})"),
        promql.TARGETS_UP: ask(f"sum by ({label}) ({up}) == 0"),
    }
    query = promql.combined_query({fig: expression for expression, fig in figs_of.items()})
    return FleetPlan(label, window_s, query, frozen_map(figs), frozen_map(unavailable), state)


def _past_buckets(buckets: str, label: str) -> str:
    """Lanes whose quantile lies past every finite bucket (Prometheus answers its bound)."""
    total = f"sum by ({label}) ({buckets} and on (le) {_INF})"
    finite = f"max by ({label}) ({buckets} unless on (le) {_INF})"
    return f"{total} * {QUANTILE} > {finite}"


def _marked(engine: Engine, label: str, match: str) -> str:
    """Lanes that expose one of the engine's `requires` names and none of its `lacks`."""
    selector = selector_with(match)

    def count(names: Iterable[str]) -> str:
        return f"count by ({label}) ({' or '.join(name + selector for name in sorted(names))})"

    marked = count(engine.requires or {engine.presence})
    return f"{marked} unless on ({label}) {count(engine.lacks)}" if engine.lacks else marked


# --- reading the answer -----------------------------------------------------------------

Samples = Mapping[str, float | Missing]
"""fig -> the value of its one sample (or why it is not a number)."""


def index_answer(result: list[dict[str, Any]], label: str) -> Mapping[str, Samples]:
    """The answer's values by lane and `fig` (series without the label are left out)."""
    found: dict[str, dict[str, float | Missing]] = {}
    for sample in result:
        metric = sample.get("metric") or {}
        lane = metric.get(label)
        if lane is not None:
            found.setdefault(lane, {})[metric.get("fig", "")] = promql.sample_value(sample)
    return found


def _number(samples: Samples, fig: str) -> float | None:
    value = samples.get(fig)
    return value if isinstance(value, float) else None


def lane_dialect(plan: FleetPlan, samples: Samples) -> str:
    """A lane's engine by its live series, else by the series only its engine has in the
    window ("": unknown); of several, the one of highest priority."""
    ranked = [engine.name for engine in reversed(engines.engines())]
    for name in ranked:
        figs = plan.figs[name]
        if figs[NEWEST] in samples and (MARKED not in figs or figs[MARKED] in samples):
            return name
    for name in ranked:
        shared = {fig for other in ranked if other != name for fig in plan.figs[other].values()}
        if any(fig in samples for fig in plan.figs[name].values() if fig not in shared):
            return name
    return ""


def lane_row(plan: FleetPlan, samples: Samples, lane: str, dialect: str, end: float) -> FleetRow:
    """One lane's row at `end` from its samples (`index_answer(...)[lane]`), each column the
    catalogue's figure over them; its state from its live series and scrape targets."""
    raw = {key: samples[fig] for key, fig in plan.figs[dialect].items() if fig in samples}
    v = {key: value for key, value in raw.items() if isinstance(value, float)}.get
    newest, start = v(NEWEST), v(START)
    covered = None
    if start is not None and start > end - plan.window_s + promql.subquery_step(plan.window_s):
        covered = max(end - start, 0.0) or None  # a lane younger than the window
    figures = evaluate(_row_totals(plan, raw, dialect, end, covered), FIGURE_COLUMNS)
    values = {key: figure.value for key, figure in figures.items()}
    up, why = _state(plan, samples, newest is not None)
    age = None if newest is None else max(end - newest, 0.0)
    reasons = {key: f.reason for key, f in figures.items() if f.missing}
    return FleetRow(
        lane,
        up=bool(up),
        values=frozen_map({**values, **dict.fromkeys(GPU_COLUMNS), AGE: age}),
        gone=up is None,
        reasons=frozen_map({**reasons, **dict.fromkeys(GPU_COLUMNS, NOT_IN_FLEET_QUERY)}),
        above=frozenset(key for key, figure in figures.items() if figure.above),
        dialect=dialect,
        down_reason=why,
    )


def _row_totals(
    plan: FleetPlan,
    raw: Mapping[str, float | Missing],
    dialect: str,
    end: float,
    covered: float | None,
) -> LaneTotals:
    """A lane's part of the answer as the totals the catalogue reads: its raw keys, why each
    absent one is, and the server's TTFT p95."""
    values = {key: value for key, value in raw.items() if isinstance(value, float)}
    absent = {key: NO_SAMPLES for key in RAW_KEYS if key not in raw}
    absent.update(plan.unavailable[dialect])
    absent.update((key, read.reason) for key, read in raw.items() if isinstance(read, Missing))
    if isinstance(raw.get(TTFT_P95), Missing):
        absent["ttft"] = NO_REQUESTS  # NaN: no observation in the window
    elif TTFT_P95 not in raw:
        absent.setdefault("ttft", NO_SAMPLES)
    p95 = values.pop(TTFT_P95, None)
    quantiles = {} if p95 is None else {TTFT_P95: (p95, TTFT_ABOVE in raw)}
    return LaneTotals("", dialect, plan.window_s, end, frozen_map(values), frozen_map(absent),
                      covered_s=covered, quantiles=frozen_map(quantiles))  # fmt: skip


def _state(plan: FleetPlan, samples: Samples, live: bool) -> tuple[bool | None, str]:
    """Up (True), down (False, and why) or gone (None): no live sample and no scrape target."""
    targets = _number(samples, plan.state[promql.TARGETS])
    if targets and _number(samples, plan.state[promql.TARGETS_UP]) == 0:
        return False, f"its {targets:.0f} scrape target(s) are down (up == 0)"
    if live:
        return True, ""
    if targets:
        return False, "no live sample of its engine (its series went stale)"
    return None, "the server has no live series of it"


# --- discovery -------------------------------------------------------------------------


def lane_config(discover: Discover, lane: str) -> LaneConfig:
    """The discovered lane as a normal lane: the discovery's server, narrowed to `label="lane"`."""
    selector = selector_with(discover.server.selector, **{discover.label: lane})
    return replace(discover.server, name=lane, selector=selector[1:-1])


class Discovery:
    """The lanes a fleet has shown, across refreshes: a lane appears with engine series under
    its label value and keeps its row, gone once its series vanish, until gone for
    HISTORY_POINTS refreshes (a label whose values churn, pods, doesn't grow the table)."""

    def __init__(self) -> None:
        self.dialects: dict[str, str] = {}  # lane -> its engine, as last seen live
        self.history: dict[str, tuple[Mapping[str, float | None], ...]] = {}
        self.gone_for: dict[str, int] = {}  # lane -> refreshes in a row it has been gone

    def rows(self, plan: FleetPlan, result: list[dict[str, Any]], end: float) -> list[FleetRow]:
        """Every lane's row from one answer to `plan.query` evaluated at `end`, by name."""
        found = index_answer(result, plan.label)
        state = set(plan.state.values())  # scrape targets alone don't make a lane
        seen = {lane for lane, samples in found.items() if not samples.keys() <= state}
        rows: list[FleetRow] = []
        for lane in sorted(seen | set(self.dialects)):
            samples = found.get(lane, {})
            dialect = (
                lane_dialect(plan, samples) or self.dialects.get(lane) or engines.default().name
            )
            self.dialects[lane] = dialect
            row = lane_row(plan, samples, lane, dialect, end)
            self.gone_for[lane] = self.gone_for.get(lane, 0) + 1 if row.gone else 0
            if self.gone_for[lane] > HISTORY_POINTS:
                for kept in (self.dialects, self.history, self.gone_for):
                    del kept[lane]
                continue
            rows.append(remember(self.history, row))
        return rows


def remember(history: dict[str, tuple[Mapping[str, float | None], ...]], row: FleetRow) -> FleetRow:
    """`row` with its trend: its values added to its lane's last HISTORY_POINTS refreshes."""
    past = (*history.get(row.lane, ()), row.values)[-HISTORY_POINTS:]
    history[row.lane] = past
    return replace(row, refreshes=past)

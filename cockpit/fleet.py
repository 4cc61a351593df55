"""The fleet: every lane of one Prometheus-API server in one table, from one query.

Pure: no I/O. `fleet_plan` builds the ONE instant query that asks every lane's figures at once
(`sum by (<label>) (...)` of the lane panes' own PromQL for each engine's specs, vLLM and
SGLang together); `Discovery.rows` turns its answer into one `FleetRow` per lane, each column
worked out as `figures.lane_figures` works out that figure (tests hold the two equal on a real
Prometheus and VictoriaMetrics), for 100 lanes in a few milliseconds where building every lane
figure would take about 20. `Discovery` keeps the lanes seen: one whose series vanish stays,
marked gone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from cockpit import promql
from cockpit.config import Discover, LaneConfig
from cockpit.decode_pace import decode_pace
from cockpit.dialects import DIALECTS, Gauge, Unavailable, lane_specs, presence_metric
from cockpit.figures import format_value, merge_reasons
from cockpit.model import Missing, Unit, divide, frozen_map
from cockpit.promql import NO_SAMPLES, selector_with
from cockpit.tail_figures import NO_REQUESTS
from cockpit.timeutil import promql_duration

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
"""Column key of the small trend (`FleetRow.history[<the column it follows>]`)."""

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
    when down (`down_reason` says why). `gone`: the server no longer has the lane's series (no
    live sample, no scrape target): the row stays, so a lane that vanished is seen, not
    silently dropped; its window figures stay while the window still holds its data, its
    now-figures (running, waiting, KV, age) are None."""

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
    if column.key == LANE:
        return row.lane
    if column.key == UP:
        return "gone" if row.gone else "up" if row.up else "down" if row.up is False else "—"
    if column.unit is None:
        return ""
    text = format_value(row.values.get(column.key), column.unit)
    return f"> {text}" if column.key in row.above else text


# --- the one query ---------------------------------------------------------------------

RAW_KEYS: tuple[str, ...] = (
    "running_now", "waiting_now", "kv_usage_now", "requests", "generation_tokens",
    "prefix_cache_queries", "prefix_cache_hits", "prompt_computed", "kv_computed_sum",
    "kv_computed_count", "itl_sum", "itl_count", "spec_drafts", "spec_accepted", "prefill_sum",
    "decode_sum",
)  # fmt: skip
"""The raw lane keys (`dialects.lane_specs`) the columns are made of, besides the TTFT
histogram (`ttft`), whose p95 the server works out."""
TTFT_P95 = "ttft_p95"
"""Plan key: `histogram_quantile(0.95, ...)` of the lane's TTFT histogram over the window."""
TTFT_ABOVE = "ttft_above"
"""Plan key: present when that p95 lies past the largest finite bucket (a lower bound)."""
NEWEST = "newest"
"""Plan key: the timestamp of the lane's newest presence sample (none: no live sample)."""
START = "start"
"""Plan key: when the lane's data starts in the window (its rates are over the part covered);
asked only of a lane younger than the window."""
LEGACY = "legacy"
"""Plan key: the lane has vLLM's pre-0.12 KV gauge and not the new one (`vllm-legacy`)."""
SPECULATION = ("spec_drafts", "spec_accepted")
"""Asked of SGLang only: its step is time per token × tokens per step, where vLLM's is the
ITL mean whatever it drafts (`decode_pace`)."""
QUANTILE = 0.95
_INF = 'label_replace(vector(1), "le", "+Inf", "", "")'


@dataclass(frozen=True, slots=True)
class FleetPlan:
    """The fleet's one instant query and how to read it back."""

    label: str
    window_s: float
    query: str
    figs: Mapping[str, Mapping[str, str]]
    """Dialect -> plan key (RAW_KEYS, TTFT_P95, TTFT_ABOVE, NEWEST, START) -> the `fig`
    label of its sample (a number); one expression is asked once when dialects read it
    alike."""
    unavailable: Mapping[str, Mapping[str, str]]
    """Dialect -> raw key -> why the engine has no metric for it."""
    state: Mapping[str, str]
    """LEGACY, TARGETS, TARGETS_UP (0, asked only when every target is down) -> fig."""


@lru_cache(maxsize=16)
def fleet_plan(label: str, match: str, window_s: float) -> FleetPlan:
    """Every lane's raw keys in one expression: each spec of each dialect as `sum by
    (<label>) (...)` (`promql.spec_expression`, the lane panes' own PromQL), `fig`-labelled
    as `combined_query` does; `match` narrows the series (`namespace="llm"`). One sample per
    lane and fig: the TTFT p95 is the server's `histogram_quantile` (the algorithm
    `cockpit.quantiles` copies), not a bucket vector per lane.

    The answer is most of a refresh's cost (the server encodes it, the client reads it), so
    a fig is a short number (every sample repeats it), vLLM's unread draft counters are not
    asked, the data start and targets up only where they tell something (a lane younger than
    the window, every target down)."""
    window = promql_duration(window_s)
    figs_of: dict[str, str] = {}  # expression -> its fig: asked once when dialects share it

    def ask(expression: str) -> str:
        return figs_of.setdefault(expression, str(len(figs_of)))

    figs: dict[str, Mapping[str, str]] = {}
    unavailable: dict[str, Mapping[str, str]] = {}
    for dialect in DIALECTS:
        specs = lane_specs(dialect)
        keys: dict[str, str] = {}
        for key in RAW_KEYS:
            if key in SPECULATION and dialect != "sglang":
                continue
            expression = promql.spec_expression(specs[key], match, window, by=label)
            if expression is not None:
                keys[key] = ask(expression)
        buckets = promql.spec_expression(specs["ttft"], match, window, by=label)
        if buckets is not None:
            keys[TTFT_P95] = ask(f"histogram_quantile({QUANTILE}, {buckets})")
            keys[TTFT_ABOVE] = ask(_past_buckets(buckets, label))
        presence = presence_metric(dialect) + selector_with(match)
        keys[NEWEST] = ask(f"max by ({label}) (timestamp({presence}))")
        start = promql.data_start_expression(dialect, match, window_s, by=label)
        keys[START] = ask(f"{start} > time() - {window_s - promql.subquery_step(window_s):.3f}")
        figs[dialect] = frozen_map(keys)
        unavailable[dialect] = frozen_map(
            {k: s.reason for k in (*RAW_KEYS, "ttft") if isinstance(s := specs[k], Unavailable)}
        )
    up = "up" + promql.selector_without(match, "model_name")
    state = {
        LEGACY: ask(_legacy(label, match)),
        promql.TARGETS: ask(f"count by ({label}) ({up})"),
        promql.TARGETS_UP: ask(f"sum by ({label}) ({up}) == 0"),
    }
    query = promql.combined_query({fig: expression for expression, fig in figs_of.items()})
    return FleetPlan(label, window_s, query, frozen_map(figs), frozen_map(unavailable), state)


def _past_buckets(buckets: str, label: str) -> str:
    """Lanes whose quantile rank lies past every finite bucket: Prometheus then answers the
    largest finite bound, a lower bound (`quantiles.histogram_quantile`'s flag)."""
    total = f"sum by ({label}) ({buckets} and on (le) {_INF})"
    finite = f"max by ({label}) ({buckets} unless on (le) {_INF})"
    return f"{total} * {QUANTILE} > {finite}"


def _legacy(label: str, match: str) -> str:
    old, new = (lane_specs(d)["kv_usage"] for d in ("vllm-legacy", "vllm"))
    assert isinstance(old, Gauge) and isinstance(new, Gauge)
    selector = selector_with(match)
    return (
        f"count by ({label}) ({old.metric}{selector})"
        f" unless on ({label}) count by ({label}) ({new.metric}{selector})"
    )


# --- reading the answer -----------------------------------------------------------------

Samples = Mapping[str, float | Missing]
"""fig -> the value of its one sample (or why it is not a number)."""
Found = Mapping[str, Samples]
"""lane -> its samples."""


def index_answer(result: list[dict[str, Any]], label: str) -> Found:
    """The answer's values by lane and `fig` (series without the label are left out), each
    sample read once."""
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


def engine_lanes(plan: FleetPlan, found: Found) -> set[str]:
    """The lanes that have engine series in the answer (in the window, or live now)."""
    state = set(plan.state.values())
    return {lane for lane, samples in found.items() if not samples.keys() <= state}


def lane_dialect(plan: FleetPlan, samples: Samples) -> str:
    """A lane's engine by the series it has now, else SGLang when its window has SGLang's
    (empty: not known from this answer)."""
    if plan.figs["sglang"][NEWEST] in samples:
        return "sglang"
    if plan.figs["vllm"][NEWEST] in samples:
        return "vllm-legacy" if plan.state[LEGACY] in samples else "vllm"
    return "sglang" if any(fig in samples for fig in plan.figs["sglang"].values()) else ""


_INPUTS: Mapping[str, tuple[str, ...]] = {
    "running_now": ("running_now",), "waiting_now": ("waiting_now",),
    "kv_usage_now": ("kv_usage_now",), "requests_per_s": ("requests",),
    "generation_tok_s": ("generation_tokens",),
    "prefix_cache_hit_rate": ("prefix_cache_hits", "prefix_cache_queries"),
    "mean_fresh_prefill": ("kv_computed_sum", "requests"), "ttft_p95": ("ttft",),
    "itl_mean": ("itl_sum", "itl_count"), "decode_share": ("prefill_sum", "decode_sum"),
    AGE: (NEWEST,),
}  # fmt: skip
"""Column -> the raw keys whose reasons say why it is missing."""


def lane_row(plan: FleetPlan, samples: Samples, lane: str, dialect: str, end: float) -> FleetRow:
    """One lane's row at `end` from its samples (`index_answer(...)[lane]`): each column as
    the lane panes define it (`figures.lane_figures`, `decode_pace`, `quantiles`; a test holds
    them equal), its state from its live series and its scrape targets (`up`, where that
    carries the label)."""
    figs = plan.figs[dialect]
    raw = {key: samples[fig] for key, fig in figs.items() if fig in samples}
    v = {key: value for key, value in raw.items() if isinstance(value, float)}.get
    newest, start = v(NEWEST), v(START)
    window = plan.window_s
    if start is not None and start > end - window + promql.subquery_step(window):
        window = max(end - start, 0.0) or window  # a lane younger than the window
    values = {
        "running_now": v("running_now"),
        "waiting_now": v("waiting_now"),
        "kv_usage_now": v("kv_usage_now"),
        "requests_per_s": divide(v("requests"), window),
        "generation_tok_s": divide(v("generation_tokens"), window),
        "prefix_cache_hit_rate": divide(v("prefix_cache_hits"), v("prefix_cache_queries")),
        "mean_fresh_prefill": _fresh_prefill(v),
        "ttft_p95": v(TTFT_P95),
        "itl_mean": decode_pace(dialect, v).step_s.value,
        "decode_share": _decode_share(v("prefill_sum"), v("decode_sum")),
        AGE: None if newest is None else max(end - newest, 0.0),
    }
    reasons = _reasons(plan.unavailable[dialect], raw, values)
    up, why = _state(plan, samples, newest is not None)
    above = values["ttft_p95"] is not None and TTFT_ABOVE in raw
    return FleetRow(
        lane,
        up=bool(up),
        values=frozen_map(values),
        gone=up is None,
        reasons=frozen_map(reasons),
        above=frozenset({"ttft_p95"} if above else ()),
        dialect=dialect,
        down_reason=why,
    )


def _reasons(
    unavailable: Mapping[str, str],
    raw: Mapping[str, float | Missing],
    values: Mapping[str, float | None],
) -> dict[str, str]:
    """Why each missing column is: its inputs' reasons (the engine has no such metric, the
    window has no samples), as the lane panes say them."""
    if None not in values.values():
        return {}
    absent = {key: NO_SAMPLES for key in RAW_KEYS if key not in raw}
    absent.update(unavailable)
    absent.update((key, read.reason) for key, read in raw.items() if isinstance(read, Missing))
    if TTFT_P95 in raw and isinstance(raw[TTFT_P95], Missing):
        absent["ttft"] = NO_REQUESTS  # NaN: no observation in the window
    elif TTFT_P95 not in raw:
        absent.setdefault("ttft", NO_SAMPLES)
    return {
        key: merge_reasons(absent[k] for k in _INPUTS[key] if k in absent) or "no data in window"
        for key, value in values.items()
        if value is None
    }


def _fresh_prefill(v: Callable[[str], float | None]) -> float | None:
    """Mean fresh prefill per request, as `figures.lane_figures` finds it."""
    mean = divide(v("kv_computed_sum"), v("kv_computed_count"))
    if mean is not None:
        return mean
    computed = v("prompt_computed")
    queries, hits = v("prefix_cache_queries"), v("prefix_cache_hits")
    if computed is None and queries is not None and hits:
        computed = queries - hits
    return divide(computed, v("requests"))


def _decode_share(prefill: float | None, decode: float | None) -> float | None:
    return None if prefill is None or decode is None else divide(decode, prefill + decode)


def _state(plan: FleetPlan, samples: Samples, live: bool) -> tuple[bool | None, str]:
    """Up (True), down (False, and why) or gone (None): no live sample and no scrape target."""
    targets = _number(samples, plan.state[promql.TARGETS])
    targets_up = _number(samples, plan.state[promql.TARGETS_UP])
    if targets and targets_up == 0:
        return False, f"its {targets:.0f} scrape target(s) are down (up == 0)"
    if live:
        return True, ""
    if targets:
        return False, "no live sample of its engine (its series went stale)"
    return None, "the server has no live series of it"


# --- discovery -------------------------------------------------------------------------


def lane_config(discover: Discover, lane: str) -> LaneConfig:
    """The discovered lane as a normal lane: the discovery's server and settings, its selector
    the series matcher plus `<label>="<lane>"` (so opening it asks for that lane alone)."""
    selector = selector_with(discover.server.selector, **{discover.label: lane})
    return replace(discover.server, name=lane, selector=selector[1:-1])


class Discovery:
    """The lanes a fleet has shown, across refreshes (bookkeeping only, no I/O).

    A lane appears when the answer has engine series with its label value; once seen it
    keeps its row: when its series vanish (no live sample, no scrape target) the row says
    gone, not dropped, until it has been gone for HISTORY_POINTS refreshes (its trend all
    blank): a label whose values churn (pods) doesn't grow the table without end. Each row
    carries the last HISTORY_POINTS refreshes of every numeric column, the overview's trend."""

    def __init__(self) -> None:
        self.dialects: dict[str, str] = {}
        """Lane -> its engine, as last seen live."""
        self.history: dict[str, tuple[Mapping[str, float | None], ...]] = {}
        """Lane -> its rows' values at the last refreshes, oldest first."""
        self.gone_for: dict[str, int] = {}
        """Lane -> refreshes in a row it has been gone."""

    def rows(self, plan: FleetPlan, result: list[dict[str, Any]], end: float) -> list[FleetRow]:
        """Every lane's row from one answer to `plan.query` evaluated at `end`, by name."""
        found = index_answer(result, plan.label)
        rows: list[FleetRow] = []
        for lane in sorted(engine_lanes(plan, found) | set(self.dialects)):
            samples = found.get(lane, {})
            dialect = lane_dialect(plan, samples) or self.dialects.get(lane) or "vllm"
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
    return replace(row, history=Trail(past))


class Trail(Mapping[str, tuple[float | None, ...]]):
    """`FleetRow.history` from a lane's values at its last refreshes: a column's points are
    made when asked (the screen asks for one or two), not at every refresh for each."""

    __slots__ = ("refreshes",)

    def __init__(self, refreshes: tuple[Mapping[str, float | None], ...]) -> None:
        self.refreshes = refreshes

    def __getitem__(self, key: str) -> tuple[float | None, ...]:
        if key not in NUMERIC_COLUMNS:
            raise KeyError(key)
        return tuple(values.get(key) for values in self.refreshes)

    def __iter__(self) -> Iterator[str]:
        return iter(NUMERIC_COLUMNS)

    def __len__(self) -> int:
        return len(NUMERIC_COLUMNS)

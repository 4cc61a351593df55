"""The fleet: every lane of one Prometheus-API server in one table, from one query
(`fleet_plan`); `Discovery.rows` makes a `FleetRow` per lane, each column the catalogue's figure
over the lane's part of the answer. A lane whose series vanish stays, gone. Pure: no I/O."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, NamedTuple

from cockpit import engines
from cockpit.config.schema import Discover, LaneConfig
from cockpit.core import gpu_series, promql
from cockpit.core.catalogue import FIGURES, NO_REQUESTS, SLO_TARGETS, evaluate
from cockpit.core.figures import format_value
from cockpit.core.gpu_figures import NO_GPU_SOURCE, GpuFigures, gpu_figures
from cockpit.core.gpu_series import EXPORTERS, expression_key, gpu_totals, values_from_samples
from cockpit.core.model import LaneTotals, Missing, Unit, frozen_map
from cockpit.core.promql import NO_SAMPLES, selector_with
from cockpit.core.slo import NO_SLO, Slo
from cockpit.core.timeutil import promql_duration
from cockpit.engines import Engine
from cockpit.engines.specs import Unavailable

# --- what the overview shows ------------------------------------------------------------


class FleetColumn(NamedTuple):
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
    *(_figure(f"{h}_slo_attainment", f"{name} SLO") for h, (name, _) in SLO_TARGETS.items()),
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
NUMERIC_COLUMNS: tuple[str, ...] = (*FIGURE_COLUMNS, *GPU_COLUMNS, AGE)
SLO_COLUMNS: tuple[str, ...] = tuple(f"{h}_slo_attainment" for h in SLO_TARGETS)
"""Shown when a lane of the view has that target set."""
COLUMN_BY_KEY: Mapping[str, FleetColumn] = frozen_map({c.key: c for c in FLEET_COLUMNS})
DEFAULT_TREND = "generation_tok_s"
HISTORY_POINTS = 60
"""How many refreshes the trend remembers per lane."""


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One lane of the overview, as one refresh read it: `values[key]` for every NUMERIC_COLUMNS
    key, or None (`reasons[key]` says why). `up`: a live engine sample and a scrape target up
    (else `down_reason`); `gone`: the server has no series of it now, its row stays."""

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
    """Read with a GPU source (a `gpu:` block, or discovered beside GPU exporters' series)."""
    targets: frozenset[str] = frozenset()
    """The SLO attainment columns whose target the lane sets."""

    def history(self, key: str) -> tuple[float | None, ...]:
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
    label: str | None = "job"
    """The label lanes are found by; None for a fleet of only the lanes listed in the config."""
    partial: bool = False
    query: str = ""
    eval_seconds: float | None = None
    listed: Mapping[str, str] = field(default_factory=frozen_map)
    """Lane listed in the config -> where its own query read it, or why it wasn't."""


def gpu_cells(gpu: GpuFigures | None) -> tuple[dict[str, float | None], dict[str, str]]:
    """The GPU columns' values (None: the lane has no GPU source), and why each missing one is."""
    if gpu is None:
        return dict.fromkeys(GPU_COLUMNS), dict.fromkeys(GPU_COLUMNS, NO_GPU_SOURCE)
    values = {key: gpu.value(key) for key in GPU_COLUMNS}
    reasons = {key: gpu.figures[key].reason for key in GPU_COLUMNS if values[key] is None}
    return values, reasons


def shown_columns(rows: Iterable[FleetRow]) -> tuple[FleetColumn, ...]:
    """The columns, the GPU ones only when a lane has a GPU source, an SLO's only when a lane
    has that target."""
    rows = list(rows)
    hidden = {*GPU_COLUMNS} if not any(row.has_gpu for row in rows) else set()
    hidden.update(key for key in SLO_COLUMNS if not any(key in row.targets for row in rows))
    return tuple(column for column in FLEET_COLUMNS if column.key not in hidden)


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
    return None if value is None or math.isnan(value) else value


def filter_rows(rows: Iterable[FleetRow], text: str) -> list[FleetRow]:
    """The rows whose lane name contains `text` (case-insensitive; blank keeps every row)."""
    wanted = text.strip().casefold()
    return [row for row in rows if wanted in row.lane.casefold()]


def rate_text(per_s: float) -> str:
    """The Req/s column: two decimals on every row, so the column reads as one."""
    return f"{per_s:,.2f}"


COLUMN_FORMATS: dict[str, Callable[[float], str]] = {
    AGE: lambda seconds: "now" if seconds < 1 else f"{seconds:,.0f} s",
    "requests_per_s": rate_text,
}
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
    gpu: Mapping[str, str] = field(default_factory=frozen_map)
    """fig -> the GPU reading's expression key (`gpu_series`)."""
    hosts: str = ""
    """The fig of each lane's engine `instance`s (a sample per lane and instance)."""


HOST_LABELS = ("Hostname", "instance")
"""dcgm-exporter's node name and every exporter's scrape target: a GPU is a discovered lane's
when either names a host of the lane's engine `instance`s."""
GPU_READINGS = ("util", "power_w")
BUCKETS = "buckets."
"""Plan keys of the SLO histograms' bucket increases (`buckets.ttft`)."""


@lru_cache(maxsize=16)
def fleet_plan(
    label: str, match: str, window_s: float, slo_histograms: tuple[str, ...] = ()
) -> FleetPlan:
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
        asked = [k for k in RAW_KEYS if k not in SPECULATION or k in engine.pace.step_inputs]
        # The SLO histograms' buckets themselves: the attainment's arithmetic.
        for key in (*asked, "ttft", *(BUCKETS + h for h in slo_histograms)):
            spec = specs[key.removeprefix(BUCKETS)]
            if (expression := promql.spec_expression(spec, match, window, by=label)) is None:
                continue
            if key != "ttft":
                keys[key] = ask(expression)
                continue
            keys[TTFT_P95] = ask(f"histogram_quantile({QUANTILE}, {expression})")
            keys[TTFT_ABOVE] = ask(_past_buckets(expression, label))
        presence = engine.presence + selector_with(match)
        keys[NEWEST] = ask(f"max by ({label}) (timestamp({presence}))")
        start = promql.data_start_expression(engine.name, match, window_s, by=label)
        keys[START] = ask(f"{start} > time() - {window_s - promql.subquery_step(window_s):.3f}")
        if engine.requires or engine.lacks:
            keys[MARKED] = ask(_marked(engine, label, match))
        figs[engine.name] = frozen_map(keys)
        read = (*RAW_KEYS, "ttft", *slo_histograms)
        unavailable[engine.name] = frozen_map(
            {k: s.reason for k in read if isinstance(s := specs[k], Unavailable)}
        )
    up = "up" + promql.selector_without(match, "model_name")
    state = {
        promql.TARGETS: ask(f"count by ({label}) ({up})"),
        promql.TARGETS_UP: ask(f"sum by ({label}) ({up}) == 0"),
    }
    presence = " or ".join(sorted({e.presence + selector_with(match) for e in engines.engines()}))
    hosts = ask(f"count by ({', '.join(dict.fromkeys((label, 'instance')))}) ({presence})")
    gpu = {  # every GPU on the server, its hosts' labels kept
        ask(gpu_series.expression(e, s, "", window_s, HOST_LABELS)): expression_key(e, s)
        for e in EXPORTERS
        for s in e.series
        if s.reading in GPU_READINGS
    }
    query = promql.combined_query({fig: expression for expression, fig in figs_of.items()})
    return FleetPlan(label, window_s, query, frozen_map(figs), frozen_map(unavailable), state,
                     frozen_map(gpu), hosts)  # fmt: skip


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
    """The answer's values by lane and `fig` (a bucket's by `<fig> le=<le>`; series without
    the label are left out)."""
    return split_answer(result, label, frozenset())[0]


def split_answer(
    result: list[dict[str, Any]], label: str, apart: frozenset[str]
) -> tuple[dict[str, dict[str, float | Missing]], dict[str, list[dict[str, Any]]]]:
    """In one pass over the answer: the values by lane and `fig` (`index_answer`'s) of every
    sample but those whose fig is `apart`, and those samples themselves by fig."""
    found: dict[str, dict[str, float | Missing]] = {}
    aside: dict[str, list[dict[str, Any]]] = {}
    for sample in result:
        metric = sample.get("metric") or {}
        fig = metric.get("fig", "")
        if fig in apart:
            aside.setdefault(fig, []).append(sample)
        elif (lane := metric.get(label)) is not None:
            key = f"{fig} le={metric['le']}" if "le" in metric else fig
            found.setdefault(lane, {})[key] = promql.sample_value(sample)
    return found, aside


def _buckets(samples: Samples, fig: str) -> tuple[tuple[float, float], ...] | None:
    """A histogram's `(le, count)` buckets among a lane's samples (None: none answered)."""
    buckets = []
    for key, value in samples.items():
        fig_of, _, le = key.partition(" le=")
        if fig_of == fig and le and isinstance(value, float):
            try:
                buckets.append((float(le), value))
            except ValueError:
                continue
    return tuple(sorted(buckets)) or None


# --- the GPUs of discovered lanes ------------------------------------------------------

NO_GPU_SERIES = "no GPU exporter's series (DCGM_FI_*, nvidia_smi_*) on the server"
NO_HOSTS = "no live engine series with an `instance` label to match GPUs to"


def host_of(instance: str) -> str:
    """A target's host: `node-1:8000` -> `node-1`, `[::1]:8000` -> `::1`."""
    host, colon, port = instance.rpartition(":")
    if not colon or not port.isdigit() or (":" in host and not host.startswith("[")):
        return instance  # no port (an IPv6 address alone, a bare name)
    return host.strip("[]")


@dataclass(frozen=True, slots=True)
class FleetGpus:
    """The GPU exporters' samples of one fleet answer, and each discovered lane's hosts."""

    samples: Mapping[str, list[tuple[dict[str, str], float]]]
    """Expression key -> (labels, value) of every GPU on the server."""
    hosts: Mapping[str, frozenset[str]]
    """Lane -> the hosts of its engines' `instance`s."""

    def cells(self, lane: str) -> tuple[dict[str, float | None], dict[str, str]]:
        """The lane's GPU columns: the GPUs named (Hostname, or instance's host) as one of its
        hosts, when no other lane shares that host; else why not."""
        hosts = self.hosts.get(lane, frozenset())
        if not hosts:
            return dict.fromkeys(GPU_COLUMNS), dict.fromkeys(GPU_COLUMNS, NO_HOSTS)
        sharing = sorted(
            other for other, theirs in self.hosts.items() if other != lane and theirs & hosts
        )
        if sharing:
            why = (f"its hosts ({', '.join(sorted(hosts))}) serve lane(s) {', '.join(sharing)} too:"
                   " Hostname/instance can't tell their GPUs apart")  # fmt: skip
            return dict.fromkeys(GPU_COLUMNS), dict.fromkeys(GPU_COLUMNS, why)
        mine = {
            key: [(labels, value) for labels, value in found if _gpu_hosts(labels) & hosts]
            for key, found in self.samples.items()
        }
        where = f"Hostname or instance {', '.join(sorted(hosts))}"
        return gpu_cells(gpu_figures(gpu_totals(mine, where), None, None))


def _gpu_hosts(labels: Mapping[str, str]) -> set[str]:
    return {
        host for host in (labels.get("Hostname", ""), host_of(labels.get("instance", ""))) if host
    }


def fleet_gpus(plan: FleetPlan, by_fig: Mapping[str, list[dict[str, Any]]]) -> FleetGpus | None:
    """The GPU samples and lanes' hosts of the answer's GPU and host figs (`by_fig`, each
    fig's samples); None when the server has no GPU's series."""
    samples = values_from_samples({key: by_fig.get(fig, []) for fig, key in plan.gpu.items()})
    if not samples:
        return None
    hosts: dict[str, set[str]] = {}
    for metric in (sample.get("metric") or {} for sample in by_fig.get(plan.hosts, [])):
        if plan.label in metric and metric.get("instance"):
            hosts.setdefault(metric[plan.label], set()).add(host_of(metric["instance"]))
    return FleetGpus(samples, {lane: frozenset(found) for lane, found in hosts.items()})


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


def lane_row(
    plan: FleetPlan,
    samples: Samples,
    lane: str,
    dialect: str,
    end: float,
    slo: Slo = NO_SLO,
    gpus: FleetGpus | None = None,
) -> FleetRow:
    """One lane's row at `end` from its samples (`index_answer(...)[lane]`), each column the
    catalogue's figure over them (the attainment against `slo`), its GPUs' columns of `gpus`
    (None: the server has none); its state from its live series and scrape targets."""
    totals = _row_totals(plan, samples, dialect, end)
    newest = totals.values.get(NEWEST)
    figures = evaluate(totals, FIGURE_COLUMNS, slo=slo)
    values = {key: figure.value for key, figure in figures.items()}
    up, why = _state(plan, samples, newest is not None)
    age = None if newest is None else max(end - newest, 0.0)
    reasons = {key: f.reason for key, f in figures.items() if f.missing}
    gpu_values, gpu_reasons = gpus.cells(lane) if gpus else gpu_cells(None)
    return FleetRow(
        lane,
        up=bool(up),
        values=frozen_map({**values, **gpu_values, AGE: age}),
        gone=up is None,
        reasons=frozen_map({**reasons, **gpu_reasons}),
        above=frozenset(key for key, figure in figures.items() if figure.above),
        dialect=dialect,
        down_reason=why,
        has_gpu=gpus is not None,
        targets=slo_targets(slo),
    )


def slo_histograms(slo: Slo) -> tuple[str, ...]:
    """The histograms whose target `slo` sets."""
    return tuple(h for h in SLO_TARGETS if slo.target(h) is not None)


def slo_targets(slo: Slo) -> frozenset[str]:
    """The attainment columns of the targets `slo` sets."""
    return frozenset(f"{h}_slo_attainment" for h in slo_histograms(slo))


def _row_totals(plan: FleetPlan, samples: Samples, dialect: str, end: float) -> LaneTotals:
    """A lane's part of the answer as the totals the catalogue reads: its raw keys, why each
    absent one is, the server's TTFT p95, the SLO histograms' buckets."""
    figs = plan.figs[dialect]
    raw = {key: samples[fig] for key, fig in figs.items() if fig in samples}
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
    histograms = {
        key.removeprefix(BUCKETS): found
        for key, fig in figs.items()
        if key.startswith(BUCKETS) and (found := _buckets(samples, fig)) is not None
    }
    start, covered = values.get(START), None
    if start is not None and start > end - plan.window_s + promql.subquery_step(plan.window_s):
        covered = max(end - start, 0.0) or None  # a lane younger than the window
    return LaneTotals("", dialect, plan.window_s, end, frozen_map(values), frozen_map(absent),
                      frozen_map(histograms), covered_s=covered,
                      quantiles=frozen_map(quantiles))  # fmt: skip


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

    def rows(
        self, plan: FleetPlan, result: list[dict[str, Any]], end: float, slo: Slo = NO_SLO
    ) -> list[FleetRow]:
        """Every lane's row from one answer to `plan.query` evaluated at `end`, by name."""
        found, aside = split_answer(result, plan.label, frozenset({plan.hosts, *plan.gpu}))
        gpus = fleet_gpus(plan, aside)
        state = set(plan.state.values())  # scrape targets alone don't make a lane
        seen = {lane for lane, samples in found.items() if not samples.keys() <= state}
        rows: list[FleetRow] = []
        for lane in sorted(seen | set(self.dialects)):
            samples = found.get(lane, {})
            dialect = (
                lane_dialect(plan, samples) or self.dialects.get(lane) or engines.default().name
            )
            self.dialects[lane] = dialect
            row = lane_row(plan, samples, lane, dialect, end, slo, gpus)
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

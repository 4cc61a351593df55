"""A lane's trend: its figures at each multiple t of a step (covering (t - step, t]), worked
out from the step's raw keys as the window's figures are; one range query on Prometheus
(`trend_query`), the buffer on a direct scrape. A step without data is None, never 0. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from cockpit.core import promql
from cockpit.core.catalogue import TREND_KEYS, TRENDS, evaluate
from cockpit.core.gpu_figures import GPU_TREND
from cockpit.core.model import LaneTotals, Trend, frozen_map
from cockpit.core.timeutil import promql_duration
from cockpit.engines import dialects

POINTS = 60
"""A window is cut into about this many steps."""
NICE_STEPS_S: tuple[int, ...] = (
    15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
)  # fmt: skip
DAY_S = 86400
STEP_INPUTS: tuple[str, ...] = (
    "prefix_cache_hits", "prefix_cache_queries", "generation_tokens", "ttft_count",
    "itl_sum", "itl_count", "spec_drafts", "spec_accepted", "running", "waiting", "kv_usage",
)  # fmt: skip
"""The raw lane keys the trend keys are worked out from, read per step."""
TTFT = "ttft"
"""The raw key of the TTFT histogram, read per step as its p95 (`TTFT_P95`)."""
TTFT_P95 = "ttft_p95"
QUANTILE = 0.95
RATE_SCRAPES = 4
"""A step's counters are read over at least this many scrape intervals."""

StepValues = Mapping[str, float]
"""Raw key -> its value within one step (absent: no data then), plus `ttft_p95`."""


def trend_step(window_s: float) -> float:
    """The trend's step for a window: a sixtieth of it rounded up to a nice step, ≥ 15 s."""
    wanted = window_s / POINTS
    nice = next((step for step in NICE_STEPS_S if step >= wanted), None)
    return float(nice if nice is not None else math.ceil(wanted / DAY_S) * DAY_S)


def point_times(window_s: float, end: float) -> tuple[float, ...]:
    """The times of the trend's points, oldest first: the step's multiples in the window,
    up to the last one at or before `end`."""
    step = trend_step(window_s)
    last = math.floor(end / step) * step
    count = max(1, int(window_s // step))
    return tuple(last - (count - 1 - i) * step for i in range(count))


@lru_cache(maxsize=16 * POINTS)
def _trend_row(
    dialect: str, step_s: float, values: tuple[tuple[str, float], ...]
) -> tuple[float | None, ...]:
    """The trend keys over one step (`TREND_KEYS` order), each its catalogue figure over the
    step's values; remembered: a window's steps stay the same from one refresh to the next."""
    raw = dict(values)
    quantiles = {TTFT_P95: (raw.pop(TTFT_P95), False)} if TTFT_P95 in raw else {}
    totals = LaneTotals("", dialect, step_s, 0.0, raw, quantiles=quantiles)
    figures = evaluate(totals, (series.figure for series in TRENDS))
    return tuple(figures[series.figure].value for series in TRENDS)


def make_trend(
    dialect: str,
    window_s: float,
    end: float,
    steps: Mapping[float, StepValues],
    rates_over_s: float | None = None,
) -> Trend:
    """The trend of the window ending at `end` from each step's values (a step not given, or
    given with no values, is a gap); `rates_over_s`: the range its counters were read over."""
    times = point_times(window_s, end)
    step = trend_step(window_s)
    points = [_trend_row(dialect, step, tuple(steps.get(t, {}).items())) for t in times]
    series = {key: tuple(row[index] for row in points) for index, key in enumerate(TREND_KEYS)}
    if any(GPU_TREND.key in values for values in steps.values()):  # it rode in a range query
        series[GPU_TREND.key] = tuple(steps.get(t, {}).get(GPU_TREND.key) for t in times)
    longer = rates_over_s if rates_over_s is not None and rates_over_s > step else None
    return Trend(step, times[-1], frozen_map(series), longer)


def step_specs(dialect: str, exposed: frozenset[str]) -> dict[str, dialects.Spec]:
    """The step inputs and the TTFT histogram the engine exposes, by raw key."""
    specs = dialects.lane_specs(dialect, dialects.names_escaped(exposed))
    wanted = (*STEP_INPUTS, TTFT)
    return {k: specs[k] for k in wanted if not dialects.missing_reason(specs[k], exposed)}


def rate_range(step_s: float, scrape_s: float) -> float:
    """The range a step's counters are read over: the step, or `RATE_SCRAPES` scrape
    intervals (whole seconds) when that is longer."""
    return float(max(step_s, math.ceil(RATE_SCRAPES * scrape_s)))


# --- Prometheus: one range query ---------------------------------------------------------


@lru_cache(maxsize=64)
def trend_query(
    dialect: str, selector: str, step_s: float, exposed: frozenset[str], scrape_s: float = 0.0
) -> str:
    """Every step input (and the TTFT p95) as one expression, each labelled `fig="<key>"`,
    to be asked with `/api/v1/query_range` at the step (built once per lane and step);
    `scrape_s`: the lane's scrape interval (0: ranges of the step itself)."""
    exprs: dict[str, str] = {}
    for key, spec in step_specs(dialect, exposed).items():
        if expression := step_expression(spec, selector, step_s, scrape_s):
            exprs[key] = expression
    if TTFT in exprs:
        exprs[TTFT_P95] = f"histogram_quantile({QUANTILE}, {exprs.pop(TTFT)})"
    return promql.combined_query(exprs)


def step_expression(
    spec: dialects.Spec, selector: str, step_s: float, scrape_s: float = 0.0
) -> str | None:
    """A spec within each step: counters' increase over it (over `rate_range` scaled to the
    step when that is longer); a gauge's samples in it (or in the last scrape interval, when
    longer) averaged, so a step without samples has no value (no 5 m lookback filling a gap)."""
    if isinstance(spec, dialects.Either) and isinstance(spec.options[0], dialects.Gauge):
        options = (step_expression(option, selector, step_s, scrape_s) for option in spec.options)
        return f"({' or '.join(o for o in options if o)})"
    if isinstance(spec, dialects.Gauge):
        within = promql_duration(max(step_s, math.ceil(scrape_s)))
        series = f"avg_over_time({spec.metric}{promql.selector_with(selector)}[{within}])"
        return f"{spec.across}({promql.one_rank(series, spec.ranks)})"
    over = rate_range(step_s, scrape_s)
    increase = promql.spec_expression(spec, selector, promql_duration(over))
    return f"({increase} * {step_s:g} / {over:g})" if increase and over > step_s else increase


def matrix_values(result: Sequence[Mapping[str, Any]]) -> dict[float, dict[str, float]]:
    """A range answer of `trend_query` as step time -> raw key -> value (NaN and infinities,
    an empty step's quantile or a division by zero, left out)."""
    steps: dict[float, dict[str, float]] = {}
    for series in result:
        key = str(series.get("metric", {}).get("fig", ""))
        for point in series.get("values") or ():
            try:
                at, value = float(point[0]), float(point[1])
            except (TypeError, ValueError, IndexError):
                continue
            if math.isfinite(value):
                steps.setdefault(at, {})[key] = value
    return steps

"""PromQL for a lane: selectors (escaping, parsing, matching), the expressions of specs, and
reading the answer.

Pure: no I/O. A lane's refresh asks every figure in one query (`lane_plan`, `combined_query`);
`split_by_fig` and `read_key` take the answer apart again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from cockpit.dialects import (
    RANK,
    Counter,
    Difference,
    Either,
    Gauge,
    Histogram,
    LastMinute,
    Now,
    Spec,
    capacity_from_info,
    capacity_metric,
    lane_specs,
    missing_reason,
    names_escaped,
    parse_le,
    presence_metric,
    sorted_buckets,
)
from cockpit.model import LANE_GROUPED, LANE_HISTOGRAMS, LANE_NOW, LAST_MINUTE_S, Bucket, Missing
from cockpit.timeutil import parse_duration, promql_duration, stamp

KV_CAPACITY = "kv_capacity"
"""Expression key for the KV capacity (vLLM: info labels; SGLang: a gauge)."""
DATA_START = "data_start"
"""Expression key for the timestamp of the lane's oldest sample in the window."""
SCRAPES = "scrapes"
"""Expression key for how many samples the lane's presence series has in the last
`SCRAPE_SPAN_S` (or the window, when shorter)."""
SCRAPE_SPAN_S = 600.0
TARGETS = "targets"
"""Expression key for how many scrape targets the lane has (`count(up)`)..."""
TARGETS_UP = "targets_up"
"""...and how many of them are up (`sum(up)`)."""


# --- selectors and escaping --------------------------------------------------------------


def escape_label_value(value: str) -> str:
    """A label value ready to sit between double quotes in PromQL."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _inner(selector: str) -> str:
    text = selector.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    return text.strip().rstrip(",").strip()


def selector_with(selector: str, **labels: str) -> str:
    """`{selector,label="value",...}` with the values escaped."""
    parts = [_inner(selector)] if _inner(selector) else []
    parts += [f'{name}="{escape_label_value(value)}"' for name, value in labels.items()]
    return "{" + ",".join(parts) + "}"


MatchOp = Literal["=", "!=", "=~", "!~"]


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher of a selector; regexes are fully anchored, as in PromQL."""

    name: str
    op: MatchOp
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        actual = labels.get(self.name, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        hit = re.fullmatch(self.value, actual) is not None
        return hit if self.op == "=~" else not hit


_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _UNESCAPE.get(m.group(1), m.group(1)), text)


def parse_selector(selector: str) -> tuple[Matcher, ...]:
    """The matchers of `{a="b",c=~"re"}` (braces optional); ValueError names the bad part."""
    text = _inner(selector)
    matchers: list[Matcher] = []
    position = 0
    while position < len(text):
        match = _MATCHER.match(text, position)
        if not match:
            raise ValueError(f"cannot read selector {selector!r} at {text[position:]!r}")
        op: MatchOp = match.group(2)  # type: ignore[assignment]
        matchers.append(Matcher(match.group(1), op, _unescape(match.group(3))))
        position = match.end()
    return tuple(matchers)


def selector_without(selector: str, *names: str) -> str:
    """The selector with matchers on `names` dropped (`cache_config_info` has no model_name)."""
    kept = [m for m in parse_selector(selector) if m.name not in names]
    return "{" + ",".join(f'{m.name}{m.op}"{escape_label_value(m.value)}"' for m in kept) + "}"


# --- PromQL -----------------------------------------------------------------------------


def _with_extra(metric: str, selector: str, extra: tuple[tuple[str, str], ...]) -> str:
    return metric + selector_with(selector, **dict(extra))


def spec_expression(
    spec: Spec,
    selector: str,
    window: str,
    at: float | None = None,
    step: float | None = None,
    by: str = "",
) -> str | None:
    """One spec as PromQL returning a single sample (a `le` vector for histograms); with `by`,
    one per value of that label (every sum keeps it: a fleet's lanes at once).

    `at` pins every range to end at that epoch (the `@` modifier). Gauges
    are the time average of the sum (or mean) across series, sampled every `step` seconds
    (default `subquery_step` of the window), so series that replace each other within the
    window (a container swap) are not added up as if they had run side by side.
    """
    pin = "" if at is None else f" @ {at:.3f}"
    if isinstance(spec, Counter):
        increase = f"increase({_with_extra(spec.metric, selector, spec.extra)}[{window}]{pin})"
        return f"{_sum('sum', _labels(spec.by, by))}({_one_rank(increase, spec.ranks)})"
    if isinstance(spec, Difference):
        a = spec_expression(spec.a, selector, window, at, step, by)
        b = spec_expression(spec.b, selector, window, at, step, by)
        return f"({a} - {b})"
    if isinstance(spec, Either):
        options = [
            e for o in spec.options if (e := spec_expression(o, selector, window, at, step, by))
        ]
        if isinstance(spec.options[0], Histogram):  # `le` vectors: one option's buckets only
            options = [f"({o} unless on({by}) ({' or '.join(options[:k])}))" if k else o
                       for k, o in enumerate(options)]  # fmt: skip
        return f"({' or '.join(options)})"
    if isinstance(spec, Now):
        return _instant(spec.of, selector, pin, by)
    if isinstance(spec, LastMinute):
        return spec_expression(spec.of, selector, promql_duration(LAST_MINUTE_S), at, step, by)
    if isinstance(spec, Gauge):
        step = subquery_step(parse_duration(window)) if step is None else step
        series = f"{spec.metric}{selector_with(selector)}"
        how = _sum(spec.across, _labels(spec.by, by))
        inner = f"{how}({_one_rank(series, spec.ranks)})"
        # Data younger than the last subquery step: fall back to the value at the end.
        return (
            f"(avg_over_time({inner}[{window}:{promql_duration(step)}]{pin})"
            f" or {how}({_one_rank(series + pin, spec.ranks)}))"
        )
    if isinstance(spec, Histogram):
        buckets = f"{_with_extra(f'{spec.base}_bucket', selector, spec.extra)}[{window}]{pin}"
        increase = _one_rank(f"increase({buckets})", spec.ranks)
        return f"sum by ({_labels('le', by)}) ({increase})"
    return None


def _instant(spec: Gauge | Either, selector: str, pin: str, by: str) -> str:
    """A gauge's sum (or mean) across series at the evaluation time."""
    if isinstance(spec, Either):
        options = [_instant(o, selector, pin, by) for o in spec.options if isinstance(o, Gauge)]
        return f"({' or '.join(options)})"
    series = f"{spec.metric}{selector_with(selector)}{pin}"
    return f"{_sum(spec.across, _labels(spec.by, by))}({_one_rank(series, spec.ranks)})"


def _sum(how: str, by: str) -> str:
    return f"{how} by ({by}) " if by else how


def _labels(*names: str) -> str:
    return ", ".join(name for name in names if name)


def _one_rank(vector: str, ranks: str) -> str:
    """Series that repeat one another across `ranks`: the largest stands for them."""
    return f"max without ({ranks}) ({vector})" if ranks else vector


def capacity_expression(
    dialect: str, selector: str, escaped: bool = False, window: str | None = None
) -> str:
    """KV capacity: vLLM's info series (labels joined client-side) or SGLang's gauge. With a
    `window`, when the lane has none now (the engine down, `--at` in a gap), the last seen in it.
    """
    lane_specs(dialect)
    metric = capacity_metric(dialect, escaped)
    if dialect == "sglang":
        series = metric + selector_with(selector)
        now = f"sum({_one_rank(series, RANK)})"
        last = f"sum({_one_rank(f'last_over_time({series}[{window}])', RANK)})"
        return now if window is None else f"({now} or {last})"
    now = metric + selector_without(selector, "model_name")
    last = f"(last_over_time({now}[{window}]) unless on() {now})"
    return now if window is None else f"({now} or {last})"


def subquery_step(window_s: float) -> float:
    """Subquery step for gauges and the data start: 15 s, or 1/2000 of long windows."""
    return float(max(15, round(window_s / 2000)))


GAUGE_STEPS: tuple[float, ...] = (15, 30, 60, 120, 300, 600, 1800, 3600)
"""Steps a long window's gauges may be sampled at when the lane's history is shorter."""


def gauge_step(window_s: float, covered_s: float | None) -> float:
    """The subquery step of a window's gauges: the window's own, or, when the lane's data
    covers only `covered_s` of it, one fine enough for that history (rounded up to
    `GAUGE_STEPS`, so a growing history changes the query rarely)."""
    step = subquery_step(window_s)
    if covered_s is None or covered_s >= window_s:
        return step
    wanted = subquery_step(max(covered_s, 0.0))
    return min([s for s in GAUGE_STEPS if s >= wanted] + [step])


FINE_STEP_S = 15.0
"""The data start's precision when the lane's history is short."""
SCAN_POINTS = 2000
"""Points of a data-start scan: a span 2000 steps long, like a window's own step."""


def data_start_expression(
    dialect: str, selector: str, window_s: float, escaped: bool = False, by: str = ""
) -> str:
    """Epoch of the lane's oldest sample in the window, to within a step.

    Each subquery point is its own time when a sample is within the 5 m lookback (`m * 0 +
    time()`: as cheap as the samples themselves, where `timestamp()` in a subquery is ~25×
    slower), so the minimum is the first point with data: at most a step after the scanned
    span's start when data covers it, else at most a step after the first sample. A window's
    own step (1/2000 of it) is coarse for a history much shorter than the window, so shorter
    spans are scanned first at finer steps (15 s over the last 8 h 20 min, each next span 20
    times longer and coarser); the first span whose data begins inside it answers. With
    `by`, one start per value of that label (a fleet's lanes).
    """
    metric = presence_metric(dialect, escaped) + selector_with(selector)
    window_step = subquery_step(window_s)
    scans: list[str] = []
    step = FINE_STEP_S
    while step < window_step and (span := SCAN_POINTS * step) < window_s:
        scan = _earliest(metric, span, step, by)
        scans.append(f"({scan} > time() - {span - step:.0f})")
        step *= 20
    scans.append(_earliest(metric, window_s, window_step, by))
    # Data younger than the last subquery step is only seen by the instant lookup.
    scans.append(f"{_sum('min', by)}(timestamp({metric}))")
    return f"({' or '.join(scans)})"


def _earliest(metric: str, span_s: float, step_s: float, by: str = "") -> str:
    return (
        f"{_sum('min', by)}(min_over_time(({metric} * 0 + time())"
        f"[{promql_duration(span_s)}:{promql_duration(step_s)}]))"
    )


def targets_expressions(selector: str) -> dict[str, str]:
    """The lane's scrape targets and how many are up, from Prometheus's own `up` series.

    The model filter is dropped (`up` has no `model_name`); a selector with no other matcher
    would count every target of the server, so it asks nothing. A matcher on a label `up`
    doesn't carry matches no target: nothing is said then either."""
    kept = selector_without(selector, "model_name")
    if kept == "{}":
        return {}
    return {TARGETS: f"count(up{kept})", TARGETS_UP: f"sum(up{kept})"}


def lane_expressions(
    dialect: str, selector: str, window: str, escaped: bool = False
) -> dict[str, str]:
    """Raw key -> PromQL for every key the dialect can answer, plus `kv_capacity`."""
    expressions: dict[str, str] = {}
    for key, spec in lane_specs(dialect, escaped).items():
        expression = spec_expression(spec, selector, window)
        if expression is not None:
            expressions[key] = expression
    expressions[KV_CAPACITY] = capacity_expression(dialect, selector, escaped)
    return expressions


def combined_query(exprs: Mapping[str, str]) -> str:
    """All expressions as one vector, each sample labelled `fig="<key>"`."""
    return " or ".join(
        f'label_replace({expr}, "fig", "{escape_label_value(key)}", "", "")'
        for key, expr in exprs.items()
    )


@dataclass(frozen=True, slots=True)
class LanePlan:
    """A lane's figures for one window: what is asked, what can't be, and the one query text."""

    specs: Mapping[str, Spec]
    """Raw key -> spec for the keys the query asks (every other key is in `missing`)."""
    exprs: Mapping[str, str]
    """Raw key -> PromQL over the whole window (what `LaneTotals.queries` shows)."""
    extra: Mapping[str, str]
    """`kv_capacity` (and the targets and `data_start` when asked) -> PromQL."""
    missing: Mapping[str, str]
    """Raw key -> why it is not asked (unavailable, or its metric not exposed)."""
    query: str
    """`exprs` and `extra` as one `combined_query`."""


@lru_cache(maxsize=64)
def lane_plan(
    dialect: str,
    selector: str,
    window_s: float,
    names: frozenset[str] | None,
    with_start: bool,
    gauge_step: float | None = None,
) -> LanePlan:
    """The plan for a lane's refresh, built once per (dialect, selector, window, names, start).

    A lane asks the same query at every refresh; cached, the text is not rebuilt each time.
    `with_start` also asks the lane's state: its scrape targets (`targets_expressions`) and
    when its data starts.
    Gauges are sampled every `gauge_step` seconds (default: the window's `subquery_step`).
    """
    escaped = names_escaped(names or ())
    specs: dict[str, Spec] = {}
    missing: dict[str, str] = {}
    for key, spec in lane_specs(dialect, escaped).items():
        reason = missing_reason(spec, names)
        if reason:
            missing[key] = reason
        else:
            specs[key] = spec
    window = promql_duration(window_s)
    exprs = {
        k: e
        for k, s in specs.items()
        if (e := spec_expression(s, selector, window, None, gauge_step))
    }
    extra = {KV_CAPACITY: capacity_expression(dialect, selector, escaped, window)}
    if with_start:
        extra.update(targets_expressions(selector))
        extra[DATA_START] = data_start_expression(dialect, selector, window_s, escaped)
        presence = presence_metric(dialect, escaped) + selector_with(selector)
        span = promql_duration(min(window_s, SCRAPE_SPAN_S))
        extra[SCRAPES] = f"max(count_over_time({presence}[{span}]))"
    return LanePlan(specs, exprs, extra, missing, combined_query({**exprs, **extra}))


# --- reading the answer -----------------------------------------------------------------

NO_SAMPLES = "no samples in window"
NO_SAMPLE_NOW = "no sample at the evaluation time"


def split_by_fig(result: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """An answer's samples grouped by their `fig` label (see `combined_query`)."""
    by_fig: dict[str, list[dict[str, Any]]] = {}
    for sample in result:
        by_fig.setdefault(str(sample.get("metric", {}).get("fig", "")), []).append(sample)
    return by_fig


def sample_value(sample: Mapping[str, Any]) -> float | Missing:
    """The sample's number, or why it is not one."""
    try:
        number = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return Missing("answer carried no readable value")
    if math.isfinite(number):
        return number
    if math.isnan(number):
        return Missing("not a number (NaN) in window")
    return Missing("infinite value in window")


def _buckets(samples: list[dict[str, Any]]) -> tuple[Bucket, ...] | Missing:
    pairs: list[Bucket] = []
    for sample in samples:
        number = sample_value(sample)
        if isinstance(number, Missing):
            return number
        try:
            bound = parse_le(sample["metric"]["le"])
        except (KeyError, TypeError, ValueError):
            return Missing("histogram bucket without a readable le")
        pairs.append((bound, number))
    return sorted_buckets(pairs)


def read_key(
    samples: list[dict[str, Any]] | None, key: str
) -> float | tuple[Bucket, ...] | dict[str, float] | Missing:
    """A raw key's value (buckets for a histogram) from its samples, or why there is none."""
    if not samples:
        return Missing(NO_SAMPLE_NOW if key in LANE_NOW else NO_SAMPLES)
    if key in LANE_HISTOGRAMS:
        return _buckets(samples)
    if key in LANE_GROUPED:
        return _groups(samples)
    return sample_value(samples[0])


def _groups(samples: list[dict[str, Any]]) -> dict[str, float] | Missing:
    """A `sum by (label)` answer as label value -> number (the one label beside `fig`)."""
    groups: dict[str, float] = {}
    for sample in samples:
        number = sample_value(sample)
        if isinstance(number, Missing):
            return number
        labels = [v for k, v in sample.get("metric", {}).items() if k != "fig"]
        groups[str(labels[0]) if labels else ""] = number
    return groups


def capacity_from_samples(dialect: str, samples: list[dict[str, Any]]) -> float | None:
    """KV capacity in tokens: SGLang's gauge, or the sum of vLLM's info series' labels."""
    if not samples:
        return None
    if dialect == "sglang":
        number = sample_value(samples[0])
        return number if isinstance(number, float) and number > 0 else None
    total = 0.0
    for sample in samples:
        capacity = capacity_from_info(sample.get("metric", {}))
        if capacity is None:
            return None
        total += capacity
    return total


def capacity_reason(dialect: str, seen: bool) -> str:
    """Why a lane's KV capacity is unknown, as far as the sample (or its absence) says."""
    metric = capacity_metric(dialect)
    if not seen:
        return f"no {metric} sample in the window"
    return f"{metric} gives no usable capacity"


def window_coverage(
    samples: list[dict[str, Any]] | None, end: float, window_s: float
) -> tuple[float | None, str]:
    """Seconds of the window the lane's data covers and the words for it, when partial."""
    start = sample_value(samples[0]) if samples else None
    if not isinstance(start, float) or start <= end - window_s + subquery_step(window_s):
        return None, ""
    return max(end - start, 0.0), f"data since {stamp(start)}"


def scrape_interval(
    counted: list[dict[str, Any]] | None,
    start: list[dict[str, Any]] | None,
    end: float,
    window_s: float,
) -> float | None:
    """The lane's scrape interval: its presence series' samples in the last `SCRAPE_SPAN_S`
    or the window (`SCRAPES`) over the time they span (all of it, or since the lane's data
    start, `DATA_START`, when that is later), as the nearest
    of `SCRAPE_INTERVALS` (a sample more or less doesn't change it, nor the trend's query);
    None with fewer than two."""
    count = sample_value(counted[0]) if counted else None
    if not isinstance(count, float) or count < 2:
        return None
    span = min(window_s, SCRAPE_SPAN_S)
    began = sample_value(start[0]) if start else None
    if isinstance(began, float) and began > end - span + subquery_step(window_s):
        found = (end - began) / (count - 1)
    else:
        found = span / count
    return min(SCRAPE_INTERVALS, key=lambda interval: abs(math.log(interval / found)))


SCRAPE_INTERVALS: tuple[float, ...] = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300)
"""The scrape intervals people set."""

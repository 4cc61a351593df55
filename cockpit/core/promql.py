"""PromQL for a lane: selectors, the expressions of specs asked as one query (`lane_plan`), and
reading the answer (`split_by_fig`, `read_key`). Pure: no I/O."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from cockpit import engines
from cockpit.core.model import (
    LANE_GROUPED,
    LANE_HISTOGRAMS,
    LANE_NOW,
    LAST_MINUTE_S,
    MODEL_KEYS,
    Bucket,
    Missing,
)
from cockpit.core.timeutil import parse_duration, promql_duration, stamp
from cockpit.engines import specs

# Keys of the expressions asked beside the figures': the KV capacity, the oldest sample in the
# window, the presence series' samples in the last SCRAPE_SPAN_S, the scrape targets and how
# many are up, a raw key's per-model expression (a prefix), the LoRA info series.
KV_CAPACITY, DATA_START, SCRAPES = "kv_capacity", "data_start", "scrapes"
TARGETS, TARGETS_UP, MODEL, LORA = "targets", "targets_up", "model:", "lora"
SCRAPE_SPAN_S = 600.0
SCRAPE_INTERVALS: tuple[float, ...] = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300)
"""The scrape intervals people set."""


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
        if self.op in ("=", "!="):
            hit = actual == self.value
        else:
            hit = re.fullmatch(self.value, actual) is not None
        return hit if self.op in ("=", "=~") else not hit


_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


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
        value = re.sub(r"\\(.)", lambda m: _UNESCAPE.get(m[1], m[1]), match.group(3))
        matchers.append(Matcher(match.group(1), op, value))
        position = match.end()
    return tuple(matchers)


def selector_without(selector: str, *names: str) -> str:
    """The selector with matchers on `names` dropped (`cache_config_info` has no model_name)."""
    kept = [m for m in parse_selector(selector) if m.name not in names]
    return "{" + ",".join(f'{m.name}{m.op}"{escape_label_value(m.value)}"' for m in kept) + "}"


# --- PromQL -----------------------------------------------------------------------------


def presence_series(dialect: str, selector: str, escaped: bool = False) -> str:
    """The lane's series of its engine's presence metric (every lane has them)."""
    return engines.engine(dialect).presence_metric(escaped) + selector_with(selector)


def spec_expression(
    spec: specs.Spec,
    selector: str,
    window: str,
    at: float | None = None,
    step: float | None = None,
    by: str = "",
) -> str | None:
    """One spec as PromQL returning a single sample (a `le` vector for histograms); with `by`,
    one per value of that label; `at` pins every range to end then (`@`). Gauges are the time
    average of the sum across series, sampled every `step` seconds (default `subquery_step`),
    so series that replace each other (a container swap) are not added up."""
    pin = "" if at is None else f" @ {at:.3f}"

    def part(other: specs.Spec, over: str = window) -> str | None:
        return spec_expression(other, selector, over, at, step, by)

    if isinstance(spec, specs.Counter):
        increase = f"increase({_series(spec.metric, selector, spec.extra)}[{window}]{pin})"
        return f"{_sum('sum', spec.by, by)}({one_rank(increase, spec.ranks)})"
    if isinstance(spec, specs.Combined):
        return f"({part(spec.a)} {spec.op} {part(spec.b)})"
    if isinstance(spec, specs.Either):
        options = [e for o in spec.options if (e := part(o))]
        # `le` vectors: one option's buckets only, not several options' mixed.
        if isinstance(spec.options[0], specs.Histogram):
            options = [f"({o} unless on({by}) ({' or '.join(options[:k])}))" if k else o
                       for k, o in enumerate(options)]  # fmt: skip
        return f"({' or '.join(options)})"
    if isinstance(spec, specs.Now):
        return _instant(spec.of, selector, pin, by)
    if isinstance(spec, specs.LastMinute):
        return part(spec.of, promql_duration(LAST_MINUTE_S))
    if isinstance(spec, specs.Gauge):
        step = subquery_step(parse_duration(window)) if step is None else step
        sampled = f"[{window}:{promql_duration(step)}]{pin}"
        mean = f"avg_over_time({_instant(spec, selector, '', by)}{sampled})"
        # Data younger than the last subquery step: fall back to the value at the end.
        return f"({mean} or {_instant(spec, selector, pin, by)})"
    if isinstance(spec, specs.Histogram):
        buckets = f"{_series(f'{spec.base}_bucket', selector, spec.extra)}[{window}]{pin}"
        increase = one_rank(f"increase({buckets})", spec.ranks)
        return f"{_sum('sum', 'le', by)}({increase})"
    return None


LE_SEEN = "_le_seen"


def le_seen_expression(
    spec: specs.Spec, selector: str, window: str, step: float | None = None
) -> str | None:
    """How often each `le` of a histogram was present in the window, for `check_buckets` (of an
    `Either`, the option its increase is read from). Counted at the gauges' subquery step: at
    most ~2000 lookups a series, and as exact (a target's buckets are scraped at once)."""
    if isinstance(spec, specs.Histogram):
        step = subquery_step(parse_duration(window)) if step is None else step
        buckets = _series(f"{spec.base}_bucket", selector, spec.extra)
        counted = f"count_over_time({buckets}[{window}:{promql_duration(step)}])"
        return f"sum by (le) ({one_rank(counted, spec.ranks)})"
    if not isinstance(spec, specs.Either) or not isinstance(spec.options[0], specs.Histogram):
        return None
    seen = [le_seen_expression(option, selector, window, step) for option in spec.options]
    chosen = [spec_expression(option, selector, window) for option in spec.options]
    parts = [
        f"({counted} unless on() ({' or '.join(str(c) for c in chosen[:k])}))" if k else counted
        for k, counted in enumerate(seen)
        if counted
    ]
    return f"({' or '.join(parts)})"


def _instant(spec: specs.Gauge | specs.Either, selector: str, pin: str, by: str) -> str:
    """A gauge's sum (or mean) across series at the evaluation time."""
    if isinstance(spec, specs.Either):
        gauges = [o for o in spec.options if isinstance(o, specs.Gauge)]
        return f"({' or '.join(_instant(o, selector, pin, by) for o in gauges)})"
    series = _series(spec.metric, selector) + pin
    return f"{_sum(spec.across, spec.by, by)}({one_rank(series, spec.ranks)})"


def _series(metric: str, selector: str, extra: tuple[tuple[str, str], ...] = ()) -> str:
    return metric + selector_with(selector, **dict(extra))


def _sum(how: str, *labels: str) -> str:
    """`how`, or `how by (labels)` when any label is kept."""
    kept = ", ".join(label for label in labels if label)
    return f"{how} by ({kept}) " if kept else how


def one_rank(vector: str, ranks: str) -> str:
    """Series that repeat one another across `ranks`: the largest stands for them."""
    return f"max without ({ranks}) ({vector})" if ranks else vector


def capacity_expression(
    dialect: str, selector: str, escaped: bool = False, window: str | None = None
) -> str | None:
    """KV capacity: an info series (labels read client-side) or a gauge; None where the engine
    states none. With a `window`, when the lane has none now, the last seen in it."""
    capacity = engines.engine(dialect).capacity_spec(escaped)
    if isinstance(capacity, specs.Gauge):
        now = _instant(capacity, selector, "", "")
        last = f"last_over_time({_series(capacity.metric, selector)}[{window}])"
        last = f"{_sum(capacity.across, capacity.by)}({one_rank(last, capacity.ranks)})"
    elif isinstance(capacity, specs.Info):
        now = capacity.metric + selector_without(selector, *capacity.unlabelled)
        last = f"(last_over_time({now}[{window}]) unless on() {now})"
    else:
        return None
    return now if window is None else f"({now} or {last})"


def subquery_step(window_s: float) -> float:
    """Subquery step for gauges and the data start: 15 s, or 1/2000 of long windows."""
    return float(max(15, round(window_s / 2000)))


GAUGE_STEPS: tuple[float, ...] = (15, 30, 60, 120, 300, 600, 1800, 3600)
GAUGE_POINTS = 60
"""A short span's gauges are sampled at this many instants at least."""
FINE_GAUGE_STEPS: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0)


def gauge_step(window_s: float, covered_s: float | None) -> float:
    """The subquery step of a window's gauges: the window's own, or, when the lane's data
    covers only `covered_s` of it, one fine enough for that history (rounded up to
    `GAUGE_STEPS`, so a growing history changes the query rarely; `FINE_GAUGE_STEPS` for a
    span shorter than `GAUGE_POINTS` steps)."""
    step = subquery_step(window_s)
    span = window_s if covered_s is None or covered_s >= window_s else max(covered_s, 0.0)
    if span < window_s:
        wanted = subquery_step(span)
        step = min([s for s in GAUGE_STEPS if s >= wanted] + [step])
    if span < GAUGE_POINTS * step:
        step = max((s for s in FINE_GAUGE_STEPS if s * GAUGE_POINTS <= span), default=1.0)
    return step


FINE_STEP_S = 15.0
"""The data start's precision when the lane's history is short."""
SCAN_POINTS = 2000


def data_start_expression(
    dialect: str, selector: str, window_s: float, escaped: bool = False, by: str = ""
) -> str:
    """Epoch of the lane's oldest sample in the window, to within a step (with `by`, one per
    value of that label). Each subquery point is its own time when a sample is within the 5 m
    lookback (`m * 0 + time()`: `timestamp()` in a subquery is ~25× slower). Shorter spans are
    scanned first at finer steps (15 s over 8 h 20 min, each next 20 times longer and coarser);
    the first span whose data begins inside it answers."""
    metric = presence_series(dialect, selector, escaped)
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
    """The lane's scrape targets and how many are up (`up` has no `model_name`: dropped); a
    selector with no other matcher would count every target of the server, so none."""
    kept = selector_without(selector, "model_name")
    if kept == "{}":
        return {}
    return {TARGETS: f"count(up{kept})", TARGETS_UP: f"sum(up{kept})"}


def lane_expressions(dialect: str, selector: str, window: str) -> dict[str, str]:
    """Raw key -> PromQL for every key the dialect can answer, plus `kv_capacity`."""
    table = engines.engine(dialect).lane_specs().items()
    expressions = {key: e for key, spec in table if (e := spec_expression(spec, selector, window))}
    capacity = capacity_expression(dialect, selector)
    return {**expressions, **({KV_CAPACITY: capacity} if capacity else {})}


def model_expressions(
    dialect: str,
    selector: str,
    window: str,
    asked: Mapping[str, specs.Spec],
    names: frozenset[str] | None,
) -> dict[str, str]:
    """`MODEL` + raw key -> the key's PromQL `sum by (<the engine's model label>)`, for the
    `MODEL_KEYS` asked; `LORA` -> its info series with the latest value (it has no model label,
    so it is asked wherever the engine has one)."""
    engine = engines.engine(dialect)
    found: dict[str, str] = {}
    if isinstance(label := engine.model_label, str):
        for key in MODEL_KEYS:
            if key in asked and (e := spec_expression(asked[key], selector, window, by=label)):
                found[MODEL + key] = e
    lora = engine.lora_metric(engines.names_escaped(names or ()))
    if lora:
        found[LORA] = f"topk(1, {lora}{selector_without(selector, 'model_name')})"
    return found


def combined_query(exprs: Mapping[str, str]) -> str:
    """All expressions as one vector, each sample labelled `fig="<key>"`."""
    return " or ".join(
        f'label_replace({expr}, "fig", "{escape_label_value(key)}", "", "")'
        for key, expr in exprs.items()
    )


@dataclass(frozen=True, slots=True)
class LanePlan:
    """A lane's figures for one window: the raw keys asked (`specs`, `exprs`), the `extra`
    expressions, why the other keys are `missing`, and all as one `query`."""

    specs: Mapping[str, specs.Spec]
    exprs: Mapping[str, str]
    extra: Mapping[str, str]
    missing: Mapping[str, str]
    query: str


@lru_cache(maxsize=64)
def lane_plan(
    dialect: str,
    selector: str,
    window_s: float,
    names: frozenset[str] | None,
    with_start: bool,
    gauge_step: float | None = None,
) -> LanePlan:
    """The plan for a lane's refresh, built once; `with_start` also asks the lane's state (its
    scrape targets, when its data starts, its scrapes). Gauges are sampled every `gauge_step`."""
    escaped = engines.names_escaped(names or ())
    every = engines.engine(dialect).lane_specs(escaped)
    reasons = {key: specs.missing_reason(spec, names) for key, spec in every.items()}
    missing = {key: reason for key, reason in reasons.items() if reason}
    asked = {key: spec for key, spec in every.items() if key not in missing}
    window = promql_duration(window_s)
    exprs = {
        k: e
        for k, s in asked.items()
        if (e := spec_expression(s, selector, window, None, gauge_step))
    }
    capacity = capacity_expression(dialect, selector, escaped, window)
    extra = {KV_CAPACITY: capacity} if capacity else {}
    extra.update(model_expressions(dialect, selector, window, asked, names))
    for key, spec in asked.items():
        if key in LANE_HISTOGRAMS and (seen := le_seen_expression(spec, selector, window)):
            extra[key + LE_SEEN] = seen
    if with_start:
        extra.update(targets_expressions(selector))
        extra[DATA_START] = data_start_expression(dialect, selector, window_s, escaped)
        presence = presence_series(dialect, selector, escaped)
        span = promql_duration(min(window_s, SCRAPE_SPAN_S))
        extra[SCRAPES] = f"max(count_over_time({presence}[{span}]))"
    return LanePlan(asked, exprs, extra, missing, combined_query({**exprs, **extra}))


# --- reading the answer -----------------------------------------------------------------

NO_SAMPLES = "no samples in window"
NO_SAMPLE_NOW = "no sample at the evaluation time"
Samples = list[dict[str, Any]]


def split_by_fig(result: Samples) -> dict[str, Samples]:
    by_fig: dict[str, Samples] = {}
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


def read_key(
    samples: Samples | None, key: str
) -> float | tuple[Bucket, ...] | dict[str, float] | Missing:
    """A raw key's value (buckets for a histogram) from its samples, or why there is none."""
    if not samples:
        return Missing(NO_SAMPLE_NOW if key in LANE_NOW else NO_SAMPLES)
    if key in LANE_HISTOGRAMS:
        return _buckets(samples)
    if key in LANE_GROUPED:
        return _groups(samples)
    return sample_value(samples[0])


def _buckets(samples: Samples) -> tuple[Bucket, ...] | Missing:
    pairs: list[Bucket] = []
    for sample in samples:
        number = sample_value(sample)
        if isinstance(number, Missing):
            return number
        try:
            pairs.append((specs.parse_le(sample["metric"]["le"]), number))
        except (KeyError, TypeError, ValueError):
            return Missing("histogram bucket without a readable le")
    return specs.sorted_buckets(pairs)


def le_seen(samples: Samples | None) -> dict[float, float] | None:
    """A `le_seen_expression` answer as bound -> times present; None when unreadable."""
    found = _buckets(samples or [])
    if isinstance(found, Missing):
        return None
    seen: dict[float, float] = {}
    for bound, number in found:
        seen[bound] = seen.get(bound, 0.0) + number
    return seen


def _groups(samples: Samples) -> dict[str, float] | Missing:
    """A `sum by (label)` answer as label value -> number (the one label beside `fig`)."""
    groups: dict[str, float] = {}
    for sample in samples:
        number = sample_value(sample)
        if isinstance(number, Missing):
            return number
        labels = [str(v) for k, v in sample.get("metric", {}).items() if k != "fig"]
        groups[labels[0] if labels else ""] = number
    return groups


def capacity_from_samples(dialect: str, samples: Samples) -> float | None:
    """KV capacity in tokens: the engine's gauge, or the sum over its info series' labels."""
    capacity = engines.engine(dialect).capacity
    if not samples:
        return None
    if isinstance(capacity, specs.Info):
        capacities = [capacity.read(sample.get("metric", {})) for sample in samples]
        return None if None in capacities else sum(c for c in capacities if c is not None)
    number = sample_value(samples[0])
    return number if isinstance(number, float) and number > 0 else None


def capacity_reason(dialect: str, seen: bool) -> str:
    """Why a lane's KV capacity is unknown, as far as the sample (or its absence) says."""
    capacity = engines.engine(dialect).capacity
    if isinstance(capacity, specs.Unavailable):
        return capacity.reason
    if not seen:
        return f"no {capacity.metric} sample in the window"
    return f"{capacity.metric} gives no usable capacity"


def window_coverage(
    samples: Samples | None, end: float, window_s: float
) -> tuple[float | None, str]:
    """Seconds of the window the lane's data covers and the words for it, when partial."""
    start = sample_value(samples[0]) if samples else None
    if not isinstance(start, float) or start <= end - window_s + subquery_step(window_s):
        return None, ""
    return max(end - start, 0.0), f"data since {stamp(start)}"


def scrape_interval(
    counted: Samples | None, start: Samples | None, end: float, window_s: float
) -> float | None:
    """The lane's scrape interval: its presence series' samples over the time they span, as the
    nearest of `SCRAPE_INTERVALS` (a sample more or less changes neither it nor the trend's
    query); None with fewer than two."""
    count = sample_value(counted[0]) if counted else None
    if not isinstance(count, float) or count < 2:
        return None
    span = min(window_s, SCRAPE_SPAN_S)
    began = sample_value(start[0]) if start else None
    if isinstance(began, float) and began > end - span + subquery_step(window_s):
        found = (end - began) / (count - 1)
    else:
        found = span / count
    if found <= 0:  # its samples start after `end`: the clocks disagree, no interval to tell
        return None
    return min(SCRAPE_INTERVALS, key=lambda interval: abs(math.log(interval / found)))

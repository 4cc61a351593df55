"""The language engine adapters state their metrics in: which metric answers each raw lane key.

Pure: no I/O. `cockpit.core.promql` renders these specs as PromQL for the Prometheus source; the
scrape source evaluates the same specs over its own samples, so both paths agree on names and
meanings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, TypeVar

__all__ = [
    "Capacity", "Combined", "Counter", "Either", "Gauge", "Histogram", "Info", "LastMinute", "Now",
    "Spec", "Unavailable", "escape_name", "escaped_spec", "first", "lacking", "missing_reason",
    "parse_le", "phases", "required_metrics", "sorted_buckets",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Counter:
    """`sum(increase(metric{S,extra}[W]))`; `metric` is the exposed name (with `_total`).

    `by`: a label kept, so the value is a mapping label value -> increase (`sum by (by)`).
    `ranks`: a label whose series repeat one another (SGLang's `tp_rank` when every scheduler
    exports): the largest of them is taken before summing (`max without (ranks)`)."""

    metric: str
    extra: tuple[tuple[str, str], ...] = ()
    by: str = ""
    ranks: str = ""


@dataclass(frozen=True, slots=True)
class Combined:
    """`a - b` or `a + b` of counters (SGLang's computed prefill = prompt - cached)."""

    a: Counter | Combined
    b: Counter
    op: Literal["-", "+"] = "-"


@dataclass(frozen=True, slots=True)
class Gauge:
    """A gauge averaged over W: summed over series (`sum`) or a mean fraction (`avg`);
    `by` and `ranks` as for `Counter`."""

    metric: str
    across: Literal["sum", "avg"]
    by: str = ""
    ranks: str = ""


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative increase per `le` of `base_bucket`; `extra` and `ranks` as for `Counter`."""

    base: str
    extra: tuple[tuple[str, str], ...] = ()
    ranks: str = ""


@dataclass(frozen=True, slots=True)
class Now:
    """A gauge spec's value at the evaluation time (a direct scrape: its last scrape)."""

    of: Gauge | Either


@dataclass(frozen=True, slots=True)
class LastMinute:
    """A counter spec's increase over the minute before the evaluation time."""

    of: Counter | Combined


@dataclass(frozen=True, slots=True)
class Unavailable:
    """The engine has no metric for this key; `reason` says so."""

    reason: str


@dataclass(frozen=True, slots=True)
class Either:
    """The first of `options` that has a value (an older engine's name, a label only newer
    engines carry): PromQL `a or b`."""

    options: tuple[Spec, ...]


Spec = Counter | Combined | Gauge | Histogram | Now | LastMinute | Either | Unavailable


@dataclass(frozen=True, slots=True)
class Info:
    """An info series whose labels state a number (vLLM's KV capacity: blocks × block size):
    `read` finds it in one label set; `unlabelled`: selector labels the series lacks."""

    metric: str
    read: Callable[[Mapping[str, str]], float | None]
    unlabelled: tuple[str, ...] = ()


Capacity = Gauge | Info | Unavailable
"""Where an engine states its KV capacity in tokens."""
S = TypeVar("S", bound=Spec | Info)


def first(*options: Spec) -> Either:
    return Either(options)


def phases(bases: Mapping[str, str], wrap: Callable[[str], Spec] = Counter) -> dict[str, Spec]:
    """`key_sum` and `key_count` of each histogram `key: base` (its `_sum` and `_count`)."""
    return {f"{k}_{part}": wrap(f"{base}_{part}") for k, base in bases.items()
            for part in ("sum", "count")}  # fmt: skip


def lacking(reason: str, *keys: str) -> dict[str, Spec]:
    """Each key unavailable for the same reason."""
    return dict.fromkeys(keys, Unavailable(reason))


def required_metrics(spec: Spec) -> tuple[str, ...]:
    """The exposed sample names a spec reads (for the 'not exposed' check)."""
    if isinstance(spec, Counter | Gauge):
        return (spec.metric,)
    if isinstance(spec, Combined):
        return (*required_metrics(spec.a), spec.b.metric)
    if isinstance(spec, Histogram):
        return (f"{spec.base}_bucket",)
    if isinstance(spec, Either):
        return tuple(name for option in spec.options for name in required_metrics(option))
    if isinstance(spec, Now | LastMinute):
        return required_metrics(spec.of)
    return ()


def escape_name(metric: str) -> str:
    """`vllm:x` -> `vllm_x`, as prometheus_client writes it under `escaping=underscores`."""
    return metric.replace(":", "_")


def escaped_spec(spec: S) -> S:
    """The spec with its names as an OpenMetrics scrape stored them (`escape_name`)."""
    changes: dict[str, Any] = {}
    for name in (f.name for f in fields(spec)):
        value = getattr(spec, name)
        if name in ("metric", "base"):
            changes[name] = escape_name(value)
        elif name in ("a", "b", "of"):
            changes[name] = escaped_spec(value)
        elif name == "options":
            changes[name] = tuple(map(escaped_spec, value))
    return replace(spec, **changes)


def missing_reason(spec: Spec, exposed: Iterable[str] | None) -> str | None:
    """Why a key can't have a value before querying: unavailable, or a name not exposed."""
    if isinstance(spec, Unavailable):
        return spec.reason
    if exposed is None:
        return None
    if isinstance(spec, Now | LastMinute):
        return missing_reason(spec.of, exposed)
    names = set(exposed)
    if isinstance(spec, Either) and any(missing_reason(o, names) is None for o in spec.options):
        return None
    absent = [name for name in required_metrics(spec) if name not in names]
    if absent:
        return f"not exposed by this engine ({', '.join(dict.fromkeys(absent))})"
    return None


def parse_le(text: str) -> float:
    """A bucket bound as a float (`"1000.0"`, `"1e+03"`, `"+Inf"`)."""
    return float(text)


def sorted_buckets(pairs: Iterable[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """(le, cumulative count) sorted by bound, `inf` last."""
    return tuple(sorted(pairs, key=lambda pair: pair[0]))

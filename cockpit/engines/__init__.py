"""The engine adapters: each module of this package that states an `Engine` adds one.

Pure: no I/O. The registry finds them (`engines`), looks one up by its id (`engine`) and tells
a lane's engine from its metric names (`detect`).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable
from functools import cache

from cockpit.engines.base import DialectError, Engine
from cockpit.engines.specs import escape_name

__all__ = ["DialectError", "Engine", "default", "detect", "engine", "engines", "find"]


@cache
def engines() -> tuple[Engine, ...]:
    """Every engine the package's modules state, lowest priority first."""
    found: dict[int, Engine] = {}
    for module in pkgutil.iter_modules(__path__):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        found.update((id(v), v) for v in vars(loaded).values() if isinstance(v, Engine))
    listed = tuple(sorted(found.values(), key=lambda e: e.priority))
    pairs = [(e.name, e.priority) for e in listed]
    if len(pairs) > min(len({name for name, _ in pairs}), len({p for _, p in pairs})):
        raise DialectError(f"engines share a name or a priority: {pairs}")
    return listed


def find(name: str) -> Engine | None:
    return next((known for known in engines() if known.name == name), None)


def engine(name: str) -> Engine:
    """The engine of this id; DialectError for one no module states."""
    found = find(name)
    if found is None:
        expected = ", ".join(known.name for known in engines())
        raise DialectError(f"unknown engine dialect {name!r} (expected one of {expected})")
    return found


def default() -> Engine:
    """The engine a lane is read as before any is detected: the most general one."""
    return engines()[0]


@cache
def prefixes(escaped: bool = False) -> tuple[str, ...]:
    """Every engine's name prefix (`vllm:`) once; `escaped`: as OpenMetrics writes it (`vllm_`)."""
    found = dict.fromkeys(e.prefix for e in engines())
    return tuple(map(escape_name, found) if escaped else found)


def names_selector() -> str:
    """A series selector of every engine's metrics, escaped or not."""
    stems = "|".join(re.escape(prefix.removesuffix(":")) for prefix in prefixes())
    return f'{{__name__=~"({stems})[:_].+"}}'


def no_engine_metrics() -> str:
    *others, last = prefixes()
    return f"no {', '.join(others)}{' or ' if others else ''}{last} metrics found for this lane"


def names_escaped(metric_names: Iterable[str]) -> bool:
    """True when the engine's names arrived as `vllm_...` instead of `vllm:...`.

    prometheus_client (0.2x) answers an OpenMetrics scrape with `escaping=underscores` and
    replaces the colon in sample names (client_python issue #1177), so a Prometheus that
    negotiates OpenMetrics stores `vllm_prompt_tokens_total`.
    """
    names = list(metric_names)
    if any(name.startswith(prefixes()) for name in names):
        return False
    return any(name.startswith(prefixes(escaped=True)) for name in names)


def detect(metric_names: Iterable[str]) -> Engine:
    """The engine whose names these are (of several, the one of highest priority)."""
    names = set(metric_names)
    if names_escaped(names):
        for plain, escaped in zip(prefixes(), prefixes(escaped=True), strict=True):
            names = {plain + n[len(escaped) :] if n.startswith(escaped) else n for n in names}
    for candidate in reversed(engines()):
        if candidate.detects(names):
            return candidate
    raise DialectError(no_engine_metrics())

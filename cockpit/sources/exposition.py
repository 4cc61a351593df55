"""An engine's `/metrics` text, parsed by prometheus_client. Pure: no I/O.

`read_scrape()` parses only the lines of the sample names the lane's figures need (of its
series, when its selector has exact matchers) with `prometheus_client.parser`, a line at a time:
with no `# TYPE` line every sample keeps its own name (`x_total`, `x_created`), in the classic
format and OpenMetrics alike. A line whose text before its value the last scrape had only has
its value read: parsing labels character by character is the costly part of a refresh.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from cockpit import engines
from cockpit.core import promql
from cockpit.engines.specs import Gauge, Info, escape_name, required_metrics
from cockpit.sources.http import SourceError

LabelKey = tuple[tuple[str, str], ...]
IGNORED_MATCHERS = frozenset({"job", "instance"})
"""Labels Prometheus adds at scrape time; an engine's own /metrics has none, so they're skipped."""
_SAMPLE_NAME = re.compile(r"[^{ \t]+")


class Series(NamedTuple):
    """A parsed sample line's name, labels, their key, that key without `le`, and the series
    itself and its `_created` series as (name, key) (kept from scrape to scrape)."""

    name: str
    labels: dict[str, str]
    key: LabelKey
    base: LabelKey
    own: tuple[str, LabelKey]
    born: tuple[str, LabelKey]


def parsed_series(name: str, labels: dict[str, str]) -> Series:
    key = label_key(labels)
    base = tuple(pair for pair in key if pair[0] != "le")
    return Series(name, labels, key, base, (name, key), (created_name(name), base))


Known = Mapping[str, Series | str]
"""A scrape's lines by their text before the value: the series parsed, or the name of a line
no figure reads (not parsed)."""


def label_key(labels: Mapping[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


@lru_cache(maxsize=1024)
def created_name(sample_name: str) -> str:
    """`x_total`, `x_bucket`, `x_sum`, `x_count` -> `x_created`."""
    base, _, suffix = sample_name.rpartition("_")
    return (base if suffix in ("total", "bucket", "sum", "count") else sample_name) + "_created"


def lane_matchers(selector: str) -> list[promql.Matcher]:
    """The selector's matchers an engine's own labels can meet (not job/instance)."""
    return [m for m in promql.parse_selector(selector) if m.name not in IGNORED_MATCHERS]


@lru_cache(maxsize=8)
def wanted_names(dialect: str, escaped: bool) -> frozenset[str]:
    """The sample names the lane's figures read for this dialect, its capacity gauge's too."""
    engine = engines.engine(dialect)
    names = set(capacity_names(dialect) if isinstance(engine.capacity, Gauge) else ())
    for spec in engine.lane_specs(escaped).values():
        names.update(required_metrics(spec))
    return frozenset(names)


def capacity_names(dialect: str) -> frozenset[str]:
    """The names the engine's capacity metric may arrive under (escaped or not)."""
    capacity = engines.engine(dialect).capacity
    return _both_forms(capacity.metric if isinstance(capacity, Gauge | Info) else None)


def _both_forms(name: str | None) -> frozenset[str]:
    return frozenset({name, escape_name(name)}) if name else frozenset()


@lru_cache(maxsize=8)
def _detected(names: frozenset[str]) -> str:
    return engines.detect(names).name


@dataclass(slots=True)
class Scrape:
    """One exposition, reduced to what the figures need."""

    names: frozenset[str]
    """Every engine sample name it exposed (wanted or not)."""
    dialect: str
    samples: dict[str, dict[LabelKey, tuple[float, float]]] = field(default_factory=dict)
    """Wanted sample name -> labels -> (value, the series' `_created` or NaN)."""
    info: list[dict[str, str]] = field(default_factory=list)
    """The label sets of the engine's capacity info metric, where it has one."""
    lora: list[tuple[dict[str, str], float]] = field(default_factory=list)
    """The engine's LoRA info series: labels and value, where it states them."""
    series: dict[str, Series | str] = field(default_factory=dict)
    """The lines read, by their text before the value: the next scrape's `known`."""
    stamped: float | None = None
    """The latest timestamp the exposition gave a sample (epoch seconds), if any did."""


def parse_line(url: str, line: str) -> Sample:
    """One sample line, by prometheus_client's parser (a `SourceError` when it can't)."""
    try:
        (sample,) = (s for family in text_string_to_metric_families(line) for s in family.samples)
        return sample
    except (ValueError, IndexError, TypeError) as exc:
        raise SourceError(f"{url}: cannot parse the /metrics text: {str(exc)[:120]!r}") from None


def plain_number(text: str) -> float | None:
    """A sample's value as written, when `float()` reads it as the parser would (else None)."""
    if "_" in text:  # `1_000`: the parser refuses it, `float()` would not
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _engine_lines(text: str, known: Known) -> list[tuple[str, str, str, Series | str, str]]:
    """(line, text before its value, value, series or name, name) of each engine sample line."""
    prefixes = (*engines.prefixes(), *engines.prefixes(escaped=True))
    lines = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        head, _, last = line.rpartition(" ")
        series = known.get(head)
        if series is None:
            line = line.strip()
            if not line.startswith(prefixes):
                continue
            head, _, last = line.rpartition(" ")
            name = _SAMPLE_NAME.match(line)
            series = name.group() if name else line
        lines.append((line, head, last, series, series if isinstance(series, str) else series.name))
    return lines


def read_scrape(
    url: str,
    text: str,
    *,
    dialect: str | None,
    seen: frozenset[str],
    keep: list[promql.Matcher],
    known: Known | None = None,
) -> Scrape:
    """The figures' samples of one exposition. `dialect`: the lane's engine when forced (else
    detected from this scrape); `seen`: engine names of earlier scrapes (an OpenMetrics answer
    escapes them all or none); `keep`: the lane's matchers; `known`: the last scrape's lines."""
    lines = _engine_lines(text, known or {})
    names = frozenset(map(itemgetter(4), lines))
    try:
        found = _detected(names)  # each scrape: the port may change hands
    except engines.DialectError as exc:
        raise SourceError(f"{url}: {exc}", engine_absent=True) from None
    scrape = Scrape(names, dialect or found)
    keep_names = wanted_names(scrape.dialect, engines.names_escaped(seen | names))
    info = capacity_names(scrape.dialect) - keep_names
    lora = _both_forms(engines.engine(scrape.dialect).lora_metric())
    chosen = {*keep_names, *(created_name(name) for name in keep_names)}
    # How an equality matcher's label appears in the text: `name="value"`.
    written = [
        f'{m.name}="{promql.escape_label_value(m.value)}"' for m in keep if m.op == "=" and m.value
    ]
    read: list[tuple[Series, float]] = []
    for line, head, last, series, name in lines:
        # the label test is cheap: the parser is the costly part
        if (
            name not in info
            and name not in lora
            and not (name in chosen and (not written or all(label in line for label in written)))
        ):
            scrape.series[head] = series
            continue
        if isinstance(series, str) or (value := plain_number(last)) is None:
            sample = parse_line(url, line.strip())
            series = parsed_series(sample.name, sample.labels)
            value = float(sample.value)
            if sample.timestamp is None and sample.exemplar is None:
                scrape.series[head] = series  # the last word is the value: the head is the series
            elif sample.timestamp is not None:
                at = float(sample.timestamp)
                scrape.stamped = at if scrape.stamped is None else max(scrape.stamped, at)
        else:
            scrape.series[head] = series
        read.append((series, value))
    created = {
        s.own: value for s, value in read if s.name.endswith("_created") and math.isfinite(value)
    }
    for s, value in read:
        if s.name in info:
            scrape.info.append(s.labels)
        if s.name in lora:
            scrape.lora.append((s.labels, value))
        if s.name not in keep_names or (keep and not all(m.matches(s.labels) for m in keep)):
            continue
        born = created.get(s.born, math.nan)
        scrape.samples.setdefault(s.name, {})[s.key] = (value, born)
    return scrape

"""An engine's `/metrics` text, parsed by prometheus_client. Pure: no I/O.

`read_scrape()` keeps only the lines of the sample names the lane's figures need and, when the
lane's selector has exact matchers, of its series (a cheap split: most of an exposition is other
histograms' buckets), and parses those with `prometheus_client.parser`, one line at a time: with
no `# TYPE` line every sample keeps its own name (`x_total`, `x_bucket`, `x_created`), in the
classic format and OpenMetrics (`vllm_` names, `# EOF`, exemplars) alike. A series the last
scrape had (the same text before the value) has only its value read: the parser reading each
line's labels character by character is the costly part of a refresh.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

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
Series = tuple[str, dict[str, str]]
"""A sample's name and labels."""


def label_key(labels: Mapping[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


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
    if isinstance(capacity, Gauge | Info):
        return frozenset({capacity.metric, escape_name(capacity.metric)})
    return frozenset()


def lora_names(dialect: str) -> frozenset[str]:
    """The names the engine's LoRA info gauge may arrive under (escaped or not)."""
    lora = engines.engine(dialect).lora_metric()
    return frozenset({lora, escape_name(lora)}) if lora else frozenset()


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
    series: dict[str, Series] = field(default_factory=dict)
    """The series read, by their text: the next scrape's `known`."""
    stamped: float | None = None
    """The latest timestamp the exposition gave a sample (epoch seconds), if any did."""


def engine_lines(text: str) -> dict[str, list[str]]:
    """The engine's sample lines by name (not comments, not other processes' samples)."""
    lines: dict[str, list[str]] = {}
    prefixes = (*engines.prefixes(), *engines.prefixes(escaped=True))
    for line in map(str.strip, text.splitlines()):
        if line.startswith(prefixes):
            name = _SAMPLE_NAME.match(line)
            lines.setdefault(name.group() if name else line, []).append(line)
    return lines


def parse_samples(
    url: str, lines: Iterable[str], known: Mapping[str, Series] | None = None
) -> tuple[list[tuple[str, dict[str, str], float]], dict[str, Series], float | None]:
    """(name, labels, value) of each sample line, by prometheus_client's parser, the series
    read (the text before a line's value -> name and labels): a line of a series in `known`
    (the last scrape's) only has its value read; and the latest timestamp a line carried."""
    known = known or {}
    samples = []
    series: dict[str, Series] = {}
    stamped: float | None = None
    for line in lines:
        head, _, last = line.rpartition(" ")
        read = known.get(head)
        value = plain_number(last) if read else None
        if read is None or value is None:
            sample = _parse_line(url, line)
            read, value = (sample.name, sample.labels), float(sample.value)
            if sample.timestamp is None and sample.exemplar is None:
                series[head] = read  # the last word is the value: the head is the series
            elif sample.timestamp is not None:
                at = float(sample.timestamp)
                stamped = at if stamped is None or at > stamped else stamped
        else:
            series[head] = read
        samples.append((read[0], read[1], value))
    return samples, series, stamped


def _parse_line(url: str, line: str) -> Sample:
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


def read_scrape(
    url: str,
    text: str,
    *,
    dialect: str | None,
    seen: frozenset[str],
    keep: list[promql.Matcher],
    known: Mapping[str, Series] | None = None,
) -> Scrape:
    """The figures' samples of one exposition. `dialect`: the lane's engine when forced (else
    detected from this scrape); `seen`: engine names of earlier scrapes (an OpenMetrics answer
    escapes them all or none); `keep`: the lane's matchers; `known`: the last scrape's series."""
    lines = engine_lines(text)
    names = frozenset(lines)
    try:
        found = engines.detect(names).name  # each scrape: the port may change hands
    except engines.DialectError as exc:
        raise SourceError(f"{url}: {exc}", engine_absent=True) from None
    scrape = Scrape(names, dialect or found)
    keep_names = wanted_names(scrape.dialect, engines.names_escaped(seen | names))
    info = capacity_names(scrape.dialect) - keep_names
    lora = lora_names(scrape.dialect)
    series = {*keep_names, *(created_name(name) for name in keep_names)}
    # How an equality matcher's label appears in the text: `name="value"`.
    written = [
        f'{m.name}="{promql.escape_label_value(m.value)}"' for m in keep if m.op == "=" and m.value
    ]
    chosen = [
        line
        for name in series
        for line in lines.get(name, ())
        if all(label in line for label in written)  # cheap: the parser is the costly part
    ]
    samples, scrape.series, scrape.stamped = parse_samples(
        url, [*chosen, *(line for name in info | lora for line in lines.get(name, ()))], known
    )
    created = {
        (name, label_key(labels)): value
        for name, labels, value in samples
        if name.endswith("_created") and math.isfinite(value)
    }
    for name, labels, value in samples:
        if name in info:
            scrape.info.append(labels)
        if name in lora:
            scrape.lora.append((labels, value))
        if name not in keep_names or not all(m.matches(labels) for m in keep):
            continue
        key = label_key(labels)
        base = tuple(pair for pair in key if pair[0] != "le")
        born = created.get((created_name(name), base), math.nan)
        scrape.samples.setdefault(name, {})[key] = (value, born)
    return scrape

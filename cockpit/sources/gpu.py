"""A lane's GPUs, read three ways behind one protocol: an exporter's series on the lane's
Prometheus (riding in the lane's one query), a direct scrape of an exporter's `/metrics`, or
NVML on this machine (`cockpit.sources.gpu_nvml`). A GPU source never raises: what went wrong
is its totals' `reason`, and the lane's own figures carry on."""

from __future__ import annotations

import math
import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import replace
from itertools import pairwise
from urllib.parse import urlsplit, urlunsplit

from cockpit.core.gpu import GpuTotals
from cockpit.core.gpu_figures import GPU_TREND, gpu_figure
from cockpit.core.gpu_series import (
    EXPORTERS,
    Exporter,
    Series,
    Values,
    expression_key,
    gpu_expressions,
    gpu_totals,
    util_step_expression,
    values_from_samples,
)
from cockpit.core.model import LaneTotals, Trend, frozen_map
from cockpit.core.promql import Samples, sample_value, selector_with
from cockpit.sources.buffer import span
from cockpit.sources.http import HttpClient, SourceError, redact_url, status_error

Named = tuple[str, dict[str, str]]
"""A series' name and labels."""

MAX_READS = 4096
"""Reads a scrape or NVML source keeps (5.7 h at a 5 s refresh); a longer window reads
"since start"."""

Reading = tuple[str, Mapping[str, str], float]
"""One sample: its name, labels and value."""
LabelKey = tuple[tuple[str, str], ...]


class PrometheusGpu:
    """An exporter's series on the lane's Prometheus, chosen by `selector`."""

    def __init__(self, selector: str) -> None:
        self.selector = selector

    def expressions(self, window_s: float) -> dict[str, str]:
        """PromQL to ride in the lane's query."""
        targets = {TARGETS_UP: f"max(up{selector_with(self.selector)})"}
        return {**gpu_expressions(self.selector, window_s), **targets}

    async def read(
        self, window_s: float, end: float | None, found: Mapping[str, Samples]
    ) -> GpuTotals:
        """The GPUs over (end - window, end]; `found`: the lane's answer, split by `fig`."""
        exprs = self.expressions(window_s)
        mine = {key: found[key] for key in exprs if key in found}
        where = f"{{{self.selector}}}"
        totals = gpu_totals(values_from_samples(mine), where)
        if not totals.gpus:
            up = [sample_value(sample) for sample in mine.get(TARGETS_UP, ())]
            totals = replace(totals, reason=_unmatched(where, up[0] if up else None))
        return replace(totals, queries=dict(exprs))

    def trend_expressions(self, step_s: float, scrape_s: float) -> dict[str, str]:
        """PromQL of the GPU trend to ride in the lane's range query, by trend key."""
        within = max(step_s, math.ceil(scrape_s))  # as the lane's gauges are read per step
        return {GPU_TREND.key: util_step_expression(self.selector, within)}

    def trend_points(self, trend: Trend) -> None:
        return None

    async def close(self) -> None:
        return None


TARGETS_UP = "gpu.up"
"""The expression key of the selector's scrape targets' `up` (1: one is up)."""


def _unmatched(where: str, up: object) -> str:
    """Why a selector read no GPU: its exporter's targets are down, or nothing matches it."""
    if up == 0.0:
        return f"the GPU exporter is down: its scrape targets at {where} have up == 0"
    if up is None:
        return f"no selector matched: no GPU exporter's series and no scrape target at {where}"
    return f"no GPU exporter's series (DCGM_FI_*, nvidia_smi_*) at {where}"


async def with_gpu(
    totals: LaneTotals, source: GpuSource | None, window_s: float, end: float | None
) -> LaneTotals:
    """The lane's totals with its GPUs read (from its own answer's riders, or on their own)."""
    if source is None:
        return totals
    gpu = await source.read(window_s, end, totals.riders)
    trend = totals.trend
    points = source.trend_points(trend) if trend is not None else None
    if trend is not None and points is not None:
        trend = replace(trend, series=frozen_map({**trend.series, GPU_TREND.key: points}))
    return replace(totals, gpu=gpu, trend=trend)


class ReadBuffer:
    """The last `MAX_READS` reads of some exporters' series, reduced over a window as PromQL
    would: the value at the end, the mean or largest in the window, a counter's increase
    since the last read before the window (a reset counts from zero). Each series keeps its
    own stamps and values, so a window costs a bisection and a slice per series, not a pass
    over every read."""

    def __init__(self, exporters: Iterable[Exporter]) -> None:
        self._by_name: dict[str, list[tuple[str, Series, tuple[str, ...]]]] = {}
        for exporter in exporters:
            for series in exporter.series:
                labels = tuple(dict.fromkeys((*exporter.gpu_labels, *series.labels)))
                for metric in series.metrics:
                    entry = (expression_key(exporter, series), series, labels)
                    self._by_name.setdefault(metric, []).append(entry)
        self.exporters = tuple(exporters)
        entries = [entry for found in self._by_name.values() for entry in found]
        self._kinds = {key: series.kind for key, series, _ in entries}
        self._events = {
            key for key, series, _ in entries if series.labels and series.kind == "increase"
        }
        """Counters of events by a label (XID codes): a code counts once it has occurred."""
        self.stamps: list[float] = []
        """When each kept read was taken, oldest first (at most `MAX_READS`)."""
        self._columns: dict[str, dict[LabelKey, tuple[list[float], list[float]]]] = {}
        """Expression key -> labels -> the stamps and values of the reads that had it."""
        self._added = 0

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._by_name)

    def add(self, at: float, samples: Iterable[Reading]) -> None:
        """One read taken at `at`; reads come in time order."""
        read: dict[str, dict[LabelKey, float]] = {}
        for name, labels, value in samples:
            for key, _, wanted in self._by_name.get(name, ()):
                label_key = tuple((label, labels.get(label, "")) for label in wanted)
                mine = read.setdefault(key, {})
                mine[label_key] = max(value, mine.get(label_key, value))  # flags: any set
        for key, mine in read.items():
            columns = self._columns.setdefault(key, {})
            for label_key, value in mine.items():
                stamps, values = columns.setdefault(label_key, ([], []))
                stamps.append(at)
                values.append(value)
        self.stamps.append(at)
        self._added += 1
        if len(self.stamps) > MAX_READS:
            del self.stamps[0]
            if self._added % MAX_READS == 0:  # a series holds at most twice the kept reads
                self._trim(self.stamps[0])

    def _trim(self, oldest: float) -> None:
        """Drop each series' values from before the oldest kept read."""
        for columns in self._columns.values():
            for label_key, (stamps, values) in list(columns.items()):
                cut = bisect_left(stamps, oldest)
                del stamps[:cut], values[:cut]
                if not stamps:
                    del columns[label_key]

    def values(self, window_s: float, end: float | None) -> tuple[Values, str]:
        """Each series' reduced value over (end - window, end] (end: the last read), and the
        words for a window the reads don't reach back over."""
        stamps = self.stamps
        last = len(stamps) if end is None else bisect_right(stamps, end)
        if not last:
            return {}, ""
        end = stamps[last - 1] if end is None else end
        start = end - window_s
        first = bisect_right(stamps, start)
        base_at = stamps[first - 1] if first else None
        last_at = stamps[last - 1] if last > first else None
        note = "" if first else f"since start ({span(end - stamps[0])})"
        return self._reduced(start, end, self._kinds, base_at, last_at), note

    def step_values(self, times: Iterable[float], step_s: float) -> list[Values]:
        """The means (`mean` readings) within each step (t - step, t]."""
        means = {key: kind for key, kind in self._kinds.items() if kind == "mean"}
        return [self._reduced(t - step_s, t, means) for t in times]

    def _reduced(
        self,
        start: float,
        end: float,
        kinds: Mapping[str, str],
        base_at: float | None = None,
        last_at: float | None = None,
    ) -> Values:
        """Each series of `kinds` reduced over its reads in (start, end] (a counter's from the
        read at `base_at`), in the order the series first appear there."""
        oldest = self.stamps[0] if self.stamps else math.inf
        values: dict[str, list[tuple[dict[str, str], float]]] = {}
        for key, kind in kinds.items():
            found: list[tuple[float, int, LabelKey, float]] = []
            for order, (label_key, (stamps, seen)) in enumerate(self._columns.get(key, {}).items()):
                low = max(bisect_right(stamps, start), bisect_left(stamps, oldest))
                high = bisect_right(stamps, end)
                if kind == "increase" and low and stamps[low - 1] == base_at:
                    low -= 1
                if low >= high:
                    continue
                now = seen[high - 1] if stamps[high - 1] == last_at else None
                reduced = _reduce(kind, seen[low:high], now)
                if reduced is not None and (reduced > 0 or key not in self._events):
                    found.append((stamps[low], order, label_key, reduced))
            if found:
                found.sort(key=lambda entry: entry[:2])
                values[key] = [(dict(label_key), reduced) for _, _, label_key, reduced in found]
        return values


def _reduce(kind: str, seen: list[float], now: float | None) -> float | None:
    if kind == "now":
        return now
    if kind == "mean":
        return sum(seen) / len(seen)
    if kind == "peak":
        return max(seen)
    if len(seen) < 2:
        return None
    return sum(b - a if b >= a else b for a, b in pairwise(seen))


class OwnReads:
    """A GPU source that reads on its own at each refresh, into a `ReadBuffer`."""

    def __init__(self, exporters: tuple[Exporter, ...], where: str) -> None:
        self.buffer = ReadBuffer(exporters)
        self.where = where
        self.failure = ""
        """Why the last read failed: the last good reads stay, said to be older."""
        self._kept_step = 0.0
        self._kept: dict[float, float | None] = {}
        """The GPU trend's closed steps (at the trend's step `_kept_step`): time -> point."""

    def expressions(self, window_s: float) -> dict[str, str]:
        return {}

    def trend_expressions(self, step_s: float, scrape_s: float) -> dict[str, str]:
        return {}

    def trend_points(self, trend: Trend) -> tuple[float | None, ...]:
        """Per step, `gpu_util` over the GPUs' means within it (None: no read in the step). A
        step a later read has closed is kept."""
        times, buffer = trend.times(), self.buffer
        if self._kept_step != trend.step_s:
            self._kept_step, self._kept = trend.step_s, {}
        kept = self._kept
        due = [t for t in times if t not in kept]
        closed_before = buffer.stamps[-1] if buffer.stamps else -math.inf
        for t, values in zip(due, buffer.step_values(due, trend.step_s), strict=True):
            totals = gpu_totals(values, self.where, exporters=buffer.exporters)
            kept[t] = gpu_figure(totals, GPU_TREND.figure).value
        self._kept = {t: kept[t] for t in times if t < closed_before}
        return tuple(kept[t] for t in times)

    async def read(
        self, window_s: float, end: float | None, found: Mapping[str, Samples]
    ) -> GpuTotals:
        if end is None:
            self.failure = await self.poll()
        return self.totals(window_s, end)

    async def poll(self) -> str:
        """One read into the buffer; why it failed, or ''."""
        raise NotImplementedError

    def totals(self, window_s: float, end: float | None) -> GpuTotals:
        values, note = self.buffer.values(window_s, end)
        totals = gpu_totals(values, self.where, note, self.buffer.exporters)
        return replace(totals, reason=self.failure) if self.failure else totals

    async def close(self) -> None:
        return None


GpuSource = PrometheusGpu | OwnReads
"""What a lane feed asks of its GPU source at each refresh."""


class ScrapeGpu(OwnReads):
    """An exporter's own `/metrics` (dcgm-exporter or nvidia_gpu_exporter), one GET a refresh."""

    def __init__(self, url: str, *, timeout: float = 5.0, verify: bool | str = True) -> None:
        super().__init__(EXPORTERS, redact_url(url))
        parts = urlsplit(url)
        self._path = parts.path or "/"
        self.http = HttpClient(
            urlunsplit((parts.scheme, parts.netloc, "", "", "")), timeout=timeout, verify=verify
        )
        self._series: dict[str, Named] = {}
        """The last exposition's series, by the text before their value."""

    async def poll(self) -> str:
        try:
            reply = await self.http.get(self._path)
            if reply.status >= 400:
                raise status_error(self.where, reply)
        except SourceError as error:
            return error.reason
        self.ingest(reply.text, time.time())
        return ""

    def ingest(self, text: str, at: float) -> None:
        """One exposition taken at `at` (epoch seconds), into the buffer."""
        readings, self._series = parse_exposition(text, self.buffer.names, self._series)
        self.buffer.add(at, readings)

    async def close(self) -> None:
        await self.http.aclose()


def parse_exposition(
    text: str, names: frozenset[str], known: Mapping[str, Named] | None = None
) -> tuple[list[Reading], dict[str, Named]]:
    """The samples named `names` of a Prometheus text exposition and the series read, by the
    text before their value (`known`: the last call's; a line of one of them has only its value
    read). A line it can't read is left out: one bad line costs its sample, not the scrape."""
    # prometheus_client's parser, loaded only where an exporter is scraped
    from cockpit.sources.exposition import parse_line, plain_number

    known = known or {}
    readings: list[Reading] = []
    series: dict[str, Named] = {}
    for line in text.splitlines():
        if line.split("{", 1)[0].split(" ", 1)[0] not in names:
            continue
        head, _, last = line.rpartition(" ")
        seen = known.get(head)
        value = plain_number(last) if seen is not None else None
        if seen is None or value is None:
            try:
                sample = parse_line("", line)
            except SourceError:
                continue
            seen, value = (sample.name, sample.labels), float(sample.value)
            if sample.timestamp is not None or sample.exemplar is not None:
                readings.append((*seen, value))
                continue
        series[head] = seen
        readings.append((*seen, value))
    return readings, series

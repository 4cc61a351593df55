"""A lane's window totals from the engine's own `/metrics`, for lanes with no Prometheus.

`poll()` takes one scrape into a bounded buffer; `read_lane()` only computes from the buffer
(it polls once itself when the buffer is empty), so a refresh costs one HTTP request.
Fetching and parsing: `exposition.py`; the buffer, increases and coverage: `buffer.py`.

First poll: one scrape holds no window increase. When a series carries `<name>_created` (a
single-process engine does) and the engine started inside the window, the counter went from 0 at
`_created` to its current value, so the first scrape's value *is* the window's increase: it is
shown at once with `coverage_note = "since engine start (N min)"`. Without `_created`
(multiprocess engines) the key is missing with "needs a second scrape".
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right
from collections.abc import Iterable

from cockpit import dialects, promql
from cockpit.model import LAST_MINUTE_S, Bucket, LaneTotals, Missing, frozen_map
from cockpit.sources.buffer import NO_SAMPLES, SECOND_SCRAPE, Buffer, Window, one_rank
from cockpit.sources.exposition import (
    MAX_RESPONSE_BYTES,
    Endpoint,
    Scrape,
    ScrapeError,
    Series,
    lane_matchers,
    read_scrape,
)
from cockpit.trends import BufferTrend

OFF_LOOP_CHARS = 1_000_000
"""A scrape text longer than this is parsed in a worker thread (the screen stays responsive)."""
MAX_BUFFER_BYTES = 16_000_000
NOT_IN_LAST_SCRAPE = Missing("not in the last scrape")


class ScrapeSource:
    """One engine's `/metrics`, polled into a buffer.

    `selector`: the lane's own matchers; series they don't match are not kept (a model filter
    or a narrower selector at read time picks among the kept ones)."""

    def __init__(
        self,
        url: str,
        *,
        selector: str = "",
        dialect: str | None = None,
        max_scrapes: int = 1440,
        max_age_s: float = 86400.0,
        max_bytes: int = MAX_BUFFER_BYTES,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        timeout: float = 5.0,
        verify: bool | str = True,
        bearer: str | None = None,
    ) -> None:
        self.endpoint = Endpoint(
            url, timeout=timeout, verify=verify, bearer=bearer, max_bytes=max_response_bytes
        )
        self.url = self.endpoint.url
        self.dialect = dialect
        self.buffer = Buffer(max_scrapes, max_age_s, max_bytes)
        self.trends = BufferTrend()
        self._keep = lane_matchers(selector)
        self._info: list[dict[str, str]] = []
        self._exposed: frozenset[str] = frozenset()
        self._series: dict[str, Series] = {}

    def __repr__(self) -> str:
        return f"ScrapeSource({self.url!r})"

    @property
    def requests(self) -> int:
        """HTTP requests sent so far."""
        return self.endpoint.client.requests

    @property
    def escaped(self) -> bool:
        """Whether the engine's names arrived escaped (`vllm_x`, an OpenMetrics answer)."""
        return dialects.names_escaped(self._exposed)

    async def aclose(self) -> None:
        await self.endpoint.aclose()

    async def poll(self) -> None:
        """Take one scrape into the buffer; ScrapeError with a one-line reason on failure."""
        text = await self.endpoint.fetch()
        at = time.time()
        if len(text) > OFF_LOOP_CHARS:
            self._add(await asyncio.to_thread(self._read, text), at)
        else:
            self._add(self._read(text), at)

    def ingest(self, text: str, at: float) -> None:
        """Parse one exposition taken at `at` and add it to the buffer."""
        self._add(self._read(text), at)

    def _read(self, text: str) -> Scrape:
        return read_scrape(
            self.url,
            text,
            dialect=self.dialect,
            seen=self._exposed,
            keep=self._keep,
            known=self._series,
        )

    def _add(self, scrape: Scrape, at: float) -> None:
        series = sum(len(by_labels) for by_labels in scrape.samples.values())
        if not self.buffer.fits(series):
            raise ScrapeError(
                f"{self.url}: {series} series kept: over the buffer's "
                f"{self.buffer.max_bytes / 1e6:g} MB bound (narrow the lane's selector)"
            )
        self._exposed = self._exposed | scrape.names
        self.dialect = scrape.dialect
        self._info = scrape.info or self._info  # the last seen, when a scrape lacks it
        self._series = scrape.series
        self.buffer.add(at, scrape.samples)

    def label_values(self, label: str) -> list[str]:
        """The values `label` takes on the lane's series in the buffer, sorted."""
        keys = (key for family in self.buffer.series.values() for key in family)
        return sorted({value for key in keys for name, value in key if name == label})

    def engine_start(self) -> float | None:
        """The earliest `_created` among the last scrape's series (None: none carries one)."""
        last = self.buffer.scrapes[-1] if self.buffer.scrapes else None
        born = [
            track.born[-1]
            for family in self.buffer.series.values()
            for track in family.values()
            if track.times and track.times[-1] == last and track.born[-1] == track.born[-1]
        ]  # NaN (no `_created`) is the one value unequal to itself
        return min(born, default=None)

    # --- reading the buffer -------------------------------------------------------------

    async def read_lane(
        self,
        lane: str,
        dialect: str | None,
        selector: str,
        window_s: float,
        end: float | None = None,
    ) -> LaneTotals:
        """Window totals from the buffer (polls once first if it is empty)."""
        if dialect is not None:
            self.dialect = dialect
        if not self.buffer.scrapes:
            await self.poll()
        return self.totals(lane, selector, window_s, end)

    def totals(self, lane: str, selector: str, window_s: float, end: float | None) -> LaneTotals:
        """The lane's raw totals over [end - window, end], from the buffer alone."""
        dialect = self.dialect or "vllm"
        end = self.buffer.scrapes[-1] if end is None and self.buffer.scrapes else end
        end = time.time() if end is None else end
        self.buffer.read_window(window_s)
        matchers = lane_matchers(selector)
        specs = dialects.lane_specs(dialect, self.escaped)
        counters = _counter_names(specs.values())
        window = Window(self.buffer, matchers, end - window_s, end, counters)
        before = bisect_right(self.buffer.scrapes, end)  # the last scrape at or before `end`
        last = self.buffer.scrapes[before - 1] if before else end
        now = Window(self.buffer, matchers, last, last, ())
        minute = Window(self.buffer, matchers, end - LAST_MINUTE_S, end, counters)
        values: dict[str, float] = {}
        missing: dict[str, str] = {}
        histograms: dict[str, tuple[Bucket, ...]] = {}
        groups: dict[str, dict[str, float]] = {}
        queries: dict[str, str] = {}
        for key, spec in specs.items():
            queries[key] = f"scrape {self.url}: {_describe(spec)}"
            reason = dialects.missing_reason(spec, self._exposed)
            read = Missing(reason) if reason else _read(spec, window, now, minute)
            if isinstance(read, Missing):
                missing[key] = read.reason
            elif isinstance(read, tuple):
                histograms[key] = read
            elif isinstance(read, dict):
                groups[key] = read
            else:
                values[key] = read
        if not values and not histograms and not groups and not self.buffer.any_match(matchers):
            # The engine's names are there, none of its series match: a mistaken selector
            # or model filter, said as Prometheus says it (see `PrometheusSource._names`).
            raise ScrapeError(f"{self.url}: no series match {selector}", engine_absent=True)
        covered, note = window.coverage()
        capacity = self._capacity(dialect, matchers)
        if capacity is None:
            missing["kv_capacity_tokens"] = promql.capacity_reason(dialect, False)
        return LaneTotals(
            lane=lane,
            dialect=dialect,
            window_s=window_s,
            end=end,
            values=frozen_map(values),
            missing=frozen_map(missing),
            histograms=frozen_map(histograms),
            groups=frozen_map(groups),
            queries=frozen_map(queries),
            kv_capacity_tokens=capacity,
            covered_s=covered,
            coverage_note=note,
            server=self.url,
            selector=selector,
            warnings=window.warnings(),
            trend=self.trends.read(
                self.buffer, matchers, specs, self._exposed, dialect, window_s, end
            ),
        )

    def _capacity(self, dialect: str, matchers: list[promql.Matcher]) -> float | None:
        if dialect == "sglang":
            name = dialects.capacity_metric(dialect, self.escaped)
            series = self.buffer.matching(name, matchers)
            latest = [(k, t.values[-1]) for k, t in series if t.values]
            return sum(v for _, v in one_rank(latest, dialects.RANK)) if latest else None
        usable = [m for m in matchers if m.name != "model_name"]
        total = 0.0
        found = False
        for labels in self._info:
            if not all(m.matches(labels) for m in usable):
                continue
            capacity = dialects.capacity_from_info(labels)
            if capacity is None:
                return None
            total, found = total + capacity, True
        return total if found else None


def _read(
    spec: dialects.Spec, window: Window, now: Window, minute: Window
) -> float | tuple[Bucket, ...] | dict[str, float] | Missing:
    """A spec's value: over the window, at the last scrape (`Now`) or over the last minute."""
    if isinstance(spec, dialects.Now):
        found = now.value(spec.of)
        return NOT_IN_LAST_SCRAPE if found == NO_SAMPLES else found
    if isinstance(spec, dialects.LastMinute):
        return _whole_minute(minute, minute.value(spec.of))
    options = spec.options if isinstance(spec, dialects.Either) else (spec,)
    if isinstance(options[0], dialects.Histogram):
        return window.histogram(spec)
    return window.value(spec)


def _whole_minute(
    minute: Window, increase: float | dict[str, float] | Missing
) -> float | dict[str, float] | Missing:
    """The increase over the part of the minute its scrapes span, scaled to the whole minute
    (as Prometheus's `increase()` extrapolates to its range)."""
    if not isinstance(increase, float):
        return increase
    observed = minute.observed_s()
    return increase * LAST_MINUTE_S / observed if observed > 0 else SECOND_SCRAPE


def _counter_names(specs: Iterable[dialects.Spec]) -> set[str]:
    """The sample names the specs read as counters (their series set the coverage)."""
    names: set[str] = set()
    for spec in specs:
        if isinstance(spec, dialects.Counter | dialects.Difference | dialects.Histogram):
            names.update(dialects.required_metrics(spec))
        elif isinstance(spec, dialects.Either):
            names.update(_counter_names(spec.options))
    return names


def _describe(spec: dialects.Spec) -> str:
    if isinstance(spec, dialects.Counter):
        extra = ",".join(f'{k}="{v}"' for k, v in spec.extra)
        text = f"increase of {spec.metric}{{{extra}}}" if extra else f"increase of {spec.metric}"
        return text + _grouping(spec)
    if isinstance(spec, dialects.Difference):
        return f"{_describe(spec.a)} - {_describe(spec.b)}"
    if isinstance(spec, dialects.Either):
        return " or else ".join(_describe(option) for option in spec.options)
    if isinstance(spec, dialects.Gauge):
        return f"{spec.across} of {spec.metric}{_grouping(spec)}, averaged over scrapes"
    if isinstance(spec, dialects.Histogram):
        extra = ",".join(f'{k}="{v}"' for k, v in spec.extra)
        return f"increase per le of {spec.base}_bucket" + (f"{{{extra}}}" if extra else "")
    if isinstance(spec, dialects.Now):
        return _describe(spec.of).replace(", averaged over scrapes", ", at the last scrape")
    if isinstance(spec, dialects.LastMinute):
        return f"{_describe(spec.of)}, over the last minute"
    return "unavailable"


def _grouping(spec: dialects.Counter | dialects.Gauge) -> str:
    by = f" by {spec.by}" if spec.by else ""
    return by + (f", the largest over {spec.ranks}" if spec.ranks else "")

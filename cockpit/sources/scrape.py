"""A lane's window totals from the engine's own `/metrics`, for lanes with no Prometheus.

`poll()` takes one scrape into a bounded buffer; `read_lane()` only computes from the buffer
(it polls once itself when the buffer is empty), so a refresh costs one HTTP request.
Parsing: `exposition.py`; the buffer, increases, coverage and trend: `buffer.py`. The first
scrape already has the window's increase when the engine started inside the window and its
series carry `_created` ("since engine start"); else it "needs a second scrape".
"""

from __future__ import annotations

import asyncio
import math
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import TypeVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from cockpit import engines
from cockpit.core import models, promql, trends
from cockpit.core.model import (
    LAST_MINUTE_S,
    MODEL_KEYS,
    SECOND_SCRAPE,
    LaneTotals,
    Missing,
    Trend,
    frozen_map,
)
from cockpit.engines import specs
from cockpit.sources.buffer import (
    NO_SAMPLES,
    Buffer,
    Read,
    Window,
    one_rank,
    span,
    step_values,
)
from cockpit.sources.exposition import Known, Scrape, lane_matchers, read_scrape
from cockpit.sources.http import HttpClient, SourceError, redact_url, status_error

OFF_LOOP_CHARS = 1_000_000
"""A scrape text longer than this is parsed in a worker thread (the screen stays responsive)."""
MAX_RESPONSE_BYTES = 16_000_000
"""A larger answer is refused: no engine's /metrics is that big, a runaway label is."""
CLASSIC_TEXT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
"""The classic text format keeps `vllm:` names; OpenMetrics may escape them to `vllm_`."""
NOT_IN_LAST_SCRAPE = Missing("not in the last scrape")
CLOCK_STEP_S = 5.0
"""The wall clock and the steady one drifting apart by more than this is a clock step."""
FIRST_INTERVAL_S = 15.0
"""The scrape interval assumed before a second scrape tells it."""


class ScrapeSource:
    """One engine's `/metrics`, polled into a buffer that keeps the series `selector` matches
    (a model filter or a narrower selector at read time picks among them)."""

    def __init__(
        self,
        url: str,
        *,
        selector: str = "",
        timeout: float = 5.0,
        verify: bool | str = True,
        wall: Callable[[], float] = time.time,
        steady: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = redact_url(url)
        parts = urlsplit(url)
        self._path = parts.path or "/"
        self._params = dict(parse_qsl(parts.query))
        self.http = HttpClient(
            urlunsplit((parts.scheme, parts.netloc, "", "", "")),
            timeout=timeout,
            verify=verify,
            headers={"Accept": CLASSIC_TEXT},
            max_bytes=MAX_RESPONSE_BYTES,  # a bigger answer stops streaming there, with the reason
        )
        self.dialect: str | None = None
        self.buffer = Buffer()
        self._steps: dict[tuple[object, ...], dict[float, trends.StepValues]] = {}
        """The trend's steps worked out, for the lane's current matchers, dialect and step."""
        self._keep = lane_matchers(selector)
        self._info: list[dict[str, str]] = []
        self._lora: list[tuple[dict[str, str], float]] = []
        self._exposed: frozenset[str] = frozenset()
        self._series: Known = {}
        self._spreads: dict[str, frozenset[str | None]] = {}
        self._said: dict[tuple[str, bool], Mapping[str, str]] = {}
        """`_queries` by (dialect, escaped)."""
        self._spreads_of: tuple[int, int] = (0, 0)
        """The label spreads worked out, and the buffer's (series let go, series held) then."""
        self._wall, self._steady = wall, steady
        self._anchor: tuple[float, float] | None = None
        """(wall, steady) at the first poll: scrape times are the wall time then plus the
        steady time since, so a step of the machine's clock moves no window."""
        self._clock_notes: dict[str, str] = {}
        """What the clocks say when they disagree ("" when they agree): ours stepped, or the
        engine's runs ahead."""

    @property
    def escaped(self) -> bool:
        """Whether the engine's names arrived escaped (`vllm_x`, an OpenMetrics answer)."""
        return engines.names_escaped(self._exposed)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def poll(self) -> None:
        """Take one scrape into the buffer; SourceError with a one-line reason on failure."""
        text = await self.fetch()
        at, wall = self._scrape_time()
        if len(text) > OFF_LOOP_CHARS:
            self._add(await asyncio.to_thread(self._parse, text), at, wall)
        else:
            self._add(self._parse(text), at, wall)

    async def fetch(self) -> str:
        """The engine's exposition now, unparsed; SourceError with a one-line reason."""
        try:
            reply = await self.http.get(self._path, self._params or None)
        except SourceError as exc:
            # Nothing listens there (yet): asked again at every refresh, without back-off.
            reason = exc.reason.replace(self.http.url, self.url, 1)
            absent = exc.connect_failed
            raise SourceError(reason, unreachable=exc.unreachable, engine_absent=absent) from None
        if reply.status >= 400:
            raise status_error(self.url, reply)
        return reply.text

    def ingest(self, text: str, at: float) -> None:
        """Parse one exposition taken at `at` (epoch seconds) and add it to the buffer."""
        self._add(self._parse(text), at, at)

    def _scrape_time(self) -> tuple[float, float]:
        """A scrape's time on the steady timeline (window arithmetic), and the wall time now."""
        wall, steady = self._wall(), self._steady()
        if self._anchor is None:
            self._anchor = (wall, steady)
        at = self._anchor[0] + (steady - self._anchor[1])
        stepped = wall - at
        way = "forward" if stepped > 0 else "back"
        self._clock_notes["step"] = (
            f"this machine's clock stepped {way} by {span(abs(stepped))} since the first scrape: "
            "windows follow the steady clock"
            if abs(stepped) > CLOCK_STEP_S
            else ""
        )
        return at, wall

    def _note_ahead(self, stamped: float | None, at: float, wall: float) -> None:
        """Say so when the exposition's stamps run ahead of this machine's clock by more than
        a scrape interval (the engine host's clock runs fast)."""
        last = self.buffer.scrapes[-1] if self.buffer.scrapes else None
        interval = at - last if last is not None and at > last else FIRST_INTERVAL_S
        ahead = -math.inf if stamped is None else stamped - wall
        self._clock_notes["ahead"] = (
            f"the engine's samples are stamped {span(ahead)} ahead of this machine's clock "
            "(the clocks disagree): read as of each scrape"
            if ahead > max(interval, 1.0)
            else ""
        )

    def _parse(self, text: str) -> Scrape:
        return read_scrape(
            self.url,
            text,
            dialect=self.dialect,
            seen=self._exposed,
            keep=self._keep,
            known=self._series,
        )

    def _add(self, scrape: Scrape, at: float, wall: float) -> None:
        series = sum(len(by_labels) for by_labels in scrape.samples.values())
        if not self.buffer.fits(series):
            raise SourceError(
                f"{self.url}: {series} series kept: over the buffer's "
                f"{self.buffer.max_bytes / 1e6:g} MB bound (narrow the lane's selector)"
            )
        if not scrape.names <= self._exposed:  # the same set while it holds: reasons cached
            self._exposed = self._exposed | scrape.names
        self.dialect = scrape.dialect
        self._info = scrape.info or self._info  # the last seen, when a scrape lacks it
        self._lora = scrape.lora
        self._series = scrape.series
        self._note_ahead(scrape.stamped, at, wall)
        self.buffer.add(at, scrape.samples)

    def label_values(self, label: str) -> list[str]:
        """The values `label` takes on the lane's series in the buffer, sorted."""
        return sorted(value for value in self._label_spread(label) if value is not None)

    def _label_spread(self, label: str) -> frozenset[str | None]:
        """The values `label` takes on the buffer's series (None: a series without it), worked
        out again only when a series came or went."""
        series = self.buffer.series
        held = (self.buffer.let_go, sum(map(len, series.values())))  # changes when the set does
        if held != self._spreads_of:
            self._spreads, self._spreads_of = {}, held
        spread = self._spreads.get(label)
        if spread is None:
            keys = (key for family in series.values() for key in family)
            spread = self._spreads[label] = frozenset(dict(key).get(label) for key in keys)
        return spread

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

    async def read_lane(
        self,
        lane: str,
        dialect: str | None,
        selector: str,
        window_s: float,
        end: float | None = None,
    ) -> LaneTotals:
        """Window totals from the buffer (polls once first if it is empty)."""
        self.dialect = dialect or self.dialect
        if not self.buffer.scrapes:
            await self.poll()
        return self.totals(lane, selector, window_s, end)

    def totals(self, lane: str, selector: str, window_s: float, end: float | None) -> LaneTotals:
        """The lane's raw totals over [end - window, end], from the buffer alone."""
        dialect = self.dialect or engines.default().name
        end = self.buffer.scrapes[-1] if end is None and self.buffer.scrapes else end
        end = time.time() if end is None else end
        self.buffer.longest_window_s = max(self.buffer.longest_window_s or 0.0, window_s)
        matchers = lane_matchers(selector)
        table, counters, _ = _table(dialect, self.escaped)
        missing_from = _missing_reasons(dialect, self.escaped, self._exposed)
        window = Window(self.buffer, matchers, end - window_s, end, counters)
        before = bisect_right(self.buffer.scrapes, end)  # the last scrape at or before `end`
        last = self.buffer.scrapes[before - 1] if before else end
        now = Window(self.buffer, matchers, last, last, ())
        minute = Window(self.buffer, matchers, end - LAST_MINUTE_S, end, counters)
        reads = {
            key: _read(spec, missing_from.get(key), window, now, minute)
            for key, spec in table.items()
        }
        found_none = all(isinstance(read, Missing) for read in reads.values())
        if found_none and not self.buffer.any_match(matchers):
            # The engine's names are there, none of its series match: a mistaken selector
            # or model filter, said as Prometheus says it (see `PrometheusSource._names`).
            raise SourceError(f"{self.url}: no series match {selector}", engine_absent=True)
        missing = {key: read.reason for key, read in reads.items() if isinstance(read, Missing)}
        covered, note = window.coverage()
        capacity = self._capacity(dialect, matchers)
        if capacity is None:
            missing["kv_capacity_tokens"] = promql.capacity_reason(dialect, False)
        totals = LaneTotals(
            lane=lane,
            dialect=dialect,
            window_s=window_s,
            end=end,
            values=frozen_map(_only(reads, float)),
            missing=frozen_map(missing),
            histograms=frozen_map(_only(reads, tuple)),
            bucket_notes=frozen_map(_bucket_notes(table, reads, window.bucket_notes)),
            groups=frozen_map(_only(reads, dict)),
            queries=self._queries(dialect),
            kv_capacity_tokens=capacity,
            covered_s=covered,
            coverage_note=note,
            server=self.url,
            selector=selector,
            warnings=(*filter(None, self._clock_notes.values()), *window.warnings()),
            trend=self._trend(matchers, dialect, window_s, end),
        )
        per_model = self._models(dialect, window, reads, missing_from)
        described = {key: totals.queries[key] for key in MODEL_KEYS}
        lora = models.lora_adapters(self._lora)
        return models.with_models(totals, per_model, described, lora)

    def _queries(self, dialect: str) -> Mapping[str, str]:
        """How each raw key is read, said once per dialect and naming (they don't change)."""
        key = (dialect, self.escaped)
        said = self._said.get(key)
        if said is None:
            described = _table(dialect, self.escaped)[2]
            said = frozen_map({k: f"scrape {self.url}: {how}" for k, how in described.items()})
            self._said[key] = said
        return said

    def _models(
        self, dialect: str, lane: Window, reads: Mapping[str, Read], missing_from: Mapping[str, str]
    ) -> dict[str, dict[str, models.Read]]:
        """Model -> raw key -> its read over the lane's window, for each model the lane's series
        name (by the engine's model label) that its matchers let through."""
        label = engines.engine(dialect).model_label
        if not isinstance(label, str):
            return {}
        spread = self._label_spread(label)
        names = sorted(n for n in spread if n is not None and all(
            m.matches({label: n}) for m in lane.matchers if m.name == label))  # fmt: skip
        table = _table(dialect, self.escaped)[0]
        found: dict[str, dict[str, models.Read]] = {}
        for name in names:
            if spread == {name}:  # every series is this model's: the lane's own reads
                mine = {key: reads[key] for key in MODEL_KEYS}
            else:
                own = [*lane.matchers, promql.Matcher(label, "=", name)]
                window = Window(self.buffer, own, lane.start, lane.end, lane.counters)
                mine = {
                    key: Missing(missing_from[key])
                    if key in missing_from
                    else window.read(table[key])
                    for key in MODEL_KEYS
                }
            found[name] = {key: read for key, read in mine.items() if not isinstance(read, dict)}
        return found

    def _trend(
        self, matchers: list[promql.Matcher], dialect: str, window_s: float, end: float
    ) -> Trend:
        """The trend of the window ending at `end`. A step is kept once over (a scrape after it
        is in the buffer, and the one before it still is)."""
        wanted = trends.step_specs(dialect, self._exposed)
        step = trends.trend_step(window_s)
        key = (*matchers, dialect, step)
        kept = self._steps.get(key, {})
        self._steps = {key: kept}
        last_scrape = self.buffer.scrapes[-1] if self.buffer.scrapes else -math.inf
        held_from = self.buffer.known_from or math.inf
        steps: dict[float, trends.StepValues] = {}
        for t in trends.point_times(window_s, end):
            if t in kept:
                steps[t] = kept[t]
            elif t < held_from:
                steps[t] = {}  # it ends before the buffer's first point: a gap, read for nothing
            else:
                steps[t] = step_values(self.buffer, matchers, wanted, t, step)
                if t < last_scrape and t - 2 * step >= held_from:
                    kept[t] = steps[t]
        for old in [t for t in kept if t < end - window_s]:
            del kept[old]
        return trends.make_trend(dialect, window_s, end, steps)

    def _capacity(self, dialect: str, matchers: list[promql.Matcher]) -> float | None:
        capacity = engines.engine(dialect).capacity_spec(self.escaped)
        if isinstance(capacity, specs.Gauge):
            series = self.buffer.matching(capacity.metric, matchers)
            latest = [(k, t.values[-1]) for k, t in series if t.values]
            return sum(v for _, v in one_rank(latest, capacity.ranks)) if latest else None
        if not isinstance(capacity, specs.Info):
            return None
        usable = [m for m in matchers if m.name not in capacity.unlabelled]
        mine = [labels for labels in self._info if all(m.matches(labels) for m in usable)]
        capacities = [capacity.read(labels) for labels in mine]
        known = [capacity for capacity in capacities if capacity is not None]
        return sum(known) if known and len(known) == len(capacities) else None


@lru_cache(maxsize=16)
def _table(
    dialect: str, escaped: bool
) -> tuple[Mapping[str, specs.Spec], frozenset[str], dict[str, str]]:
    """The engine's specs, the sample names they read as counters, and how each is read."""
    table = engines.engine(dialect).lane_specs(escaped)
    described = {key: _describe(spec) for key, spec in table.items()}
    return table, frozenset(_counter_names(table.values())), described


@lru_cache(maxsize=16)
def _missing_reasons(dialect: str, escaped: bool, exposed: frozenset[str]) -> dict[str, str]:
    """Key -> why it can't be read from what the engine exposed (the keys that can, absent)."""
    reasons = {
        key: specs.missing_reason(spec, exposed)
        for key, spec in _table(dialect, escaped)[0].items()
    }
    return {key: reason for key, reason in reasons.items() if reason}


def _read(
    spec: specs.Spec, reason: str | None, window: Window, now: Window, minute: Window
) -> Read:
    """A spec's value: over the window, at the last scrape (`Now`) or over the last minute."""
    if reason:
        return Missing(reason)
    if isinstance(spec, specs.Now):
        found = now.read(spec.of)
        return NOT_IN_LAST_SCRAPE if found == NO_SAMPLES else found
    if not isinstance(spec, specs.LastMinute):
        return window.read(spec)
    # The increase over the part of the minute its scrapes span, scaled to the whole minute
    # (as Prometheus's `increase()` extrapolates to its range).
    increase, observed = minute.read(spec.of), minute.observed_s()
    if not isinstance(increase, float):
        return increase
    return increase * LAST_MINUTE_S / observed if observed > 0 else SECOND_SCRAPE


T = TypeVar("T")


def _only(reads: Mapping[str, Read], kind: type[T]) -> dict[str, T]:
    """The reads of one kind: numbers, buckets (tuple) or numbers by label (dict)."""
    return {key: read for key, read in reads.items() if isinstance(read, kind)}


def _bucket_notes(
    table: Mapping[str, specs.Spec],
    reads: Mapping[str, Read],
    notes: Mapping[specs.Histogram, str],
) -> dict[str, str]:
    """Histogram key -> what was wrong with the buckets it was read from."""
    found: dict[str, str] = {}
    for key, spec in table.items():
        options = spec.options if isinstance(spec, specs.Either) else (spec,)
        said = [notes[o] for o in options if isinstance(o, specs.Histogram) and o in notes]
        if said and isinstance(reads.get(key), tuple):
            found[key] = said[0]
    return found


def _counter_names(table: Iterable[specs.Spec]) -> set[str]:
    """The sample names the specs read as counters (their series set the coverage)."""
    names: set[str] = set()
    for spec in table:
        if isinstance(spec, specs.Counter | specs.Combined | specs.Histogram):
            names.update(specs.required_metrics(spec))
        elif isinstance(spec, specs.Either):
            names.update(_counter_names(spec.options))
    return names


def _describe(spec: specs.Spec) -> str:
    if isinstance(spec, specs.Counter):
        return f"increase of {spec.metric}{_extra(spec)}{_grouping(spec)}"
    if isinstance(spec, specs.Combined):
        return f"{_describe(spec.a)} {spec.op} {_describe(spec.b)}"
    if isinstance(spec, specs.Either):
        return " or else ".join(_describe(option) for option in spec.options)
    if isinstance(spec, specs.Gauge):
        return f"{spec.across} of {spec.metric}{_grouping(spec)}, averaged over scrapes"
    if isinstance(spec, specs.Histogram):
        return f"increase per le of {spec.base}_bucket{_extra(spec)}"
    if isinstance(spec, specs.Now):
        return _describe(spec.of).replace(", averaged over scrapes", ", at the last scrape")
    if isinstance(spec, specs.LastMinute):
        return f"{_describe(spec.of)}, over the last minute"
    return "unavailable"


def _extra(spec: specs.Counter | specs.Histogram) -> str:
    extra = ",".join(f'{k}="{v}"' for k, v in spec.extra)
    return f"{{{extra}}}" if extra else ""


def _grouping(spec: specs.Counter | specs.Gauge) -> str:
    by = f" by {spec.by}" if spec.by else ""
    return by + (f", the largest over {spec.ranks}" if spec.ranks else "")

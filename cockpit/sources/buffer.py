"""The scrape source's memory: each kept series' points, a window's figures and the trend.

Increases: Prometheus's `increase()` over the window's samples, resets handled (a drop, or a
newer `_created`, counts the new value as the increase since the restart), but not extrapolated
to the window's edges: at the usual 1-5 s poll, at most one interval's traffic apart.

Coverage: a buffer that starts after the window does watched only part of it. A series born
(`_created`) inside the window at or before the first watched scrape went from 0 at birth:
when every counter series of that scrape was (one engine start), the window is covered since
that start; otherwise from the first watched scrape. A series that appears later counts from
its own birth (absent, so zero, before). One series' start never applies to another's total.

Bounds: scrape count, age and an approximate size (points × 32 bytes + series × 700 bytes);
a series that stopped appearing is let go once no window read reaches it. A non-finite sample
(NaN, ±Inf) is left out and counted. A trend's step reads its own window (`step_values`).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TypeVar

from cockpit.core import promql, trends
from cockpit.core.model import SECOND_SCRAPE, Bucket, Missing
from cockpit.core.quantiles import check_buckets, histogram_quantile
from cockpit.core.timeutil import promql_duration
from cockpit.engines import specs

LabelKey = tuple[tuple[str, str], ...]
POINT_BYTES = 32
"""A point: time, value, `_created` and running increase, 8 bytes each."""
SERIES_BYTES = 700
"""A series' arrays, label key and dict entries, roughly."""
NO_SAMPLES = Missing("no samples in window")
ONLY_NON_FINITE = Missing("only non-finite samples (NaN/Inf) in window")
NOT_SINGLE = Missing("not a single value")
Read = float | dict[str, float] | tuple[Bucket, ...] | Missing
"""A spec's figure over a window: a number, one per label value, buckets, or why none."""


class Track:
    """One series' finite points in flat arrays (8 bytes a number), oldest first. `run[k]`:
    the increase from the first kept point to point k, so a window's is one subtraction."""

    __slots__ = ("born", "dropped", "run", "times", "values")

    def __init__(self) -> None:
        self.times = array("d")
        self.values = array("d")
        self.born = array("d")
        """The series' `_created` at each point; NaN when it has none."""
        self.run = array("d")
        self.dropped = array("d")
        """Times of the non-finite samples left out."""

    def append(self, at: float, value: float, born: float) -> None:
        """Add a point (to `dropped` when the value is not finite)."""
        if not math.isfinite(value):
            self.dropped.append(at)
            return
        born = born if math.isfinite(born) else math.nan
        if self.values:
            last = self.values[-1]
            # A reset: the counter went down, or a newer `_created` (NaN compares False).
            reset = value < last or born > self.born[-1]
            self.run.append(self.run[-1] + (value if reset else value - last))
        else:
            self.run.append(0.0)
        self.times.append(at)
        self.values.append(value)
        self.born.append(born)

    def drop_before(self, oldest: float) -> None:
        del self.dropped[: bisect_left(self.dropped, oldest)]
        cut = bisect_left(self.times, oldest)
        for column in (self.times, self.values, self.born, self.run):
            del column[:cut]

    def dropped_in(self, start: float, end: float) -> int:
        dropped = self.dropped
        return bisect_right(dropped, end) - bisect_left(dropped, start) if dropped else 0

    @property
    def last_seen(self) -> float:
        """When the series last appeared (with a finite value or not)."""
        seen = self.times[-1] if self.times else -math.inf
        return max(seen, self.dropped[-1]) if self.dropped else seen


Samples = Mapping[str, Mapping[LabelKey, tuple[float, float]]]
"""Sample name -> labels -> (value, `_created` or NaN), as one scrape read them."""


@dataclass(slots=True)
class Buffer:
    """Series-major ring buffer, bounded by scrape count, age and size."""

    max_scrapes: int = 1440
    max_age_s: float = 86400.0
    max_bytes: int = 16_000_000
    scrapes: deque[float] = field(default_factory=deque)
    series: dict[str, dict[LabelKey, Track]] = field(default_factory=dict)
    complete_since: float = -math.inf
    """Series last seen before this were let go: a window reaching back further is partial."""
    longest_window_s: float | None = None
    """Series that stopped appearing are kept as long as the longest window read (all, before)."""
    let_go: int = 0
    """Series let go so far: a count that changes whenever one is."""
    births: dict[tuple[object, ...], list[float]] = field(default_factory=dict)
    """`births_at` worked out, for scrapes no longer the newest (their points are final)."""
    matched: dict[tuple[object, ...], list[tuple[LabelKey, Track]]] = field(default_factory=dict)
    """`matching` worked out, while no series comes or goes."""

    @property
    def size(self) -> int:
        """Approximate bytes held."""
        tracks = [track for family in self.series.values() for track in family.values()]
        return sum(len(t.times) for t in tracks) * POINT_BYTES + len(tracks) * SERIES_BYTES

    def fits(self, series: int) -> bool:
        """Whether one scrape of that many series fits the size bound at all."""
        return series * (SERIES_BYTES + POINT_BYTES) <= self.max_bytes

    @property
    def known_from(self) -> float | None:
        """From when on the buffer holds every kept series' points."""
        return None if not self.scrapes else max(self.scrapes[0], self.complete_since)

    def add(self, at: float, samples: Samples) -> None:
        self.scrapes.append(at)
        for name, by_labels in samples.items():
            family = self.series.setdefault(name, {})
            for labels, (value, born) in by_labels.items():
                track = family.get(labels)
                if track is None:
                    track = family[labels] = Track()
                    self.matched.clear()
                track.append(at, value, born)
        every_one = sum(map(len, samples.values())) == sum(map(len, self.series.values()))
        self._trim(at, every_one)

    def _trim(self, now: float, every_one: bool = False) -> None:
        """Keep to the bounds; `every_one`: each series has a point at `now` (none is dead)."""
        aged = 0
        while len(self.scrapes) - aged > 1 and (
            len(self.scrapes) - aged > self.max_scrapes or now - self.scrapes[aged] > self.max_age_s
        ):
            aged += 1
        self._drop_scrapes(aged)
        while (size := self.size) > self.max_bytes and len(self.scrapes) > 1:
            excess = math.ceil((size - self.max_bytes) * len(self.scrapes) / size)
            self._drop_scrapes(min(max(excess, 1), len(self.scrapes) - 1))
        if self.longest_window_s is not None and not every_one:
            self._evict_dead(now - self.longest_window_s)

    def _drop_scrapes(self, count: int) -> None:
        if not count:
            return
        for _ in range(count):
            self.scrapes.popleft()
        oldest = self.scrapes[0]
        for family in self.series.values():
            for labels, track in list(family.items()):
                track.drop_before(oldest)
                if not track.times and not track.dropped:
                    self._let_go(family, labels)

    def _evict_dead(self, before: float) -> None:
        """Let go of the series last seen before `before` (no window read reaches them)."""
        for family in self.series.values():
            for labels, track in list(family.items()):
                if track.last_seen < before:
                    self._let_go(family, labels)
                    self.complete_since = max(self.complete_since, track.last_seen)

    def _let_go(self, family: dict[LabelKey, Track], labels: LabelKey) -> None:
        del family[labels]
        self.let_go += 1
        self.matched.clear()

    def matching(self, name: str, matchers: list[promql.Matcher]) -> list[tuple[LabelKey, Track]]:
        """The series of `name` whose labels meet every matcher."""
        key = (name, *matchers)
        found = self.matched.get(key)
        if found is None:
            family = self.series.get(name, {}).items()
            found = self.matched[key] = [
                (labels, track)
                for labels, track in family
                if not matchers or all(m.matches(dict(labels)) for m in matchers)
            ]
        return found

    def births_at(
        self, watched: float, lo: float, matchers: list[promql.Matcher], counters: frozenset[str]
    ) -> list[float]:
        """The `_created` of each series of `counters` whose first point from `lo` on is at
        the scrape `watched` (NaN where it has none). Remembered once a later scrape is in:
        only a series let go changes it then."""
        key = (watched, lo, self.let_go, *matchers, counters)
        if key in self.births:
            return self.births[key]
        births: list[float] = []
        for name in counters:
            for _, track in self.matching(name, matchers):
                at = bisect_left(track.times, lo)
                if at < len(track.times) and track.times[at] == watched:
                    births.append(track.born[at])
        if self.scrapes and watched < self.scrapes[-1]:
            if len(self.births) > 16:
                self.births.clear()
            self.births[key] = births
        return births

    def any_match(self, matchers: list[promql.Matcher]) -> bool:
        return any(True for name in self.series for _ in self.matching(name, matchers))


def span(seconds: float) -> str:
    """`45 s`, `12 min`, `13.4 h`, `2.5 d`: how long the data goes back."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


class Window:
    """The figures of one window [start, end] over the buffer, for one lane's matchers;
    coverage is worked out over the series of `counters` (the sample names read as counters)."""

    def __init__(
        self,
        buffer: Buffer,
        matchers: list[promql.Matcher],
        start: float,
        end: float,
        counters: Iterable[str],
        carry_after: float | None = None,
    ) -> None:
        self.buffer = buffer
        self.carry_after = carry_after
        """An increase starts at the point before the window when it is later than this."""
        self.matchers = matchers
        self.start = start
        self.end = end
        known = buffer.known_from
        self.lo = start if known is None else max(start, known)
        self.partial = known is None or known > start
        self.counters = frozenset(counters)
        self.since = self._counting_start() if self.partial else start
        """Counts start here: a series born at or after it counts from its birth."""
        self.dropped: dict[tuple[str, LabelKey], int] = {}
        """Non-finite samples left out, by series read."""
        self.unreadable_le: dict[tuple[str, LabelKey], str] = {}
        """Bucket series left out because their `le` is not a number, with that `le`."""
        self.bucket_notes: dict[specs.Histogram, str] = {}
        """What was wrong with a histogram's buckets in the window (see `check_buckets`)."""

    def _counting_start(self) -> float:
        first = bisect_left(self.buffer.scrapes, self.lo)
        if first >= len(self.buffer.scrapes):
            return self.lo
        watched = self.buffer.scrapes[first]
        births = self.buffer.births_at(watched, self.lo, self.matchers, self.counters)
        # One engine start inside the window, every series counted from it (and nothing let
        # go since: a series evicted after that start would be missing from the totals).
        earliest = max(self.start, self.buffer.complete_since)
        if births and all(earliest <= born <= watched for born in births):
            return min(births)
        return watched

    def coverage(self) -> tuple[float | None, str]:
        """Seconds of the window the figures cover, and words for it (None, "": all of it)."""
        if not self.partial:
            return None, ""
        if not self.buffer.scrapes:
            return 0.0, "nothing watched yet"
        covered = max(self.end - self.since, 0.0)
        if self.since < self.lo:
            return covered, f"since engine start ({span(covered)})"
        return covered, f"watched {span(covered)} of {promql_duration(self.end - self.start)}"

    def observed_s(self) -> float:
        """Seconds the increases span: the first watched scrape (or engine start) to the last."""
        scrapes = self.buffer.scrapes
        first, stop = bisect_left(scrapes, self.lo), bisect_right(scrapes, self.end)
        if first >= stop:
            return 0.0
        begin = min(self.since, scrapes[first]) if self.partial else scrapes[first]
        return scrapes[stop - 1] - begin

    def warnings(self) -> tuple[str, ...]:
        said: list[str] = []
        if self.dropped:
            count = sum(self.dropped.values())
            names = ", ".join(sorted({name for name, _ in self.dropped}))
            plural = "s" if count > 1 else ""
            said.append(f"{count} non-finite sample{plural} (NaN/Inf) left out: {names}")
        if self.unreadable_le:
            count = len(self.unreadable_le)
            names = ", ".join(sorted({name for name, _ in self.unreadable_le}))
            first = next(iter(self.unreadable_le.values()))
            plural = "s" if count > 1 else ""
            said.append(f"{count} bucket series with an unreadable le "
                        f"(le={first!r}) left out: {names}")  # fmt: skip
        return tuple(said)

    def _tracks(
        self, name: str, extra: tuple[tuple[str, str], ...] = ()
    ) -> Iterator[tuple[LabelKey, Track, int, int]]:
        """Matching series with the index range [first, stop) of their points in the window."""
        matchers = self.matchers
        if extra:
            matchers = [*matchers, *(promql.Matcher(k, "=", v) for k, v in extra)]
        lo, end = self.lo, self.end
        for labels, track in self.buffer.matching(name, matchers):
            if track.dropped and (dropped := track.dropped_in(lo, end)):
                self.dropped[(name, labels)] = dropped
            yield labels, track, bisect_left(track.times, lo), bisect_right(track.times, end)

    def read(self, spec: specs.Spec) -> Read:
        """A counter's increase, a gauge's mean over the scrapes, a histogram's increase per
        `le`; of an `Either`, the first option that has one."""
        if isinstance(spec, specs.Counter):
            return self.counter(spec)
        if isinstance(spec, specs.Gauge):
            return self.gauge(spec)
        if isinstance(spec, specs.Histogram):
            return self.histogram(spec)
        if isinstance(spec, specs.Combined):
            a, b = self.read(spec.a), self.read(spec.b)
            if not isinstance(a, float):
                return a if isinstance(a, Missing) else NOT_SINGLE
            if not isinstance(b, float):
                return b if isinstance(b, Missing) else NOT_SINGLE
            return a + b if spec.op == "+" else a - b
        if not isinstance(spec, specs.Either):
            return NOT_SINGLE
        found: Read = NOT_SINGLE
        for option in spec.options:
            found = self.read(option)
            if not isinstance(found, Missing):
                break
        return found

    def counter(self, spec: specs.Counter) -> float | dict[str, float] | Missing:
        found = [
            (labels, self._increase(track, first, stop))
            for labels, track, first, stop in self._tracks(spec.metric, spec.extra)
        ]
        groups = _by(one_rank(found, spec.ranks), spec.by)
        totals = {name: _total(increases) for name, increases in groups.items()}
        if not spec.by:
            return totals.get("", NO_SAMPLES)
        numbers = {name: t for name, t in totals.items() if not isinstance(t, Missing)}
        return numbers or next(iter(totals.values()), NO_SAMPLES)

    def _increase(self, track: Track, first: int, stop: int) -> float | Missing | None:
        """Like Prometheus `increase()` over the window's scrapes, without extrapolation."""
        if first >= stop:
            return ONLY_NON_FINITE if track.dropped_in(self.lo, self.end) else None
        if self.carry_after is not None and first and track.times[first - 1] > self.carry_after:
            first -= 1
        # Born since counting starts: it went from 0 at birth (NaN, no `_created`, never is).
        born = self.since <= track.born[first] <= track.times[first]
        if not born and stop - first < 2:
            return SECOND_SCRAPE
        return (track.values[first] if born else 0.0) + (track.run[stop - 1] - track.run[first])

    def gauge(self, spec: specs.Gauge) -> float | dict[str, float] | Missing:
        tracks = list(self._tracks(spec.metric))
        quick = _series_means(spec, tracks)
        if quick is not None:
            return quick
        per_scrape: dict[float, list[tuple[LabelKey, float]]] = {}
        dropped = False
        for labels, track, first, stop in tracks:
            dropped = dropped or (spec.metric, labels) in self.dropped  # noted by _tracks
            for k in range(first, stop):
                per_scrape.setdefault(track.times[k], []).append((labels, track.values[k]))
        if not per_scrape:
            return ONLY_NON_FINITE if dropped else NO_SAMPLES
        combined: dict[str, list[float]] = {}
        for found in per_scrape.values():
            for name, values in _by(one_rank(found, spec.ranks), spec.by).items():
                across = sum(values) if spec.across == "sum" else sum(values) / len(values)
                combined.setdefault(name, []).append(across)
        means = {name: sum(values) / len(values) for name, values in combined.items()}
        return means if spec.by else means[""]

    def histogram(self, spec: specs.Histogram) -> tuple[Bucket, ...] | Missing:
        """The window's increase per `le`, over the bounds every bucket set in it shares (see
        `check_buckets`); a series whose `le` is no number is left out and counted."""
        name = f"{spec.base}_bucket"
        found: list[tuple[LabelKey, float | Missing | None]] = []
        bounds: dict[LabelKey, float] = {}
        seen: dict[float, float] = {}
        for labels, track, first, stop in self._tracks(name, spec.extra):
            bound = _le(labels)
            if not isinstance(bound, float):
                if bound is not None:
                    self.unreadable_le[(name, labels)] = bound
                continue
            points = stop - first + track.dropped_in(self.lo, self.end)
            if not points:  # a bucket set that ended before the window: not in it
                continue
            bounds[labels] = bound
            seen[bound] = seen.get(bound, 0.0) + points
            found.append((labels, self._increase(track, first, stop)))
        by_le: dict[float, list[float | Missing | None]] = {}
        for labels, increase in one_rank(found, spec.ranks):
            by_le.setdefault(bounds[labels], []).append(increase)
        pairs: list[Bucket] = []
        for le, increases in by_le.items():
            total = _total(increases)
            if isinstance(total, Missing):
                return total
            pairs.append((le, total))
        if not pairs:
            return NO_SAMPLES
        checked = check_buckets(pairs, seen)
        if isinstance(checked, Missing):
            return checked
        buckets, note = checked
        if note:
            self.bucket_notes[spec] = note
        return buckets


@lru_cache(maxsize=4096)
def _le(labels: LabelKey) -> float | str | None:
    """A bucket series' `le` as a number, or its text when it is none (None: no `le`)."""
    text = dict(labels).get("le")
    if text is None:
        return None
    try:
        bound = specs.parse_le(text)
    except ValueError:
        return text
    return text if math.isnan(bound) else bound


def _series_means(
    spec: specs.Gauge, tracks: list[tuple[LabelKey, Track, int, int]]
) -> float | dict[str, float] | None:
    """`Window.gauge` at C speed when it is each series' own mean: one series per group, all
    with points at the same scrapes (None: not so). The same sums in the same order."""
    present = [(labels, track.times[first:stop], track.values[first:stop])
               for labels, track, first, stop in tracks if stop > first]  # fmt: skip
    if spec.ranks or not present or any(times != present[0][1] for _, times, _ in present):
        return None
    means: dict[str, float] = {}
    for labels, _, values in present:
        name = dict(labels).get(spec.by, "") if spec.by else ""
        if name in means:
            return None
        means[name] = sum(values) / len(values)
    return means if spec.by else means[""]


T = TypeVar("T", float, float | Missing | None)


def one_rank(found: list[tuple[LabelKey, T]], ranks: str) -> list[tuple[LabelKey, T]]:
    """Series that differ only by `ranks` repeat one value: the largest stands for them."""
    if not ranks:
        return found
    best: dict[LabelKey, tuple[LabelKey, T]] = {}
    for labels, value in found:
        others = tuple(pair for pair in labels if pair[0] != ranks)
        kept = best.get(others)
        if kept is None or _number(value) > _number(kept[1]):
            best[others] = (labels, value)
    return list(best.values())


def _number(value: float | Missing | None) -> float:
    return value if isinstance(value, float) else -math.inf


def _by(found: list[tuple[LabelKey, T]], label: str) -> dict[str, list[T]]:
    """Values grouped by one label's value (all under "" when `label` is "")."""
    groups: dict[str, list[T]] = {}
    for labels, value in found:
        groups.setdefault(dict(labels).get(label, "") if label else "", []).append(value)
    return groups


def _total(found: list[float | Missing | None]) -> float | Missing:
    """The sum of the series' increases; None marks a series with no point in the window."""
    numbers = [f for f in found if isinstance(f, float)]
    return sum(numbers) if numbers else next((f for f in found if f is not None), NO_SAMPLES)


def step_values(
    buffer: Buffer,
    matchers: list[promql.Matcher],
    wanted: Mapping[str, specs.Spec],
    t: float,
    step: float,
) -> trends.StepValues:
    """The step inputs over the step (t - step, t], from the series' last point in the step
    before (after a gap, their first in this step) to their last in it."""
    start = math.nextafter(t - step, math.inf)  # (t - step, t]
    window = Window(buffer, matchers, start, t, (), carry_after=t - 2 * step)
    values: dict[str, float] = {}
    for key, spec in wanted.items():
        found = window.read(spec)
        if isinstance(found, tuple):  # the TTFT histogram: its p95 is the point
            p95 = histogram_quantile(trends.QUANTILE, found)
            key, found = trends.TTFT_P95, p95[0] if p95 else NO_SAMPLES
        if isinstance(found, float):
            values[key] = found
    return values

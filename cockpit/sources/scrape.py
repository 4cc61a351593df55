"""A lane's window totals from the engine's own `/metrics`, for lanes with no Prometheus.

`poll()` takes one scrape into a bounded ring buffer; `read_lane()` only computes from the
buffer (it polls once itself when the buffer is empty), so a refresh costs no HTTP request.

Increase semantics: like Prometheus `increase()` over the samples inside the window, with
counter resets handled (a drop, or a new `_created` time, counts the new value as the increase
since the restart), but **without** extrapolation to the window edges: the figure covers the
first to the last scrape in the window, which at the usual 1-5 s poll differs from Prometheus by
at most one interval's traffic.

First poll: one scrape holds no window increase. When a series carries `<name>_created` (a
single-process engine does) and the engine started inside the window, the counter went from 0 at
`_created` to its current value, so the first scrape's value *is* the window's increase: it is
shown at once with `coverage_note = "since engine start (N min)"`. Without `_created`
(multiprocess engines) the key is missing with "needs a second scrape".
"""

from __future__ import annotations

import math
import re
import time
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from cockpit import dialects
from cockpit.model import Bucket, LaneTotals, frozen_map
from cockpit.sources.prometheus import (
    PlainHttp,
    SourceError,
    TransportError,
    failure_reason,
    general_client_error,
    plain_http_ok,
    redact_url,
    tls_verify,
)

if TYPE_CHECKING:
    import httpx

LabelKey = tuple[tuple[str, str], ...]
Point = tuple[float, float, float | None]
"""(scrape time, value, the series' `_created` at that scrape or None)."""

IGNORED_MATCHERS = frozenset({"job", "instance"})
"""Labels Prometheus adds at scrape time; an engine's own /metrics has none, so they're skipped."""
ENGINE_PREFIXES = ("vllm:", "sglang:", "vllm_", "sglang_")
"""Engine sample names, also as escaped by an OpenMetrics answer (`vllm_...`)."""
INFO_METRIC = "vllm:cache_config_info"


def created_name(sample_name: str) -> str:
    """`x_total`, `x_bucket`, `x_sum`, `x_count` -> `x_created`."""
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        if sample_name.endswith(suffix):
            return sample_name[: -len(suffix)] + "_created"
    return sample_name + "_created"


def _label_key(labels: Mapping[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


NO_BIRTH = math.nan
"""`born` of a point whose series carries no `_created`."""


def restarted(previous: float, current: float, previous_born: float, born: float) -> bool:
    """A counter reset between two scrapes: it went down, or a newer `_created` appeared."""
    return current < previous or born > previous_born  # NaN compares False: no `_created`


class _Track:
    """One series' points in flat arrays (8 bytes a number), oldest first.

    `run[k]` is the counter's increase from the first kept point to point k, resets handled:
    a window's increase is then one subtraction, however many scrapes it spans.
    """

    __slots__ = ("born", "run", "times", "values")

    def __init__(self) -> None:
        self.times = array("d")
        self.values = array("d")
        self.born = array("d")
        self.run = array("d")

    def append(self, at: float, value: float, born: float | None) -> None:
        born = NO_BIRTH if born is None else born
        if self.values:
            last, last_born = self.values[-1], self.born[-1]
            step = value if restarted(last, value, last_born, born) else value - last
            self.run.append(self.run[-1] + step)
        else:
            self.run.append(0.0)
        self.times.append(at)
        self.values.append(value)
        self.born.append(born)

    def drop_before(self, oldest: float) -> None:
        cut = bisect_left(self.times, oldest)
        if cut:
            for column in (self.times, self.values, self.born, self.run):
                del column[:cut]

    def window(self, start: float, end: float) -> tuple[int, int]:
        """Index range [first, stop) of the points with start <= time <= end."""
        return bisect_left(self.times, start), bisect_right(self.times, end)

    def points(self, first: int, stop: int) -> list[Point]:
        return [
            (self.times[k], self.values[k], None if math.isnan(b) else b)
            for k, b in zip(range(first, stop), self.born[first:stop], strict=True)
        ]


@dataclass(slots=True)
class Buffer:
    """Series-major ring buffer, bounded by scrape count and by age."""

    max_scrapes: int
    max_age_s: float
    scrapes: deque[float] = field(default_factory=deque)
    series: dict[str, dict[LabelKey, _Track]] = field(default_factory=dict)

    def add(self, at: float, samples: Mapping[str, Mapping[LabelKey, Point]]) -> None:
        self.scrapes.append(at)
        for name, by_labels in samples.items():
            family = self.series.setdefault(name, {})
            for labels, (when, value, born) in by_labels.items():
                track = family.get(labels)
                if track is None:
                    track = family[labels] = _Track()
                track.append(when, value, born)
        self._trim(at)

    def _trim(self, now: float) -> None:
        dropped = False
        while self.scrapes and (
            len(self.scrapes) > self.max_scrapes or now - self.scrapes[0] > self.max_age_s
        ):
            self.scrapes.popleft()
            dropped = True
        if not dropped:
            return
        oldest = self.scrapes[0] if self.scrapes else now
        for family in self.series.values():
            for labels in list(family):
                track = family[labels]
                track.drop_before(oldest)
                if not track.times:
                    del family[labels]

    @property
    def oldest(self) -> float | None:
        return self.scrapes[0] if self.scrapes else None


class ScrapeSource:
    """One engine's `/metrics`, polled into a ring buffer."""

    def __init__(
        self,
        url: str,
        *,
        dialect: str | None = None,
        max_scrapes: int = 1440,
        max_age_s: float = 86400.0,
        timeout: float = 5.0,
        verify: bool = True,
        bearer: str | None = None,
    ) -> None:
        self.url = redact_url(url)
        self.dialect = dialect
        # The classic text format keeps `vllm:` names; OpenMetrics may escape them to `vllm_`.
        headers = {"Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1"}
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        self._plain: PlainHttp | None = None
        self._client: httpx.AsyncClient | None = None
        if plain_http_ok(url):
            parts = urlsplit(self.url)
            self._plain = PlainHttp(f"http://{parts.netloc}", headers, timeout)
            self._target = urlunsplit(("", "", parts.path or "/", parts.query, ""))
        else:
            import httpx

            self._client = httpx.AsyncClient(
                headers=headers, verify=tls_verify(url, verify), timeout=timeout
            )
        self._timeout = timeout
        self._raw_url = url
        self.buffer = Buffer(max_scrapes, max_age_s)
        self._info: list[dict[str, str]] = []
        self._exposed: frozenset[str] = frozenset()
        self._keep: dict[tuple[str, bool], frozenset[str]] = {}
        self._escaped = False
        self.requests = 0

    def __repr__(self) -> str:
        return f"ScrapeSource({self.url!r})"

    async def aclose(self) -> None:
        if self._plain is not None:
            self._plain.close()
        if self._client is not None:
            await self._client.aclose()

    async def poll(self) -> None:
        """Take one scrape into the buffer; SourceError with a one-line reason on failure."""
        text = await self._fetch()
        at = time.time()
        self.ingest(text, at)

    def ingest(self, text: str, at: float) -> None:
        """Parse one exposition taken at `at` and add it to the buffer."""
        lines = _sample_lines(text)
        names = frozenset(lines)
        self._exposed = self._exposed | names
        self._escaped = dialects.names_escaped(self._exposed)
        try:
            found = dialects.detect_dialect(names)  # each scrape: the port may change hands
        except dialects.DialectError as exc:
            raise SourceError(f"{self.url}: {exc}", engine_absent=True) from None
        self.dialect = self.dialect or found
        keep = self._wanted(self.dialect, self._escaped)
        info = (INFO_METRIC, dialects.escape_name(INFO_METRIC))
        parsed = {*keep, *(created_name(name) for name in keep), *info}
        flat = _flatten(line for name, group in lines.items() if name in parsed for line in group)
        created: dict[tuple[str, LabelKey], float] = {}
        for name, labels, value in ((n, lab, v) for (n, lab), v in flat.items()):
            if name.endswith("_created"):
                created[(name, labels)] = value
        samples: dict[str, dict[LabelKey, Point]] = {}
        self._info = []
        for (name, labels), value in flat.items():
            if name in info:
                self._info.append(dict(labels))
            if name not in keep:
                continue
            base_labels = tuple(pair for pair in labels if pair[0] != "le")
            born = created.get((created_name(name), base_labels))
            samples.setdefault(name, {})[labels] = (at, value, born)
        self.buffer.add(at, samples)

    def _wanted(self, dialect: str, escaped: bool) -> frozenset[str]:
        """The sample names worth keeping for this dialect (bounds the buffer's memory)."""
        if (dialect, escaped) not in self._keep:
            names: set[str] = {"sglang:max_total_num_tokens", "sglang_max_total_num_tokens"}
            for spec in dialects.lane_specs(dialect, escaped).values():
                names.update(dialects.required_metrics(spec))
            self._keep[(dialect, escaped)] = frozenset(names)
        return self._keep[(dialect, escaped)]

    async def _fetch(self) -> str:
        self.requests += 1
        try:
            status, reason, text = await self._get()
        except TransportError as exc:
            refused = exc.connect and not exc.timeout  # nothing listens there (yet)
            reason = failure_reason(self.url, exc, self._timeout)[0]
            raise SourceError(reason, engine_absent=refused) from None
        if status >= 400:
            raise SourceError(f"{self.url}: HTTP {status} {reason}")
        return text

    async def _get(self) -> tuple[int, str, str]:
        """Status, reason and text of one GET (either client raises TransportError)."""
        if self._plain is not None:
            reply = await self._plain.request("GET", self._target)
            return reply.status, reply.reason, reply.text
        import httpx

        assert self._client is not None
        try:
            response = await self._client.get(self._raw_url)
        except httpx.HTTPError as exc:
            raise general_client_error(exc) from exc
        return response.status_code, response.reason_phrase, response.text

    @property
    def connections(self) -> int | None:
        """Connections opened so far on the plain-http path (None: the general client)."""
        return self._plain.connections if self._plain is not None else None

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
        """Pure over the buffer: the lane's raw totals over [end - window, end]."""
        dialect = self.dialect or "vllm"
        end = self.buffer.scrapes[-1] if end is None and self.buffer.scrapes else end
        end = time.time() if end is None else end
        start = end - window_s
        matchers = [m for m in dialects.parse_selector(selector) if m.name not in IGNORED_MATCHERS]
        reader = _Reader(self.buffer, matchers, start, end)
        values: dict[str, float] = {}
        missing: dict[str, str] = {}
        histograms: dict[str, tuple[Bucket, ...]] = {}
        queries: dict[str, str] = {}
        for key, spec in dialects.lane_specs(dialect, self._escaped).items():
            reason = dialects.missing_reason(spec, self._exposed)
            queries[key] = f"scrape {self.url}: {_describe(spec)}"
            if reason:
                missing[key] = reason
                continue
            if isinstance(spec, dialects.Histogram):
                buckets = reader.histogram(spec.base)
                if isinstance(buckets, str):
                    missing[key] = buckets
                else:
                    histograms[key] = buckets
                continue
            number = reader.value(spec)
            if isinstance(number, str):
                missing[key] = number
            else:
                values[key] = number
        if not values and not histograms and not self._any_series_match(matchers):
            # The engine's names are there, none of its series match: a mistaken selector
            # or model filter, said as Prometheus says it (see `PrometheusSource._names`).
            raise SourceError(f"{self.url}: no series match {selector}", engine_absent=True)
        covered, note = self._coverage(reader, start, end)
        return LaneTotals(
            lane=lane,
            dialect=dialect,
            window_s=window_s,
            end=end,
            values=frozen_map(values),
            missing=frozen_map(missing),
            histograms=frozen_map(histograms),
            queries=frozen_map(queries),
            kv_capacity_tokens=self._capacity(dialect, matchers),
            covered_s=covered,
            coverage_note=note,
            server=self.url,
            selector=selector,
        )

    def _any_series_match(self, matchers: list[dialects.Matcher]) -> bool:
        """Whether any engine series kept in the buffer matches (asked only when no figure has
        a value: a window before the first scrape is empty, not a mismatch)."""
        if not matchers:
            return True
        return any(
            all(m.matches(dict(labels)) for m in matchers)
            for family in self.buffer.series.values()
            for labels in family
        )

    def _coverage(self, reader: _Reader, start: float, end: float) -> tuple[float | None, str]:
        oldest = self.buffer.oldest
        if oldest is None or oldest <= start:
            return None, ""
        if reader.born is not None and reader.born >= start:
            return end - reader.born, f"since engine start ({_span(end - reader.born)})"
        return end - oldest, f"since start ({_span(end - oldest)})"

    def _capacity(self, dialect: str, matchers: list[dialects.Matcher]) -> float | None:
        if dialect == "sglang":
            name = "sglang:max_total_num_tokens"
            family = self.buffer.series.get(
                dialects.escape_name(name) if self._escaped else name, {}
            )
            latest = [track.values[-1] for track in family.values() if track.values]
            return sum(latest) if latest else None
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


class _Reader:
    """Evaluates specs over the buffer for one window."""

    def __init__(
        self, buffer: Buffer, matchers: list[dialects.Matcher], start: float, end: float
    ) -> None:
        self.buffer = buffer
        self.matchers = matchers
        self.start = start
        self.end = end
        self.born: float | None = None
        """The latest `_created` seen among counted series (an engine start inside W)."""

    def _series(
        self, name: str, extra: Iterable[tuple[str, str]] = ()
    ) -> Iterable[tuple[LabelKey, _Track, int, int]]:
        """The matching series with the index range of their points inside the window."""
        wanted = dict(extra)
        for labels, track in self.buffer.series.get(name, {}).items():
            as_dict = dict(labels)
            if any(as_dict.get(k) != v for k, v in wanted.items()):
                continue
            if all(m.matches(as_dict) for m in self.matchers):
                yield (labels, track, *track.window(self.start, self.end))

    def value(self, spec: dialects.Spec) -> float | str:
        if isinstance(spec, dialects.Counter):
            return self._counter(spec)
        if isinstance(spec, dialects.Difference):
            a, b = self._counter(spec.a), self._counter(spec.b)
            if isinstance(a, str):
                return a
            if isinstance(b, str):
                return b
            return a - b
        if isinstance(spec, dialects.Gauge):
            return self._gauge(spec)
        return "not a single value"

    def _counter(self, spec: dialects.Counter) -> float | str:
        found = [self._increase(*found[1:]) for found in self._series(spec.metric, spec.extra)]
        return _total(found)

    def _increase(self, track: _Track, first: int, stop: int) -> float | None:
        """Like Prometheus `increase()` over the window's scrapes, without extrapolation."""
        if first >= stop:
            return None
        total = 0.0
        counted = False
        born = track.born[first]
        if self.start <= born <= track.times[first]:  # NaN (no `_created`) never is
            total, counted = track.values[first], True
            self.born = born if self.born is None else max(self.born, born)
        if stop - first >= 2:
            total += track.run[stop - 1] - track.run[first]
            counted = True
        return total if counted else None

    def _gauge(self, spec: dialects.Gauge) -> float | str:
        per_scrape: dict[float, list[float]] = {}
        for _, track, first, stop in self._series(spec.metric):
            for at, value, _ in track.points(first, stop):
                per_scrape.setdefault(at, []).append(value)
        if not per_scrape:
            return "no samples in window"
        if spec.across == "sum":
            combined = [sum(values) for values in per_scrape.values()]
        else:
            combined = [sum(values) / len(values) for values in per_scrape.values()]
        mean = sum(combined) / len(combined)
        return mean if math.isfinite(mean) else "not a number (NaN) in window"

    def histogram(self, base: str) -> tuple[Bucket, ...] | str:
        by_le: dict[float, list[float | None]] = {}
        for labels, track, first, stop in self._series(f"{base}_bucket"):
            bound = dict(labels).get("le")
            if bound is None:
                continue
            increase = self._increase(track, first, stop)
            by_le.setdefault(dialects.parse_le(bound), []).append(increase)
        pairs: list[Bucket] = []
        for le, increases in by_le.items():
            total = _total(increases)
            if isinstance(total, str):
                return total
            pairs.append((le, total))
        return dialects.sorted_buckets(pairs) if pairs else "no samples in window"


def _total(found: list[float | None]) -> float | str:
    if not found:
        return "no samples in window"
    numbers = [f for f in found if f is not None]
    if not numbers:
        return "needs a second scrape"
    total = sum(numbers)
    return total if math.isfinite(total) else "not a number (NaN) in window"


_QUOTED = r'"(?:[^"\\]|\\.)*"'
_SAMPLE_NAME = re.compile(r"[^{ \t]+")
_SAMPLE_LINE = re.compile(
    rf"([a-zA-Z_:][a-zA-Z0-9_:]*)[ \t]*(?:\{{((?:[^\"}}]|{_QUOTED})*)\}})?[ \t]+(\S+)"
    r"(?:[ \t]+-?[0-9.eE+]+)?[ \t]*(?:#.*)?"
)
"""`name{labels} value [timestamp] [# exemplar]`, as the text and OpenMetrics formats write it."""
_LABEL_PAIR = re.compile(rf"[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*({_QUOTED})[ \t]*(?:,|$)")
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPED = {"n": "\n", "\\": "\\", '"': '"'}


_LABELS_SEEN: dict[str, LabelKey] = {}
"""Parsed label sets by their text: an engine repeats the same ones at every scrape."""
LABELS_SEEN_MAX = 50_000


def _labels(body: str, line: str) -> LabelKey:
    key = _LABELS_SEEN.get(body)
    if key is None:
        if len(_LABELS_SEEN) >= LABELS_SEEN_MAX:
            _LABELS_SEEN.clear()
        key = _LABELS_SEEN[body] = _parse_labels(body, line)
    return key


def _parse_labels(body: str, line: str) -> LabelKey:
    pairs: list[tuple[str, str]] = []
    at = 0
    while at < len(body):
        found = _LABEL_PAIR.match(body, at)
        if found is None:
            if body[at:].strip(" \t,"):
                raise SourceError(f"cannot parse the /metrics text: labels of {line[:80]!r}")
            break
        name, quoted = found.groups()
        value = quoted[1:-1]
        if "\\" in value:
            value = _ESCAPE.sub(lambda m: _UNESCAPED.get(m[1], "\\" + m[1]), value)
        pairs.append((name, value))
        at = found.end()
    return tuple(sorted(pairs))


def _sample_lines(text: str) -> dict[str, list[str]]:
    """The engine's sample lines by sample name; comments, HELP, TYPE and other processes'
    samples are left out. Only the wanted names' lines are parsed further: the exposition is
    read at every refresh, and most of it is other histograms' buckets."""
    lines: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(ENGINE_PREFIXES):
            name = _SAMPLE_NAME.match(line)
            lines.setdefault(name.group() if name else line, []).append(line)
    return lines


def _flatten(lines: Iterable[str]) -> dict[tuple[str, LabelKey], float]:
    """Sample lines as (name, sorted labels) -> value; a line that isn't one is an error."""
    flat: dict[tuple[str, LabelKey], float] = {}
    for line in lines:
        found = _SAMPLE_LINE.fullmatch(line)
        if found is None:
            raise SourceError(f"cannot parse the /metrics text: {line[:80]!r}")
        name, body, value = found.groups()
        try:
            number = float(value)
        except ValueError:
            raise SourceError(f"cannot parse the /metrics text: value of {line[:80]!r}") from None
        flat[(name, _labels(body, line) if body else ())] = number
    return flat


def _describe(spec: dialects.Spec) -> str:
    if isinstance(spec, dialects.Counter):
        extra = ",".join(f'{k}="{v}"' for k, v in spec.extra)
        return f"increase of {spec.metric}{{{extra}}}" if extra else f"increase of {spec.metric}"
    if isinstance(spec, dialects.Difference):
        return f"{_describe(spec.a)} - {_describe(spec.b)}"
    if isinstance(spec, dialects.Gauge):
        return f"{spec.across} of {spec.metric}, averaged over scrapes"
    if isinstance(spec, dialects.Histogram):
        return f"increase per le of {spec.base}_bucket"
    return "unavailable"


def _span(seconds: float) -> str:
    """`45 s`, `12 min`, `13.4 h`, `2.5 d`: how long the data goes back."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"

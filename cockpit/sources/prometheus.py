"""A lane's window totals from anything that speaks the Prometheus HTTP API.

One kept-alive client per server (`cockpit.sources.http`); one `/api/v1/query` request per
lane refresh carries every figure (`promql.lane_plan`).

Long windows are not evaluated again at every refresh: a window's totals are reused until
`reevaluation_interval(window)` has passed (in evaluation time), keeping their own `end` (the
screen says when they were evaluated). Such a refresh still asks one cheap query: the lane's
now and last-minute keys, its scrape targets (`up`) and whether its series are live (not
stale), so a server or an engine that went away shows at once.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from cockpit import engines
from cockpit.core import models, promql
from cockpit.core.model import LANE_LAST_MINUTE, LANE_NOW, Bucket, LaneTotals, Missing, frozen_map
from cockpit.core.quantiles import check_buckets
from cockpit.sources.buffer import span
from cockpit.sources.history import History, StepRiders
from cockpit.sources.http import (
    Credentials,
    FormValue,
    HttpClient,
    SourceError,
    one_line,
    retry_after,
    status_error,
)

__all__ = ["Answer", "PrometheusSource", "SourceError", "reevaluation_interval"]

NAMES_TTL_S = 300.0
"""How long a lane's list of exposed metric names is trusted."""
REEVALUATE_SHARE = 1 / 800
"""A window is evaluated again once this share of it has passed (1 d: every 108 s)..."""
REEVALUATE_MAX_S = 600.0
"""...but at least every 10 minutes."""
LIVE = "live"
"""Expression key: how many of the lane's series have a sample at the evaluation time (0 when
they went stale: the engine stopped, its target is gone)."""
AHEAD = "ahead"
"""Expression key: how far past the evaluation time the lane's newest sample is stamped (no
sample: none is). Looked up at the evaluation time plus the 5 min lookback, so it sees
samples up to 5 min ahead: Prometheus stores them (its scrape keeps an exposition's own
timestamps) but an instant query only reads those at or before its time."""
LOOKBACK_S = 300.0
DEFAULT_INTERVAL_S = 15.0
"""Prometheus's default scrape interval, for a lane whose own is not known."""
STALE = "no sample of the lane at the evaluation time (its series went stale)"
BACK = "the lane is back after being down: read at the next refresh"
PARTIAL = "server answer is partial (isPartial): some of its storage nodes did not answer"


def reevaluation_interval(window_s: float) -> float:
    """How long a window's totals are reused: a 1 h window's for 4.5 s (at a 5 s refresh,
    none), a day's for 108 s, a week's for 10 min. At a 5 s refresh that asks Prometheus
    for at most 5 % of the samples a full query at every refresh would touch, from 1 d on."""
    return min(window_s * REEVALUATE_SHARE, REEVALUATE_MAX_S)


@dataclass(frozen=True, slots=True)
class Answer:
    """One decoded `/api/v1/query` answer."""

    result: list[dict[str, Any]]
    warnings: tuple[str, ...]
    eval_seconds: float | None
    partial: bool = False
    """The server said some of its stores did not answer (VictoriaMetrics' `isPartial`)."""


@dataclass(frozen=True, slots=True)
class _Evaluated:
    query: str
    totals: LaneTotals
    warnings: tuple[str, ...]
    """The server's own warnings (a reused read adds the targets' state of its refresh)."""
    down: str = ""
    """Why the lane is down (every scrape target's `up` is 0), or empty."""


@dataclass(frozen=True, slots=True)
class _Ask:
    """One read of a lane: what is read, at what time, and its liveness expression (`LIVE`)."""

    lane: str
    dialect: str
    selector: str
    window_s: float
    end: float
    present: bool
    """A read of now, not of the past (`--at`)."""
    live: Mapping[str, str]
    riders: Mapping[str, str] = field(default_factory=dict)
    """Expressions asked beside the lane's in its one query (its GPUs'), at every refresh."""


@dataclass(slots=True)
class _Lane:
    """What a source remembers of one lane (and selector)."""

    dialect: str | None = None
    names: frozenset[str] | None = None
    names_at: float = -math.inf
    covered: dict[float, float | None] = field(default_factory=dict)
    """Window -> the part of it the lane's data covered at the last evaluation."""
    last: dict[float, _Evaluated] = field(default_factory=dict)


class PrometheusSource:
    """One Prometheus-compatible server; `read_lane` serves every lane on it."""

    def __init__(
        self,
        url: str,
        *,
        bearer: str | None = None,
        auth: tuple[str, str] | None = None,
        credentials: Credentials | None = None,
        verify: bool | str = True,
        timeout: float = 10.0,
        stats: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.http = HttpClient(
            url,
            bearer=bearer,
            basic=auth,
            credentials=credentials,
            verify=verify,
            timeout=timeout,
            headers=headers,
        )
        self.url = self.http.url
        self.stats = stats
        self._lanes: dict[tuple[str, str], _Lane] = {}
        self.history = History(self.query_range)
        self.last_samples: int | None = None
        """Samples the server touched in the last refresh (needs `stats=True`)."""

    def __repr__(self) -> str:
        return f"PrometheusSource({self.url!r})"

    @property
    def requests(self) -> int:
        """HTTP requests sent so far."""
        return self.http.requests

    async def aclose(self) -> None:
        await self.http.aclose()

    def forget(self) -> None:
        """Let go of the lanes' reused totals: each next read evaluates its window anew."""
        for memory in self._lanes.values():
            memory.last.clear()
        self.history.forget()

    async def read_lane(
        self,
        lane: str,
        dialect: str | None,
        selector: str,
        window_s: float,
        end: float | None = None,
        riders: Mapping[str, str] | None = None,
        trend_riders: StepRiders | None = None,
    ) -> LaneTotals:
        """The lane's raw totals over (end - window, end] with its trend up to `end`
        (`History`); `dialect=None` detects it. `riders` ride in the same query, their samples
        in `LaneTotals.riders`; `trend_riders` in the trend's range query.

        Totals evaluated less than `reevaluation_interval(window_s)` before `end` are
        returned again as they were (with their own `end`)."""
        before, at = self.requests, time.time() if end is None else end
        self.last_samples = 0
        memory, names, dialect = await self._lane(lane, dialect, selector)
        presence = promql.presence_series(dialect, selector, engines.names_escaped(names))
        live = {LIVE: f"(count({presence}) or vector(0))"}
        if end is None:  # in the past (`--at`), later samples are no clock's fault
            live[AHEAD] = f"max(timestamp({presence} @ {at + LOOKBACK_S:.3f})) - {at:.3f}"
        ask = _Ask(lane, dialect, selector, window_s, at, end is None, live, riders or {})
        plan = self._plan(memory, ask, names)
        last = memory.last.get(window_s)
        if (
            last is not None
            and last.query == plan.query
            and 0 <= at - last.totals.end < reevaluation_interval(window_s)
        ):
            totals = await self._reuse(memory, last, plan, ask)
        else:
            first = window_s not in memory.covered
            evaluated = await self._evaluate(plan, ask)
            memory.covered[window_s] = evaluated.totals.covered_s
            finer = self._plan(memory, ask, names)
            if first and finer.query != plan.query:  # a history shorter than the window
                evaluated = await self._evaluate(finer, ask)
            memory.last[window_s] = evaluated  # kept when down: next refreshes ask the cheap query
            if evaluated.down:
                raise SourceError(evaluated.down, engine_absent=True)
            totals = evaluated.totals
        spent = self.requests - before
        return await self.history.attach(totals, names, at, spent, trend_riders)

    async def _lane(
        self, lane: str, dialect: str | None, selector: str
    ) -> tuple[_Lane, frozenset[str], str]:
        """The lane's memory, its exposed metric names and its dialect (given, or detected)."""
        memory = self._lanes.setdefault((lane, selector), _Lane())
        names = await self._names(memory, selector)
        memory.dialect = dialect or memory.dialect or engines.detect(names).name
        return memory, names, memory.dialect

    def _plan(self, memory: _Lane, ask: _Ask, names: frozenset[str]) -> promql.LanePlan:
        step = promql.gauge_step(ask.window_s, memory.covered.get(ask.window_s))
        return promql.lane_plan(ask.dialect, ask.selector, ask.window_s, names, True, step)

    async def _reuse(
        self, memory: _Lane, last: _Evaluated, plan: promql.LanePlan, ask: _Ask
    ) -> LaneTotals:
        """The last evaluation's totals with the lane's now and last-minute keys read fresh;
        while the lane is down, only whether it is back."""
        fresh = {k: e for k, e in plan.exprs.items() if k in FRESH_KEYS and not last.down}
        state = {**promql.targets_expressions(ask.selector), **ask.live, **fresh, **ask.riders}
        answer = await self.query(promql.combined_query(state), ask.end)
        found = promql.split_by_fig(answer.result)
        note, down = self._targets(found, ask.present, last.totals.scrape_interval_s)
        if down:
            raise SourceError(down, engine_absent=True)
        read = _Read(found, fresh)
        if last.down:  # back: its fresh keys are read from the next refresh on
            memory.last[ask.window_s] = replace(last, down="")
            read.missing = dict.fromkeys(FRESH_KEYS & set(plan.exprs), BACK)
        old = last.totals
        return replace(
            old,
            values=frozen_map({**_stale(old.values), **read.values}),
            missing=frozen_map({**_stale(old.missing), **read.missing}),
            groups=frozen_map({**_stale(old.groups), **read.groups}),
            warnings=(*last.warnings, *note),
            eval_seconds=answer.eval_seconds,
            riders=_riders(found, ask),
        )

    async def _evaluate(self, plan: promql.LanePlan, ask: _Ask) -> _Evaluated:
        extra = promql.combined_query({**ask.live, **ask.riders})
        answer = await self.query((plan.query, " or ", extra), ask.end)
        found = promql.split_by_fig(answer.result)
        start, scrapes = found.get(promql.DATA_START), found.get(promql.SCRAPES)
        interval = promql.scrape_interval(scrapes, start, ask.end, ask.window_s)
        note, down = self._targets(found, ask.present, interval)
        read = _Read(found, plan.exprs)
        notes = read.check_buckets(found)
        if read.unusable and not read.values and not read.histograms:  # garbage, not quiet
            raise SourceError(f"{self.url}: no usable value in the answer ({read.unusable[0]})")
        missing = {**plan.missing, **read.missing}
        seen = found.get(promql.KV_CAPACITY, [])
        capacity = promql.capacity_from_samples(ask.dialect, seen)
        if capacity is None:
            missing["kv_capacity_tokens"] = promql.capacity_reason(ask.dialect, bool(seen))
        covered, coverage = promql.window_coverage(start, ask.end, ask.window_s)
        totals = LaneTotals(
            lane=ask.lane,
            dialect=ask.dialect,
            window_s=ask.window_s,
            end=ask.end,
            values=frozen_map(read.values),
            missing=frozen_map(missing),
            histograms=frozen_map(read.histograms),
            bucket_notes=frozen_map(notes),
            groups=frozen_map(read.groups),
            queries=frozen_map({**plan.exprs, **plan.extra}),
            kv_capacity_tokens=capacity,
            covered_s=covered,
            coverage_note=coverage,
            scrape_interval_s=interval,
            server=self.url,
            selector=ask.selector,
            warnings=(*answer.warnings, *note),
            eval_seconds=answer.eval_seconds,
            riders=_riders(found, ask),
        )
        per_model = {k.removeprefix(promql.MODEL): e for k, e in plan.extra.items()
                     if k.startswith(promql.MODEL)}  # fmt: skip
        lora = models.lora_from_answer(found.get(promql.LORA))
        reads = models.answer_reads(found, ask.dialect)
        totals = models.with_models(totals, reads, per_model, lora)
        return _Evaluated(plan.query, totals, answer.warnings, down)

    def _targets(
        self, found: Mapping[str, list[dict[str, Any]]], present: bool, interval: float | None
    ) -> tuple[tuple[str, ...], str]:
        """A note when some of the lane's scrape targets are down, or its samples are stamped
        ahead of the evaluation time by more than a scrape `interval`; the reason the lane is
        down when all targets are, or when its series went stale (a note when reading the
        past). Nothing when all are up, or neither `up` nor the answer says."""
        ahead = promql.read_key(found.get(AHEAD), AHEAD)
        live = promql.read_key(found.get(LIVE), LIVE)
        note: tuple[str, ...] = ()
        if isinstance(ahead, float) and ahead > max(interval or DEFAULT_INTERVAL_S, 1.0):
            clocks = (
                f"the lane's samples are stamped {span(ahead)} ahead of the evaluation time "
                "(the clocks of its engine and of this machine or the server disagree)"
            )
            if live == 0:
                return (), f"{self.url}: {clocks}: none is at or before it yet"
            note = (f"{clocks}: the values read are up to that much older than they look",)
        targets = promql.read_key(found.get(promql.TARGETS), promql.TARGETS)
        up = promql.read_key(found.get(promql.TARGETS_UP), promql.TARGETS_UP)
        if isinstance(targets, float) and isinstance(up, float) and up < targets:
            if up <= 0:
                down = f"{self.url}: the lane's {targets:.0f} scrape target(s) are down (up == 0)"
                return note, down
            return (*note, f"{targets - up:.0f} of {targets:.0f} scrape targets down (up == 0)"), ""
        if live != 0:
            return note, ""
        return (note, f"{self.url}: {STALE}") if present else ((*note, STALE), "")

    async def _names(self, memory: _Lane, selector: str) -> frozenset[str]:
        if memory.names is not None and time.monotonic() - memory.names_at < NAMES_TTL_S:
            return memory.names
        every = engines.names_selector()
        match = promql.selector_with(selector) if promql.parse_selector(selector) else every
        names = frozenset(await self._label_values("__name__", match))
        if not names:
            raise SourceError(f"{self.url}: no series match {selector}", engine_absent=True)
        try:
            engines.detect(names)
        except engines.DialectError:  # only `up` and `scrape_*` while it loads
            reason = f"{self.url}: {engines.no_engine_metrics()} ({selector})"
            raise SourceError(reason, engine_absent=True) from None
        memory.names, memory.names_at = names, time.monotonic()
        return names

    async def query(self, expr: FormValue, at: float) -> Answer:
        """One instant query (POST form) at `at` (`expr` whole, or its parts in order); raises
        SourceError with a one-line reason."""
        form: dict[str, FormValue] = {"query": expr, "time": f"{at:.3f}"}
        if self.stats:
            form["stats"] = "all"
        body = await self._api("/api/v1/query", form=form)
        data = body.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise SourceError(f"{self.url}: answer is not an instant vector")
        result = data.get("result")
        if not isinstance(result, list) or not all(
            isinstance(s, dict) and isinstance(s.get("metric", {}), dict) for s in result
        ):
            raise SourceError(f"{self.url}: Prometheus answered an unexpected shape (not samples)")
        stats = _dict(data.get("stats"))
        samples = _float(_dict(stats.get("samples")).get("totalQueryableSamples"))
        if samples is not None:
            self.last_samples = (self.last_samples or 0) + int(samples)
        warnings = body.get("warnings")
        said = warnings if isinstance(warnings, list) else []
        warned = [f"server warning: {one_line(str(w))}" for w in said]
        partial = body.get("isPartial") is True
        if partial:
            warned.append(PARTIAL)
        eval_seconds = _float(_dict(stats.get("timings")).get("evalTotalTime"))
        return Answer(result, tuple(warned), eval_seconds, partial)

    async def query_range(
        self, expr: str, start: float, end: float, step: float
    ) -> list[dict[str, Any]]:
        """One range query's series (`metric`, `values`); SourceError with a one-line reason."""
        form = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:.3f}"}
        body = await self._api("/api/v1/query_range", form=form)
        data = body.get("data")
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise SourceError(f"{self.url}: answer is not a range matrix")
        if not isinstance(result, list) or not all(isinstance(s, dict) for s in result):
            raise SourceError(f"{self.url}: Prometheus answered an unexpected shape (not series)")
        return result

    async def label_values(
        self, label: str, lane: str, dialect: str | None, selector: str
    ) -> list[str]:
        """The values `label` takes on the lane's presence metric under `selector`, sorted."""
        _, names, dialect = await self._lane(lane, dialect, selector)
        match = promql.presence_series(dialect, selector, engines.names_escaped(names))
        return sorted(await self._label_values(label, match))

    async def _label_values(self, label: str, match: str) -> list[str]:
        body = await self._api(f"/api/v1/label/{label}/values", params={"match[]": match})
        data = body.get("data")
        if not isinstance(data, list):
            raise SourceError(f"{self.url}: label values answer has no list of values")
        return [str(value) for value in data]

    async def probe(self) -> bool:
        """Does the query API answer again? One trivial query (`1`): no series are read."""
        try:
            await self._api("/api/v1/query", params={"query": "1"})
        except SourceError:
            return False
        return True

    async def _api(
        self,
        path: str,
        form: Mapping[str, FormValue] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One API call, a POST of `form` (else a GET with `params`); its decoded `success`
        answer, or SourceError with the reason."""
        if form is not None:
            reply = await self.http.post_form(path, form)
        else:
            reply = await self.http.get(path, params)
        try:
            body = json.loads(reply.text)
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("status") == "error":
            kind = one_line(str(body.get("errorType") or "error"))
            message = one_line(str(body.get("error") or ""))
            raise SourceError(f"{self.url}: {kind}: {message}", retry_after(reply.headers))
        if reply.status >= 400:
            raise status_error(self.url, reply)
        if body is None:
            if reply.text.lstrip()[:1] == "<":
                raise SourceError(
                    f"{self.url}: answered an HTML page, not the Prometheus API "
                    "(wrong URL or a login page?)"
                )
            raise SourceError(f"{self.url}: answered invalid JSON")
        if not isinstance(body, dict) or body.get("status") != "success":
            raise SourceError(f"{self.url}: answer is not a Prometheus API response")
        return body


# --- reading answers --------------------------------------------------------------------

FRESH_KEYS = frozenset(LANE_NOW + LANE_LAST_MINUTE)
"""Keys asked again at every refresh, also while a long window's totals are reused."""


class _Read:
    """The raw keys `keys` read from an answer split by `fig`, sorted by kind."""

    def __init__(self, found: Mapping[str, list[dict[str, Any]]], keys: Iterable[str]) -> None:
        self.values: dict[str, float] = {}
        self.histograms: dict[str, tuple[Bucket, ...]] = {}
        self.groups: dict[str, dict[str, float]] = {}
        self.missing: dict[str, str] = {}
        self.unusable: list[str] = []
        """Reasons other than no samples: the answer had something, but not a number."""
        for key in keys:
            read = promql.read_key(found.get(key), key)
            if isinstance(read, Missing):
                self.missing[key] = read.reason
                if read.reason not in (promql.NO_SAMPLES, promql.NO_SAMPLE_NOW):
                    self.unusable.append(read.reason)
            elif isinstance(read, tuple):
                self.histograms[key] = read
            elif isinstance(read, dict):
                self.groups[key] = read
            else:
                self.values[key] = read

    def check_buckets(self, found: Mapping[str, list[dict[str, Any]]]) -> dict[str, str]:
        """Each histogram over the bounds its window's bucket sets share (`check_buckets`, with
        its `le_seen` answer), missing when they share none; what was wrong, by key."""
        notes: dict[str, str] = {}
        for key, buckets in list(self.histograms.items()):
            checked = check_buckets(buckets, promql.le_seen(found.get(key + promql.LE_SEEN)))
            if isinstance(checked, Missing):
                del self.histograms[key]
                self.missing[key] = checked.reason
                continue
            self.histograms[key], note = checked
            if note:
                notes[key] = note
        return notes


V = TypeVar("V")


def _stale(mapping: Mapping[str, V]) -> dict[str, V]:
    """A reused read's entries but its fresh keys (this refresh reads those again)."""
    return {key: value for key, value in mapping.items() if key not in FRESH_KEYS}


def _riders(found: Mapping[str, list[dict[str, Any]]], ask: _Ask) -> Mapping[str, Any]:
    return frozen_map({key: found[key] for key in ask.riders if key in found})


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None

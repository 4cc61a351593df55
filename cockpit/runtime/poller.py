"""A feed's refresh cycle (a lane's, the ledger's, the fleet's): read, compute figures, track
freshness and back-off. No Textual.

The app runs one `cycle()` at a time per feed and arms the next one `delay` seconds after the
last ended, so reads never overlap and a failing source is asked less often. A source that could
not be reached at all (refused, unknown host, dropped) and whose feed has a cheap `probe()` is
probed once per refresh meanwhile: when it answers, the full read runs at once, so a server that
comes back is fresh within two refreshes while the heavy query still backs off.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, runtime_checkable

from cockpit.core.figures import LaneFigures, lane_figures
from cockpit.core.ledger_figures import LedgerFigures, Prices, ledger_figures
from cockpit.core.model import (
    FRESH,
    SECOND_SCRAPE,
    FailureCause,
    Freshness,
    LaneTotals,
    LedgerTotals,
    SourceFailure,
)
from cockpit.core.slo import Slo
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.core.text import first_line
from cockpit.core.timeutil import parse_duration
from cockpit.roofline.model import Hardware, ModelProfile

if TYPE_CHECKING:
    from cockpit.core.fleet import FleetView

MAX_DELAY_S = 60.0
"""The longest pause between two reads of a failing source."""
SECOND_READ_S = 1.0
"""How soon a lane whose rates wait on a second scrape is read again, when its refresh is longer:
rates in about a second, not a refresh later."""


TotalsT = TypeVar("TotalsT")
TotalsT_co = TypeVar("TotalsT_co", covariant=True)
FiguresT = TypeVar("FiguresT")
SnapshotT = TypeVar("SnapshotT")


class Feed(Protocol[TotalsT_co]):
    """What a poller reads: a window's totals up to `end` (None: now), or SourceFailure."""

    async def read(self, window_s: float, end: float | None) -> TotalsT_co: ...


class LaneFeed(Feed[LaneTotals], Protocol):
    """One lane's source, as the app sees it: `host_kv_tokens` are held by a host tier (added
    to the GPU's resident tokens), `model_filter` reads only that `model_name` (None: all)."""

    @property
    def name(self) -> str: ...
    @property
    def hardware(self) -> Hardware | None: ...
    @property
    def model(self) -> ModelProfile | None: ...
    @property
    def host_kv_tokens(self) -> float: ...
    @property
    def slo(self) -> Slo: ...
    @property
    def chunk_tokens(self) -> int | None: ...
    @property
    def gpus(self) -> int: ...
    @property
    def model_filter(self) -> str | None: ...
    def filter_model(self, model: str | None) -> None:
        """Read only `model` from now on (None or empty: the whole lane)."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class Probes(Protocol):
    """A feed with a cheap check that its source answers again (asked while unreachable)."""

    async def probe(self) -> bool: ...


@runtime_checkable
class Forgets(Protocol):
    """A feed that reuses what it read (a long window's totals) until told to forget it."""

    def forget(self) -> None: ...


@runtime_checkable
class ListsModels(Protocol):
    """A lane feed that can say which `model_name` values the lane has (for the `m` filter)."""

    async def model_names(self) -> Sequence[str]: ...


class LedgerFeed(Feed[LedgerTotals], Protocol):
    """The agent ledger(s), as the app sees them: totals of the sessions started in the window."""

    async def close(self) -> None: ...


class FleetFeed(Protocol):
    """Every lane at once over the window ending at `end` (None: now), or SourceFailure:
    found on one server (`sources.fleet`), listed (`listed_fleet`), or both."""

    async def read(self, window_s: float, end: float | None) -> FleetView: ...

    async def aclose(self) -> None: ...


async def close_all(lanes: Sequence[LaneFeed], ledger: LedgerFeed | None) -> None:
    """Close every feed (in the loop its clients were made in)."""
    for feed in lanes:
        await feed.close()
    if ledger is not None:
        await ledger.close()


def failure_reason(error: BaseException) -> str:
    """The error's own one-line message, or its type when it has none."""
    return first_line(str(error)) or type(error).__name__


def warning_note(warnings: tuple[str, ...]) -> str:
    """The read's warnings as one line: the server's (partial data, say) or the cockpit's own
    (targets down, samples left out), each saying whose it is."""
    first = first_line(warnings[0]) or "(empty)"
    more = f" (+{len(warnings) - 1} more)" if len(warnings) > 1 else ""
    return f"{first}{more}"


@dataclass(frozen=True, slots=True)
class Clocks:
    """Wall time (for `stale since`) and a monotonic clock (for latency)."""

    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.perf_counter


@dataclass(frozen=True, slots=True)
class Good(Generic[TotalsT, FiguresT]):
    """A read that worked: its totals, their figures, and when (wall time) it was made."""

    totals: TotalsT
    figures: FiguresT
    read_at: float


class Poller(ABC, Generic[TotalsT, FiguresT, SnapshotT]):
    """Read timing, last good result per window, failure streak and back-off of one feed; a
    subclass says how totals become figures and how a cycle's outcome becomes a snapshot."""

    def __init__(
        self,
        feed: Feed[TotalsT],
        refresh_s: float,
        *,
        replay_at: float | None = None,
        clocks: Clocks | None = None,
    ) -> None:
        self.replay_at = replay_at
        self.refresh_s = refresh_s
        self.failures = 0
        """Failed reads in a row."""
        self._retry_after: float | None = None
        """The source's own word on when to ask again (429 or 503 with Retry-After)."""
        self._clocks = clocks or Clocks()
        self._probe = feed.probe if isinstance(feed, Probes) else None
        self.feed = feed
        self._good: dict[tuple[str, str | None], Good[TotalsT, FiguresT]] = {}
        """Last good read per (window, scope): a model filter's figures are not the lane's."""
        self._failing_since: float | None = None
        self._failure: tuple[SourceFailure, float | None] | None = None
        """The last failure and its latency, while failing."""
        self._retry_at = 0.0
        """When (monotonic) the backed-off full read is due."""

    @abstractmethod
    def figures(self, totals: TotalsT) -> FiguresT: ...

    @abstractmethod
    def snapshot(
        self,
        window: str,
        good: Good[TotalsT, FiguresT] | None,
        freshness: Freshness,
        latency_s: float | None,
    ) -> SnapshotT: ...

    def scope(self) -> str | None:
        """What part of the source is read (a model filter): good reads are kept per scope."""
        return None

    @property
    def probing(self) -> bool:
        """Failing because the source can't be reached, and it can be probed cheaply."""
        failure = self._failure
        return self._probe is not None and failure is not None and failure[0].unreachable

    @property
    def _backoff_s(self) -> float:
        """The refresh interval; after failures, it ×1, ×2, ×4 … up to MAX_DELAY_S (or the
        refresh interval, if longer), and no sooner than the source asked."""
        if self.failures == 0:
            return self.refresh_s
        cap = max(MAX_DELAY_S, self.refresh_s)
        return max(min(self.refresh_s * 2.0 ** (self.failures - 1), cap), self._retry_after or 0)

    @property
    def delay(self) -> float:
        """Seconds to the next cycle: the back-off, or one refresh while probing."""
        return self.refresh_s if self.probing else self._backoff_s

    async def cycle(self, window: str) -> SnapshotT:
        """One read of `window` (or one probe while the source is unreachable), as a snapshot."""
        key = (window, self.scope())
        if self.probing and self._clocks.monotonic() < self._retry_at:
            assert self._probe is not None and self._failure is not None
            if not await self._probe():
                return self._failing(window, key, *self._failure)
            self.failures, self._retry_after = 0, None  # it answers again: start afresh
        started = self._clocks.monotonic()
        try:
            totals = await self.feed.read(parse_duration(window), self.replay_at)
        # The feed is the I/O boundary and raises SourceFailure; anything else is a bug in it,
        # shown all the same (its message, read again later) rather than ending the polling.
        except Exception as error:
            latency = self._clocks.monotonic() - started
            if not isinstance(error, SourceFailure):  # a bug in the feed: its message, no hints
                error = SourceFailure(failure_reason(error))
            return self._failed(window, key, error, latency)
        latency = self._clocks.monotonic() - started
        good = Good(totals, self.figures(totals), self._clocks.wall())
        self._good[key] = good
        self._failing_since, self._failure = None, None
        self.failures, self._retry_after = 0, None
        warnings = getattr(totals, "warnings", ())
        freshness = Freshness("ok", reason=warning_note(warnings)) if warnings else FRESH
        return self.snapshot(window, good, freshness, latency)

    def _failed(
        self, window: str, key: tuple[str, str | None], error: SourceFailure, latency: float
    ) -> SnapshotT:
        if self._failing_since is None:
            self._failing_since = self._clocks.wall()
        if error.engine_absent:  # asking each refresh costs nothing: no back-off
            self.failures, self._retry_after = 0, None
        else:
            self.failures += 1
            retry_after = error.retry_after
            self._retry_after = retry_after if retry_after and retry_after > 0 else None
        self._retry_at = self._clocks.monotonic() + self._backoff_s
        self._failure = (error, latency)
        return self._failing(window, key, error, latency)

    def _failing(
        self, window: str, key: tuple[str, str | None], error: SourceFailure, latency: float | None
    ) -> SnapshotT:
        good = self._good.get(key)
        cause: FailureCause = (
            "engine" if error.engine_absent else "source" if error.unreachable else ""
        )
        freshness = Freshness(
            "stale" if good else "missing", self._failing_since, failure_reason(error), cause
        )
        return self.snapshot(window, good, freshness, latency)


class LanePoller(Poller[LaneTotals, LaneFigures, LaneSnapshot]):
    """Refresh cycles of one lane feed."""

    feed: LaneFeed
    waiting_streak: int = 0
    """Good refreshes in a row that found requests waiting (a failed one ends the run)."""
    second_read_due: bool = False
    """The first good read had figures that need a second scrape: the next read comes after
    `SECOND_READ_S`. Once per poller: a window too short to hold two scrapes at the refresh
    interval would otherwise hurry every read."""
    hurried: bool = False
    """Whether this poller has hurried a read already."""

    @property
    def delay(self) -> float:
        delay = super().delay
        return min(delay, SECOND_READ_S) if self.second_read_due else delay

    def figures(self, totals: LaneTotals) -> LaneFigures:
        return lane_figures(totals, self.feed.host_kv_tokens, self.feed.slo)

    async def cycle(self, window: str) -> LaneSnapshot:
        snapshot = await super().cycle(window)
        good = snapshot.totals if snapshot.freshness.state == "ok" else None
        pending = good is not None and SECOND_SCRAPE.reason in good.missing.values()
        self.second_read_due = pending and not self.hurried
        self.hurried = self.hurried or pending
        waiting = waiting_now(snapshot.figures) if good is not None else None
        self.waiting_streak = self.waiting_streak + 1 if waiting else 0
        return replace(snapshot, waiting_streak=self.waiting_streak)

    def forget(self) -> None:
        """The next read evaluates anew what the feed may reuse (a long Prometheus window)."""
        if isinstance(self.feed, Forgets):
            self.feed.forget()

    def scope(self) -> str | None:
        return self.feed.model_filter

    def snapshot(
        self,
        window: str,
        good: Good[LaneTotals, LaneFigures] | None,
        freshness: Freshness,
        latency_s: float | None,
    ) -> LaneSnapshot:
        return LaneSnapshot(
            lane=self.feed.name,
            window=window,
            totals=good.totals if good else None,
            figures=good.figures if good else None,
            hardware=self.feed.hardware,
            model=self.feed.model,
            freshness=freshness,
            latency_s=latency_s,
            gpus=self.feed.gpus,
            chunk_tokens=self.feed.chunk_tokens,
        )


def waiting_now(figures: LaneFigures | None) -> float | None:
    """Requests waiting at the read's time, or the window's mean where the engine's gauge
    was not read at that time."""
    if figures is None:
        return None
    now = figures.value("waiting_now")
    return now if now is not None else figures.value("waiting")


class LedgerPoller(Poller[LedgerTotals, LedgerFigures, LedgerSnapshot]):
    """Refresh cycles of the agent ledger feed."""

    feed: LedgerFeed

    def __init__(
        self,
        feed: LedgerFeed,
        refresh_s: float,
        *,
        prices: Prices | None = None,
        replay_at: float | None = None,
        clocks: Clocks | None = None,
    ) -> None:
        super().__init__(feed, refresh_s, replay_at=replay_at, clocks=clocks)
        self.prices = prices or Prices()

    def figures(self, totals: LedgerTotals) -> LedgerFigures:
        return ledger_figures(totals, self.prices)

    def snapshot(
        self,
        window: str,
        good: Good[LedgerTotals, LedgerFigures] | None,
        freshness: Freshness,
        latency_s: float | None,
    ) -> LedgerSnapshot:
        return LedgerSnapshot(
            window=window,
            totals=good.totals if good else None,
            figures=good.figures if good else None,
            freshness=freshness,
            latency_s=latency_s,
        )


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """The overview after a refresh. On failure the last good view stays, marked stale."""

    window: str
    view: FleetView | None
    freshness: Freshness = FRESH
    replay_at: float | None = None


class FleetPoller(Poller["FleetView", "FleetView", FleetSnapshot]):
    """Refresh cycles of the fleet: the view is its own figures."""

    feed: FleetFeed

    def figures(self, totals: FleetView) -> FleetView:
        return totals

    def snapshot(
        self,
        window: str,
        good: Good[FleetView, FleetView] | None,
        freshness: Freshness,
        latency_s: float | None,
    ) -> FleetSnapshot:
        return FleetSnapshot(
            window=window,
            view=good.totals if good else None,
            freshness=freshness,
            replay_at=self.replay_at,
        )

"""One feed's refresh cycle: read, compute figures, track freshness and back-off. No Textual.

The app runs one `cycle()` at a time per feed and arms the next one `delay` seconds after the
last ended, so reads never overlap and a failing source is asked less often. A source that could
not be reached at all (refused, unknown host, dropped) and whose feed has a cheap `probe()` is
probed once per refresh meanwhile: when it answers, the full read runs at once, so a server that
comes back is fresh within two refreshes while the heavy query still backs off.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from cockpit.figures import LaneFigures, LedgerFigures, Prices, lane_figures, ledger_figures
from cockpit.model import FRESH, Freshness, LaneTotals, LedgerTotals
from cockpit.roofline import Hardware, ModelProfile
from cockpit.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.timeutil import parse_duration

MAX_DELAY_S = 60.0
"""The longest pause between two reads of a failing source."""


class LaneFeed(Protocol):
    """One lane's source, as the app sees it."""

    @property
    def name(self) -> str: ...
    @property
    def hardware(self) -> Hardware | None: ...
    @property
    def model(self) -> ModelProfile | None: ...
    @property
    def host_kv_tokens(self) -> float:
        """KV tokens held by a host tier, added to the GPU's resident tokens."""
        ...

    @property
    def chunk_tokens(self) -> int | None: ...
    @property
    def gpus(self) -> int:
        """GPUs behind the lane; `hardware` is already all of them together."""
        ...

    @property
    def model_filter(self) -> str | None:
        """Only series with this `model_name` (None: the whole lane)."""
        ...

    def filter_model(self, model: str | None) -> None:
        """Read only `model` from now on (None or empty: the whole lane)."""
        ...

    async def read(self, window_s: float, end: float | None) -> LaneTotals:
        """Window totals ending at `end` (None = now); raises with a one-line reason."""
        ...

    async def close(self) -> None: ...


class LedgerFeed(Protocol):
    """The agent ledger(s), as the app sees them."""

    async def read(self, window_s: float, end: float | None) -> LedgerTotals:
        """Totals of sessions started in the window; raises with a one-line reason."""
        ...

    async def close(self) -> None: ...


def failure_reason(error: BaseException) -> str:
    """The error's own one-line message, or its type when it has none."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


class Backoff:
    """Refresh interval on success; after failures refresh, ×2, ×4 … capped at `max_s`."""

    def __init__(self, refresh_s: float, max_s: float = MAX_DELAY_S) -> None:
        self.refresh_s = refresh_s
        self.max_s = max(max_s, refresh_s)
        self.failures = 0
        self.retry_after: float | None = None

    def succeeded(self) -> None:
        self.failures = 0
        self.retry_after = None

    def failed(self, retry_after: float | None = None) -> None:
        self.failures += 1
        self.retry_after = retry_after

    @property
    def delay(self) -> float:
        if self.failures == 0:
            return self.refresh_s
        delay = min(self.refresh_s * 2.0 ** (self.failures - 1), self.max_s)
        if self.retry_after is not None:
            delay = max(delay, self.retry_after)
        return delay


def warning_note(warnings: tuple[str, ...]) -> str:
    """The source's warnings (partial data, say) as one line: the figures may be incomplete."""
    first = warnings[0].strip().splitlines()[0] if warnings[0].strip() else "(empty)"
    more = f" (+{len(warnings) - 1} more)" if len(warnings) > 1 else ""
    return f"server warning: {first}{more}"


def _unreachable(error: BaseException) -> bool:
    """The read never reached the source (the feed's error says so with `unreachable`)."""
    return getattr(error, "unreachable", False) is True


def _engine_absent(error: BaseException) -> bool:
    """The lane's engine is not up (yet); its source is fine (see SourceError)."""
    return getattr(error, "engine_absent", False) is True


def _retry_after(error: BaseException) -> float | None:
    value = getattr(error, "retry_after", None)
    return float(value) if isinstance(value, int | float) and value > 0 else None


@dataclass(frozen=True, slots=True)
class Clocks:
    """Wall time (for `updated_at`, `stale since`) and a monotonic clock (for latency)."""

    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.perf_counter


TotalsT = TypeVar("TotalsT", LaneTotals, LedgerTotals)
FiguresT = TypeVar("FiguresT", LaneFigures, LedgerFigures)


@dataclass(frozen=True, slots=True)
class _Good(Generic[TotalsT, FiguresT]):
    totals: TotalsT
    figures: FiguresT
    read_at: float


@dataclass(frozen=True, slots=True)
class _Outcome(Generic[TotalsT, FiguresT]):
    good: _Good[TotalsT, FiguresT] | None
    freshness: Freshness
    latency_s: float | None


class _Tracker(Generic[TotalsT, FiguresT]):
    """Read timing, last good result per window, failure streak and back-off."""

    def __init__(
        self,
        read: Callable[[float, float | None], Awaitable[TotalsT]],
        compute: Callable[[TotalsT], FiguresT],
        refresh_s: float,
        clocks: Clocks,
        max_delay_s: float,
        probe: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self._clocks = clocks
        self._read: Callable[[float, float | None], Awaitable[TotalsT]] = read
        self._compute: Callable[[TotalsT], FiguresT] = compute
        self._probe = probe
        self.backoff = Backoff(refresh_s, max_delay_s)
        self._good: dict[tuple[str, str | None], _Good[TotalsT, FiguresT]] = {}
        """Last good read per (window, scope): a model filter's figures are not the lane's."""
        self._failing_since: float | None = None
        self._failure: tuple[str, float] | None = None
        """The last failure's reason and latency, while failing."""
        self._unreachable = False
        self._retry_at = 0.0
        """When (monotonic) the backed-off full read is due."""

    @property
    def probing(self) -> bool:
        """Failing because the source can't be reached, and it can be probed cheaply."""
        return self._probe is not None and self._unreachable

    @property
    def delay(self) -> float:
        """Seconds to the next cycle: the back-off, or one refresh while probing."""
        if self.probing:
            return min(self.backoff.delay, self.backoff.refresh_s)
        return self.backoff.delay

    async def run(
        self, window: str, end: float | None, scope: str | None = None
    ) -> _Outcome[TotalsT, FiguresT]:
        key = (window, scope)
        if self.probing and self._clocks.monotonic() < self._retry_at:
            assert self._probe is not None
            if not await self._probe():
                return self._still_failing(key)
            self.backoff.succeeded()  # it answers again: whatever comes next starts afresh
        window_s = parse_duration(window)
        started = self._clocks.monotonic()
        try:
            totals = await self._read(window_s, end)
        # The feed is the I/O boundary: every source raises its own error types, each with a
        # one-line message. Whatever it is, the user sees that message and the app goes on.
        except Exception as error:
            latency = self._clocks.monotonic() - started
            return self._failed(key, error, latency)
        latency = self._clocks.monotonic() - started
        good = _Good(totals, self._compute(totals), self._clocks.wall())
        self._good[key] = good
        self._failing_since = None
        self._failure = None
        self._unreachable = False
        self.backoff.succeeded()
        return _Outcome(good, FRESH, latency)

    def _failed(
        self, key: tuple[str, str | None], error: Exception, latency: float
    ) -> _Outcome[TotalsT, FiguresT]:
        if self._failing_since is None:
            self._failing_since = self._clocks.wall()
        if _engine_absent(error):
            self.backoff.succeeded()  # asking each refresh costs nothing: no back-off
        else:
            self.backoff.failed(_retry_after(error))
        self._unreachable = _unreachable(error)
        self._retry_at = self._clocks.monotonic() + self.backoff.delay
        reason = failure_reason(error)
        self._failure = (reason, latency)
        return self._failing(key, reason, latency)

    def _still_failing(self, key: tuple[str, str | None]) -> _Outcome[TotalsT, FiguresT]:
        """A probe found the source still unreachable: the last failure's outcome again."""
        reason, latency = self._failure or ("unreachable", None)
        return self._failing(key, reason, latency)

    def _failing(
        self, key: tuple[str, str | None], reason: str, latency: float | None
    ) -> _Outcome[TotalsT, FiguresT]:
        good = self._good.get(key)
        if good is None:
            return _Outcome(None, Freshness("missing", reason=reason), latency)
        return _Outcome(good, Freshness("stale", since=self._failing_since, reason=reason), latency)


class _Polling(Generic[TotalsT, FiguresT]):
    """What the app asks of any poller between cycles."""

    _tracker: _Tracker[TotalsT, FiguresT]

    @property
    def delay(self) -> float:
        """Seconds to wait before the next cycle."""
        return self._tracker.delay

    @property
    def failures(self) -> int:
        return self._tracker.backoff.failures


class LanePoller(_Polling[LaneTotals, LaneFigures]):
    """Refresh cycles of one lane feed."""

    def __init__(
        self,
        feed: LaneFeed,
        refresh_s: float,
        *,
        replay_at: float | None = None,
        clocks: Clocks | None = None,
        max_delay_s: float = MAX_DELAY_S,
    ) -> None:
        self.feed = feed
        self.replay_at = replay_at
        self._tracker: _Tracker[LaneTotals, LaneFigures] = _Tracker(
            feed.read,
            self._figures,
            refresh_s,
            clocks or Clocks(),
            max_delay_s,
            getattr(feed, "probe", None),
        )

    def _figures(self, totals: LaneTotals) -> LaneFigures:
        return lane_figures(totals, self.feed.host_kv_tokens)

    async def cycle(self, window: str) -> LaneSnapshot:
        outcome = await self._tracker.run(window, self.replay_at, self.feed.model_filter)
        good = outcome.good
        freshness = outcome.freshness
        if freshness.state == "ok" and good is not None and good.totals.warnings:
            freshness = Freshness("ok", reason=warning_note(good.totals.warnings))
        return LaneSnapshot(
            lane=self.feed.name,
            window=window,
            totals=good.totals if good else None,
            figures=good.figures if good else None,
            hardware=self.feed.hardware,
            model=self.feed.model,
            freshness=freshness,
            latency_s=outcome.latency_s,
            updated_at=good.read_at if good else None,
            replay_at=self.replay_at,
            gpus=self.feed.gpus,
            chunk_tokens=self.feed.chunk_tokens,
        )


class LedgerPoller(_Polling[LedgerTotals, LedgerFigures]):
    """Refresh cycles of the agent ledger feed."""

    def __init__(
        self,
        feed: LedgerFeed,
        refresh_s: float,
        *,
        prices: Prices | None = None,
        replay_at: float | None = None,
        clocks: Clocks | None = None,
        max_delay_s: float = MAX_DELAY_S,
    ) -> None:
        self.feed = feed
        self.prices = prices or Prices()
        self.replay_at = replay_at
        self._tracker: _Tracker[LedgerTotals, LedgerFigures] = _Tracker(
            feed.read,
            self._figures,
            refresh_s,
            clocks or Clocks(),
            max_delay_s,
            getattr(feed, "probe", None),
        )

    def _figures(self, totals: LedgerTotals) -> LedgerFigures:
        return ledger_figures(totals, self.prices)

    async def cycle(self, window: str) -> LedgerSnapshot:
        outcome = await self._tracker.run(window, self.replay_at)
        good = outcome.good
        return LedgerSnapshot(
            window=window,
            totals=good.totals if good else None,
            figures=good.figures if good else None,
            freshness=outcome.freshness,
            latency_s=outcome.latency_s,
            updated_at=good.read_at if good else None,
            replay_at=self.replay_at,
        )

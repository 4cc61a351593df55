"""The first reads, started while the terminal UI is still loading.

Importing Textual and building the panes costs a few hundred milliseconds of CPU, while the
first reads mostly wait: on Prometheus evaluating, on SQLite reading. So `HeadStart` runs the
first lane and ledger cycles on the event loop the app will run on, in a thread, while the main
thread loads the UI; `handover()` stops that thread and hands the loop over, reads still out
included, so the app's first paint usually has every figure and no read is made twice.
Nothing here imports Textual.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from cockpit.config import Config
from cockpit.poller import Clocks, LaneFeed, LanePoller, LedgerFeed, LedgerPoller
from cockpit.snapshot import LaneSnapshot, LedgerSnapshot


@dataclass(frozen=True, slots=True)
class Pollers:
    """One poller per lane (in the order of the feeds) and the ledger's, if any."""

    lanes: tuple[LanePoller, ...]
    ledger: LedgerPoller | None


def build_pollers(
    config: Config,
    lane_feeds: Sequence[LaneFeed],
    ledger_feed: LedgerFeed | None,
    refresh_s: float,
    replay_at: float | None = None,
    clocks: Clocks | None = None,
) -> Pollers:
    clocks = clocks or Clocks()
    lanes = tuple(
        LanePoller(feed, refresh_s, replay_at=replay_at, clocks=clocks) for feed in lane_feeds
    )
    ledger = (
        LedgerPoller(
            ledger_feed, refresh_s, prices=config.prices, replay_at=replay_at, clocks=clocks
        )
        if ledger_feed is not None
        else None
    )
    return Pollers(lanes, ledger)


class HeadStart:
    """The first lane cycle (of the first lane) and ledger cycle, on a loop in a thread."""

    def __init__(self, pollers: Pollers, window: str, ledger_window: str) -> None:
        self.pollers = pollers
        self.window = window
        self.ledger_window = ledger_window
        self.loop = asyncio.new_event_loop()
        self.lane_read: asyncio.Task[LaneSnapshot] | None = None
        self.ledger_read: asyncio.Task[LedgerSnapshot] | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cockpit-head-start", daemon=True)

    def start(self) -> HeadStart:
        self._thread.start()
        return self

    def _run(self) -> None:
        self.loop.call_soon(self._begin)
        self.loop.run_forever()

    def _begin(self) -> None:
        reads: list[asyncio.Task[LaneSnapshot] | asyncio.Task[LedgerSnapshot]] = []
        if self.pollers.lanes:
            self.lane_read = self.loop.create_task(self.pollers.lanes[0].cycle(self.window))
            reads.append(self.lane_read)
        if self.pollers.ledger is not None:
            self.ledger_read = self.loop.create_task(self.pollers.ledger.cycle(self.ledger_window))
            reads.append(self.ledger_read)
        if not reads:
            self._done.set()
            return
        finished = asyncio.gather(*reads, return_exceptions=True)
        finished.add_done_callback(lambda _: self._done.set())

    def handover(self, wait_s: float = 0.0) -> asyncio.AbstractEventLoop:
        """Stop the thread (after up to `wait_s` for the reads) and give the caller the loop."""
        self._done.wait(wait_s)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        return self.loop

    def close(self) -> None:
        """After the app: end what still runs on the loop, as `asyncio.run` would, and close it."""
        loop = self.loop
        if loop.is_closed():
            return
        if self._thread.is_alive():
            self.handover()
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()

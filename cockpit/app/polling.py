"""Polling the sources: one worker per source, a message per read, the next read armed.

Each source is polled by an exclusive worker that runs one `Poller.cycle()` and posts the
snapshot as a message; its handler shows it and arms the next cycle with `set_timer`, so reads
of one source never overlap. Handlers never await I/O: a key is answered at once however slow
a source is. A cycle started for an older lane, window or filter is cancelled, and its answer,
if already posted, is known by its epoch and dropped. While the fleet's overview is open, it
is read instead of the lane.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Generic, TypeVar

from textual import on
from textual.message import Message
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from cockpit.app.benchprobe import Probe
from cockpit.app.panes import LanePanes
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.runtime.fleet_poller import FleetPoller
from cockpit.runtime.poller import MAX_DELAY_S, LanePoller
from cockpit.widgets.fleet import FleetScreen

SnapshotT = TypeVar("SnapshotT")


@dataclass
class SourceRead(Message, Generic[SnapshotT]):
    """A source's cycle ended. A newer one of the same source replaces it if not handled yet."""

    snapshot: SnapshotT
    epoch: int

    def can_replace(self, message: Message) -> bool:
        return type(message) is type(self)


class LaneRead(SourceRead[LaneSnapshot]):
    """A lane cycle ended."""


class LedgerRead(SourceRead[LedgerSnapshot]):
    """A ledger cycle ended."""


@dataclass
class Polling:
    """One source's polling: the current cycle's epoch and the timer armed for the next."""

    epoch: int = 0
    timer: Timer | None = None

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.stop()
            self.timer = None

    def restart(self) -> int:
        """No timer armed, answers of cycles out dropped from now on: the new cycle's epoch."""
        self.disarm()
        self.epoch += 1
        return self.epoch


class SourcePolling(LanePanes):
    """The polling part of the cockpit app (`CockpitApp` sets the state below)."""

    lane_pollers: list[LanePoller]
    fleet_poller: FleetPoller | None
    _overview: FleetScreen | None = None
    """The fleet's overview (with a fleet feed): the cockpit opens on it."""
    _lane_seen: dict[tuple[int, str], LaneSnapshot]
    _ledger_seen: dict[str, LedgerSnapshot]
    _lane: Polling
    _ledger: Polling
    _probe: Probe | None

    @property
    def overview_open(self) -> bool:
        """The overview is shown (or is about to be, at start): the lane is not polled then."""
        overview = self._overview
        return self.fleet_poller is not None and (overview is None or overview in self.screen_stack)

    def _lane_changed(self) -> None:
        """The lane, window or model filter changed: their last figures at once, then a read."""
        self.lane_snapshot = self._lane_seen.get((self.lane_index, self.window))
        self._show()
        self._read_lane()

    def _read_lane(self) -> None:
        """Start a lane cycle now; one still out for an older state is cancelled."""
        epoch = self._lane.restart()
        if self.overview_open:  # the overview reads the whole fleet instead
            if self._overview is not None:
                self._overview.read_now()
            return
        if not self.lane_pollers:
            return
        poller, window = self.lane_pollers[self.lane_index], self.window

        async def cycle() -> None:
            self.post_message(LaneRead(await poller.cycle(window), epoch))

        self._run_cycle(cycle, "lane", f"read lane {poller.feed.name} over {window}")

    def _read_ledger(self) -> None:
        epoch, poller = self._ledger.restart(), self.ledger_poller
        if poller is None:
            return
        window = self.ledger_window

        async def cycle() -> None:
            self.post_message(LedgerRead(await poller.cycle(window), epoch))

        self._run_cycle(cycle, "ledger", f"read the agent ledger over {window}")

    def _run_cycle(
        self, cycle: Callable[[], Coroutine[None, None, None]], group: str, description: str
    ) -> Worker[None]:
        """The source's one worker: starting it cancels the one out, if any."""
        return self.run_worker(
            cycle, group=group, description=description, exclusive=True, exit_on_error=False
        )

    def _arm(self, polling: Polling, delay: float, read: Callable[[], None], fresh: bool) -> None:
        """Arm the next cycle, unless paused or a replayed moment was read well: it doesn't
        move, so it is read again only to recover from a failure."""
        if not self.paused and (self.replay_at is None or not fresh):
            polling.timer = self.set_timer(delay, read)

    def on_lane_read(self, message: LaneRead) -> None:
        if message.epoch != self._lane.epoch:
            return
        snapshot = self.lane_snapshot = message.snapshot
        self._lane_seen[(self.lane_index, snapshot.window)] = snapshot
        self._show()
        self._probe_refresh()
        delay = self.lane_pollers[self.lane_index].delay
        self._arm(self._lane, delay, self._read_lane, snapshot.freshness.state == "ok")
        self._read_ledger_with_lane(delay)

    def _read_ledger_with_lane(self, delay: float) -> None:
        """When the ledger's next read is due a refresh from now as the lane's is, start both
        together: the ledger's answer (the quicker) is then shown with the lane's, one repaint
        per refresh rather than two."""
        poller = self.ledger_poller
        if poller is None or self._ledger.timer is None or poller.delay != delay:
            return
        self._ledger.disarm()
        self._ledger.timer = self.set_timer(delay, self._read_ledger)

    def on_ledger_read(self, message: LedgerRead) -> None:
        if message.epoch != self._ledger.epoch or self.ledger_poller is None:
            return
        snapshot = self.ledger_snapshot = message.snapshot
        self._ledger_seen[snapshot.window] = snapshot
        lane_reading = any(worker.group == "lane" and worker.is_running for worker in self.workers)
        if not lane_reading:  # else shown with the lane's answer, in one repaint
            self._show()
        self._probe_refresh()
        delay = self.ledger_poller.delay
        self._arm(self._ledger, delay, self._read_ledger, snapshot.freshness.state == "ok")

    def _probe_refresh(self) -> None:
        """With `COCKPIT_BENCH_PROBE` set: note the first frame with every pane's data, tasks."""
        probe = self._probe
        if probe is None:
            return
        probe.tasks()
        lane_ready = not self.lane_feeds or (
            self.lane_snapshot is not None and self.lane_snapshot.figures is not None
        )
        if self.overview_open and self._overview is not None:  # the overview's rows instead
            lane_ready = self._overview.snapshot is not None
        ledger_ready = self.ledger_poller is None or (
            self.ledger_snapshot is not None and self.ledger_snapshot.figures is not None
        )
        if lane_ready and ledger_ready and not probe.first_frame_seen:
            self.call_after_refresh(probe.first_frame)

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """A cycle that raised (a bug, not a source failure): say so and keep polling."""
        if event.state != WorkerState.ERROR:
            return
        worker = event.worker
        self.notify(
            f"{worker.description}: {worker.error}",
            title="refresh failed",
            severity="error",
            markup=False,
        )
        self._show()  # a ledger answer held for this lane cycle's
        if worker.group == "lane":
            self._arm(self._lane, MAX_DELAY_S, self._read_lane, fresh=False)
        elif worker.group == "ledger":
            self._arm(self._ledger, MAX_DELAY_S, self._read_ledger, fresh=False)

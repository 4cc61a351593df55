"""The one refresh loop: a cycle in a worker, its snapshot in a message, the next cycle armed.

`RefreshLoop.read_now()` runs a `Poller.cycle()` in the source's exclusive worker and posts its
snapshot; `receive()` drops an answer older than the last `read_now()` or `stop()` (its epoch)
and arms the next cycle after the poller's delay (its back-off), so reads of one source never
overlap; none is armed while paused, nor after a replayed moment read well (it doesn't move).
Handlers never await I/O: a key is answered at once however slow a source is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, NamedTuple, TypeVar

from textual.app import App
from textual.message import Message
from textual.timer import Timer
from textual.worker import Worker

from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.runtime.poller import MAX_DELAY_S, FleetSnapshot, Poller

SnapshotT = TypeVar("SnapshotT", LaneSnapshot, LedgerSnapshot, FleetSnapshot)


@dataclass
class SourceRead(Message, Generic[SnapshotT]):
    """A source's cycle ended. A newer one of the same source replaces it if not handled yet."""

    snapshot: SnapshotT
    epoch: int

    def can_replace(self, message: Message) -> bool:
        return type(message) is type(self)


class LaneRead(SourceRead[LaneSnapshot]): ...


class LedgerRead(SourceRead[LedgerSnapshot]): ...


class FleetRead(SourceRead[FleetSnapshot]): ...


class Cycle(NamedTuple, Generic[SnapshotT]):
    """What a cycle reads: a source's poller over a window, and what the worker is called."""

    poller: Poller[Any, Any, SnapshotT]
    window: str
    description: str
    label: str | None = None
    """The window's name on the snapshot when not its duration (`card`: since its start)."""


class RefreshLoop(Generic[SnapshotT]):
    """One source's polling: what to read next, its epoch, its worker and its armed timer."""

    def __init__(
        self,
        app: App[Any],
        group: str,
        read: type[SourceRead[SnapshotT]],
        next_cycle: Callable[[], Cycle[SnapshotT] | None],
        paused: Callable[[], bool],
    ) -> None:
        self.app, self.paused = app, paused
        self.group = group
        """The workers' group: a cycle started cancels the one of its group still out."""
        self.read: type[SourceRead[SnapshotT]] = read
        self.next_cycle: Callable[[], Cycle[SnapshotT] | None] = next_cycle
        """The cycle to start now (None: nothing to read, no lane say)."""
        self.epoch = 0
        self.timer: Timer | None = None
        self.worker: Worker[None] | None = None
        self.poller: Poller[Any, Any, SnapshotT] | None = None
        """The poller of the cycle last started: its delay arms the next."""

    @property
    def reading(self) -> bool:
        return self.worker is not None and self.worker.is_running

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.stop()
            self.timer = None

    def stop(self) -> None:
        """No timer armed, no cycle out (its answer, if posted already, dropped)."""
        self.disarm()
        self.epoch += 1
        if self.worker is not None:
            self.worker.cancel()

    def read_now(self) -> None:
        """Start a cycle now; one still out for an older state is cancelled."""
        self.stop()
        cycle = self.next_cycle()
        if cycle is None:
            return
        epoch, post, message = self.epoch, self.app.post_message, self.read
        self.poller, window = cycle.poller, cycle.window

        async def run() -> None:
            snapshot = await cycle.poller.cycle(window)
            if cycle.label is not None:
                snapshot = replace(snapshot, window=cycle.label)
            post(message(snapshot, epoch))

        self.worker = self.app.run_worker(
            run,
            group=self.group,
            description=cycle.description,
            exclusive=True,
            exit_on_error=False,
        )

    def receive(self, message: SourceRead[SnapshotT]) -> SnapshotT | None:
        """The message's snapshot, the next cycle armed; None for a dropped answer."""
        if message.epoch != self.epoch or self.poller is None:
            return None
        replayed = self.poller.replay_at is not None
        if not replayed or message.snapshot.freshness.state != "ok":
            self.arm(self.poller.delay)
        return message.snapshot

    def arm(self, delay: float) -> None:
        """The next cycle in `delay` seconds (unless paused), instead of one armed before."""
        self.disarm()
        if not self.paused():
            self.timer = self.app.set_timer(delay, self.read_now)

    def align(self, other: RefreshLoop[Any]) -> None:
        """When this source's next cycle is due when `other`'s is (the same delay from now),
        start both together: answered together, they are shown in one repaint, not two."""
        delay = other.poller.delay if other.poller is not None else None
        if self.timer is not None and self.poller is not None and self.poller.delay == delay:
            self.arm(self.poller.delay)

    def failed(self, worker: Worker[Any]) -> None:
        """The cycle of `worker` raised (a bug, not a source failure): try again later."""
        if worker is self.worker:
            self.arm(MAX_DELAY_S)

"""The Textual app: lane and window state, one polling worker per source, keys, layout.

Each source is polled by a worker that runs one `Poller.cycle()` and posts the snapshot as a
message; the next cycle is armed with `set_timer` only once that message is handled, so reads
never overlap. Handlers never await I/O: a key is answered at once however slow a source is.

The lane and the ledger share one refresh tick while both read at the refresh interval, and
two reads started together are shown together: one screen update per period, not two. A read
still out `HOLD_S` after the other answered is not waited for.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.driver import Driver
from textual.geometry import Size
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from cockpit.benchprobe import Probe
from cockpit.config import Config
from cockpit.head_start import HeadStart, build_pollers
from cockpit.model import FRESH
from cockpit.poller import Clocks, LaneFeed, LedgerFeed
from cockpit.screens import HelpScreen, ModelFilterScreen
from cockpit.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.themes import (
    DEFAULT_THEME,
    STYLESHEET,
    THEME_NAMES,
    THEMES,
    ansi_color_setting,
    next_theme,
)
from cockpit.timeutil import WINDOWS
from cockpit.widgets import (
    CacheGauge,
    PhaseBar,
    PrefillPane,
    RatiosPane,
    SpendPane,
    StatusLine,
    StatusView,
)
from cockpit.widgets.columns import PaneColumns
from cockpit.widgets.keys import KeyBar
from cockpit.widgets.roofline import RooflinePane
from cockpit.widgets.status import SourceStatus

MIN_WIDTH = 40
MIN_HEIGHT = 12
TOO_SMALL = f"terminal too small: needs {MIN_WIDTH}×{MIN_HEIGHT}"


class _Refreshed(Message):
    """A cycle ended. A newer one of the same kind replaces it if not handled yet."""

    def can_replace(self, message: Message) -> bool:
        return type(message) is type(self)


class LaneRefreshed(_Refreshed):
    """A lane cycle ended."""

    def __init__(self, snapshot: LaneSnapshot, epoch: int) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.epoch = epoch


class LedgerRefreshed(_Refreshed):
    """A ledger cycle ended."""

    def __init__(self, snapshot: LedgerSnapshot, epoch: int) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.epoch = epoch


def write_new_file(target: Path, text: str) -> Path:
    """Writes `text` to `target`, or to `name-2.md`, `name-3.md`… if it exists (two exports of
    one replayed moment, or of one second): an export never replaces another. The path used."""
    path, number = target, 1
    while True:
        try:
            with path.open("x", encoding="utf-8") as out:
                out.write(text)
            return path
        except FileExistsError:
            number += 1
            path = target.with_stem(f"{target.stem}-{number}")


def receipt_name(lane: str, window: str, moment: float) -> str:
    """`cockpit-receipt-<lane>-<window>-<UTC stamp>.md`, safe as a file name."""
    safe_lane = re.sub(r"[^A-Za-z0-9_.-]+", "_", lane) or "lane"
    stamp = datetime.fromtimestamp(moment, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"cockpit-receipt-{safe_lane}-{window}-{stamp}.md"


HOLD_S = 0.25
"""The longest a source's answer waits for the other source's read started with it."""

TOGETHER_S = 0.1
"""Two reads started this close (seconds) belong to the same refresh."""


@dataclass
class _Loop:
    """One source's polling state: which cycle is current, the armed timer, the read out."""

    epoch: int = 0
    timer: Timer | None = None
    due: float | None = None
    """When (monotonic) the armed timer fires, if it was armed at the refresh interval."""
    reading: bool = False
    started: float = 0.0
    """When (monotonic) the current read started."""

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.stop()
            self.timer = None
        self.due = None

    def read_started(self) -> None:
        self.timer, self.due = None, None
        self.reading, self.started = True, time.monotonic()

    def read_with(self, other: _Loop) -> bool:
        """This read is out and started in the same refresh as `other`'s."""
        return self.reading and abs(self.started - other.started) <= TOGETHER_S


@dataclass(frozen=True, slots=True)
class _Panes:
    status: StatusLine
    cache: CacheGauge
    prefill: PrefillPane
    phases: PhaseBar
    roofline: RooflinePane
    ratios: RatiosPane
    spend: SpendPane


def _lane_bindings() -> list[BindingType]:
    first = Binding("1", "lane(1)", "lane", key_display="1-9")
    rest = [Binding(str(n), f"lane({n})", f"lane {n}", show=False) for n in range(2, 10)]
    return [first, *rest]


class CockpitApp(App[None]):
    """The cockpit: status line, six panes (prefill first), key bar."""

    CSS_PATH = str(STYLESHEET)
    TITLE = "lane-cockpit"
    ENABLE_COMMAND_PALETTE = True

    # Textual declares these as instance variables, so a ClassVar annotation can't be used.
    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-tiny"),
        (MIN_WIDTH, "-one-column"),
        (80, "-two-columns"),
        (100, "-roomy-two-columns"),
        (120, "-three-columns"),
        (150, "-wide-three-columns"),
    ]
    VERTICAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-short"),
        (MIN_HEIGHT, "-tall"),
    ]

    BINDINGS: ClassVar[list[BindingType]] = [
        *_lane_bindings(),
        Binding("tab", "next_lane", "next", key_display="tab", priority=True),
        Binding("shift+tab", "previous_lane", "prev lane", show=False, priority=True),
        Binding("w", "next_window", "window", key_display="w/W"),
        Binding("W", "previous_window", "prev window", show=False),
        # Polling refreshes on its own: `r` stays in the help, off the key bar so 80 columns fit.
        Binding("r", "refresh", "refresh", show=False),
        Binding("p", "pause", "pause"),
        Binding("e", "export", "export"),
        Binding("t", "next_theme", "theme"),
        Binding("m", "filter_model", "model"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        config: Config,
        lane_feeds: Sequence[LaneFeed],
        ledger_feed: LedgerFeed | None,
        *,
        replay_at: float | None = None,
        refresh_s: float | None = None,
        export_dir: Path | None = None,
        clocks: Clocks | None = None,
        head_start: HeadStart | None = None,
        notice: str = "",
    ) -> None:
        # NO_COLOR: drop colours altogether (Textual alone would draw in shades of grey).
        super().__init__(ansi_color=ansi_color_setting())
        self.config = config
        self.refresh_s = refresh_s or config.refresh_s
        self.replay_at = replay_at
        self.export_dir = export_dir
        self.clocks = clocks or Clocks()
        self.lane_feeds = tuple(lane_feeds)
        self._head_start = head_start
        self._notice = notice
        """Shown once, as a notification, when the cockpit starts."""
        pollers = (
            head_start.pollers
            if head_start is not None
            else build_pollers(
                config, lane_feeds, ledger_feed, self.refresh_s, replay_at, self.clocks
            )
        )
        self.lane_pollers = list(pollers.lanes)
        self.ledger_poller = pollers.ledger
        self.lane_index = 0
        self.window = config.window
        self.paused = False
        self.lane_snapshot: LaneSnapshot | None = None
        self.ledger_snapshot: LedgerSnapshot | None = None
        self._lane_seen: dict[tuple[int, str], LaneSnapshot] = {}
        self._ledger_seen: dict[str, LedgerSnapshot] = {}
        self._lane_loop = _Loop()
        self._ledger_loop = _Loop()
        self._hold: Timer | None = None
        """Armed while an answer waits for the other source's (see `HOLD_S`)."""
        self._panes: _Panes | None = None
        """The panes, found once at mount: a refresh doesn't search the widget tree."""
        self._shown: dict[str, tuple[object, ...]] = {}
        """Each pane's last inputs: a pane whose snapshots are the same objects is not rebuilt."""
        self._cockpit_theme = config.theme if config.theme in THEME_NAMES else DEFAULT_THEME
        self._probe = Probe.from_env()
        # Before the stylesheet is first parsed: a theme set once running re-parses all CSS.
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = self._cockpit_theme

    # --- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # Textual sets breakpoint classes on the first resize, after a first layout and paint
        # at the wrong number of columns. Set here, before the panes are mounted, the panes
        # are styled once, already at the right number (set on mount, all were styled again).
        self.screen.update_classes(self._breakpoint_classes(self.size), animate=False)
        yield StatusLine(id="status")
        yield Static(TOO_SMALL, id="too-small")
        with VerticalScroll(id="body"), PaneColumns(id="panes"):
            yield CacheGauge(id="cache")
            yield PrefillPane(id="prefill")
            yield PhaseBar(id="phases")
            yield RooflinePane(id="roofline")
            yield RatiosPane(id="ratios")
            yield SpendPane(id="spend")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self._panes = _Panes(
            self.query_one(StatusLine),
            self.query_one(CacheGauge),
            self.query_one(PrefillPane),
            self.query_one(PhaseBar),
            self.query_one(RooflinePane),
            self.query_one(RatiosPane),
            self.query_one(SpendPane),
        )
        head = self._head_start
        answers: list[Callable[[], None]] = []
        if head is not None and head.lane_read is not None:
            answers.append(
                self._adopt(head.lane_read, self._lane_loop, LaneRefreshed, self._poll_lane_now)
            )
        else:
            self._poll_lane_now()
        if head is not None and head.ledger_read is not None:
            answers.append(
                self._adopt(
                    head.ledger_read, self._ledger_loop, LedgerRefreshed, self._poll_ledger_now
                )
            )
        else:
            self._poll_ledger_now()
        for answer in answers:
            answer()
        self._show_all()  # placeholders for what is still being read
        if self._notice:
            self.notify(self._notice, severity="warning", timeout=20)

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, with a quiet input thread on Linux (see cockpit/driver.py)."""
        driver = super().get_driver_class()
        if driver.__name__ == "LinuxDriver" and driver.__module__.startswith("textual."):
            from cockpit.driver import QuietLinuxDriver

            return QuietLinuxDriver
        return driver

    def _breakpoint_classes(self, size: Size) -> dict[str, bool]:
        """The screen's breakpoint classes at `size`, as Textual's Screen sets them on resize."""
        horizontal = self.HORIZONTAL_BREAKPOINTS or []
        vertical = self.VERTICAL_BREAKPOINTS or []
        classes = {name: False for _, name in [*horizontal, *vertical]}
        for dimension, breakpoints in ((size.width, horizontal), (size.height, vertical)):
            reached = [name for low, name in sorted(breakpoints) if dimension >= low]
            if reached:
                classes[reached[-1]] = True
        return classes

    def _adopt(
        self,
        read: asyncio.Task[Any],
        loop: _Loop,
        answer: Callable[[Any, int], _Refreshed],
        read_again: Callable[[], None],
    ) -> Callable[[], None]:
        """Take a read started before the app (see `HeadStart`) as the current cycle.

        Both sources are marked as reading before either answer is handled, so that answers
        already in are shown together, in the first paint."""
        loop.epoch += 1
        loop.read_started()
        epoch = loop.epoch

        def failed() -> bool:
            return read.cancelled() or read.exception() is not None

        def landed(_: object) -> None:
            if not failed():
                self.post_message(answer(read.result(), epoch))
            elif not read.cancelled():  # a cycle doesn't raise; if this one did, read again
                self.call_later(read_again)

        def deliver() -> None:
            if not read.done():
                read.add_done_callback(landed)
            elif failed():
                read_again()
            else:
                self._dispatch_refreshed(answer(read.result(), epoch))

        return deliver

    def _dispatch_refreshed(self, message: _Refreshed) -> None:
        if isinstance(message, LaneRefreshed):
            self.on_lane_refreshed(message)
        elif isinstance(message, LedgerRefreshed):
            self.on_ledger_refreshed(message)

    async def on_unmount(self) -> None:
        """Close every feed in the loop its clients were made in."""
        self.workers.cancel_all()
        if self._head_start is not None:
            for read in (self._head_start.lane_read, self._head_start.ledger_read):
                if read is not None:
                    read.cancel()
        for feed in self.lane_feeds:
            await feed.close()
        if self.ledger_poller is not None:
            await self.ledger_poller.feed.close()

    # --- state as the user sees it -----------------------------------------------------------

    @property
    def ledger_window(self) -> str:
        return self.config.ledger_window or self.window

    @property
    def lane_name(self) -> str:
        if not self.lane_feeds:
            return "no lane"
        return self.lane_feeds[self.lane_index].name

    def status_view(self) -> StatusView:
        sources: list[SourceStatus] = []
        lane, ledger = self.lane_snapshot, self.ledger_snapshot
        if lane is not None:
            sources.append(SourceStatus("lane", lane.freshness, lane.latency_s))
        elif self.lane_feeds:
            sources.append(SourceStatus("lane", FRESH, reading=True))
        if ledger is not None:
            sources.append(SourceStatus("ledger", ledger.freshness, ledger.latency_s))
        elif self.ledger_poller is not None:
            sources.append(SourceStatus("ledger", FRESH, reading=True))
        evaluated = None
        if lane is not None and lane.totals is not None:
            evaluated = lane.totals.end
        elif ledger is not None and ledger.totals is not None:
            evaluated = ledger.totals.end
        return StatusView(
            lane=self.lane_name,
            index=self.lane_index + 1 if self.lane_feeds else 0,
            count=len(self.lane_feeds),
            window=self.window,
            ledger_window=self.ledger_window if self.ledger_poller else None,
            evaluated_at=evaluated,
            replay_at=self.replay_at,
            sources=tuple(sources),
            paused=self.paused,
            model_filter=self.lane_feeds[self.lane_index].model_filter if self.lane_feeds else None,
            coverage=lane.totals.coverage_note if lane is not None and lane.totals else "",
        )

    def _show_status(self) -> None:
        if self._panes is not None:
            self._panes.status.show(self.status_view())

    def _show_all(self) -> None:
        lane, ledger = self.lane_snapshot, self.ledger_snapshot
        has_ledger = self.ledger_poller is not None
        has_lane = bool(self.lane_feeds)
        panes = self._panes
        if panes is None or not panes.status.is_attached:
            return  # a read that ends while the app quits finds no screen to show it on
        with self.batch_update():
            self._show_status()
            if self._changed("cache", lane, ledger, has_ledger):
                panes.cache.show(lane, ledger, has_ledger, has_lane)
            if self._changed("lane", lane):
                panes.prefill.show(lane, has_lane)
                panes.phases.show(lane, has_lane)
                panes.roofline.show(lane.roofline() if lane else None)
            if self._changed("ratios", lane, ledger, has_ledger):
                panes.ratios.show(lane, ledger, has_ledger, has_lane)
            if self._changed("spend", ledger, has_ledger):
                panes.spend.show(ledger, has_ledger)

    def _changed(self, panes: str, *inputs: object) -> bool:
        """Whether `panes` last showed other snapshots (by identity: snapshots are frozen)."""
        last = self._shown.get(panes)
        if last is not None and all(a is b for a, b in zip(last, inputs, strict=True)):
            return False
        self._shown[panes] = inputs
        return True

    # --- polling ------------------------------------------------------------------------------

    def _poll_lane_now(self) -> None:
        """Start a lane cycle at once; any cycle in flight for an older state is cancelled."""
        if self._head_start is not None and self._head_start.lane_read is not None:
            self._head_start.lane_read.cancel()  # a worker's exclusivity doesn't reach it
        self._lane_loop.disarm()
        self._lane_loop.epoch += 1
        self._start_lane_cycle()

    def _poll_ledger_now(self) -> None:
        if self._head_start is not None and self._head_start.ledger_read is not None:
            self._head_start.ledger_read.cancel()
        self._ledger_loop.disarm()
        self._ledger_loop.epoch += 1
        self._start_ledger_cycle()

    def _start_lane_cycle(self) -> Worker[None] | None:
        self._lane_loop.timer = None
        if not self.lane_pollers:
            return None
        self._lane_loop.read_started()
        poller, window, epoch = (
            self.lane_pollers[self.lane_index],
            self.window,
            self._lane_loop.epoch,
        )

        async def cycle() -> None:
            self.post_message(LaneRefreshed(await poller.cycle(window), epoch))

        worker: Worker[None] = self.run_worker(
            cycle,
            name=f"lane {poller.feed.name}",
            group="lane",
            description=f"read lane {poller.feed.name} over {window}",
            exclusive=True,
            exit_on_error=False,
        )
        return worker

    def _start_ledger_cycle(self) -> Worker[None] | None:
        self._ledger_loop.timer = None
        poller = self.ledger_poller
        if poller is None:
            return None
        self._ledger_loop.read_started()
        window, epoch = self.ledger_window, self._ledger_loop.epoch

        async def cycle() -> None:
            self.post_message(LedgerRefreshed(await poller.cycle(window), epoch))

        worker: Worker[None] = self.run_worker(
            cycle,
            name="ledger",
            group="ledger",
            description=f"read the agent ledger over {window}",
            exclusive=True,
            exit_on_error=False,
        )
        return worker

    def _wants_next_cycle(self, fresh: bool) -> bool:
        # A replayed moment doesn't move: read it again only to recover from a failure.
        return not self.paused and (self.replay_at is None or not fresh)

    def on_lane_refreshed(self, message: LaneRefreshed) -> None:
        if message.epoch != self._lane_loop.epoch:
            return
        self.lane_snapshot = message.snapshot
        self._lane_seen[(self.lane_index, message.snapshot.window)] = message.snapshot
        self._answered(self._lane_loop, self._ledger_loop)
        poller = self.lane_pollers[self.lane_index]
        if self._wants_next_cycle(message.snapshot.freshness.state == "ok"):
            self._arm(self._lane_loop, self._ledger_loop, poller.delay, self._start_lane_cycle)

    def on_ledger_refreshed(self, message: LedgerRefreshed) -> None:
        if message.epoch != self._ledger_loop.epoch or self.ledger_poller is None:
            return
        self.ledger_snapshot = message.snapshot
        self._ledger_seen[message.snapshot.window] = message.snapshot
        self._answered(self._ledger_loop, self._lane_loop)
        if self._wants_next_cycle(message.snapshot.freshness.state == "ok"):
            delay = self.ledger_poller.delay
            self._arm(self._ledger_loop, self._lane_loop, delay, self._start_ledger_cycle)

    def _answered(self, loop: _Loop, other: _Loop) -> None:
        """Show a source's answer, with the other's if that read started with it and is out."""
        loop.reading = False
        if other.read_with(loop):
            if self._hold is None:
                self._hold = self.set_timer(min(HOLD_S, self.refresh_s / 2), self._show_held)
            return
        self._show_held()

    def _show_held(self) -> None:
        if self._hold is not None:
            self._hold.stop()
            self._hold = None
        self._show_all()
        self._probe_refresh()

    def _arm(self, loop: _Loop, other: _Loop, delay: float, start: Callable[[], object]) -> None:
        """Arm the next cycle; at the refresh interval, on the other source's tick when near."""
        now = time.monotonic()
        if delay == self.refresh_s and other.due is not None:
            ahead = now + delay - other.due
            if 0 <= ahead <= self.refresh_s / 2:
                delay -= ahead
        loop.timer = self.set_timer(delay, start)
        loop.due = now + delay if delay <= self.refresh_s else None

    def _probe_refresh(self) -> None:
        """With `COCKPIT_BENCH_PROBE` set: note the first frame with every pane's data, tasks."""
        probe = self._probe
        if probe is None:
            return
        probe.tasks()
        lane_ready = not self.lane_feeds or (
            self.lane_snapshot is not None and self.lane_snapshot.figures is not None
        )
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
        loop = {"lane": self._lane_loop, "ledger": self._ledger_loop}.get(worker.group or "")
        if loop is not None:
            loop.reading = False
            if self._hold is not None:
                self._show_held()
        self.notify(
            f"{worker.description}: {worker.error}", title="refresh failed", severity="error"
        )
        if worker.group == "lane" and not self.paused:
            self._lane_loop.timer = self.set_timer(MAX_RETRY_S, self._start_lane_cycle)
        elif worker.group == "ledger" and not self.paused:
            self._ledger_loop.timer = self.set_timer(MAX_RETRY_S, self._start_ledger_cycle)

    # --- actions ------------------------------------------------------------------------------

    def select_lane(self, index: int) -> None:
        """Show lane `index` (0-based): its last figures for this window, then a fresh read."""
        if not 0 <= index < len(self.lane_feeds) or index == self.lane_index:
            return
        self.lane_index = index
        self.lane_snapshot = self._lane_seen.get((index, self.window))
        self._show_all()
        self._poll_lane_now()

    def select_window(self, window: str) -> None:
        if window == self.window:
            return
        self.window = window
        self.lane_snapshot = self._lane_seen.get((self.lane_index, window))
        if self.config.ledger_window is None:
            self.ledger_snapshot = self._ledger_seen.get(window)
            self._poll_ledger_now()
        self._show_all()
        self._poll_lane_now()

    def action_lane(self, number: int) -> None:
        self.select_lane(number - 1)

    def action_next_lane(self) -> None:
        if self.lane_feeds:
            self.select_lane((self.lane_index + 1) % len(self.lane_feeds))

    def action_previous_lane(self) -> None:
        if self.lane_feeds:
            self.select_lane((self.lane_index - 1) % len(self.lane_feeds))

    @property
    def windows(self) -> tuple[str, ...]:
        return self.config.windows or WINDOWS

    def _step_window(self, step: int) -> str:
        windows = self.windows
        index = windows.index(self.window) if self.window in windows else 0
        return windows[(index + step) % len(windows)]

    def action_next_window(self) -> None:
        self.select_window(self._step_window(1))

    def action_previous_window(self) -> None:
        self.select_window(self._step_window(-1))

    def action_refresh(self) -> None:
        self._poll_lane_now()
        self._poll_ledger_now()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if self.paused:
            self._lane_loop.disarm()
            self._ledger_loop.disarm()
            self._show_status()
        else:
            self._show_status()
            self.action_refresh()

    def action_filter_model(self) -> None:
        if not self.lane_feeds or isinstance(self.screen, ModelFilterScreen):
            return
        feed = self.lane_feeds[self.lane_index]
        self.push_screen(ModelFilterScreen(feed.model_filter), self.filter_model)

    def filter_model(self, model: str | None) -> None:
        """Read the current lane for `model` only (None: unchanged, empty: the whole lane)."""
        if model is None or not self.lane_feeds:
            return
        feed = self.lane_feeds[self.lane_index]
        if (model or None) == feed.model_filter:
            return
        feed.filter_model(model)
        self._lane_seen = {k: v for k, v in self._lane_seen.items() if k[0] != self.lane_index}
        self.lane_snapshot = None
        self._show_all()
        self._poll_lane_now()

    def action_next_theme(self) -> None:
        self.theme = next_theme(self.theme)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_export(self) -> None:
        lane, ledger = self.lane_snapshot, self.ledger_snapshot
        # A replay's receipt is named for the moment it shows, not the moment it was written.
        moment = self.replay_at if self.replay_at is not None else self.clocks.wall()
        target = (self.export_dir or Path.cwd()) / receipt_name(self.lane_name, self.window, moment)
        self.run_worker(
            lambda: self._write_receipt(lane, ledger, target),
            name="export",
            group="export",
            description=f"export the receipt to {target}",
            thread=True,
            exit_on_error=False,
        )

    def _write_receipt(
        self, lane: LaneSnapshot | None, ledger: LedgerSnapshot | None, target: Path
    ) -> None:
        from cockpit.report import markdown_receipt

        text = markdown_receipt(lane, ledger, self.config.prices)
        try:
            target = write_new_file(target, text)
        except OSError as error:
            reason = error.strerror or str(error)
            self.call_from_thread(
                self.notify, f"{target}: {reason}", title="export failed", severity="error"
            )
            return
        self.call_from_thread(self.notify, str(target), title="receipt exported")

    # --- command palette ----------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for index, feed in enumerate(self.lane_feeds):
            yield SystemCommand(
                f"Lane: {feed.name}",
                f"Show lane {index + 1} of {len(self.lane_feeds)}",
                lambda index=index: self.select_lane(index),
            )
        for window in self.windows:
            yield SystemCommand(
                f"Window: {window}",
                f"Figures over the last {window}",
                lambda window=window: self.select_window(window),
            )
        for name in THEME_NAMES:
            yield SystemCommand(
                f"Cockpit theme: {name}",
                "Switch to this theme",
                lambda name=name: setattr(self, "theme", name),
            )
        yield SystemCommand(
            "Export receipt", "Write the current receipt as markdown", self.action_export
        )
        yield SystemCommand("Refresh now", "Read every source again", self.action_refresh)
        yield SystemCommand("Pause / resume", "Stop or restart polling", self.action_pause)


MAX_RETRY_S = 60.0
"""How long to wait after a cycle that crashed before trying again."""


def make_app(
    config: Config,
    lane_feeds: Sequence[LaneFeed],
    ledger_feed: LedgerFeed | None,
    *,
    replay_at: float | None = None,
    refresh_s: float | None = None,
    export_dir: Path | None = None,
    clocks: Clocks | None = None,
    head_start: HeadStart | None = None,
    notice: str = "",
) -> CockpitApp:
    """The cockpit app, as the CLI and the tests build it."""
    return CockpitApp(
        config,
        lane_feeds,
        ledger_feed,
        replay_at=replay_at,
        refresh_s=refresh_s,
        export_dir=export_dir,
        clocks=clocks,
        head_start=head_start,
        notice=notice,
    )

"""The Textual app: lane and window state, one polling worker per source, keys, layout.

Each source is polled by an exclusive worker that runs one `Poller.cycle()` and posts the
snapshot as a message; its handler shows it and arms the next cycle with `set_timer`, so reads
of one source never overlap. Handlers never await I/O: a key is answered at once however slow
a source is. A cycle started for an older lane, window or filter is cancelled, and its answer,
if already posted, is known by its epoch and dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.markup import escape
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from cockpit.benchprobe import Probe
from cockpit.config import Config
from cockpit.feeds import build_lane_feeds
from cockpit.fleet import lane_config
from cockpit.fleet_poller import FleetFeed, FleetPoller
from cockpit.health import check, rule_lines
from cockpit.ledger_figures import for_lane, lane_models
from cockpit.lifecycle import resume_only_after_suspend
from cockpit.poller import (
    MAX_DELAY_S,
    Clocks,
    LaneFeed,
    LanePoller,
    LedgerFeed,
    LedgerPoller,
    close_all,
)
from cockpit.receipts import receipt_name, receipts_folder, write_receipt
from cockpit.screens import (
    DetailsScreen,
    HelpScreen,
    LedgerTablesScreen,
    ModelFilterScreen,
    details_blocks,
)
from cockpit.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.themes import (
    DEFAULT_THEME,
    STYLESHEET,
    THEME_NAMES,
    THEMES,
    ansi_color_setting,
    next_theme,
)
from cockpit.widgets import (
    CacheGauge,
    PhaseBar,
    PrefillPane,
    RatiosPane,
    SpendPane,
    StatusLine,
    StatusView,
)
from cockpit.widgets.fleet import FleetScreen
from cockpit.widgets.folds import NO_LANE, NO_LEDGER, NO_PROFILE, FoldNotes
from cockpit.widgets.grid import PaneGrid
from cockpit.widgets.pane import Pane
from cockpit.widgets.roofline import RooflinePane
from cockpit.widgets.status import source_status
from cockpit.widgets.tables import LedgerTables
from cockpit.widgets.tails import TailsPane
from cockpit.widgets.trends import TrendsPane
from cockpit.widgets.vitals import HealthLine, VitalStrip

MIN_WIDTH = 40
MIN_HEIGHT = 12
TOO_SMALL = f"terminal too small: needs {MIN_WIDTH}×{MIN_HEIGHT}"
DETAILED = (VitalStrip, Pane)
"""What the arrows focus, in turn, and enter or i opens the figures of."""
PANE_FOCUS = (*DETAILED, ScrollableContainer)
"""Where the arrows move between panes: a pane, or the scrolling body around them."""


@runtime_checkable
class ListsModels(Protocol):
    """A lane feed that can say which `model_name` values the lane has (for the `m` filter)."""

    async def model_names(self) -> Sequence[str]: ...


@dataclass
class LaneRead(Message):
    """A lane cycle ended. A newer one replaces it if not handled yet."""

    snapshot: LaneSnapshot
    epoch: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LaneRead)


@dataclass
class LedgerRead(Message):
    """A ledger cycle ended. A newer one replaces it if not handled yet."""

    snapshot: LedgerSnapshot
    epoch: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LedgerRead)


@dataclass
class _Polling:
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


class CockpitApp(App[None]):
    """The cockpit: status line, six panes (prefill first), the keys."""

    CSS_PATH = str(STYLESHEET)
    TITLE = "lane-cockpit"
    AUTO_FOCUS = "#body"
    """Not the vital strip above it: the arrows go there and to the panes."""

    # Textual declares these as instance variables, so a ClassVar annotation can't be used.
    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-tiny"),
        (MIN_WIDTH, "-one-column"),
        (80, "-two-columns"),
        (120, "-three-columns"),
        (200, "-wide"),
    ]
    VERTICAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-short"),
        (MIN_HEIGHT, "-low"),
        (24, "-tall"),
        (48, "-very-tall"),
    ]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "lane(1)", "lane", key_display="1-9"),
        *(Binding(str(n), f"lane({n})", f"lane {n}", show=False) for n in range(2, 10)),
        Binding("tab", "step_lane(1)", "next", key_display="tab", priority=True),
        Binding("shift+tab", "step_lane(-1)", "prev lane", show=False, priority=True),
        Binding("w", "step_window(1)", "window"),
        Binding("W", "step_window(-1)", "prev window", show=False),
        Binding("r", "refresh", "refresh"),
        Binding("p", "pause", "pause"),
        Binding("e", "export", "export"),
        # Off the bar, in the help: t, W, shift+tab (80 columns hold no more; ^p shown bare).
        Binding("t", "next_theme", "theme", show=False),
        Binding("m", "filter_model", "model"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),  # as in htop and k9s
        Binding("ctrl+p", "command_palette", "", show=False, priority=True),
        # Panes: the arrows move the focus, enter or i opens the focused pane's details.
        Binding("down,right", "focus_pane(1)", "next pane", show=False, priority=True),
        Binding("up,left", "focus_pane(-1)", "previous pane", show=False, priority=True),
        Binding("enter,i", "details", "details", show=False),
        Binding("l", "ledger_tables", "ledger tables", show=False),
        Binding("escape", "overview", "overview", show=False),
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
        notice: str = "",
        fleet: FleetFeed | None = None,
    ) -> None:
        # NO_COLOR: drop colours altogether (Textual alone would draw in shades of grey).
        super().__init__(ansi_color=ansi_color_setting())
        self.config = config
        self.refresh_s = refresh_s or config.refresh_s
        self.replay_at = replay_at
        self.export_dir = export_dir
        self.clocks = clocks or Clocks()
        self.lane_feeds = tuple(lane_feeds)
        self._notice = notice
        """Shown once, as a notification, when the cockpit starts."""
        self.lane_pollers = [
            LanePoller(feed, self.refresh_s, replay_at=replay_at, clocks=self.clocks)
            for feed in lane_feeds
        ]
        self.ledger_poller = (
            LedgerPoller(
                ledger_feed,
                self.refresh_s,
                prices=config.prices,
                replay_at=replay_at,
                clocks=self.clocks,
            )
            if ledger_feed is not None
            else None
        )
        self.lane_index = 0
        self.window = config.window
        self.paused = False
        self.lane_snapshot: LaneSnapshot | None = None
        self.ledger_snapshot: LedgerSnapshot | None = None
        self._lane_seen: dict[tuple[int, str], LaneSnapshot] = {}
        self._ledger_seen: dict[str, LedgerSnapshot] = {}
        self._lane = _Polling()
        self._ledger = _Polling()
        self._probe = Probe.from_env()
        self._home: Screen[object] | None = None
        """The panes' screen (under the help or the model filter when they are open)."""
        self.fleet_poller = (
            FleetPoller(fleet, self.refresh_s, replay_at=replay_at, clocks=self.clocks)
            if fleet is not None
            else None
        )
        self._overview: FleetScreen | None = None
        """The fleet's overview (with a fleet feed): the cockpit opens on it."""
        # Before the stylesheet is first parsed: a theme set once running re-parses all CSS.
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = config.theme if config.theme in THEME_NAMES else DEFAULT_THEME

    # --- layout -------------------------------------------------------------------------------

    def get_default_screen(self) -> Screen[object]:
        """The panes' screen, with the breakpoint classes for the terminal's size from the start:
        set by its first Resize only, a layout of unmounted panes before it kept its columns."""
        width, height = self.size
        points = ((width, self.HORIZONTAL_BREAKPOINTS), (height, self.VERTICAL_BREAKPOINTS))
        classes = (max(p for p in breakpoints if size >= p[0])[1] for size, breakpoints in points)
        return Screen(classes=" ".join(classes))

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        yield VitalStrip(id="vitals")
        yield HealthLine(id="health")
        yield Static(TOO_SMALL, id="too-small")
        with VerticalScroll(id="body"):
            with PaneGrid(id="panes"):
                yield CacheGauge(id="cache")
                yield PrefillPane(id="prefill")
                yield PhaseBar(id="phases")
                yield TailsPane(id="tails")
                yield TrendsPane(id="trends")
                yield RooflinePane(id="roofline", own_height=True)
                yield RatiosPane(id="ratios")
                yield SpendPane(id="spend")
                yield LedgerTables(id="tables")
            yield FoldNotes(id="folds")
        yield Footer(id="keys", compact=True)

    def on_load(self) -> None:
        # Before the screen is composed: the first reads wait on their sources while the UI
        # is built. Their answers are handled once it is mounted.
        self._read_lane()
        self._read_ledger()

    def on_mount(self) -> None:
        self._home = self.screen
        resume_only_after_suspend()
        # Back from ctrl+z the terminal's screen is blank, and Textual repaints only what
        # changes: all of it, at once.
        self.app_resume_signal.subscribe(self, lambda _: self.refresh(layout=True))
        self._show()
        if self.fleet_poller is not None:
            folder = self.export_dir or receipts_folder(self.config.export_dir)
            health, wall = self.config.health, self.clocks.wall
            self._overview = FleetScreen(self.fleet_poller, self, health, folder, wall)
            self.install_screen(self._overview, "fleet")
            self.action_overview()
        if self._notice:
            self.notify(self._notice, severity="warning", timeout=20, markup=False)

    async def on_unmount(self) -> None:
        """Close every feed in the loop its clients were made in."""
        self.workers.cancel_all()
        await close_all(self.lane_feeds, self.ledger_poller.feed if self.ledger_poller else None)
        if self.fleet_poller is not None:
            await self.fleet_poller.feed.aclose()

    # --- state as the user sees it -----------------------------------------------------------

    @property
    def ledger_window(self) -> str:
        return self.config.ledger_window or self.window

    @property
    def lane_name(self) -> str:
        if not self.lane_feeds:
            return "no lane"
        return self.lane_feeds[self.lane_index].name

    def lane_ledger(self) -> LedgerSnapshot | None:
        """The ledger as the lane's panes show it: the lane's own models only (its config's
        `ledger_models`, else the `m` filter's model), or the whole ledger."""
        if not self.lane_feeds:
            return self.ledger_snapshot
        feed = self.lane_feeds[self.lane_index]
        named = {lane.name: lane.ledger_models for lane in self.config.lanes}
        models = lane_models(named.get(feed.name, ()), feed.model_filter)
        return for_lane(self.ledger_snapshot, models, self.config.prices)

    def status_view(self) -> StatusView:
        lane, ledger = self.lane_snapshot, self.ledger_snapshot
        sources = [source_status("lane", lane)] if self.lane_feeds else []
        sources += [source_status("ledger", ledger)] if self.ledger_poller else []
        read = [snapshot.totals for snapshot in (lane, ledger) if snapshot and snapshot.totals]
        return StatusView(
            lane=self.lane_name,
            index=self.lane_index + 1 if self.lane_feeds else 0,
            count=len(self.lane_feeds),
            window=self.window,
            ledger_window=self.ledger_window if self.ledger_poller else None,
            evaluated_at=read[0].end if read else None,
            replay_at=self.replay_at,
            sources=tuple(sources),
            paused=self.paused,
            model_filter=self.lane_feeds[self.lane_index].model_filter if self.lane_feeds else None,
            coverage=lane.totals.coverage_note if lane is not None and lane.totals else "",
        )

    def _show_status(self) -> None:
        if self._home is not None:
            self._home.query_one(StatusLine).show(self.status_view())

    def _show(self) -> None:
        """The status line and every pane, from the current snapshots. A pane whose view is
        unchanged is not redrawn."""
        lane, ledger = self.lane_snapshot, self.lane_ledger()
        has_lane, has_ledger = bool(self.lane_feeds), self.ledger_poller is not None
        home = self._home
        if home is None:
            return
        # NoMatches: a read that ends while the app quits finds its panes gone.
        feed = self.lane_feeds[self.lane_index] if has_lane else None
        has_profile = feed is not None and feed.hardware is not None and feed.model is not None
        with self.batch_update(), suppress(NoMatches):
            home.query_one(StatusLine).show(self.status_view())
            findings = check(lane, self.config.health) if lane is not None else None
            home.query_one(VitalStrip).show(lane, has_lane, findings or ())
            home.query_one(HealthLine).show(findings)
            home.query_one(CacheGauge).show(lane, ledger, has_ledger, has_lane)
            home.query_one(PrefillPane).show(lane, has_lane)
            home.query_one(PhaseBar).show(lane, has_lane)
            home.query_one(TailsPane).show(lane, has_lane)
            home.query_one(TrendsPane).show(lane, has_lane)
            home.query_one(RooflinePane).show(lane.roofline() if lane else None)
            home.query_one(RatiosPane).show(lane, ledger, has_ledger, has_lane)
            home.query_one(SpendPane).show(ledger, has_ledger)
            home.query_one(LedgerTables).show(ledger, has_ledger)
            # What has no source folds into one line saying how to add it.
            folds = {"-no-lane": not has_lane, "-no-ledger": not has_ledger}
            folds["-no-profile"] = has_lane and not has_profile
            for name, folded in folds.items():
                home.set_class(folded, name)
            notes = zip(folds.values(), (NO_LANE, NO_LEDGER, NO_PROFILE), strict=True)
            home.query_one(FoldNotes).show(tuple(note for folded, note in notes if folded))

    # --- polling ------------------------------------------------------------------------------

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
        epoch = self._ledger.restart()
        poller = self.ledger_poller
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

    def _arm(self, polling: _Polling, delay: float, read: Callable[[], None], fresh: bool) -> None:
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

    def on_ledger_read(self, message: LedgerRead) -> None:
        if message.epoch != self._ledger.epoch or self.ledger_poller is None:
            return
        snapshot = self.ledger_snapshot = message.snapshot
        self._ledger_seen[snapshot.window] = snapshot
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
        if self.paused:
            return
        if worker.group == "lane":
            self._lane.timer = self.set_timer(MAX_DELAY_S, self._read_lane)
        elif worker.group == "ledger":
            self._ledger.timer = self.set_timer(MAX_DELAY_S, self._read_ledger)

    # --- actions ------------------------------------------------------------------------------

    def select_lane(self, index: int) -> None:
        """Show lane `index` (0-based): its last figures for this window, then a fresh read."""
        if not 0 <= index < len(self.lane_feeds) or index == self.lane_index:
            return
        self.lane_index = index
        self.lane_snapshot = self._lane_seen.get((index, self.window))
        self._show()
        self._read_lane()

    def select_window(self, window: str) -> None:
        if window == self.window:
            return
        self.window = window
        self.lane_snapshot = self._lane_seen.get((self.lane_index, window))
        if self.config.ledger_window is None:
            self.ledger_snapshot = self._ledger_seen.get(window)
            self._read_ledger()
        self._show()
        self._read_lane()

    def action_lane(self, number: int) -> None:
        count = len(self.lane_feeds)
        if number > count:
            configured = f"{count} lane{'s' if count != 1 else ''}" if count else "no lanes"
            self.notify(f"no lane {number}: {configured} configured", severity="warning")
        self.select_lane(number - 1)

    def action_step_lane(self, step: int) -> None:
        if self.lane_feeds:
            self.select_lane((self.lane_index + step) % len(self.lane_feeds))

    @property
    def windows(self) -> tuple[str, ...]:
        return self.config.windows

    def action_step_window(self, step: int) -> None:
        windows = self.windows
        index = windows.index(self.window) if self.window in windows else 0
        self.select_window(windows[(index + step) % len(windows)])

    def action_refresh(self) -> None:
        if self.lane_pollers:  # a long window's reused totals are evaluated anew
            self.lane_pollers[self.lane_index].forget()
        self._read_lane()
        self._read_ledger()

    def action_pause(self) -> None:
        self.paused = not self.paused
        self._show_status()
        if self.paused:
            self._lane.disarm()  # a cycle out still shows its answer, and arms no next one
            self._ledger.disarm()
        else:
            self.action_refresh()

    def action_filter_model(self) -> None:
        if not self.lane_feeds or isinstance(self.screen, ModelFilterScreen):
            return
        feed = self.lane_feeds[self.lane_index]
        names = feed.model_names if isinstance(feed, ListsModels) else None
        self.push_screen(ModelFilterScreen(feed.model_filter, names), self.filter_model)

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
        self._show()
        self._read_lane()

    def action_next_theme(self) -> None:
        self.theme = next_theme(self.theme)
        self.notify(f"theme: {self.theme}", markup=False)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(rule_lines(self.config.health)))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The pane keys act on the panes' screen only, and the arrows move between panes
        only when no other widget (a list, a field) takes them."""
        if action in ("lane", "step_lane", "filter_model") and self.overview_open:
            return False  # the overview opens a lane itself (enter)
        if action not in ("focus_pane", "details", "ledger_tables"):
            return True
        if self.screen is not self._home:
            return False
        focused = self.focused
        return action != "focus_pane" or focused is None or isinstance(focused, PANE_FOCUS)

    def _detailed(self) -> list[Widget]:
        return [widget for widget in self.screen.focus_chain if isinstance(widget, DETAILED)]

    def action_focus_pane(self, step: int) -> None:
        panes, focused = self._detailed(), self.focused
        if panes:
            start = panes.index(focused) if focused in panes else (-1 if step > 0 else 0)
            panes[(start + step) % len(panes)].focus()

    def action_details(self) -> None:
        """The focused pane's figures (the vital strip's when no pane is focused)."""
        panes, focused = self._detailed(), self.focused
        pane = focused if focused in panes else panes[0] if panes else None
        if pane is None:
            return
        name = pane.border_title or ("Vital signs" if isinstance(pane, VitalStrip) else "pane")
        body = details_blocks(pane, self.lane_snapshot, self.ledger_snapshot)
        self.push_screen(DetailsScreen(f"{Content(name).plain}: details", body))

    def action_ledger_tables(self) -> None:
        self.push_screen(LedgerTablesScreen(self.ledger_snapshot, self.ledger_poller is not None))

    def action_export(self) -> None:
        lane, ledger = self.lane_snapshot, self.ledger_snapshot
        # A replay's receipt is named for the moment it shows, not the moment it was written.
        moment = self.replay_at if self.replay_at is not None else self.clocks.wall()
        folder = self.export_dir or receipts_folder(self.config.export_dir)
        target = folder / receipt_name(self.lane_name, self.window, moment)
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
        try:
            written = write_receipt(lane, ledger, self.config.prices, target)
        except OSError as error:
            reason = f"{target}: {error.strerror or error}"
            self.call_from_thread(
                self.notify, reason, title="export failed", severity="error", markup=False
            )
        else:
            self.call_from_thread(self.notify, str(written), title="receipt exported", markup=False)

    # --- the fleet's overview -----------------------------------------------------------------

    @property
    def overview_open(self) -> bool:
        """The overview is shown (or is about to be, at start): the lane is not polled then."""
        overview = self._overview
        return self.fleet_poller is not None and (overview is None or overview in self.screen_stack)

    def action_overview(self) -> None:
        """Back to the overview from the lane's panes; the fleet is read at once."""
        if self._overview is None or self._overview in self.screen_stack:
            return
        self.push_screen(self._overview)
        self._read_lane()

    def open_lane(self, name: str) -> None:
        """Lane `name`'s panes, from the overview: it alone is polled until escape."""
        names = [feed.name for feed in self.lane_feeds]
        if name not in names:
            return
        if self._overview is not None and self.screen is self._overview:
            self.pop_screen()
        self.lane_index = names.index(name)
        self.lane_snapshot = self._lane_seen.get((self.lane_index, self.window))
        self._show()
        self._read_lane()

    def fleet_shown(self) -> None:
        """The overview drew a fleet read (for the bench probe, as a lane's read does)."""
        self._probe_refresh()

    def add_lanes(self, names: Sequence[str]) -> None:
        """Lanes the fleet found that the cockpit has no feed for yet (discovered while it
        runs): each gets one, on the discovery's server, after the lanes already there."""
        discover, known = self.config.discover, {feed.name for feed in self.lane_feeds}
        found = [name for name in names if name not in known]
        if discover is None or not found:
            return
        lanes = tuple(lane_config(discover, name) for name in found)
        feeds = build_lane_feeds(replace(self.config, lanes=lanes))
        self.lane_feeds += tuple(feeds)
        self.lane_pollers += [
            LanePoller(feed, self.refresh_s, replay_at=self.replay_at, clocks=self.clocks)
            for feed in feeds
        ]

    # --- command palette ----------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        count = len(self.lane_feeds)
        for index, feed in enumerate(self.lane_feeds):
            show_lane = partial(self.select_lane, index)
            # The palette reads titles as markup: a lane's name is escaped to show as it is.
            yield SystemCommand(
                f"Lane: {escape(feed.name)}", f"Show lane {index + 1} of {count}", show_lane
            )
        for window in self.windows:
            show_window = partial(self.select_window, window)
            yield SystemCommand(f"Window: {window}", f"Figures over the last {window}", show_window)
        for name in THEME_NAMES:
            use_theme = partial(setattr, self, "theme", name)
            yield SystemCommand(f"Cockpit theme: {name}", "Switch to this theme", use_theme)
        yield SystemCommand("Export receipt", "Write the receipt as markdown", self.action_export)
        yield SystemCommand("Refresh now", "Read every source again", self.action_refresh)
        yield SystemCommand("Pause / resume", "Stop or restart polling", self.action_pause)


make_app = CockpitApp
"""The cockpit app, as the CLI and the tests build it."""

"""The Textual app: lane and window state, the keys, the layout, the command palette.

Its parts live beside it, each a base of the app: the panes drawn from the snapshots and the
keys among them (`app_panes`), the sources' polling (`app_polling`), the fleet's overview
(`app_fleet`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import Footer, Static

from cockpit.app.benchprobe import Probe
from cockpit.app.fleet import FleetOverview
from cockpit.app.panes import PANE_FOCUS
from cockpit.app.polling import LaneRead, LedgerRead, Polling
from cockpit.app.screens import HelpScreen, ModelFilterScreen
from cockpit.app.suspend import resume_only_after_suspend
from cockpit.config.schema import Config
from cockpit.core.health import rule_lines
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.runtime.fleet_poller import FleetFeed, FleetPoller
from cockpit.runtime.poller import Clocks, LaneFeed, LanePoller, LedgerFeed, LedgerPoller, close_all
from cockpit.runtime.receipts import receipt_name, receipts_folder, write_receipt
from cockpit.themes import (
    DEFAULT_THEME,
    STYLESHEET,
    THEME_NAMES,
    THEMES,
    ansi_color_setting,
    next_theme,
)
from cockpit.widgets import CacheGauge, PhaseBar, PrefillPane, RatiosPane, SpendPane, StatusLine
from cockpit.widgets.folds import FoldNotes
from cockpit.widgets.grid import PaneGrid
from cockpit.widgets.roofline import RooflinePane
from cockpit.widgets.tables import LedgerTables
from cockpit.widgets.tails import TailsPane
from cockpit.widgets.trends import TrendsPane
from cockpit.widgets.vitals import HealthLine, VitalStrip

MIN_WIDTH = 40
MIN_HEIGHT = 12
TOO_SMALL = f"terminal too small: needs {MIN_WIDTH}×{MIN_HEIGHT}"


@runtime_checkable
class ListsModels(Protocol):
    """A lane feed that can say which `model_name` values the lane has (for the `m` filter)."""

    async def model_names(self) -> Sequence[str]: ...


class CockpitApp(FleetOverview):
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
        lanes: Sequence[LaneFeed],
        ledger: LedgerFeed | None,
        *,
        replay_at: float | None = None,
        refresh_s: float | None = None,
        export_dir: Path | None = None,
        clocks: Clocks | None = None,
        notice: str = "",
        fleet: FleetFeed | None = None,
        lane: str | None = None,
    ) -> None:
        # NO_COLOR: drop colours altogether (Textual alone would draw in shades of grey).
        super().__init__(ansi_color=ansi_color_setting())
        self.config = config
        self.refresh_s = refresh_s or config.refresh_s
        self.replay_at = replay_at
        self.export_dir = export_dir
        self.clocks = clocks or Clocks()
        self.lane_feeds = tuple(lanes)
        self._notice = notice
        """Shown once, as a notification, when the cockpit starts."""
        self.lane_pollers = [
            LanePoller(feed, self.refresh_s, replay_at=replay_at, clocks=self.clocks)
            for feed in lanes
        ]
        self.ledger_poller = None
        if ledger is not None:
            prices = config.prices
            self.ledger_poller = LedgerPoller(
                ledger, self.refresh_s, prices=prices, replay_at=replay_at, clocks=self.clocks
            )
        self.window = config.window
        self._lane_seen = {}
        self._ledger_seen = {}
        self._lane = Polling()
        self._ledger = Polling()
        self._probe = Probe.from_env()
        self.fleet_poller = (
            FleetPoller(fleet, self.refresh_s, replay_at=replay_at, clocks=self.clocks)
            if fleet is not None
            else None
        )
        self.first_lane = lane
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
        self.open_on_overview()
        if self._notice:
            self.notify(self._notice, severity="warning", timeout=20, markup=False)

    async def on_unmount(self) -> None:
        """Close every feed in the loop its clients were made in."""
        self.workers.cancel_all()
        await close_all(self.lane_feeds, self.ledger_poller.feed if self.ledger_poller else None)
        if self.fleet_poller is not None:
            await self.fleet_poller.feed.aclose()

    # --- actions ------------------------------------------------------------------------------

    def select_lane(self, index: int) -> None:
        """Show lane `index` (0-based): its last figures for this window, then a fresh read."""
        if not 0 <= index < len(self.lane_feeds) or index == self.lane_index:
            return
        self.lane_index = index
        self._lane_changed()

    def select_window(self, window: str) -> None:
        if window == self.window:
            return
        self.window = window
        if self.config.ledger_window is None:
            self.ledger_snapshot = self._ledger_seen.get(window)
            self._read_ledger()
        self._lane_changed()

    def action_lane(self, number: int) -> None:
        count = len(self.lane_feeds)
        if number > count:
            configured = f"{count} lane{'s' if count != 1 else ''}" if count else "no lanes"
            self.notify(f"no lane {number}: {configured} configured", severity="warning")
        self.select_lane(number - 1)

    def action_step_lane(self, step: int) -> None:
        if self.lane_feeds:
            self.select_lane((self.lane_index + step) % len(self.lane_feeds))

    def action_step_window(self, step: int) -> None:
        windows = self.config.windows
        index = windows.index(self.window) if self.window in windows else 0
        self.select_window(windows[(index + step) % len(windows)])

    def action_refresh(self) -> None:
        if self.lane_pollers:  # a long window's reused totals are evaluated anew
            self.lane_pollers[self.lane_index].forget()
        self._read_lane()
        self._read_ledger()

    def action_pause(self) -> None:
        self.paused = not self.paused
        self._show()
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
        self._lane_changed()

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

    def action_export(self) -> None:
        lane, ledger = self.lane_snapshot, self.lane_ledger()
        # A replay's receipt is named for the moment it shows, not the moment it was written.
        moment = self.replay_at if self.replay_at is not None else self.clocks.wall()
        folder = self.export_dir or receipts_folder(self.config.export_dir)
        target = folder / receipt_name(self.lane_name, self.window, moment)
        description = f"export the receipt to {target}"
        export = self._export(lane, ledger, target)
        self.run_worker(export, group="export", description=description, exit_on_error=False)

    async def _export(
        self, lane: LaneSnapshot | None, ledger: LedgerSnapshot | None, target: Path
    ) -> None:
        prices = self.config.prices
        try:  # a slow disk must not hold the keys
            written = await asyncio.to_thread(write_receipt, lane, ledger, prices, target)
        except OSError as error:
            reason = f"{target}: {error.strerror or error}"
            self.notify(reason, title="export failed", severity="error", markup=False)
        else:
            self.notify(str(written), title="receipt exported", markup=False)

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
        for window in self.config.windows:
            show_window = partial(self.select_window, window)
            yield SystemCommand(f"Window: {window}", f"Figures over the last {window}", show_window)
        for name in THEME_NAMES:
            use_theme = partial(setattr, self, "theme", name)
            yield SystemCommand(f"Cockpit theme: {name}", "Switch to this theme", use_theme)
        yield SystemCommand("Export receipt", "Write the receipt as markdown", self.action_export)
        yield SystemCommand("Refresh now", "Read every source again", self.action_refresh)
        yield SystemCommand("Pause / resume", "Stop or restart polling", self.action_pause)


__all__ = ["MIN_HEIGHT", "MIN_WIDTH", "CockpitApp", "LaneRead", "LedgerRead", "make_app"]

make_app = CockpitApp
"""The cockpit app, as the CLI and the tests build it."""

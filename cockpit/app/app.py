"""The Textual app: which lane, window and screen are shown, the keys, the sources' polling.

Three refresh loops (`refresh.RefreshLoop`: the lane, the ledger, the fleet) hand each snapshot to
the screen that shows it: the lane's panes (`lane.LaneScreen`) or the fleet's overview
(`overview.FleetScreen`, opened first when there is a fleet, and read instead of the lane while
open; `enter` opens a lane's panes, that lane alone polled until `escape`). The overview, the
pop-up screens, the cards and the receipts are imported when first used.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.content import Content
from textual.markup import escape
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.worker import Worker, WorkerError, WorkerState

from cockpit.app.lane import MIN_HEIGHT, MIN_WIDTH, LaneScreen, LaneView, lane_widgets
from cockpit.app.refresh import Cycle, FleetRead, LaneRead, LedgerRead, RefreshLoop, SnapshotT
from cockpit.app.suspend import resume_only_after_suspend
from cockpit.config.schema import Config, LaneConfig
from cockpit.core.health import rule_lines
from cockpit.core.ledger_figures import lane_models
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot, for_lane
from cockpit.core.text import visible
from cockpit.core.timeutil import promql_duration
from cockpit.runtime.cards import Card, CardError, CardStore
from cockpit.runtime.poller import (
    Clocks,
    FleetFeed,
    FleetPoller,
    FleetSnapshot,
    LaneFeed,
    LanePoller,
    LedgerFeed,
    LedgerPoller,
    ListsModels,
    Poller,
    close_all,
)
from cockpit.themes import (
    DEFAULT_THEME,
    STYLESHEET,
    THEME_NAMES,
    THEMES,
    ansi_color_setting,
    next_theme,
)
from cockpit.widgets import StatusView
from cockpit.widgets.pane import Pane
from cockpit.widgets.status import source_status
from cockpit.widgets.vitals import VitalStrip

if TYPE_CHECKING:
    from cockpit.app.overview import FleetScreen
    from cockpit.widgets.fleet_table import RowTable

DETAILED = (VitalStrip, Pane)
"""What the arrows focus, in turn, and enter or i opens the figures of."""
PANE_FOCUS = (*DETAILED, ScrollableContainer)
"""Where the arrows move between panes: a pane, or the scrolling body around them."""
PANE_ACTIONS = ("focus_pane", "details", "ledger_tables", "models", "card", "cards")
CARD_WINDOW = "card"
"""The window since the start of the card running on the lane."""
SETTLE_S = 0.5
"""From the first read shown to the collector settled (`collector_settled`)."""
FIRST_READ_WAIT_S = 0.5
"""How long the command's first frame waits for the first read (`_await_first_read`)."""
YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation (Python's default: 700)."""


async def _finished(worker: Worker[None]) -> None:
    """Once `worker` has ended, however it ended."""
    with contextlib.suppress(WorkerError):
        await worker.wait()


def collector_settled() -> None:
    """Once the first read is drawn: start-up's garbage collected, what it built (modules, the
    screen, its widgets and styles) frozen, the collector on again, its youngest generation
    collected less often.

    Unfrozen, every full collection scanned the screen's objects again, and the youngest
    generation's collections re-scanned a refresh's live objects: ~1.1 ms a refresh at a 1 s
    refresh (`bench refresh_cpu`), ~0.2 ms after. Cycles are still collected, in batches.
    What the console script froze (`cli.script`) is collected too: its import's cycles."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    gc.enable()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)


class CockpitApp(App[None]):
    """The cockpit: status line, the panes (prefill first), the keys."""

    CSS_PATH = str(STYLESHEET)
    TITLE = "lane-cockpit"
    AUTO_FOCUS = "#body"
    """Not the vital strip above it: the arrows go there and to the panes."""
    settles_collector = False
    """Turn the garbage collector on again once the first read is drawn (`collector_settled`):
    the command's app, built with it off, does (`build_app`); an app a test builds leaves it."""
    first_read_wait_s = 0.0
    """How long the first frame may wait for the first read (`_await_first_read`): the
    command's app waits `FIRST_READ_WAIT_S` (`build_app`); an app a test builds starts at once."""

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
        Binding("M", "models", "models", show=False),
        Binding("b", "card", "card", show=False),
        Binding("B", "cards", "cards", show=False),
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
        cards: CardStore | None = None,
    ) -> None:
        # NO_COLOR: drop colours altogether (Textual alone would draw in shades of grey).
        super().__init__(ansi_color=ansi_color_setting())
        self.config, self.replay_at, self.export_dir = config, replay_at, export_dir
        self.refresh_s = refresh_s or config.refresh_s
        self.clocks = clocks or Clocks()
        self._notice = notice
        """Shown once, as a notification, when the cockpit starts."""
        self.lane_feeds: tuple[LaneFeed, ...] = ()
        self.lane_pollers: list[LanePoller] = []
        self._add_feeds(lanes)
        self.ledger_poller = None
        if ledger is not None:
            prices = config.prices
            self.ledger_poller = LedgerPoller(
                ledger, self.refresh_s, prices=prices, replay_at=replay_at, clocks=self.clocks
            )
        self.fleet_poller = None
        if fleet is not None:
            self.fleet_poller = FleetPoller(
                fleet, self.refresh_s, replay_at=replay_at, clocks=self.clocks
            )
        self.window = config.window
        self.paused = False
        names: list[str | None] = [feed.name for feed in lanes]
        self.lane_index = names.index(lane) if lane in names else 0
        self.on_overview = fleet is not None and lane not in names
        """The overview is shown (under the help, say): the fleet is polled, not the lane."""
        self.lane_snapshot: LaneSnapshot | None = None
        self.ledger_snapshot: LedgerSnapshot | None = None
        self._lane_seen: dict[tuple[int, str], LaneSnapshot] = {}
        self._ledger_seen: dict[str, LedgerSnapshot] = {}
        self.overview: FleetScreen | None = None
        self.lanes_screen: LaneScreen | None = None
        self.card_store = cards or CardStore()
        self.running_cards: dict[str, Card] = {}
        """The card running on each lane that has one, as last read from the card store."""
        self.kept_cards: tuple[Card, ...] = ()
        """The stopped cards, as last read from the card store."""
        self._first_read_due = False
        """The first read answered before the screen was composed: its message, not a
        placeholder, is the first thing shown (`_await_first_read`)."""
        self.narrowed_ledger: (
            tuple[LedgerSnapshot | None, tuple[str, ...], LedgerSnapshot | None] | None
        ) = None
        """The last ledger snapshot `lane_ledger` narrowed, to which models, and what it made:
        each lane refresh shows the ledger the last ledger read left, narrowed once."""
        self.card_clock: Timer | None = None
        """The status line's once-a-second tick, running only while a card does."""
        paused = lambda: self.paused  # noqa: E731
        self.lane_loop = RefreshLoop(self, "lane", LaneRead, self._lane_cycle, paused)
        self.ledger_loop = RefreshLoop(self, "ledger", LedgerRead, self._ledger_cycle, paused)
        self.fleet_loop = RefreshLoop(self, "fleet", FleetRead, self._fleet_cycle, paused)
        self.loops = (self.lane_loop, self.ledger_loop, self.fleet_loop)
        # Before the stylesheet is first parsed: a theme set once running re-parses all CSS.
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = config.theme if config.theme in THEME_NAMES else DEFAULT_THEME

    @property
    def ledger_window(self) -> str:
        return self.config.ledger_window or self.window

    @property
    def lane_feed(self) -> LaneFeed | None:
        return self.lane_feeds[self.lane_index] if self.lane_feeds else None

    @property
    def lane_name(self) -> str:
        return self.lane_feed.name if self.lane_feed else "no lane"

    @property
    def running_card(self) -> Card | None:
        """The card running on the current lane."""
        return self.running_cards.get(self.lane_name) if self.lane_feeds else None

    # --- layout -------------------------------------------------------------------------------

    def get_default_screen(self) -> Screen[object]:
        """The panes' screen, with the breakpoint classes for the terminal's size from the start:
        set by its first Resize only, a layout of unmounted panes before it kept its columns."""
        width, height = self.size
        points = ((width, self.HORIZONTAL_BREAKPOINTS), (height, self.VERTICAL_BREAKPOINTS))
        classes = (max(p for p in breakpoints if size >= p[0])[1] for size, breakpoints in points)
        self.lanes_screen = LaneScreen(classes=" ".join(classes))
        return self.lanes_screen

    def compose(self) -> ComposeResult:
        yield from lane_widgets()

    async def on_load(self) -> None:
        # Before the screen is composed: the first reads wait on their sources while the UI
        # is built (the command's app waits a moment for the shown one's, `_await_first_read`).
        # Their answers are handled once it is mounted.
        if self.fleet_poller is not None:
            from cockpit.app.overview import FleetScreen

            self.overview = FleetScreen(self.config.health)
        self._read_view()
        self.ledger_loop.read_now()
        self._read_cards()
        await self._await_first_read()

    async def _await_first_read(self) -> None:
        """Wait up to `first_read_wait_s` for the shown source's first read, before the screen
        is composed: its first frame then has figures, not placeholders painted over again a
        moment later (a read that takes longer is shown when it comes, as before)."""
        worker = (self.fleet_loop if self.on_overview else self.lane_loop).worker
        if self.first_read_wait_s <= 0 or worker is None:
            return
        await asyncio.wait(
            [asyncio.ensure_future(_finished(worker))], timeout=self.first_read_wait_s
        )
        self._first_read_due = worker.state == WorkerState.SUCCESS

    def on_mount(self) -> None:
        resume_only_after_suspend()
        # Back from ctrl+z the terminal's screen is blank, and Textual repaints only what
        # changes: all of it, at once.
        self.app_resume_signal.subscribe(self, lambda _: self.refresh(layout=True))
        if self.overview is not None:
            self.install_screen(self.overview, "fleet")
            if self.on_overview:
                self.push_screen(self.overview)
        if not self._first_read_due:  # else shown with the read, already answered
            self._show()
        if self._notice:
            self.notify(self._notice, severity="warning", timeout=20, markup=False)

    def settle_collector(self) -> None:
        if self.settles_collector:
            self.settles_collector = False
            collector_settled()

    async def on_unmount(self) -> None:
        """Close every feed in the loop its clients were made in."""
        self.settle_collector()  # ended before its first read
        self.workers.cancel_all()
        await close_all(self.lane_feeds, self.ledger_poller.feed if self.ledger_poller else None)
        if self.fleet_poller is not None:
            await self.fleet_poller.feed.aclose()

    # --- what is shown --------------------------------------------------------------------------

    def lane_ledger(self) -> LedgerSnapshot | None:
        """The ledger as the lane's panes show it: the lane's own models only (its config's
        `ledger_models`, else the `m` filter's model), or the whole ledger."""
        if (feed := self.lane_feed) is None:
            return self.ledger_snapshot
        named = {lane.name: lane.ledger_models for lane in self.config.lanes}
        models = lane_models(named.get(feed.name, ()), feed.model_filter)
        snapshot, last = self.ledger_snapshot, self.narrowed_ledger
        if last is None or last[0] is not snapshot or last[1] != models:
            narrowed = for_lane(snapshot, models, self.config.prices)
            last = self.narrowed_ledger = (snapshot, models, narrowed)
        return last[2]

    def status_view(self) -> StatusView:
        lane, ledger = self.lane_snapshot, self.ledger_snapshot
        feed, card = self.lane_feed, self.running_card
        sources = [source_status("lane", lane)] if feed else []
        sources += [source_status("ledger", ledger)] if self.ledger_poller else []
        read = [snapshot.totals for snapshot in (lane, ledger) if snapshot and snapshot.totals]
        return StatusView(
            lane=self.lane_name,
            index=self.lane_index + 1 if feed else 0,
            count=len(self.lane_feeds),
            window=self.window,
            ledger_window=self.ledger_window if self.ledger_poller else None,
            evaluated_at=read[0].end if read else None,
            replay_at=self.replay_at,
            sources=tuple(sources),
            paused=self.paused,
            model_filter=feed.model_filter if feed else None,
            coverage=lane.totals.coverage_note if lane is not None and lane.totals else "",
            card=card.name if card is not None else None,
            card_s=self.clocks.wall() - card.start if card is not None else 0.0,
            cards_in_window=self.cards_in_window(),
        )

    def _show(self) -> None:
        """The screen the cockpit shows (the overview or the lane's panes), from the current
        snapshots; the other one is drawn when it is shown again."""
        self._first_read_due = False
        if self.on_overview and self.overview is not None:
            self.overview.show(self.window, self.paused)
        if self.on_overview or self.lanes_screen is None:
            return
        feed = self.lane_feed
        view = LaneView(
            lane=self.lane_snapshot,
            ledger=self.lane_ledger(),
            status=self.status_view(),
            thresholds=self.config.health,
            has_lane=feed is not None,
            has_ledger=self.ledger_poller is not None,
            has_profile=feed is not None and feed.hardware is not None and feed.model is not None,
        )
        self.lanes_screen.show(view)

    # --- polling --------------------------------------------------------------------------------

    def _lane_cycle(self) -> Cycle[LaneSnapshot] | None:
        poller = self.lane_pollers[self.lane_index] if self.lane_pollers else None
        return self._cycle(poller, self.window, f"lane {poller.feed.name}") if poller else None

    def _ledger_cycle(self) -> Cycle[LedgerSnapshot] | None:
        poller = self.ledger_poller
        return self._cycle(poller, self.ledger_window, "the agent ledger") if poller else None

    def _fleet_cycle(self) -> Cycle[FleetSnapshot] | None:
        poller = self.fleet_poller
        return self._cycle(poller, self.window, "the fleet") if poller else None

    def _cycle(
        self, poller: Poller[Any, Any, SnapshotT], window: str, what: str
    ) -> Cycle[SnapshotT]:
        """A read of `window`: the `card` window as the seconds since the card's start, under
        its own name."""
        card = self.running_card
        if window != CARD_WINDOW or card is None:
            return Cycle(poller, window, f"read {what} over {window}")
        duration = promql_duration(max(1.0, self.clocks.wall() - card.start))
        return Cycle(poller, duration, f"read {what} over {duration}", window)

    def _read_view(self) -> None:
        """Read what is shown now: the fleet on the overview, else the lane."""
        (self.fleet_loop if self.on_overview else self.lane_loop).read_now()

    def _lane_changed(self) -> None:
        """The lane, window or model filter changed: their last figures at once, then a read."""
        if self.window == CARD_WINDOW and self.running_card is None:
            self.select_window(self.config.window)
            return
        self.lane_snapshot = self._lane_seen.get((self.lane_index, self.window))
        self._show()
        self._read_view()

    def on_lane_read(self, message: LaneRead) -> None:
        if (snapshot := self.lane_loop.receive(message)) is None:
            return
        self.lane_snapshot = snapshot
        self._lane_seen[(self.lane_index, snapshot.window)] = snapshot
        self._show_read()
        self.ledger_loop.align(self.lane_loop)
        self._read_cards()

    def on_ledger_read(self, message: LedgerRead) -> None:
        if (snapshot := self.ledger_loop.receive(message)) is None:
            return
        self.ledger_snapshot = snapshot
        self._ledger_seen[snapshot.window] = snapshot
        if not (self.lane_loop.reading or self._first_read_due):  # else shown with the lane's
            self._show_read()

    def on_fleet_read(self, message: FleetRead) -> None:
        snapshot = self.fleet_loop.receive(message)
        if snapshot is None or self.overview is None:
            return
        if snapshot.view is not None:
            self.add_lanes([row.lane for row in snapshot.view.rows])
        self.overview.snapshot = snapshot
        self._show_read()

    def _show_read(self) -> None:
        self._show()
        if self.settles_collector:  # a collection holds the thread that writes the frame out
            self.set_timer(SETTLE_S, self.settle_collector)

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """A cycle that raised (a bug, not a source failure): say so and keep polling."""
        if event.state != WorkerState.ERROR:
            return
        worker = event.worker
        message = f"{worker.description}: {worker.error}"
        self.notify(message, title="refresh failed", severity="error", markup=False)
        self._show()  # a ledger answer held for this lane cycle's
        for loop in self.loops:
            loop.failed(worker)

    # --- the overview -------------------------------------------------------------------------

    def action_overview(self) -> None:
        """Back to the overview from the lane's panes; the fleet is read at once."""
        if self.overview is None or self.on_overview:
            return
        self.on_overview = True
        self.lane_loop.stop()
        self.push_screen(self.overview)
        self._show()
        self.fleet_loop.read_now()

    def on_row_table_selected(self, event: RowTable.Selected) -> None:
        self.open_lane(event.key)

    def open_lane(self, name: str) -> None:
        """Lane `name`'s panes, from the overview: it alone is polled until escape."""
        names = [feed.name for feed in self.lane_feeds]
        if name not in names:
            return
        if self.on_overview:
            self.on_overview = False
            self.fleet_loop.stop()
            if self.screen is self.overview:
                self.pop_screen()
        self.lane_index = names.index(name)
        self._lane_changed()

    def add_lanes(self, names: Sequence[str]) -> None:
        """A feed, on the discovery's server, for each lane found that has none yet."""
        discover, known = self.config.discover, {feed.name for feed in self.lane_feeds}
        found = [name for name in names if name not in known]
        if discover is None or not found:
            return
        from cockpit.core.fleet import lane_config
        from cockpit.runtime.feeds import build_lane_feeds

        lanes = tuple(lane_config(discover, name) for name in found)
        self._add_feeds(build_lane_feeds(replace(self.config, lanes=lanes)))

    def _add_feeds(self, feeds: Sequence[LaneFeed]) -> None:
        self.lane_feeds += tuple(feeds)
        self.lane_pollers += [
            LanePoller(feed, self.refresh_s, replay_at=self.replay_at, clocks=self.clocks)
            for feed in feeds
        ]

    # --- actions ------------------------------------------------------------------------------

    def select_lane(self, index: int) -> None:
        """Show lane `index` (0-based): its last figures for this window, then a fresh read."""
        if 0 <= index < len(self.lane_feeds) and index != self.lane_index:
            self.lane_index = index
            self._lane_changed()

    def select_window(self, window: str) -> None:
        if window == self.window:
            return
        self.window = window
        if self.config.ledger_window is None:
            self.ledger_snapshot = self._ledger_seen.get(window)
            self.ledger_loop.read_now()
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
        windows = (*self.config.windows, *([CARD_WINDOW] if self.running_card else []))
        index = windows.index(self.window) if self.window in windows else 0
        self.select_window(windows[(index + step) % len(windows)])

    def action_refresh(self) -> None:
        if self.lane_pollers:  # a long window's reused totals are evaluated anew
            self.lane_pollers[self.lane_index].forget()
        self._read_view()
        self.ledger_loop.read_now()

    def action_pause(self) -> None:
        self.paused = not self.paused
        self._show()
        if self.paused:  # a cycle out still shows its answer, and arms no next one
            for loop in self.loops:
                loop.disarm()
        else:
            self.action_refresh()

    def action_filter_model(self) -> None:
        from cockpit.app.screens import ModelFilterScreen

        feed = self.lane_feed
        if feed is None or isinstance(self.screen, ModelFilterScreen):
            return
        names = feed.model_names if isinstance(feed, ListsModels) else None
        self.push_screen(ModelFilterScreen(feed.model_filter, names), self.filter_model)

    def filter_model(self, model: str | None) -> None:
        """Read the current lane for `model` only (None: unchanged, empty: the whole lane)."""
        feed = self.lane_feed
        if model is None or feed is None or (model or None) == feed.model_filter:
            return
        feed.filter_model(model)
        self._lane_seen = {k: v for k, v in self._lane_seen.items() if k[0] != self.lane_index}
        self._lane_changed()

    def action_next_theme(self) -> None:
        self.theme = next_theme(self.theme)
        self.notify(f"theme: {self.theme}", markup=False)

    def action_help(self) -> None:
        from cockpit.app.screens import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            targets = any(lane.slo.ttft_s is not None for lane in self.config.lanes)
            self.push_screen(HelpScreen(rule_lines(self.config.health, targets)))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The pane keys act on the panes' screen only, and the arrows move between panes
        only when no other widget (a list, a field) takes them."""
        if action in ("lane", "step_lane", "filter_model") and self.on_overview:
            return False  # the overview opens a lane itself (enter)
        if action not in PANE_ACTIONS:
            return True
        if self.screen is not self.lanes_screen:
            return action == "details" and self._overlay_pane() is not None
        focused = self.focused
        return action != "focus_pane" or focused is None or isinstance(focused, PANE_FOCUS)

    # --- moving between panes ----------------------------------------------------------------

    def _detailed(self) -> list[Widget]:
        return [widget for widget in self.screen.focus_chain if isinstance(widget, DETAILED)]

    def action_focus_pane(self, step: int) -> None:
        panes, focused = self._detailed(), self.focused
        if panes:
            start = panes.index(focused) if focused in panes else (-1 if step > 0 else 0)
            panes[(start + step) % len(panes)].focus()

    def _overlay_pane(self) -> Widget | None:
        """The pane a pop-up shows whole that has details (the models' at any size)."""
        from cockpit.app.screens import ModelsScreen

        return self.screen.pane if isinstance(self.screen, ModelsScreen) else None

    def action_details(self) -> None:
        """The focused pane's figures (the vital strip's when no pane is focused), or those of
        the pane a pop-up shows."""
        panes, focused = self._detailed(), self.focused
        pane = self._overlay_pane() or (
            focused if focused in panes else panes[0] if panes else None
        )
        if pane is None:
            return
        from cockpit.app.screens import DetailsScreen, details_blocks

        name = pane.border_title or ("Vital signs" if isinstance(pane, VitalStrip) else "pane")
        body = details_blocks(pane, self.lane_snapshot, self.lane_ledger())
        # border_title reads back as markup: a `[` in a model's name comes back escaped.
        self.push_screen(DetailsScreen(f"{Content.from_markup(name).plain}: details", body))

    def action_ledger_tables(self) -> None:
        from cockpit.app.screens import LedgerTablesScreen

        self.push_screen(LedgerTablesScreen(self.lane_ledger(), self.ledger_poller is not None))

    def action_models(self) -> None:
        from cockpit.app.screens import ModelsScreen

        self.push_screen(ModelsScreen(self.lane_snapshot, bool(self.lane_feeds)))

    # --- benchmark cards --------------------------------------------------------------------

    def _work(self, work: Awaitable[None], group: str, description: str = "") -> None:
        """`work` in a worker of `group`: an error in it is notified, not the app's end."""
        self.run_worker(work, group=group, description=description, exit_on_error=False)

    def _lane_config(self) -> LaneConfig | None:
        """The current lane's configuration (a discovered lane's from its server's)."""
        if not self.lane_feeds:
            return None
        named = {lane.name: lane for lane in self.config.lanes}
        if self.lane_name in named or self.config.discover is None:
            return named.get(self.lane_name)
        from cockpit.core.fleet import lane_config

        return lane_config(self.config.discover, self.lane_name)

    def _read_cards(self) -> None:
        if self.running_cards or self.kept_cards or self.card_store.path.exists():
            cards = self._running_cards()  # no store and no card known: nothing new to find
            self.run_worker(cards, group="cards", exclusive=True, exit_on_error=False)

    async def _running_cards(self) -> None:
        """The running cards, read again: another cockpit, or the command, may have marked."""
        try:
            cards = await asyncio.to_thread(self.card_store.cards)
        except CardError as error:
            self.notify(visible(str(error)), title="cards", severity="warning", markup=False)
            return
        found = {card.lane: card for card in cards if card.running}
        kept = tuple(card for card in cards if not card.running)
        if found != self.running_cards or kept != self.kept_cards:
            self.running_cards, self.kept_cards = found, kept
            if self.window == CARD_WINDOW and self.running_card is None:
                self.select_window(self.config.window)
            self._set_card_clock()
            self._show()

    def cards_in_window(self) -> tuple[int, float | None, float | None]:
        """The lane's stopped cards lying wholly in the window read: how many, their requests
        (each card's exact count, as kept), and the window's."""
        lane = self.lane_snapshot
        if lane is None or lane.totals is None or lane.figures is None:
            return 0, None, None
        start, end = lane.totals.end - lane.totals.window_s, lane.totals.end
        inside = [c for c in self.kept_cards if c.lane == self.lane_name and c.within(start, end)]
        if not inside:
            return 0, 0.0, lane.figures.value("requests")
        from cockpit.runtime.card_receipts import figures_of

        counts = [figures_of(card.receipt).get("requests", {}).get("value") for card in inside]
        known = None if None in counts else float(sum(counts))
        return len(inside), known, lane.figures.value("requests")

    def _set_card_clock(self) -> None:
        """The card clock ticking while a card runs, and stopped when none does: an idle
        cockpit has no wake-up of its own between refreshes."""
        if self.running_cards and self.card_clock is None:
            self.card_clock = self.set_interval(1.0, self._tick_card)
        elif not self.running_cards and self.card_clock is not None:
            self.card_clock.stop()
            self.card_clock = None

    def _tick_card(self) -> None:
        """A running card's time on the status line, once a second."""
        if self.running_card is not None and not self.on_overview and self.lanes_screen:
            self._show()

    def action_card(self) -> None:
        """Start a card on the lane (its name asked), or stop the one running there."""
        lane = self._lane_config()
        if lane is None:
            self.notify("no lane to mark a card on", title="card", severity="warning")
        elif (running := self.running_cards.get(lane.name)) is not None:
            self._work(self._stop_card(lane, running), "card", "stop the card")
        else:
            from cockpit.app.screens import CardNameScreen

            moment = datetime.fromtimestamp(self.clocks.wall(), UTC).strftime("%H%M%S")
            screen = CardNameScreen(lane.name, f"{lane.name}-{moment}")
            self.push_screen(screen, partial(self._start_card, lane))

    def _start_card(self, lane: LaneConfig, name: str | None) -> None:
        if name:
            self._work(self._mark_start(lane, name), "card", "start a card")

    async def _mark_start(self, lane: LaneConfig, name: str) -> None:
        from cockpit.runtime.card_marks import start_card

        try:
            card = await start_card(self.card_store, lane, name, now=self.clocks.wall)
        except CardError as error:
            self._card_failed("card not started", error)
            return
        self.running_cards[lane.name] = card
        self.notify(visible(f"card {card.name} started on lane {lane.name}"), markup=False)
        self._set_card_clock()
        self._show()

    async def _stop_card(self, lane: LaneConfig, card: Card) -> None:
        from cockpit.runtime.card_marks import card_length, card_requests, stop_card

        try:
            kept = await stop_card(self.config, self.card_store, lane, card, now=self.clocks.wall)
        except CardError as error:
            self._card_failed(f"card {card.name} not kept", error)
        else:
            counted = f"{card_requests(kept)} requests in {card_length(kept)}"
            self.notify(visible(f"card {kept.name} kept: {counted}"), markup=False)
        await self._running_cards()

    def _card_failed(self, title: str, error: CardError) -> None:
        self.notify(visible(str(error)), title=visible(title), severity="error", markup=False)

    def action_cards(self) -> None:
        if self.lane_feeds:
            self._work(self._open_cards(self.lane_name), "cards-screen")

    async def _open_cards(self, lane: str) -> None:
        from cockpit.app.screens import CardsScreen

        try:
            cards = await asyncio.to_thread(self.card_store.cards, lane)
        except CardError as error:
            self._card_failed("cards", error)
            return
        if not isinstance(self.screen, CardsScreen):
            self.push_screen(CardsScreen(lane, cards))

    # --- the receipt ----------------------------------------------------------------------------

    def action_export(self) -> None:
        """The receipt of what is shown (the overview's or the lane's), written to a new file."""
        from cockpit.runtime import receipts

        folder = self.export_dir or receipts.receipts_folder(self.config.export_dir)
        # A replay's receipt is named for the moment it shows, not the moment it was written.
        moment = self.replay_at if self.replay_at is not None else self.clocks.wall()
        write: Callable[[Path], Path]
        if self.on_overview and self.overview is not None:
            snapshot = self.overview.snapshot
            if snapshot is None or snapshot.view is None:
                self.notify("the fleet has not been read yet", title="export", severity="warning")
                return
            target = folder / receipts.receipt_name("fleet", snapshot.window, moment)
            write = partial(receipts.write_fleet_receipt, snapshot, self.overview.rows())
            what = "the fleet receipt"
        else:
            target = folder / receipts.receipt_name(self.lane_name, self.window, moment)
            ledger, prices = self.lane_ledger(), self.config.prices
            write = partial(receipts.write_receipt, self.lane_snapshot, ledger, prices)
            what = "the receipt"
        self._work(self._export(write, target), "export", f"export {what} to {target}")

    async def _export(self, write: Callable[[Path], Path], target: Path) -> None:
        try:  # a slow disk must not hold the keys
            written = await asyncio.to_thread(write, target)
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

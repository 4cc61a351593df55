"""The overview: the cockpit opens on it with a fleet, sorts, filters, opens a lane and comes
back, and shows lanes that appear and vanish. A scripted fleet feed returns fixed views."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widgets import Static

from cockpit.app.app import CockpitApp, make_app
from cockpit.app.lifecycle import Setup, build_app
from cockpit.app.overview import FleetScreen
from cockpit.cli.fleet import fleet_feed
from cockpit.cli.main import effective_config, main, parse_args
from cockpit.core.figures import lane_figures
from cockpit.core.fleet import (
    AGE,
    FIGURE_COLUMNS,
    GPU_COLUMNS,
    NO_GPU_SOURCE,
    FleetView,
    shown_columns,
)
from cockpit.core.model import LaneTotals
from cockpit.core.slo import Slo
from cockpit.runtime.feeds import PrometheusLaneFeed, build_feeds
from cockpit.runtime.fleet_report import fleet_markdown
from cockpit.runtime.listed_fleet import ListedFleet
from cockpit.sources.prometheus import PrometheusSource
from cockpit.widgets.fleet_table import RowTable
from tests.support import fleet as live
from tests.support.feeds import (
    EVAL_AT,
    ScriptedLaneFeed,
    SourceDown,
    config,
    fixed_clocks,
    gpu_totals,
)
from tests.support.fleet import DISCOVER, FLEET, ScriptedFleetFeed, fleet_row, fleet_view, gone_row
from tests.support.pilot import on_screen, settle
from tests.support.promharness import PromServer

pytestmark = pytest.mark.usefixtures("utc")

SnapCompare = Callable[..., bool]


def cockpit(
    fleet: ScriptedFleetFeed | None = None, lanes: Sequence[str] = ("lane-a", "lane-b")
) -> tuple[CockpitApp, list[ScriptedLaneFeed], ScriptedFleetFeed]:
    feeds = [ScriptedLaneFeed(name) for name in lanes]
    fleet = fleet or ScriptedFleetFeed()
    app = make_app(
        config(*lanes, discover=DISCOVER),
        feeds,
        None,
        clocks=fixed_clocks(),
        fleet=fleet,
        export_dir=Path("/nonexistent"),
    )
    return app, feeds, fleet


def row_order(screen: str, names: Sequence[str]) -> list[str]:
    """The lanes in the order the screen lists them (top to bottom)."""
    lines = screen.split("\n")
    found = [(i, name) for i, line in enumerate(lines) for name in names if f" {name} " in line]
    return [name for _, name in sorted(found)]


LANES = ("lane-a", "lane-b", "lane-c", "lane-d", "lane-e")


# --- snapshots ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_overview(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    assert snap_compare(cockpit()[0], terminal_size=size, run_before=settle)


# --- keys -----------------------------------------------------------------------------------


async def test_the_cockpit_opens_on_the_overview_and_reads_only_the_fleet() -> None:
    app, lanes, fleet = cockpit()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, FleetScreen)
        screen = await on_screen(pilot, "lane-e", "5 lanes by job", "1 down", "1 gone")
        assert len(fleet.reads) == 1 and all(lane.reads == [] for lane in lanes)
        assert "DOWN" in screen and "gone" in screen
    assert fleet.closed


async def test_s_cycles_the_sort_column_and_S_reverses_it() -> None:
    app, _, _ = cockpit()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = await on_screen(pilot, "lane-e")
        assert row_order(screen, LANES) == list(LANES)  # by name
        await pilot.press("S")
        screen = await on_screen(pilot, "Lane ▼")
        assert row_order(screen, LANES) == list(reversed(LANES))
        await pilot.press("S", "s")  # ascending, by the engine: gone, down, then up
        screen = await on_screen(pilot, "Engine ▲")
        assert row_order(screen, LANES) == ["lane-e", "lane-d", "lane-a", "lane-b", "lane-c"]
        await pilot.press("s", "s")  # running now; the gone lane has none: last
        screen = await on_screen(pilot, "Waiting ▲")
        assert row_order(screen, LANES) == ["lane-a", "lane-c", "lane-d", "lane-b", "lane-e"]
        await pilot.press("S")
        screen = await on_screen(pilot, "Waiting ▼")
        assert row_order(screen, LANES)[0] == "lane-b"
        assert row_order(screen, LANES)[-1] == "lane-e"


async def test_c_picks_the_column_the_trend_follows_and_the_arrows_the_columns_shown() -> None:
    app, _, _ = cockpit()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await on_screen(pilot, "Hit rate →")
        assert "Decode" not in screen
        await pilot.press("c")
        await pilot.press(*["right"] * 12)  # the last columns, the lane's kept at the left
        screen = await on_screen(pilot, "Decode", "Trend Hit rate ←")
        assert all(lane in screen for lane in LANES) and "Running" not in screen


async def test_a_fleet_that_fails_after_a_read_keeps_its_rows_dimmed_and_says_so() -> None:
    fleet = ScriptedFleetFeed([FLEET, SourceDown("connection refused (127.0.0.1:9090)")])
    app, _, _ = cockpit(fleet)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        screen = await on_screen(pilot, "fleet stale since", "connection refused")
        assert all(lane in screen for lane in LANES)


async def test_a_fleet_cycle_that_raises_is_said_and_the_overview_keeps_going() -> None:
    """A bug in a cycle (not a source failure) is notified, not left a silently frozen table."""
    app, _, fleet = cockpit()
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        assert app.fleet_poller is not None
        cycle, calls, reads = app.fleet_poller.cycle, [], len(fleet.reads)

        async def broken(window: str) -> object:
            calls.append(window)
            raise RuntimeError("a bug in the cycle")

        app.fleet_poller.cycle = broken  # type: ignore[method-assign,assignment]
        await pilot.press("r")
        await settle(pilot)
        await on_screen(pilot, "refresh failed", "a bug in the cycle")
        assert calls and app.is_running
        app.fleet_poller.cycle = cycle  # type: ignore[method-assign]
        await pilot.press("r")
        await settle(pilot)
        await on_screen(pilot, *LANES)
        assert len(fleet.reads) == reads + 1  # read again once the cycle works


async def test_a_fleet_never_read_says_why() -> None:
    app, _, _ = cockpit(ScriptedFleetFeed([SourceDown("connection refused (127.0.0.1:9090)")]))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await on_screen(pilot, "fleet missing: connection refused")


async def test_slash_filters_the_rows_by_name_and_escape_clears_it() -> None:
    app, _, _ = cockpit(ScriptedFleetFeed([fleet_view(*FLEET.rows, fleet_row("gpu-box-7"))]))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await on_screen(pilot, "gpu-box-7")
        await pilot.press("slash", "b", "o", "x")
        screen = await on_screen(pilot, "filter “box”")
        assert row_order(screen, [*LANES, "gpu-box-7"]) == ["gpu-box-7"]
        await pilot.press("enter", "escape")
        screen = await on_screen(pilot, "lane-a")
        assert len(row_order(screen, [*LANES, "gpu-box-7"])) == 6


async def test_enter_opens_the_lane_alone_and_escape_returns_to_the_overview() -> None:
    app, lanes, fleet = cockpit()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter")  # the second row: lane-b
        await settle(pilot)
        assert not isinstance(app.screen, FleetScreen)
        assert app.lane_name == "lane-b" and len(lanes[1].reads) == 1 and lanes[0].reads == []
        assert len(fleet.reads) == 1  # the fleet is not read while a lane is open
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, FleetScreen)
        assert len(fleet.reads) == 2 and len(lanes[1].reads) == 1
        await pilot.press("r")  # refresh on the overview reads the fleet, not the lane
        await settle(pilot)
        assert len(fleet.reads) == 3 and len(lanes[1].reads) == 1


async def test_w_reads_the_fleet_over_the_next_window_and_the_lane_keys_rest() -> None:
    app, lanes, fleet = cockpit()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("w", "2", "tab")
        await settle(pilot)
        assert fleet.reads[-1] == (6 * 3600.0, None) and len(fleet.reads) == 2
        assert isinstance(app.screen, FleetScreen) and app.lane_name == "lane-a"
        assert all(lane.reads == [] for lane in lanes)
        await on_screen(pilot, "· 6h ·")


async def test_a_lane_found_while_running_is_added_and_one_that_vanished_shows_gone() -> None:
    first = fleet_view(fleet_row("lane-a"), fleet_row("lane-b"))
    second = fleet_view(fleet_row("lane-a"), gone_row("lane-b"), fleet_row("lane-new"))
    app, _, _ = cockpit(ScriptedFleetFeed([first, second]))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = await on_screen(pilot, "2 lanes by job")
        assert "lane-new" not in screen and "gone" not in screen
        await pilot.press("r")
        await settle(pilot)
        screen = await on_screen(pilot, "3 lanes by job", "lane-new", "1 gone")
        assert [feed.name for feed in app.lane_feeds] == ["lane-a", "lane-b", "lane-new"]
        line = next(line for line in screen.split("\n") if " lane-b " in line)
        assert "gone" in line and "—" in line
        await pilot.press("down", "down", "enter")  # lane-new, the last row by name
        await settle(pilot)
        assert app.lane_name == "lane-new"


async def test_a_lane_name_is_shown_as_data_never_as_markup() -> None:
    hostile = "[bold red]x[/]\x1b]0;pwn\x07"
    app, _, _ = cockpit(ScriptedFleetFeed([fleet_view(fleet_row(hostile))]))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await on_screen(pilot, "[bold red]x[/]␛]0;pwn␇")


async def test_e_writes_the_overview_receipt_with_every_lane(tmp_path: Path) -> None:
    app, _, _ = cockpit()
    app.export_dir = tmp_path
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("S", "e")  # by name, reversed
        await on_screen(pilot, "receipt exported")
    (receipt,) = tmp_path.glob("cockpit-receipt-fleet-1h-*.md")
    text = receipt.read_text(encoding="utf-8")
    places = [text.index(f"| {lane} |") for lane in LANES]
    assert places == sorted(places, reverse=True)  # in the screen's order
    assert "| lane-d | DOWN |" not in text and "| lane-d | down |" in text
    assert "sum by (job)" in text


# --- lanes listed in the config ----------------------------------------------------------


@dataclass(eq=False)
class TogetherFeed(ScriptedLaneFeed):
    """A lane whose first read waits for every listed lane's first read to start: read one
    after another, it gives up (and its row says DOWN)."""

    together: asyncio.Barrier | None = None

    async def read(self, window_s: float, end: float | None) -> LaneTotals:
        if not self.reads and self.together is not None:
            try:
                await asyncio.wait_for(self.together.wait(), 5.0)
            except TimeoutError:
                self.reads.append((window_s, end))
                raise SourceDown("read alone, not beside the other lanes") from None
        return await super().read(window_s, end)


def listed(*feeds: ScriptedLaneFeed) -> CockpitApp:
    """The cockpit as `cockpit run` builds it for these lanes listed in the config."""
    settings = config(*(feed.name for feed in feeds))
    setup = Setup(settings, feeds, None, fleet=fleet_feed(settings, feeds))
    return build_app(lambda: setup)


def test_one_listed_lane_opens_on_its_panes_and_several_on_the_overview() -> None:
    one = [ScriptedLaneFeed("lane-a")]
    assert fleet_feed(config("lane-a"), one) is None
    assert isinstance(fleet_feed(config("lane-a", "lane-b"), [*one, *one]), ListedFleet)


async def test_listed_lanes_open_on_the_overview_read_together_their_rows_the_panes_figures() -> (
    None
):
    together = asyncio.Barrier(3)
    feeds = [TogetherFeed(name, together=together) for name in ("lane-a", "lane-b", "lane-c")]
    feeds[1].scale = 2.0
    feeds[2].failure = SourceDown("connection refused (127.0.0.1:8000)")
    app = listed(*feeds)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, FleetScreen)
        screen = await on_screen(pilot, "3 lanes listed", "1 down")
        assert [len(feed.reads) for feed in feeds] == [1, 1, 1]
        line = next(line for line in screen.split("\n") if " lane-c " in line)
        assert "DOWN" in line
        assert app.screen.snapshot is not None and app.screen.snapshot.view is not None
        view = app.screen.snapshot.view
        await pilot.press("down", "enter")  # lane-b: its panes, it alone read
        await settle(pilot)
        assert not isinstance(app.screen, FleetScreen) and app.lane_name == "lane-b"
        assert [len(feed.reads) for feed in feeds] == [1, 2, 1]
        snapshot, row = app.lane_snapshot, live.row_of(view, "lane-b")
        assert snapshot is not None and snapshot.figures is not None and row is not None
        for key in FIGURE_COLUMNS:
            assert row.values[key] == snapshot.figures.figures[key].value, key
        await pilot.press("1")  # the lane keys switch lanes in the panes
        await settle(pilot)
        assert app.lane_name == "lane-a" and [len(feed.reads) for feed in feeds] == [2, 2, 1]
        await pilot.press("tab")
        await settle(pilot)
        assert app.lane_name == "lane-b"
        await pilot.press("escape")  # back: every lane read again, together
        await settle(pilot)
        assert isinstance(app.screen, FleetScreen)
        assert [len(feed.reads) for feed in feeds] == [3, 4, 2]


async def test_lanes_listed_beside_discovery_are_rows_of_the_overview() -> None:
    listed_lane = ScriptedLaneFeed("lane-x")
    fleet = ListedFleet([listed_lane], ScriptedFleetFeed())
    settings = config("lane-x", discover=DISCOVER)
    app = make_app(settings, [listed_lane], None, clocks=fixed_clocks(), fleet=fleet)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = await on_screen(pilot, "6 lanes by job", "lane-x", "lane-e")
        assert row_order(screen, [*LANES, "lane-x"]) == [*LANES, "lane-x"]
        assert [feed.name for feed in app.lane_feeds] == ["lane-x", *LANES]
        await pilot.press("slash", *"lane-x", "enter", "enter")
        await settle(pilot)
        assert app.lane_name == "lane-x" and len(listed_lane.reads) == 2


@dataclass(eq=False)
class EarlierFeed(ScriptedLaneFeed):
    """A lane whose figures were read `before_s` before the read asked for (a scrape lane's
    last scrape, a Prometheus lane's window evaluated at an earlier refresh)."""

    before_s: float = 0.0

    async def read(self, window_s: float, end: float | None) -> LaneTotals:
        totals = await super().read(window_s, end)
        return replace(totals, end=totals.end - self.before_s)


async def test_a_listed_lanes_age_is_the_time_since_its_figures_were_read() -> None:
    fleet = ListedFleet([EarlierFeed("lane-a", before_s=7.0), EarlierFeed("lane-b")])
    view = await fleet.read(3600.0, EVAL_AT)
    assert {row.lane: row.values[AGE] for row in view.rows} == {"lane-a": 7.0, "lane-b": 0.0}
    assert all(AGE not in row.reasons for row in view.rows)


async def test_the_receipt_of_listed_lanes_says_where_each_was_read_and_no_fleet_query() -> None:
    down = ScriptedLaneFeed("lane-b", failure=SourceDown("connection refused (127.0.0.1:8000)"))
    text = fleet_markdown(await ListedFleet([ScriptedLaneFeed("lane-a"), down]).read(60, EVAL_AT))
    assert "\n2 lanes listed in the config, each read by its own query; window 1m" in text
    assert "Server" not in text and "/api/v1/query" not in text and "```promql" not in text
    assert "- lane-a: every series on http://127.0.0.1:9090\n" in text
    assert "- lane-b: not read: connection refused (127.0.0.1:8000)\n" in text


async def test_the_receipt_of_listed_lanes_beside_discovery_says_both() -> None:
    fleet = ListedFleet([ScriptedLaneFeed("lane-x")], ScriptedFleetFeed())
    text = fleet_markdown(await fleet.read(3600.0, EVAL_AT))
    assert "Server http://127.0.0.1:9090, lanes by `job`; 1 lane listed in the config" in text
    assert "one `/api/v1/query` for every lane found by `job`" in text
    assert "- lane-x: every series on http://127.0.0.1:9090\n" in text


# --- on a real server -----------------------------------------------------------------------


@pytest.mark.prometheus
@pytest.mark.slow
async def test_on_a_real_server_the_overview_finds_the_lanes_and_each_opens_on_its_row(
    fleet_server: PromServer,
) -> None:
    """`--prometheus URL --lanes-by job --selector fleet="live"` (no lane listed), at the fleet
    test's pinned second read: the overview shows its six lanes (down and gone said), and a lane
    opened from it shows the overview's figures in its panes, read by its own query."""
    argv = ["run", "--prometheus", fleet_server.url, "--lanes-by", "job", "--selector", live.MATCH]
    config = effective_config(parse_args(argv))
    fleet = fleet_feed(config)
    assert fleet is not None and not config.lanes
    setup = Setup(config, [], None, replay_at=live.END, refresh_s=3600.0, fleet=fleet)
    app = build_app(lambda: setup)
    app.clocks = fixed_clocks(live.END + 5)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = await on_screen(pilot, f"{len(live.LANES)} lanes by job", "1 down", "1 gone")
        assert [feed.name for feed in app.lane_feeds] == sorted(lane.name for lane in live.LANES)
        line = next(line for line in screen.split("\n") if " lane-down " in line)
        assert "DOWN" in line
        assert isinstance(app.screen, FleetScreen) and app.screen.snapshot is not None
        view = app.screen.snapshot.view
        assert view is not None
        for lane in ("lane-a", "lane-c", "lane-new"):
            await pilot.press("slash", *lane, "enter", "enter")
            await settle(pilot)
            snapshot, row = app.lane_snapshot, live.row_of(view, lane)
            assert app.lane_name == lane and snapshot is not None and row is not None
            assert snapshot.figures is not None, snapshot.freshness
            for key in FIGURE_COLUMNS:
                figure = snapshot.figures.figures[key]
                assert row.values[key] == pytest.approx(figure.value, rel=1e-9), key
            await pilot.press("escape", "escape")  # the overview, its filter cleared
            await settle(pilot)
    assert fleet.source.requests == 4  # one per visit of the overview, none while a lane is open


@pytest.mark.prometheus
@pytest.mark.slow
async def test_on_a_real_server_listed_lanes_are_read_on_their_one_client_as_their_panes_read_them(
    fleet_server: PromServer,
    tmp_path: Path,
) -> None:
    """Three lanes of one server listed in a config file: the overview reads them through the
    lanes' own feeds (one client for the server), and each lane opened shows its row."""
    names = ("lane-a", "lane-c", "lane-down")
    url = fleet_server.url
    lines = [
        f"- {{name: {n}, prometheus: '{url}', selector: '{live.lane_selector(n)}'}}" for n in names
    ]
    path = tmp_path / "config.yaml"
    path.write_text("\n".join(["lanes:", *lines, ""]), encoding="utf-8")
    config = effective_config(parse_args(["run", "--config", str(path)]))
    lanes, _ = build_feeds(config)
    fleet = fleet_feed(config, lanes)
    assert isinstance(fleet, ListedFleet) and fleet.feeds == lanes
    assert len({id(feed.source) for feed in lanes if isinstance(feed, PrometheusLaneFeed)}) == 1
    setup = Setup(config, lanes, None, replay_at=live.END, refresh_s=3600.0, fleet=fleet)
    app = build_app(lambda: setup)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await on_screen(pilot, "3 lanes listed", "1 down")
        assert isinstance(app.screen, FleetScreen) and app.screen.snapshot is not None
        view = app.screen.snapshot.view
        assert view is not None
        for lane in ("lane-a", "lane-c"):
            await pilot.press("slash", *lane, "enter", "enter")
            await settle(pilot)
            snapshot, row = app.lane_snapshot, live.row_of(view, lane)
            assert app.lane_name == lane and snapshot is not None and row is not None
            assert snapshot.figures is not None, snapshot.freshness
            for key in FIGURE_COLUMNS:  # VictoriaMetrics sums in no fixed order
                figure = snapshot.figures.figures[key]
                assert row.values[key] == pytest.approx(figure.value, rel=1e-9), key
            await pilot.press("escape", "escape")
            await settle(pilot)


@pytest.mark.prometheus
@pytest.mark.slow
@pytest.mark.parametrize("found", [False, True], ids=["listed", "listed-and-found"])
def test_report_fleet_reads_the_overviews_fleet_listed_found_or_both(
    fleet_server: PromServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    found: bool,
) -> None:
    """`cockpit report --fleet` with lanes listed in the config (beside discovery or not):
    the rows the overview shows, each listed lane's figures its panes' (its twin found by
    `job` has the same)."""
    lines = [f"- {{name: mine-{n}, prometheus: '{fleet_server.url}', "
             f"selector: '{live.lane_selector(f'lane-{n}')}'}}" for n in ("a", "c")]  # fmt: skip
    discover = [f"discover: {{prometheus: '{fleet_server.url}', label: job, "
                f"match: '{live.MATCH}'}}"] if found else []  # fmt: skip
    path = tmp_path / "config.yaml"
    path.write_text("\n".join([*discover, "lanes:", *lines, ""]), encoding="utf-8")
    argv = ["report", "--fleet", "--config", str(path), "--window", "1h", "--at", str(live.END)]
    assert main([*argv, "--format", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    lanes = {lane["lane"]: lane for lane in answer["lanes"]}
    found_lanes = {lane.name for lane in live.LANES} if found else set()
    assert set(lanes) == {"mine-a", "mine-c", *found_lanes}
    assert set(answer["listed"]) == {"mine-a", "mine-c"}
    panes = lane_figures(asyncio.run(_read_lane(fleet_server.url, "lane-a")))
    for key in FIGURE_COLUMNS:
        assert lanes["mine-a"]["values"][key] == pytest.approx(panes[key].value, rel=1e-9), key
    assert main([*argv, "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "| mine-a |" in out and "| mine-c |" in out
    assert ("```promql" in out) == found


async def _read_lane(url: str, job: str) -> LaneTotals:
    """The lane as its panes read it at the fleet test's pinned second read."""
    source = PrometheusSource(url)
    try:
        selector = f"{{{live.lane_selector(job)}}}"
        return await source.read_lane(job, None, selector, live.WINDOW_S, live.END)
    finally:
        await source.aclose()


# --- the GPU columns ------------------------------------------------------------------------


class FixedEndFleet(ListedFleet):
    """Listed lanes read at a fixed time when the loop asks for now."""

    async def read(self, window_s: float, end: float | None) -> FleetView:
        return await super().read(window_s, EVAL_AT + 5 if end is None else end)


def gpu_fleet() -> CockpitApp:
    """Three listed lanes: one whose dcgm-exporter reads two GPUs (and with a TTFT target),
    one whose GPU source failed, one without a GPU source."""
    feeds = [
        ScriptedLaneFeed("gpu-lane", gpu=gpu_totals(2), slo=Slo(ttft_s=0.5)),
        ScriptedLaneFeed("gpu-failed", gpu=gpu_totals(failed="connection refused (:9400)")),
        ScriptedLaneFeed("no-gpu"),
    ]
    settings = config(*(feed.name for feed in feeds))
    return make_app(settings, feeds, None, clocks=fixed_clocks(), fleet=FixedEndFleet(feeds))


def test_overview_with_gpu_and_attainment_columns(snap_compare: SnapCompare) -> None:
    assert snap_compare(gpu_fleet(), terminal_size=(160, 48), run_before=settle)


async def test_gpu_columns_for_lanes_listed_with_a_gpu_source_the_others_say_why() -> None:
    feeds = [ScriptedLaneFeed("gpu-lane", gpu=gpu_totals(2)), ScriptedLaneFeed("no-gpu")]
    view = await ListedFleet(feeds).read(3600.0, EVAL_AT)
    rows = {row.lane: row for row in view.rows}
    assert rows["gpu-lane"].values["gpu_util"] == pytest.approx((0.87 + 0.77) / 2)
    assert rows["gpu-lane"].values["gpu_power_w"] == pytest.approx(612.0 + 572.0)
    assert rows["no-gpu"].values["gpu_util"] is None
    assert rows["no-gpu"].reasons["gpu_power_w"] == NO_GPU_SOURCE
    assert [c.key for c in shown_columns(view.rows)][-4:-2] == list(GPU_COLUMNS)
    assert not set(GPU_COLUMNS) & {c.key for c in shown_columns([rows["no-gpu"]])}
    assert "| GPU | Power |" in fleet_markdown(view)


async def test_a_new_clock_on_the_status_line_does_not_lay_the_overview_out_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A refresh whose status keeps its lines updates it in place; one that adds a line (the
    stale note) lays the screen out again, so the note is shown."""
    fleet = ScriptedFleetFeed([FLEET, FLEET, SourceDown("connection refused (127.0.0.1:9090)")])
    app, _, _ = cockpit(fleet)
    layouts: list[bool] = []
    update = Static.update

    def spied(widget: Static, content: object = "", *, layout: bool = True) -> None:
        if widget.id == "fleet-status":
            layouts.append(layout)
        update(widget, content, layout=layout)  # type: ignore[arg-type]

    monkeypatch.setattr(Static, "update", spied)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        layouts.clear()
        await pilot.press("r")
        await settle(pilot)
        assert layouts and not any(layouts)
        await pilot.press("r")
        await settle(pilot)
        await on_screen(pilot, "fleet stale since", "connection refused")
        assert layouts[-1]


def spy_table_refreshes(monkeypatch: pytest.MonkeyPatch) -> list[RowTable]:
    """From now on, each refresh of a fleet table, recorded (the table) in the list returned."""
    drawn: list[RowTable] = []
    refresh = RowTable.refresh

    def spied(table: RowTable, *regions: Region, **options: bool) -> RowTable:
        drawn.append(table)
        return refresh(table, *regions, **options)

    monkeypatch.setattr(RowTable, "refresh", spied)
    return drawn


async def test_a_refresh_that_reads_the_same_fleet_does_not_draw_the_table_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same rows again (a replay's fixed time, say) leave the table as drawn; a changed
    row draws it again."""
    changed = fleet_view(*(fleet_row(lane, 2.0) for lane in LANES))
    app, _, _ = cockpit(ScriptedFleetFeed([FLEET, FLEET, changed]))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        drawn = spy_table_refreshes(monkeypatch)
        await pilot.press("r")
        await settle(pilot)
        assert not drawn
        await pilot.press("r")
        await settle(pilot)
        assert drawn


async def test_a_new_theme_draws_the_same_rows_again(monkeypatch: pytest.MonkeyPatch) -> None:
    app, _, _ = cockpit()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        drawn = spy_table_refreshes(monkeypatch)
        app.theme = next(name for name in app.available_themes if name != app.theme)
        await settle(pilot)
        assert drawn

"""Benchmark cards in the cockpit: `b` starts and stops a card on the lane, the status line
shows it running, the window keys offer `card`, and `B` lists the lane's cards and compares
two of them. The card store is the test's own (XDG_DATA_HOME, tests/app/conftest.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from textual.widgets import DataTable, Input

from cockpit.app.app import CockpitApp, make_app
from cockpit.app.screens import CardNameScreen, CardsScreen
from cockpit.config.schema import Config, LaneConfig
from cockpit.demo.lane import SimulatedLane, serve_metrics
from cockpit.runtime.card_receipts import figures_of
from cockpit.runtime.cards import CardStore
from tests.support.cards import running_card, two_kept_cards
from tests.support.feeds import ScriptedLaneFeed, config, fixed_clocks
from tests.support.loopback import line_sum
from tests.support.pilot import on_screen, settle

pytestmark = pytest.mark.usefixtures("utc")
REQUESTS = "vllm:request_success_total"


class ServedLane(SimulatedLane):
    url = ""


@pytest.fixture
def engine() -> Iterator[ServedLane]:
    """A simulated vLLM engine's /metrics on loopback, moving only when stepped."""
    lane = ServedLane(seed=5, warm_start=600.0)
    server, _ = serve_metrics(lane.registry, 0)
    lane.url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    yield lane
    server.shutdown()


def cockpit(lanes: Config | None = None, feed: ScriptedLaneFeed | None = None) -> CockpitApp:
    feeds = [feed or ScriptedLaneFeed("lane-a")]
    return make_app(lanes or config("lane-a"), feeds, None, clocks=fixed_clocks())


def scraped(url: str) -> Config:
    return Config(lanes=(LaneConfig("lane-a", metrics_url=url),), window="1h", refresh_s=3600.0)


async def test_b_starts_a_card_and_b_again_keeps_its_exact_receipt(engine: ServedLane) -> None:
    app = cockpit(scraped(engine.url))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        assert app.card_clock is None  # no card: no once-a-second wake-up
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, CardNameScreen)
        field = app.screen.query_one(Input)
        assert field.value == "lane-a-141325"  # the lane and the (fixed) UTC time offered
        before = engine.render()
        field.value = "run-1"
        await pilot.press("enter")
        await settle(pilot)
        await on_screen(pilot, "card run-1 started on lane lane-a")
        (started,) = CardStore().running("lane-a")
        assert started.name == "run-1" and len(started.edges) == 1  # the edge scrape
        assert app.card_clock is not None  # the status line's card time ticks
        engine.step(30.0)
        after = engine.render()
        await pilot.press("b")
        await settle(pilot)
        kept = CardStore().get("run-1")
        assert not kept.running and len(kept.edges) == 2
        requests = line_sum(after, REQUESTS) - line_sum(before, REQUESTS)
        assert requests > 0
        figure = figures_of(kept.receipt)["requests"]
        assert figure["value"] == requests
        await on_screen(pilot, f"card run-1 kept: {figure['text']} requests")
        assert app.running_card is None
        assert app.card_clock is None


async def test_a_card_that_cannot_start_says_why_as_plain_text() -> None:
    two_kept_cards()
    app = cockpit()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("b")
        await pilot.pause()
        app.screen.query_one(Input).value = "rate-2"
        await pilot.press("enter")
        await settle(pilot)
        await on_screen(pilot, "a card named 'rate-2' exists already")
        assert CardStore().running() == []


async def test_the_status_line_shows_the_running_card_and_its_time() -> None:
    running_card("bench\x1b-1", 125.0)
    app = cockpit()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        screen = await on_screen(pilot, "card bench␛-1 2m 05s")
        assert "\x1b-1" not in screen
        assert app.card_clock is not None  # a card found in the store ticks too


async def test_the_window_keys_offer_the_running_card() -> None:
    running_card("bench-1", 125.0)
    feed = ScriptedLaneFeed("lane-a")
    app = cockpit(feed=feed)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        for _ in range(len(app.config.windows)):
            await pilot.press("w")
            await settle(pilot)
            if app.window == "card":
                break
        assert app.window == "card"
        assert feed.reads[-1] == (125.0, None)  # since the card's start
        assert app.lane_snapshot is not None and app.lane_snapshot.window == "card"
        await pilot.press("w")
        assert app.window == app.config.windows[0]


async def test_the_window_keys_offer_no_card_when_none_runs() -> None:
    app = cockpit()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        seen = set()
        for _ in range(len(app.config.windows) + 1):
            await pilot.press("w")
            seen.add(app.window)
        assert seen == set(app.config.windows)


async def test_the_cards_screen_lists_the_lanes_cards_and_compares_two() -> None:
    two_kept_cards()
    app = cockpit()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("B")
        await settle(pilot)
        assert isinstance(app.screen, CardsScreen)
        screen = await on_screen(pilot, "rate-2", "rate-4", "rate 4", "1,000", "2,000")
        assert "60.0 s" in screen
        await pilot.press("space", "down", "space")
        await pilot.pause()
        rows = {row.key: row for row in app.screen.comparison()}
        requests = rows["requests"]
        assert (requests.a, requests.b, requests.delta, requests.change) == (1000, 2000, 1000, 1)
        compared = app.screen.query_one("#cards-compared", DataTable)
        assert compared.row_count == len(rows) > 0
        text = await on_screen(pilot, "B − A", "+100.0%", "higher in B", "A rate-2 (60.0 s)")
        assert "Verdict" in text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CardsScreen)


async def test_the_help_lists_the_card_keys() -> None:
    app = cockpit()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await on_screen(pilot, "start / stop a card", "the cards; compare two")


def refused_url() -> str:
    """A loopback address nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def test_a_card_whose_receipt_cannot_be_read_says_why_and_the_cockpit_runs_on() -> None:
    running_card("bench-1", 60.0)
    lanes = Config(lanes=(LaneConfig("lane-a", prometheus=refused_url()),), window="1h",
                   refresh_s=3600.0)  # fmt: skip
    app = cockpit(lanes)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await on_screen(pilot, "card bench-1 1m 00s")
        await pilot.press("b")
        await settle(pilot)
        screen = await on_screen(pilot, "card bench-1 not kept", "lane lane-a:")
        assert "card bench-1 1m" not in screen.splitlines()[0]  # its end is marked all the same
        assert CardStore().get("bench-1").end is not None
        assert app.is_running


async def test_a_card_name_with_control_bytes_is_refused_as_plain_text() -> None:
    app = cockpit()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("b")
        await pilot.pause()
        app.screen.query_one(Input).value = "bad\x07[b]name"
        await pilot.press("enter")
        await settle(pilot)
        await on_screen(pilot, "card name 'bad␇[b]name': expected printable text")
        assert CardStore().cards() == []


async def test_the_status_line_says_how_much_of_the_window_was_inside_cards() -> None:
    a, b = two_kept_cards()  # b lies in the last hour, a before it
    app = cockpit()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.lane_snapshot is not None and app.lane_snapshot.figures is not None
        window = app.lane_snapshot.figures.value("requests")
        totals = app.lane_snapshot.totals
        assert totals is not None and totals.end - totals.window_s <= b.start
        assert a.start < totals.end - totals.window_s
        kept = b.receipt["lane"]["figures"]["requests"]["value"]
        await on_screen(pilot, f"1 card in window: {kept:,.0f} of {window:,.0f} requests")

"""The whole cockpit with fixed figures (pytest-textual-snapshot): with every source, a lane
only, a ledger only and a lane down, each at 80×24, 160×48 and 250×70."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from cockpit.app.app import CockpitApp, make_app
from tests.support.feeds import (
    ScriptedLaneFeed,
    ScriptedLedgerFeed,
    SourceDown,
    config,
    fixed_clocks,
    gpu_totals,
)
from tests.support.pilot import full_cockpit, settle

pytestmark = pytest.mark.usefixtures("utc")

SnapCompare = Callable[..., bool]
DOWN = SourceDown("connection refused (127.0.0.1:9090)", unreachable=True)


def lane_only() -> CockpitApp:
    return make_app(config("lane-a"), [ScriptedLaneFeed("lane-a")], None, clocks=fixed_clocks())


def ledger_only() -> CockpitApp:
    return make_app(config(), [], ScriptedLedgerFeed(), clocks=fixed_clocks())


SCREENS: dict[str, Callable[[], CockpitApp]] = {
    "demo": full_cockpit,
    "lane_only": lane_only,
    "ledger_only": ledger_only,
    "lane_down": lambda: full_cockpit(DOWN),
}
SIZES = {"80x24": (80, 24), "160x48": (160, 48), "250x70": (250, 70)}


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("screen", SCREENS.keys())
def test_cockpit(snap_compare: SnapCompare, screen: str, size: tuple[int, int]) -> None:
    assert snap_compare(SCREENS[screen](), terminal_size=size, run_before=settle)


def test_cockpit_help_screen(snap_compare: SnapCompare) -> None:
    async def help_open(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(full_cockpit(), terminal_size=(80, 24), run_before=help_open)


def test_cockpit_too_small(snap_compare: SnapCompare) -> None:
    assert snap_compare(full_cockpit(), terminal_size=(30, 10), run_before=settle)


def gpu_lane() -> CockpitApp:
    """A lane whose dcgm-exporter reads two GPUs, one at its memory limit and power-held."""
    lane = ScriptedLaneFeed("lane-a", gpu=gpu_totals(2))
    return make_app(config("lane-a"), [lane], ScriptedLedgerFeed(), clocks=fixed_clocks())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_cockpit_gpu_line(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    assert snap_compare(gpu_lane(), terminal_size=size, run_before=settle)


def test_cockpit_models_screen(snap_compare: SnapCompare) -> None:
    """`M`: the lane's two models and its LoRA adapters, over the panes at 160×48."""

    async def models_open(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("M")
        await pilot.pause()

    assert snap_compare(full_cockpit(), terminal_size=(160, 48), run_before=models_open)

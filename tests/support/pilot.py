"""Driving the app under Textual's Pilot: waiting for reads and redraws, finding text, keys."""

from __future__ import annotations

import asyncio
from typing import Any, Self

from textual.app import App
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget

from cockpit.app.app import CockpitApp, make_app
from cockpit.widgets.pane import Pane, Row
from tests.support.feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config, fixed_clocks
from tests.support.screentext import screen_text


async def settle(pilot: Pilot[None]) -> None:
    """Wait until no read is under way (cancelled ones included), then for the redraw."""
    for _ in range(500):
        if not any(worker.is_running for worker in pilot.app.workers):
            break
        await asyncio.sleep(0.005)
    await pilot.pause()


async def on_screen(pilot: Pilot[None], *texts: str) -> str:
    """The screen once every one of `texts` is on it (a notification takes a frame or two)."""
    screen = ""
    for _ in range(200):
        screen = screen_text(pilot.app)
        if all(text in screen for text in texts):
            return screen
        await pilot.pause(0.01)
    raise AssertionError(f"not on screen: {texts}\n{screen}")


async def focus_pane(pilot: Pilot[None], pane_id: str) -> None:
    """Press ↓ until the pane has the focus (at most once round the strip and every pane)."""
    for _ in range(len(pilot.app.query(Pane)) + 2):
        await pilot.press("down")
        if pilot.app.focused is not None and pilot.app.focused.id == pane_id:
            return
    raise AssertionError(f"↓ never focused #{pane_id}")


class Counting(Widget):
    """A widget noting each refresh it asks for: whether it wants the screen laid out again.
    Put it after the widget class counted, whose name the CSS and queries follow."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.refreshes: list[bool] = []
        super().__init__(*args, **kwargs)

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        self.refreshes.append(layout)
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)


async def full_render(app: App[Any], pilot: Pilot[None]) -> str:
    """The screen after every widget is redrawn from scratch."""
    for widget in app.screen.walk_children():
        widget.refresh()
    await pilot.pause()
    return screen_text(app)


def screen_lines(app: App[Any]) -> list[str]:
    """The screen's rows, each as wide as the screen."""
    width, height = app.size
    rows = screen_text(app).split("\n")
    rows += [""] * (height - len(rows))
    return [row.ljust(width) for row in rows]


def check_screen(app: App[Any]) -> int:
    """Borders and values of every pane on screen; how many figure rows were checked."""
    lines = screen_lines(app)
    width, height = app.size
    assert len(lines) == height and all(len(line) == width for line in lines)
    body = app.query_one("#body").region
    checked = 0
    for pane in app.query(Pane):
        region = pane.region
        if not pane.display or not region.overlaps(body):
            continue
        visible = region.intersection(body).intersection(Region(0, 0, width, height))
        whole = visible == region
        left, right = region.x, region.right - 1
        assert left >= 0 and right < width, (pane.id, region, app.size)
        if whole:
            top, bottom = lines[region.y], lines[region.bottom - 1]
            assert top[left] == "╭" and top[right] == "╮", (pane.id, top)
            assert bottom[left] == "╰" and bottom[right] == "╯", (pane.id, bottom)
        for y in range(visible.y, visible.bottom):
            if y in (region.y, region.bottom - 1):
                continue
            assert lines[y][left] == "│" and lines[y][right] == "│", (pane.id, y, lines[y])
        assert pane.view is not None
        for index, line in enumerate(pane.view.lines):
            y = region.y + 1 + index
            if not isinstance(line, Row) or not visible.y <= y < visible.bottom:
                continue
            inside = lines[y][left + 2 : right - 1].rstrip()
            assert inside.endswith(line.value), (pane.id, line, inside)
            checked += 1
    return checked


def full_cockpit(lane_failure: Exception | None = None) -> CockpitApp:
    """Two lanes (the first decodes speculatively) and a ledger: every pane has its data."""
    lanes = [
        ScriptedLaneFeed("lane-a", failure=lane_failure, spec=True),
        ScriptedLaneFeed("lane-b"),
    ]
    return make_app(config("lane-a", "lane-b"), lanes, ScriptedLedgerFeed(), clocks=fixed_clocks())

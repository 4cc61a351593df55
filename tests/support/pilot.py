"""Driving the app under Textual's Pilot: waiting for reads and redraws, finding text, keys."""

from __future__ import annotations

import asyncio
from typing import Any, Self

from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget

from cockpit.widgets.pane import Pane
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

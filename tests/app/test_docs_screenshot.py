"""The README's picture of the screen (docs/screen.svg) is the screen the cockpit draws today.

Regenerate it with `.venv/bin/python -m tests.app.test_docs_screenshot` after a change to the
screen.
"""

from __future__ import annotations

import asyncio
import os
import time

from cockpit.app.app import CockpitApp
from tests.support.pilot import full_cockpit, settle
from tests.support.repo import REPO
from tests.support.screentext import screen_text, svg_text

SCREENSHOT = REPO / "docs" / "screen.svg"
SIZE = (160, 48)


async def draw(app: CockpitApp) -> tuple[str, str]:
    """The app's screen at SIZE, as an SVG and as text."""
    os.environ["TZ"] = "UTC"  # the clock times on screen
    time.tzset()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        svg = app.export_screenshot(title="cockpit demo")
        return svg, screen_text(app)


async def test_the_readme_screenshot_is_the_screen_of_today() -> None:
    _, text = await draw(full_cockpit())
    assert SCREENSHOT.exists(), "run python -m tests.app.test_docs_screenshot"
    assert svg_text(SCREENSHOT.read_text(encoding="utf-8")) == text, (
        "docs/screen.svg is out of date: run python -m tests.app.test_docs_screenshot"
    )


if __name__ == "__main__":
    svg, _ = asyncio.run(draw(full_cockpit()))
    SCREENSHOT.write_text(svg, encoding="utf-8")
    print(f"wrote {SCREENSHOT}")

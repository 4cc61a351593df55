"""Where `e` writes receipts: the configured folder, else the platform's data folder (made on
the first export), never the current directory; the cockpit says the full path."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from cockpit.app.app import make_app
from cockpit.core.ledger_figures import Prices
from cockpit.runtime.receipts import receipts_folder, write_receipt
from tests.support.feeds import EVAL_AT, ScriptedLaneFeed, config, fixed_clocks
from tests.support.pilot import settle
from tests.support.screentext import screen_text

NAME = "cockpit-receipt-lane-a-1h-20260921T141320Z.md"
"""The receipt of lane-a, window 1h, at EVAL_AT (2026-09-21 14:13:20 UTC)."""


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data home and a home of the test's own, run from a third folder."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


def test_the_default_folder_is_the_platforms_data_folder_made_on_first_write(
    elsewhere: Path,
) -> None:
    folder = receipts_folder(None)
    assert folder == elsewhere / "data" / "lane-cockpit" / "receipts"
    assert not folder.exists()
    written = write_receipt(None, None, Prices(), folder / NAME)
    assert written == folder / NAME and written.read_text(encoding="utf-8").startswith("# ")
    assert list((elsewhere / "cwd").iterdir()) == []


def test_a_configured_folder_is_expanded_and_absolute(elsewhere: Path) -> None:
    assert receipts_folder("~/receipts") == elsewhere / "home" / "receipts"
    assert receipts_folder("out") == elsewhere / "cwd" / "out"


def test_a_configured_folder_that_is_not_there_is_an_error_not_made(elsewhere: Path) -> None:
    folder = receipts_folder(str(elsewhere / "typo"))
    with pytest.raises(FileNotFoundError):
        write_receipt(None, None, Prices(), folder / NAME)
    assert not folder.exists()


async def exported(pilot: Pilot[None]) -> str:
    """Press `e`, wait for the write, and return the screen once it says where."""
    await settle(pilot)
    await pilot.press("e")
    await settle(pilot)
    for _ in range(200):
        screen = screen_text(pilot.app)
        if "receipt exported" in screen:
            return screen
        await pilot.pause(0.01)
    raise AssertionError(screen_text(pilot.app))


def said(screen: str, path: Path) -> bool:
    """The path is on screen, though a notification may wrap it over several rows."""
    return "".join(str(path).split()) in "".join(screen.replace("▌", "").split())


@pytest.mark.parametrize("configured", [False, True])
async def test_e_writes_to_the_folder_and_says_the_full_path(
    elsewhere: Path, configured: bool
) -> None:
    folder = elsewhere / "mine" if configured else elsewhere / "data" / "lane-cockpit" / "receipts"
    if configured:
        folder.mkdir()
    settings = config("lane-a", export_dir=str(folder) if configured else None)
    app = make_app(settings, [ScriptedLaneFeed()], None, clocks=fixed_clocks(wall=EVAL_AT))
    async with app.run_test(size=(250, 70), notifications=True) as pilot:
        screen = await exported(pilot)
        assert [f.name for f in folder.iterdir()] == [NAME]
        assert said(screen, folder / NAME), screen
    assert list((elsewhere / "cwd").iterdir()) == []

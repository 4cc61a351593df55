"""`cockpit demo` end to end in a real terminal: tmux at 160×48 and 80×24, real keys, real screen.

Each test runs the installed `cockpit` entry point (no Pilot, no in-process app) in a private
tmux server, reads the screen with `capture-pane` and types with `send-keys`.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.app.lifecycle import STALL_S
from tests.support.cli import COCKPIT
from tests.support.repo import require_binary
from tests.support.tmux import TmuxSession, ended

pytestmark = [pytest.mark.slow, pytest.mark.tmux]

DEMO_PREFIX = "lane-cockpit-demo-"
"""The demo's temp folder starts with this (tempfile under $TMPDIR)."""

HIT_RATE = re.compile(r"Hit rate \(engine\)\s+\d{1,3}\.\d%")
PREFILL_RATE = re.compile(r"Effective prefill rate\s+[\d,.]+ (k |M )?tok/s")
STREAM_RATE = re.compile(r"Decode tok/s per stream\s+[\d,.]+ tok/s")
PROMPT_OUTPUT = re.compile(r"Prompt : output\s+[\d,.]+ : 1")
SPEND = re.compile(r"Output\s+\d{1,3}\.\d%")
ROOF_P = re.compile(r"│ P [\d.]+ [kMGTPE]?FLOP/s")
ROOF_D = re.compile(r"│ D [\d.]+ [kMGTPE]?FLOP/s")
LANE = re.compile(r"(\S+) \((\d)/(\d)\)")
WINDOW = re.compile(r"│ (\d+[mhd]) │")
PANE_TOP = re.compile(r"╭─ (.+?) ─")
TITLES = ("Prefix cache", "Prefill", "Phases & decode", "Latency tails", "Trends", "Roofline",
          "Token ratios", "Spend split")  # fmt: skip
"""The panes' titles (the roofline's goes on with its profile), prefill first, reading across."""
COLOUR_BASES = (30, 40, 90, 100)
"""SGR 30-37, 40-47, 90-97, 100-107: the 16 basic colours, foreground and background."""
SGR = re.compile(r"\x1b\[([0-9;:]*)m")
PROMETHEUS_FIRST_RATE_S = 30
"""How long a demo on a fresh Prometheus may take to show its first rates (see its test)."""
OVERVIEW = "2 lanes listed"
"""The overview's status line: the demo lists two lanes, so it opens on their overview."""
ROW = re.compile(r"^ (\S+)\s+(?:up|DOWN)\s", re.MULTILINE)
"""An overview row: the lane's name, its engine's state."""


class Demo:
    """The demo in tmux, with its own cwd (receipts land under it: its data folder) and its
    own $TMPDIR."""

    def __init__(self, tmp_path: Path, width: int, height: int, *args: str, **env: str) -> None:
        self.cwd = tmp_path / "cwd"
        self.tmpdir = tmp_path / "tmp"
        self.cwd.mkdir()
        self.tmpdir.mkdir()
        self.session = TmuxSession(
            require_binary("tmux"),
            [COCKPIT, "demo", *args],
            width=width,
            height=height,
            cwd=self.cwd,
            env={
                "TMPDIR": str(self.tmpdir),
                "XDG_DATA_HOME": str(self.cwd),  # receipts: <data folder>/lane-cockpit/receipts
                "TERM": "tmux-256color",
                "PYTHONFAULTHANDLER": "1",  # a hang shows its stacks (TmuxSession.stacks)
                **env,
            },
        )

    def demo_folders(self) -> list[Path]:
        return sorted(self.tmpdir.glob(DEMO_PREFIX + "*"))


@pytest.fixture
def demo_factory(tmp_path: Path) -> Iterator[list[Demo]]:
    started: list[Demo] = []
    yield started
    for demo in started:
        demo.session.kill()


def start(
    started: list[Demo], tmp_path: Path, size: tuple[int, int], *args: str, **env: str
) -> Demo:
    folder = tmp_path / f"demo{len(started)}"
    folder.mkdir()
    demo = Demo(folder, *size, *args, **env)
    started.append(demo)
    return demo


def all_match(*patterns: re.Pattern[str]) -> object:
    def check(screen: str) -> bool:
        return all(pattern.search(screen) for pattern in patterns)

    return check


def wait_figures(session: TmuxSession, *patterns: re.Pattern[str], timeout: float = 10.0) -> str:
    names = ", ".join(pattern.pattern for pattern in patterns)
    return session.wait_for(all_match(*patterns), timeout, f"figures {names}")  # type: ignore[arg-type]


def wait_overview(session: TmuxSession, timeout: float = 10.0) -> str:
    """The overview the demo opens on, its lanes read."""
    return session.wait_for(lambda s: OVERVIEW in s and ROW.search(s), timeout, "the overview")  # type: ignore[arg-type]


def open_first_lane(session: TmuxSession, timeout: float = 10.0) -> str:
    """From the overview, enter opens the first row's lane (its name returned)."""
    found = ROW.search(wait_overview(session, timeout))
    assert found is not None
    session.send_keys("Enter")
    return found.group(1)


def status_line(screen: str) -> str:
    """The status line: the screen's first two lines (it wraps to two when narrow)."""
    return "\n".join(screen.splitlines()[:2])


def lane_of(screen: str) -> tuple[str, int, int]:
    found = LANE.search(status_line(screen))
    assert found, f"no lane in the status line:\n{screen}"
    return found.group(1), int(found.group(2)), int(found.group(3))


def window_of(screen: str) -> str:
    found = WINDOW.search(status_line(screen))
    assert found, f"no window in the status line:\n{screen}"
    return found.group(1)


def whole_panes(screen: str) -> list[str]:
    """The titles of the panes drawn whole, reading across: each top-left corner has its side
    below it down to a bottom-left corner, all on the screen."""
    rows = screen.splitlines()
    found: list[tuple[int, int, str]] = []
    for y, row in enumerate(rows):
        for top in PANE_TOP.finditer(row):
            x, below = top.start(), y + 1
            while below < len(rows) and rows[below][x : x + 1] == "│":
                below += 1
            if rows[below : below + 1] and rows[below][x : x + 1] == "╰":
                found.append((y, x, top.group(1).split(" · ")[0]))
    return [title for _, _, title in sorted(found)]


def colour_codes(screen: str) -> set[str]:
    """SGR colour parameters other than the terminal's defaults (39, 49)."""
    found: set[str] = set()
    for match in SGR.finditer(screen):
        params = match.group(1).replace(":", ";").split(";")
        index = 0
        while index < len(params):
            code = params[index]
            if code in ("38", "48", "58"):
                found.add(";".join(params[index : index + 5]))
                index += 5 if params[index + 1 : index + 2] == ["2"] else 3
                continue
            if code.isdigit() and any(low <= int(code) <= low + 7 for low in COLOUR_BASES):
                found.add(code)
            index += 1
    return found


def test_figures_in_every_pane_at_160x48(demo_factory: list[Demo], tmp_path: Path) -> None:
    demo = start(demo_factory, tmp_path, (160, 48))
    session = demo.session
    open_first_lane(session)
    wait_figures(session, HIT_RATE, PREFILL_RATE, STREAM_RATE, ROOF_P, ROOF_D)
    # The simulated agents' past sessions started over an hour ago: a longer window shows them.
    session.send_keys("w")
    screen = wait_figures(session, HIT_RATE, PROMPT_OUTPUT, SPEND, ROOF_P, ROOF_D)
    assert len(screen.splitlines()) == 48
    # Three columns, every pane whole on the first screen.
    assert whole_panes(screen) == list(TITLES), screen
    columns = {top.start() for row in screen.splitlines() for top in PANE_TOP.finditer(row)}
    assert len(columns) == 3, screen


def test_keys_at_80x24_then_quit_cleans_up(demo_factory: list[Demo], tmp_path: Path) -> None:
    demo = start(demo_factory, tmp_path, (80, 24))
    session = demo.session
    # The overview of the two lanes first; enter opens the first row's panes. Prefill first:
    # the cache and prefill panes are whole on the first screen, with figures; the others
    # follow below them (a scroll away).
    opened = open_first_lane(session)
    screen = wait_figures(session, HIT_RATE, PREFILL_RATE)
    whole = whole_panes(screen)
    assert len(whole) >= 2 and whole == list(TITLES[: len(whole)]), screen
    assert len(demo.demo_folders()) == 1, "the demo's temp folder is under $TMPDIR"

    first, index, count = lane_of(screen)
    assert (first, count) == (opened, 2)
    other = 3 - index  # the lane keys switch lanes in the panes
    session.send_keys(str(other))
    screen = session.wait_for(lambda s: lane_of(s)[1] == other, what=f"lane {other}")
    second = lane_of(screen)[0]
    assert second != first
    session.send_keys("Tab")
    screen = session.wait_for(lambda s: lane_of(s)[1] == index, what=f"lane {index} after tab")
    assert lane_of(screen)[0] == first

    window = window_of(screen)
    session.send_keys("w")
    screen = session.wait_for(lambda s: window_of(s) != window, what="next window")
    session.send_keys("W")
    session.wait_for(lambda s: window_of(s) == window, what="previous window")
    session.send_keys("W")
    screen = session.wait_for(lambda s: window_of(s) != window, what="window before")

    session.send_keys("p")
    session.wait_for_text("PAUSED")
    session.send_keys("p")
    session.wait_gone("PAUSED")

    session.send_keys("?")
    screen = session.wait_for_text("lane-cockpit keys")
    assert "pause / resume" in screen and "quit" in screen and "next theme" in screen
    session.send_keys("Escape")
    session.wait_gone("lane-cockpit keys")

    coloured = session.capture(escapes=True)
    session.send_keys("t")
    session.wait_for(lambda _: session.capture(escapes=True) != coloured, what="new colours")
    wait_figures(session, HIT_RATE, PREFILL_RATE)

    session.send_keys("e")
    session.wait_for(lambda _: any(demo.cwd.rglob("cockpit-receipt-*.md")), what="receipt file")
    receipt = next(demo.cwd.rglob("cockpit-receipt-*.md"))
    session.wait_for(lambda _: receipt.stat().st_size > 0, what="receipt written")
    text = receipt.read_text(encoding="utf-8")
    assert f"## The lane {first}" in text
    assert re.search(r"\| Requests completed \| [\d,]+ \|", text), text
    assert re.search(r"\| Prefix-cache hit rate \| \d{1,3}\.\d% \|", text), text

    session.send_keys("m")
    session.wait_for_text("filter the lane by model")
    session.type_text("some-model")
    session.send_keys("Enter")
    session.wait_for(lambda s: "model 'some-model'" in status_line(s), what="model filter")

    session.send_keys("Escape")  # back to the overview
    wait_overview(session)
    session.send_keys("q")
    assert session.wait_exited() == 0
    assert demo.demo_folders() == [], "the demo removed its temp folder"


def test_prometheus_demo_reaches_figures(demo_factory: list[Demo], tmp_path: Path) -> None:
    require_binary("prometheus")
    demo = start(demo_factory, tmp_path, (160, 48), "--prometheus")
    # Prometheus 2.42 hands new targets to its scrapers on two 5 s tickers: the first scrape
    # comes 5-10 s after it starts, a rate needs the 1 s scrape after it, and the cockpit sees
    # it on its next 5 s refresh (not backed off: the lane was missing, not failing). That is
    # 18 s at worst on an idle machine.
    open_first_lane(demo.session, timeout=PROMETHEUS_FIRST_RATE_S)
    wait_figures(demo.session, HIT_RATE, PREFILL_RATE, ROOF_P, timeout=PROMETHEUS_FIRST_RATE_S)
    demo.session.send_keys("q")
    assert demo.session.wait_exited(timeout=15) == 0
    assert demo.demo_folders() == []


def test_terminal_hang_up_ends_the_cockpit_and_cleans_up(
    demo_factory: list[Demo], tmp_path: Path
) -> None:
    """The ssh session drops: the cockpit must end, not live on unseen with its simulators."""
    demo = start(demo_factory, tmp_path, (100, 30))
    wait_overview(demo.session)
    pid = demo.session.pid
    demo.session.kill()  # the terminal goes away: SIGHUP (and SIGCONT) to the cockpit
    deadline = time.monotonic() + STALL_S - 2
    while not ended(pid):
        assert time.monotonic() < deadline, "still running after its terminal hung up"
        time.sleep(0.1)
    assert demo.demo_folders() == [], "the demo removed its temp folder"


def test_sigterm_quits_at_once(demo_factory: list[Demo], tmp_path: Path) -> None:
    demo = start(demo_factory, tmp_path, (100, 30))
    wait_overview(demo.session)
    os.kill(demo.session.pid, signal.SIGTERM)
    # Well inside the 5 s refresh period: the signal wakes the app, not its next timer.
    assert demo.session.wait_exited(timeout=4) == 128 + signal.SIGTERM
    assert demo.demo_folders() == []


def test_a_killed_cockpit_leaves_no_simulator_and_no_files(
    demo_factory: list[Demo], tmp_path: Path
) -> None:
    """SIGKILL runs no handler; the simulators, a process of their own, see their stdin close."""
    demo = start(demo_factory, tmp_path, (100, 30))
    wait_overview(demo.session)
    children = Path(f"/proc/{demo.session.pid}/task/{demo.session.pid}/children").read_text()
    (simulators,) = map(int, children.split())
    assert "cockpit.demo" in Path(f"/proc/{simulators}/cmdline").read_text()
    os.kill(demo.session.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not ended(simulators) or demo.demo_folders():
        assert time.monotonic() < deadline, "the simulators outlived their cockpit"
        time.sleep(0.1)


def test_prometheus_asked_for_but_missing_is_said_on_screen(
    demo_factory: list[Demo], tmp_path: Path
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    demo = start(demo_factory, tmp_path, (120, 36), "--prometheus", PATH=str(empty))
    wait_overview(demo.session)
    screen = demo.session.wait_for_text("prometheus is not on PATH", timeout=5.0)
    assert "the lanes are scraped" in screen, screen


def test_no_color_draws_without_colour(demo_factory: list[Demo], tmp_path: Path) -> None:
    demo = start(demo_factory, tmp_path, (100, 30), NO_COLOR="1")
    wait_overview(demo.session)
    screen = demo.session.capture(escapes=True)
    assert "\x1b[" in screen, "capture-pane -e shows styles (bold) at least"
    assert colour_codes(screen) == set()


def test_colour_codes_sees_colours() -> None:
    """The colour detector used above is able to fail."""
    assert colour_codes("\x1b[1;38;5;246mx\x1b[39;49m") == {"38;5;246"}
    assert colour_codes("\x1b[48;2;1;2;3m\x1b[31m") == {"48;2;1;2;3", "31"}
    assert colour_codes("\x1b[0m\x1b[1m\x1b[7m\x1b[39m") == set()


def test_whole_panes_sees_cut_panes() -> None:
    """The pane finder used above is able to fail."""
    screen = "╭─ A ─╮ ╭─ B ─╮\n│ 1   │ │ 2   │\n╰─────╯ │ 3   │\n╭─ C ─╮ ╰─────╯\n│ 4   │"
    assert whole_panes(screen) == ["A", "B"]
    assert whole_panes(screen.replace("╰─────╯ │", "╰─────╯  ")) == ["A"]

"""The cockpit sits still while idle: in a real terminal (tmux), its threads wait instead of
polling, and keys, a lone Escape included, still arrive at once.

The sources are the demo's simulators in this process, scraped directly, so every thread
counted is the cockpit's own.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.demo import Demo, demo_config_yaml
from tests.support.cli import COCKPIT
from tests.support.repo import require_binary
from tests.support.tmux import TmuxSession

pytestmark = [pytest.mark.slow, pytest.mark.tmux]

WINDOW = re.compile(r"│ (\d+[mhd]) │")
IDLE_S = 3.0
MAX_WAKEUPS = 40
"""Per thread in IDLE_S: Textual's input thread wakes ten times a second to check for its
exit; a thread that polls faster (a busy loop, a timer per frame) goes well over."""


def wakeups(pid: int) -> dict[int, int]:
    """Voluntary context switches of each of the process's threads so far."""
    counts = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        status = (task / "status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("voluntary"))
        counts[int(task.name)] = int(line.split()[1])
    return counts


@pytest.fixture
def cockpit(tmp_path: Path) -> Iterator[TmuxSession]:
    with Demo() as demo:
        config = tmp_path / "config.yaml"
        config.write_text(demo_config_yaml(demo), encoding="utf-8")
        session = TmuxSession(
            require_binary("tmux"),
            [COCKPIT, "--config", str(config), "--refresh", "60"],
            width=160,
            height=48,
            cwd=tmp_path,
            env={"TERM": "tmux-256color"},
        )
        try:
            session.wait_for_text("Hit rate", timeout=15)
            yield session
        finally:
            session.kill()


def test_no_thread_polls_while_idle_and_keys_still_arrive(cockpit: TmuxSession) -> None:
    time.sleep(1.0)  # the first paint's follow-ups
    before = wakeups(cockpit.pid)
    time.sleep(IDLE_S)
    after = wakeups(cockpit.pid)
    busy = {tid: after[tid] - count for tid, count in before.items() if tid in after}
    assert max(busy.values()) <= MAX_WAKEUPS, busy
    cockpit.send_keys("?")
    cockpit.wait_for_text("command palette", timeout=5)
    cockpit.send_keys("Escape")  # a lone escape: delivered once its time-out passes
    cockpit.wait_gone("command palette", timeout=5)
    cockpit.send_keys("q")
    assert cockpit.wait_exited(timeout=10) == 0


def test_stops_and_continues_with_no_suspend_leave_keys_working_and_still_quit(
    cockpit: TmuxSession,
) -> None:
    """SIGCONT alone (after a SIGSTOP, or from a debugger) makes Textual start application mode
    again: keys must still arrive, and the exit must not wait on a stale input thread."""
    for _ in range(3):
        os.kill(cockpit.pid, signal.SIGSTOP)
        time.sleep(0.3)
        os.kill(cockpit.pid, signal.SIGCONT)
        time.sleep(0.5)
    cockpit.send_keys("?")
    cockpit.wait_for_text("command palette", timeout=5)
    cockpit.send_keys("Escape")
    cockpit.wait_gone("command palette", timeout=5)
    cockpit.send_keys("q")
    assert cockpit.wait_exited(timeout=10) == 0

"""The full-screen cockpit refuses a terminal it can't draw on, in one line pointing to
`cockpit report`, before it writes a single escape sequence."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import COCKPIT
from tests.support.repo import HERMES_FIXTURES, require_fixture


def start(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """The command, its stdin a closed pipe; a cockpit that starts drawing is ended at 15 s."""
    try:
        return subprocess.run(
            [COCKPIT, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env={**os.environ, **env},
            timeout=15,
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"{args} ran the full-screen cockpit: {(expired.stderr or b'')[:300]!r}")


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    target = tmp_path / "state.db"
    shutil.copyfile(require_fixture(HERMES_FIXTURES / "state-v22.db"), target)
    return str(target)


def assert_refused(done: subprocess.CompletedProcess[bytes], reason: str) -> None:
    said = done.stderr.decode("ascii")  # the refusal fits any terminal
    assert done.returncode == 2, said
    assert done.stdout == b""
    assert len(said.splitlines()) == 1, said
    assert reason in said and "`cockpit report`" in said, said
    assert b"\x1b" not in done.stderr


@pytest.mark.parametrize("command", [[], ["run"], ["demo"]], ids=["default", "run", "demo"])
def test_term_dumb_is_refused(ledger: str, command: list[str]) -> None:
    args = command if command == ["demo"] else [*command, "--ledger", ledger]
    assert_refused(start(args, {"TERM": "dumb"}), "TERM=dumb")


@pytest.mark.parametrize("command", [["run"], ["demo"]], ids=["run", "demo"])
def test_a_terminal_that_cant_carry_the_lines_is_refused(ledger: str, command: list[str]) -> None:
    """What Textual writes the screen through is ASCII: every line would show as `\\u2502`."""
    args = command if command == ["demo"] else [*command, "--ledger", ledger]
    env = {"TERM": "xterm-256color", "PYTHONIOENCODING": "ascii"}
    assert_refused(start(args, env), "encoding (ascii)")

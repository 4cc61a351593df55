"""A real terminal for end-to-end tests: one command in a private tmux server at a fixed size.

Each `TmuxSession` starts its own tmux server on a socket of its own (`tmux -S <path>` in a
folder of its own), so it never touches the user's tmux; `kill()` stops that server and
whatever still runs in it, and removes the socket and its folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def zombie(pid: int) -> bool:
    """The process has exited but its parent has not collected its status yet."""
    try:
        return "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def ended(pid: int) -> bool:
    """Gone, or a zombie whose parent (tmux, or init once tmux is gone) has not reaped it yet."""
    return not Path(f"/proc/{pid}").exists() or zombie(pid)


class TmuxSession:
    """`command` running in a detached tmux window of `width` × `height` cells."""

    def __init__(
        self,
        tmux: str,
        command: Sequence[str],
        *,
        width: int,
        height: int,
        cwd: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.tmux = tmux
        # Short, under /tmp: a socket path over ~100 bytes (pytest's tmp_path) is refused.
        self._folder = Path(tempfile.mkdtemp(prefix="lc-tmux-"))
        self.socket = str(self._folder / "socket")
        self.target = "cockpit"
        # A COLUMNS / LINES inherited from the test runner would override the window's size.
        env_args = [f"{name}={value}" for name, value in (env or {}).items()]
        self._run(
            "-f", "/dev/null",
            "new-session", "-d", "-s", self.target, "-x", str(width), "-y", str(height),
            "-c", str(cwd), "--", "env", "-u", "COLUMNS", "-u", "LINES", *env_args, *command,
            ";", "set-option", "-w", "-t", self.target, "remain-on-exit", "on",
        )  # fmt: skip

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            [self.tmux, "-S", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {done.stderr.strip() or done.returncode}")
        return done.stdout

    def send_keys(self, *keys: str) -> None:
        """Keys as tmux names them (`Tab`, `Escape`, `Enter`, `q`); `literal` for text."""
        self._run("send-keys", "-t", self.target, *keys)

    def type_text(self, text: str) -> None:
        self._run("send-keys", "-t", self.target, "-l", text)

    def capture(self, *, escapes: bool = False) -> str:
        """The visible screen as text; with `escapes`, with its colour and style sequences."""
        return self._run("capture-pane", "-p", "-t", self.target, *(["-e"] if escapes else []))

    def resize(self, width: int, height: int) -> None:
        self._run("resize-window", "-t", self.target, "-x", str(width), "-y", str(height))

    def pane_value(self, name: str) -> str:
        """A tmux format variable of the pane, e.g. `pane_dead`, `pane_dead_status`."""
        return self._run("display-message", "-p", "-t", self.target, f"#{{{name}}}").strip()

    @property
    def pid(self) -> int:
        """The command's process id (tmux runs it as the pane's process)."""
        return int(self.pane_value("pane_pid"))

    @property
    def exited(self) -> bool:
        return self.pane_value("pane_dead") == "1"

    def wait_for(
        self, predicate: Callable[[str], bool], timeout: float = 10.0, what: str = ""
    ) -> str:
        """The first screen for which `predicate` holds; AssertionError with the last screen."""
        deadline = time.monotonic() + timeout
        screen = ""
        while True:
            screen = self.capture()
            if predicate(screen):
                return screen
            if time.monotonic() > deadline:
                seen = f"--- screen ---\n{screen}"
                raise AssertionError(
                    f"not seen within {timeout:.0f} s: {what or predicate}\n{seen}"
                )
            time.sleep(0.1)

    def wait_for_text(self, text: str, timeout: float = 10.0) -> str:
        return self.wait_for(lambda screen: text in screen, timeout, repr(text))

    def wait_gone(self, text: str, timeout: float = 10.0) -> str:
        return self.wait_for(lambda screen: text not in screen, timeout, f"{text!r} gone")

    def wait_exited(self, timeout: float = 10.0) -> int:
        """The command's exit status once it has exited (AssertionError if a signal ended it)."""
        deadline = time.monotonic() + timeout
        # tmux may see the terminal close a moment before it collects the exit status.
        while not (status := self.pane_value("pane_dead_status")):
            killer = self.pane_value("pane_dead_signal")
            if killer:
                raise AssertionError(f"killed by signal {killer}:\n{self.capture()}")
            self._nudge_if_unreaped()
            if time.monotonic() > deadline:
                raise AssertionError(f"still running after {timeout:.0f} s:\n{self.stacks()}")
            time.sleep(0.1)
        return int(status)

    def _nudge_if_unreaped(self) -> None:
        """Debian's tmux is built with libutempter, whose own SIGCHLD handler, in place while
        tmux updates utmp as the pane's terminal closes, can swallow the SIGCHLD of the pane's
        process (tmux/tmux#311, #4559): it has exited, yet stays a zombie and the pane never
        dies. Another SIGCHLD makes the server reap it."""
        if zombie(self.pid):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(self._run("display-message", "-p", "#{pid}").strip()), signal.SIGCHLD)

    def stacks(self) -> str:
        """Where a hung command is stuck: SIGABRT makes Python's faulthandler (on when the command
        runs with PYTHONFAULTHANDLER=1) print every thread's stack on the pane before it dies."""
        pid = self.pane_value("pane_pid")
        if pid.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGABRT)
            deadline = time.monotonic() + 5
            while not self.exited and time.monotonic() < deadline:
                time.sleep(0.1)
        history = self._run("capture-pane", "-p", "-t", self.target, "-S", "-200")
        return f"--- screen and scrollback after SIGABRT ---\n{history}"

    def kill(self) -> None:
        """Stop this private server (and the command, if it still runs); remove its socket."""
        subprocess.run(
            [self.tmux, "-S", self.socket, "kill-server"],
            capture_output=True,
            timeout=10,
            check=False,
        )
        shutil.rmtree(self._folder, ignore_errors=True)

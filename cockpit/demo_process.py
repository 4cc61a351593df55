"""`cockpit demo`'s simulators, run as a process of their own (`python -m cockpit.demo`).

The cockpit starts them first. They boot on another core while the cockpit loads Textual, then
hand over one line: the config of the lanes and ledger they serve. The cockpit then reads them as
it reads any lane and ledger. The simulators stop and remove their files when their stdin
closes, so they never outlive the cockpit, even one that is killed.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import NamedTuple

READY_TIMEOUT_S = 30.0
"""Long enough for a real Prometheus to come up (`cockpit demo --prometheus`)."""
STOP_TIMEOUT_S = 10.0
"""How long the simulators may take to stop and remove their files before they are killed."""


class DemoProcessError(Exception):
    """The simulators did not start, or answered something else than their config."""


class DemoReady(NamedTuple):
    config_text: str
    """The cockpit's config for the simulators, as JSON (which is YAML: parse_config reads it)."""
    note: str
    """Something the user should know, such as why no Prometheus runs; empty if nothing."""


class DemoProcess:
    """The simulators' process: `ready()` waits for their config, `stop()` ends them."""

    def __init__(self, command: Sequence[str]) -> None:
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115  closed by stop()
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            start_new_session=True,  # the terminal's signals are the cockpit's to handle
        )
        self._line = b""

    @classmethod
    def start(cls, *, prometheus: bool = False) -> DemoProcess:
        command = [sys.executable, "-m", "cockpit.demo"]
        return cls([*command, "--prometheus"] if prometheus else command)

    @property
    def pid(self) -> int:
        return self._process.pid

    def ready(self, timeout: float = READY_TIMEOUT_S) -> DemoReady:
        """The simulators' config, once they serve it; DemoProcessError if they can't."""
        line = self._read_line(timeout)
        try:
            answer = json.loads(line)
            return DemoReady(json.dumps(answer["config"]), str(answer.get("note") or ""))
        except (ValueError, TypeError, KeyError):
            raise DemoProcessError(
                f"the demo's simulators answered {line[:120]!r} instead of their config"
            ) from None

    def _read_line(self, timeout: float) -> str:
        stdout = self._process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while b"\n" not in self._line:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    self.stop()
                    raise DemoProcessError(f"the demo's simulators were not ready in {timeout:g} s")
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    raise DemoProcessError(self._why_it_ended())
                self._line += chunk
        return self._line.partition(b"\n")[0].decode("utf-8", "replace")

    def _why_it_ended(self) -> str:
        code = self._process.wait()
        self._errors.seek(0)
        said = self._errors.read().decode("utf-8", "replace").strip().splitlines()
        why = said[-1] if said else "nothing said"
        return f"the demo's simulators did not start (exit {code}): {why}"

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Close their stdin, so they stop and remove their files; kill them if that stalls."""
        if self._process.stdin is not None:
            self._process.stdin.close()  # nothing was written to it: closing can't fail
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._errors.close()

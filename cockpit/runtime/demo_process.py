"""`cockpit demo`'s simulators as a process of their own (`python -m cockpit.demo`): they boot on
another core while the cockpit loads Textual, then hand over one line (their temp folder and the
config of what they serve). They stop and remove their folder when their stdin closes, so they
never outlive the cockpit, even one that is killed."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from cockpit.runtime.poller import LaneFeed

READY_TIMEOUT_S = 30.0  # long enough for a real Prometheus to come up (`--prometheus`)
STOP_TIMEOUT_S = 30.0  # Prometheus may take 15 s to stop; then they are killed


class DemoProcessError(Exception):
    """The simulators did not start, or answered something other than their config."""


class DemoReady(NamedTuple):
    config_text: str
    """The cockpit's config for the simulators, as YAML (parse_config reads it)."""
    note: str
    """Something the user should know, such as why no Prometheus runs; empty if nothing."""
    history: Mapping[str, Sequence[tuple[float, str]]]
    """Lane name -> (time, exposition) of its simulated warm start, oldest first."""

    def warm(self, lanes: Sequence[LaneFeed]) -> None:
        """Give each directly scraped lane its warm start, as if scraped all along."""
        from cockpit.runtime.feeds import ScrapeLaneFeed

        for feed in lanes:
            if isinstance(feed, ScrapeLaneFeed):
                for at, text in self.history.get(feed.name, ()):
                    feed.source.ingest(text, at)


class DemoProcess:
    """The simulators' process: `ready()` waits for their config, `stop()` ends them."""

    def __init__(self, command: Sequence[str]) -> None:
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115  closed by stop()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            start_new_session=True,  # the terminal's signals are the cockpit's to handle
        )
        self._received = b""
        self._folder: Path | None = None

    @classmethod
    def start(cls, *, prometheus: bool = False) -> DemoProcess:
        return cls([sys.executable, "-m", "cockpit.demo", *["--prometheus"] * prometheus])

    def ready(self, timeout: float = READY_TIMEOUT_S) -> DemoReady:
        """The simulators' config, once they serve it; DemoProcessError if they can't."""
        import yaml  # loaded already, for the profiles

        line = self._read_line(timeout)
        try:
            answer = json.loads(line)
            self._folder = Path(answer["folder"])
            # YAML from the data, not the JSON text: YAML 1.1 reads `1e-05` as a string
            config = yaml.safe_dump(answer["config"], sort_keys=False)
            history = {
                str(lane): [(float(at), str(text)) for at, text in scrapes]
                for lane, scrapes in (answer.get("history") or {}).items()
            }
            return DemoReady(config, str(answer.get("note") or ""), history)
        except (ValueError, TypeError, KeyError, AttributeError):
            raise DemoProcessError(
                f"the demo's simulators answered {line[:120]!r} instead of their config"
            ) from None

    def _read_line(self, timeout: float) -> str:
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while b"\n" not in self._received:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise DemoProcessError(f"the demo's simulators were not ready in {timeout:g} s")
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    raise DemoProcessError(self._why_it_ended())
                self._received += chunk
        return self._received.partition(b"\n")[0].decode("utf-8", "replace")

    def _why_it_ended(self) -> str:
        try:
            ended = f"exit {self.process.wait(STOP_TIMEOUT_S)}"
        except subprocess.TimeoutExpired:
            ended = "its stdout closed"
        self._errors.seek(0)
        said = self._errors.read().decode("utf-8", "replace").strip().splitlines()
        why = said[-1] if said else "nothing said"
        return f"the demo's simulators did not start ({ended}): {why}"

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Close their stdin, so they stop and remove their folder; should that stall, kill them
        and what they started (Prometheus) and remove it from here."""
        if self.process.stdin is not None:
            self.process.stdin.close()  # nothing was written to it: closing can't fail
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)  # their own session: their group
            self.process.wait()
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._errors.close()

"""The installed `cockpit` command, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
"""The console script the editable install put beside this interpreter."""


def run_cockpit(
    *args: str,
    cwd: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`cockpit ARGS` to its end, its output captured as text.

    The environment is this one, with a home of its own when `home` is given (`HOME`, and
    `XDG_CONFIG_HOME` in it, so no config of the machine's is read), then `env` on top;
    `prefix` goes before the command (`unshare --net`, `setpriv ...`)."""
    environment = dict(os.environ)
    if home is not None:
        environment["HOME"] = str(home)
        environment["XDG_CONFIG_HOME"] = str(home / ".config")
    environment.update(env or {})
    return subprocess.run(
        [*prefix, COCKPIT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        cwd=cwd,
    )

"""The `cockpit` command, run as a user runs it (`run_cockpit`, a process of its own) or through
its `main(argv)` in this process (`cockpit_here`: the same arguments, environment, folder and
captured output, without a Python start-up per call)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
"""The console script the editable install put beside this interpreter."""


def _environment(home: Path | None, env: Mapping[str, str] | None) -> dict[str, str]:
    """This environment, with a home of its own when `home` is given (`HOME`, and
    `XDG_CONFIG_HOME` in it, so no config of the machine's is read), then `env` on top."""
    environment = dict(os.environ)
    if home is not None:
        environment["HOME"] = str(home)
        environment["XDG_CONFIG_HOME"] = str(home / ".config")
    environment.update(env or {})
    return environment


def run_cockpit(
    *args: str,
    cwd: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`cockpit ARGS` to its end, its output captured as text; `prefix` goes before the
    command (`unshare --net`, `setpriv ...`). See `_environment` for `home` and `env`."""
    return subprocess.run(
        [*prefix, COCKPIT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_environment(home, env),
        cwd=cwd,
    )


@contextlib.contextmanager
def _inside(environment: Mapping[str, str], cwd: Path | None) -> Iterator[None]:
    """os.environ and the working folder set for the while, then put back."""
    saved, folder = dict(os.environ), Path.cwd()
    os.environ.clear()
    os.environ.update(environment)
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(folder)
        os.environ.clear()
        os.environ.update(saved)


def cockpit_here(
    *args: str,
    cwd: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`cockpit ARGS` through `main(argv)` in this process, as `run_cockpit` runs it: the same
    environment and folder, stdout and stderr captured, the exit code argparse or main gives.
    An exception out of main fails the calling test (where a process would print a traceback).
    """
    from cockpit.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with (
        _inside(_environment(home, env), cwd),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code: int | str | None = main(list(args))
        except SystemExit as exit_:
            code = exit_.code
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess([COCKPIT, *args], returncode, out.getvalue(), err.getvalue())

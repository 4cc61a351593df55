"""`python -m cockpit.demo`: the demo's simulators as a process of their own.

`cockpit demo` starts this, as a real engine and agent run apart from the cockpit that watches
them. It starts the simulated lanes and Hermes (and Prometheus with `--prometheus`) and writes
one JSON line to stdout: `{"folder": <its temp folder>, "config": <the cockpit's config data>,
"note": <what to tell the user>, "history": <each lane's name: [time, exposition] pairs of its
warm start, when the cockpit scrapes the lanes itself>}`. Then it runs until its stdin closes:
when the cockpit quits, and also when the cockpit is killed. Then it stops everything and
removes its temp folder. If it can't start, it exits 1 with the reason as the last line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from cockpit.demo import Demo, demo_config_data

RECORD_EVERY_S = 15
"""The warm start's expositions handed to the cockpit: one every trend step of a 5 min window."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cockpit.demo",
        description="the demo's simulated lanes and Hermes, until stdin closes",
    )
    parser.add_argument("--prometheus", action="store_true", help="a real Prometheus too")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_cleanly)
    record_every = 0 if args.prometheus else RECORD_EVERY_S  # Prometheus scrapes from its start
    demo = Demo(record_every=record_every, with_prometheus=args.prometheus)
    demo.start()  # if it raises, the last line says why
    try:
        ready = {
            "folder": str(demo.folder),
            "config": demo_config_data(demo),
            "note": demo.prometheus_note,
            "history": {name: lane.warm_history for name, lane in demo.lanes.items()},
        }
        with contextlib.suppress(BrokenPipeError):  # the cockpit is already gone
            sys.stdout.write(json.dumps(ready) + "\n")
            sys.stdout.flush()
        _silence_stdout()
        sys.stdin.buffer.read()  # returns at end of file: the cockpit is gone
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM doesn't cut the clean-up
        demo.stop()
    return 0


def _silence_stdout() -> None:
    """Nobody reads stdout after the ready line: anything written later goes nowhere rather
    than filling the pipe (or failing at exit, if the cockpit is gone)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m cockpit.demo`: the demo's simulators as a process of their own.

`cockpit demo` starts this, as a real engine and agent run apart from the cockpit that watches
them. It starts the simulated lanes and Hermes (and Prometheus with `--prometheus`), writes one
JSON line to stdout, `{"config": <the cockpit's config data>, "note": <what to tell the user>}`,
then runs until its stdin closes: when the cockpit quits, and also when the cockpit is killed.
Then it stops everything and removes its temp folder. If it can't start, it says why on stderr
and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from cockpit.demo import Demo, demo_config_data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cockpit.demo",
        description="the demo's simulated lanes and Hermes, until stdin closes",
    )
    parser.add_argument("--prometheus", action="store_true", help="a real Prometheus too")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_cleanly)
    demo = Demo(with_prometheus=args.prometheus)
    try:
        demo.start()
    except Exception as exc:  # everything is already stopped and removed by start()
        print(exc, file=sys.stderr)
        return 1
    try:
        ready = {"config": demo_config_data(demo), "note": demo.prometheus_note}
        with contextlib.suppress(BrokenPipeError):  # the cockpit is already gone
            sys.stdout.write(json.dumps(ready) + "\n")
            sys.stdout.flush()
        sys.stdin.buffer.read()  # returns at end of file: the cockpit is gone
    finally:
        demo.stop()
    return 0


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    raise SystemExit(main())

"""The cockpit with its asyncio task count sampled: `python -m bench._tasks FILE [cockpit args]`.

Runs the `cockpit` command line as it is (`cockpit.cli.main.main`) and, every `TASKS_EVERY_S`
seconds, appends `tasks <epoch s> <asyncio tasks> <threads>` to FILE. The count is taken in
the event loop the app runs in, found through a generic hook of asyncio (an event loop policy
that notes the loops it makes), so the cockpit itself carries nothing for the benchmarks.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

TASKS_EVERY_S = 5.0


class NotingPolicy(asyncio.DefaultEventLoopPolicy):
    """The default policy, noting each event loop it makes."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[asyncio.AbstractEventLoop] = []

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        self.loops.append(loop)
        return loop


def sample_tasks(policy: NotingPolicy, out: Path) -> None:
    """Forever, in a thread of its own: the running loop's task count, written in that loop."""

    def write() -> None:
        line = f"tasks {time.time():.6f} {len(asyncio.all_tasks())} {threading.active_count()}"
        with out.open("a", encoding="utf-8") as file:
            file.write(line + "\n")

    while True:
        time.sleep(TASKS_EVERY_S)
        for loop in [loop for loop in policy.loops if loop.is_running()]:
            loop.call_soon_threadsafe(write)


def main(argv: list[str]) -> int:
    from cockpit.cli.main import main as cockpit

    policy = NotingPolicy()
    asyncio.set_event_loop_policy(policy)
    threading.Thread(target=sample_tasks, args=(policy, Path(argv[0])), daemon=True).start()
    return cockpit(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

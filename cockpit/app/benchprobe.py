"""An opt-in probe for the benchmarks: `COCKPIT_BENCH_PROBE=path` makes the app append lines.

- `first_frame <epoch s>`: once, after the first screen update in which every pane has data;
- `tasks <epoch s> <asyncio tasks> <threads>`: after every refresh the app handles.

Unset (the default), nothing is written and the app pays one attribute test per refresh.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Probe:
    """Appends one short line per event to the probe file."""

    path: Path
    first_frame_seen: bool = False

    @classmethod
    def from_env(cls) -> Probe | None:
        path = os.environ.get("COCKPIT_BENCH_PROBE")
        return cls(Path(path)) if path else None

    def _write(self, line: str) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def first_frame(self) -> None:
        if not self.first_frame_seen:
            self.first_frame_seen = True
            self._write(f"first_frame {time.time():.6f}")

    def tasks(self) -> None:
        tasks = len(asyncio.all_tasks())
        self._write(f"tasks {time.time():.6f} {tasks} {threading.active_count()}")

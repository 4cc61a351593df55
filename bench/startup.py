"""First full frame: process start to the first screen update where every pane has data.

`python -m bench startup`. Each run starts, in a 160×48 tmux pane and in this order, a bare
Textual app (Header, one Static, Footer), `cockpit demo` (which starts its simulators as a
process of their own, first, and waits for them), and the cockpit on external sources (the
demo's simulators in this process, read through a real Prometheus and by direct scrape): a
config listing both lanes opens on their overview (its first frame: the first fleet read on
screen), one listing one lane on its panes (every pane with data).
The time is taken here just before tmux starts the process, and the first full frame is the
first capture of the tmux pane (every 10 ms) that shows it fully drawn with data: the keys bar
and no placeholder left (`common.full_frame`), as a user sees it. Ratios to the bare app are
taken within each run.
Two yardsticks show what the cockpit pays before its UI exists: the bare app after importing
the libraries the cockpit uses (yaml, httpx, aiosqlite, plotext, textual_plotext), and after
importing those and the cockpit's own modules.
Targets, for the cockpit on external sources: <= 2.0× the bare app, and <= half the ~2.4 s a
two-poll monitor needs for its first rate.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.common import (
    TARGETED,
    Tmux,
    compared_subjects,
    load_average,
    spread,
    table,
    tmux_server,
    wait_full_frame,
    warm_bytecode,
)

LIBRARIES_SUBJECT = "bare app + cockpit's libraries"
MODULES_SUBJECT = "bare app + cockpit's libraries and modules"
YARDSTICKS = (LIBRARIES_SUBJECT, MODULES_SUBJECT)
"""Not targets: the bare app after importing the cockpit's libraries first, and after
importing those and every module of the cockpit's own that it loads before its first frame
(nothing read, composed or drawn): what the cockpit pays before its UI exists."""
RATIO_TARGET = 2.0
TWO_POLL_RATE_S = 2.4
FIRST_FRAME_MAX_S = TWO_POLL_RATE_S / 2
RUNS = 5


def first_frame(tmux: Tmux, name: str, command: Sequence[str]) -> tuple[float, dict[str, float]]:
    """Seconds from start to the first full frame on screen, and what that screen shows."""
    started = time.time()
    window = tmux.start(command)
    try:
        shown, screen = wait_full_frame(window)
    finally:
        window.stop()
    return shown - started, {"dashes": screen.count("—")}


def run(runs: int = RUNS) -> dict[str, Any]:
    warm_bytecode()
    load_before = load_average()
    times: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    screens: dict[str, dict[str, float]] = {}
    with compared_subjects() as (_, compared), tmux_server() as tmux:
        bare_name, bare_command = next(iter(compared.items()))
        subjects = {
            bare_name: bare_command,
            LIBRARIES_SUBJECT: [*bare_command, "--libraries"],
            MODULES_SUBJECT: [*bare_command, "--modules"],
            **compared,
        }
        for _ in range(runs):
            bare = 0.0
            for name, command in subjects.items():
                seconds, screen = first_frame(tmux, name, command)
                times.setdefault(name, []).append(seconds)
                screens[name] = screen
                if name == bare_name:
                    bare = seconds
                else:
                    ratios.setdefault(name, []).append(seconds / bare)
    result: dict[str, Any] = {
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "first_frame_s": {name: spread(values) for name, values in times.items()},
        "ratio_to_bare": {name: spread(values, 3) for name, values in ratios.items()},
        "last_screen": screens,
        "targets": {"ratio_to_bare_max": RATIO_TARGET, "first_frame_max_s": FIRST_FRAME_MAX_S},
    }
    cockpits = TARGETED
    result["ok"] = all(
        statistics.median(ratios[name]) <= RATIO_TARGET for name in cockpits
    ) and all(statistics.median(times[name]) <= FIRST_FRAME_MAX_S for name in cockpits)
    print_table(result)
    return result


def print_table(result: dict[str, Any]) -> None:
    rows = []
    for name, times in result["first_frame_s"].items():
        ratio = result["ratio_to_bare"].get(name)
        ratio_text = (
            f"{ratio['median']:.2f} ({ratio['min']:.2f}–{ratio['max']:.2f})" if ratio else "1"
        )
        screen = result["last_screen"][name]
        frame = f"{times['median']:.3f} ({times['min']:.3f}–{times['max']:.3f})"
        rows.append((name, frame, ratio_text, screen["dashes"]))
    header = ("subject", "first frame s med (min–max)", "× bare", "— on screen (last run)")
    print(table(rows, header))
    print(f"load average before {result['load_average_before']}, after "
          f"{result['load_average_after']}; targets <= {RATIO_TARGET}× bare and "
          f"<= {FIRST_FRAME_MAX_S:g} s")  # fmt: skip
    print("all targets met" if result["ok"] else "TARGET MISSED")


if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else RUNS
    print(json.dumps(run(runs), indent=2))

"""Soak: `cockpit demo --refresh 1` in a 160×48 tmux pane for 30 minutes (`--minutes N`).

`python -m bench soak` (or `python -m bench.soak --minutes 10`). Every 10 s: RSS, open file
descriptors (/proc/PID/fd), threads (/proc/PID/task); every 5 s its asyncio task count, taken
in its event loop by the `bench._tasks` wrapper it runs under. The demo's simulators are a
process of their own: their RSS is shown beside, not counted. Warm-up is the first fifth of
the run (at most 5 minutes). Targets: RSS growth <= 5 MB after warm-up; no growth in fds,
threads or tasks. Growth is the median of the last five samples minus the median of the
first five after warm-up, so one sample caught mid-refresh doesn't decide it.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    PYTHON,
    RESULTS,
    children,
    load_average,
    open_fds,
    rss_mb,
    threads,
    tmux_server,
    wait_full_frame,
    warm_bytecode,
)

RSS_GROWTH_TARGET_MB = 5.0
SAMPLE_S = 10.0
COMMAND = ("demo", "--refresh", "1")


def task_counts(path: Path) -> list[tuple[float, int, int]]:
    """(time, asyncio tasks, threads) as `bench._tasks` wrote them."""
    rows = []
    for line in path.read_text().splitlines() if path.exists() else []:
        _, at, tasks, threads = line.split()
        rows.append((float(at), int(tasks), int(threads)))
    return rows


def _growth(values: list[float]) -> float:
    return statistics.median(values[-5:]) - statistics.median(values[:5])


def run(minutes: float = 30.0) -> dict[str, Any]:
    warm_bytecode()
    warmup_s = min(minutes * 60 / 5, 300.0)
    samples: list[dict[str, float]] = []
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp, tmux_server() as tmux:
        tasks_file = Path(tmp) / "tasks"
        window = tmux.start([PYTHON, "-m", "bench._tasks", str(tasks_file), *COMMAND])
        started = time.monotonic()
        try:
            wait_full_frame(window)
            while (elapsed := time.monotonic() - started) < minutes * 60:
                if not window.alive():
                    raise RuntimeError(f"the cockpit exited during the soak:\n{window.capture()}")
                samples.append(
                    {
                        "t": round(elapsed, 1),
                        "rss_mb": round(rss_mb(window.pid), 2),
                        "fds": open_fds(window.pid),
                        "threads": threads(window.pid),
                        "simulators_rss_mb": round(sum(map(rss_mb, children(window.pid))), 2),
                    }
                )
                time.sleep(SAMPLE_S)
            screen = window.capture()
        finally:
            window.stop()
        tasks = task_counts(tasks_file)
    after = [s for s in samples if s["t"] >= warmup_s]
    task_after = [n for t, n, _ in tasks if t - tasks[0][0] >= warmup_s] if tasks else []
    result: dict[str, Any] = {
        "minutes": minutes,
        "warmup_s": warmup_s,
        "task_samples": len(tasks),
        "rss_mb_at_warmup_end": after[0]["rss_mb"],
        "rss_mb_end": after[-1]["rss_mb"],
        "rss_mb_max": max(s["rss_mb"] for s in samples),
        "rss_growth_mb": round(_growth([s["rss_mb"] for s in after]), 2),
        "fds_growth": _growth([s["fds"] for s in after]),
        "fds_range": [min(s["fds"] for s in after), max(s["fds"] for s in after)],
        "threads_growth": _growth([s["threads"] for s in after]),
        "threads_range": [min(s["threads"] for s in after), max(s["threads"] for s in after)],
        "tasks_growth": _growth([float(n) for n in task_after]) if task_after else None,
        "tasks_range": [min(task_after), max(task_after)] if task_after else None,
        "simulators_rss_mb": [after[0]["simulators_rss_mb"], after[-1]["simulators_rss_mb"]],
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "stale_or_missing_on_screen": sum(screen.count(w) for w in ("stale", "missing")),
        "samples": samples,
        "target_rss_growth_mb": RSS_GROWTH_TARGET_MB,
    }
    result["ok"] = (
        result["rss_growth_mb"] <= RSS_GROWTH_TARGET_MB
        and result["fds_growth"] <= 0
        and result["threads_growth"] <= 0
        and (result["tasks_growth"] or 0) <= 0
    )
    print_summary(result)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"soak-{minutes:g}min.json").write_text(json.dumps(result, indent=2))
    return result


def print_summary(result: dict[str, Any]) -> None:
    print(
        f"soak {result['minutes']:g} min at 1 s refresh ({result['task_samples']} task counts), "
        f"warm-up {result['warmup_s']:.0f} s"
    )
    print(
        f"RSS {result['rss_mb_at_warmup_end']} -> {result['rss_mb_end']} MB "
        f"(growth {result['rss_growth_mb']} MB, target <= {RSS_GROWTH_TARGET_MB}), "
        f"max {result['rss_mb_max']} MB"
    )
    print(
        f"fds {result['fds_range']} growth {result['fds_growth']}; threads "
        f"{result['threads_range']} growth {result['threads_growth']}; asyncio tasks "
        f"{result['tasks_range']} growth {result['tasks_growth']}"
    )
    print(
        "the simulators (a process of their own, not counted): RSS "
        f"{' -> '.join(map(str, result['simulators_rss_mb']))} MB"
    )
    print(f"load average before {result['load_average_before']}, after "
          f"{result['load_average_after']}")  # fmt: skip
    print("all targets met" if result["ok"] else "TARGET MISSED")


def main() -> None:
    # A plain `kill` still runs the clean-up (quit the cockpit, stop the tmux server).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    run(parser.parse_args().minutes)


if __name__ == "__main__":
    main()

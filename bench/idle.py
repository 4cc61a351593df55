"""Idle cost at the default refresh (5 s): CPU % of one core over 60 s, and RSS.

`python -m bench idle`. Each run starts side by side, each in its own 160×48 tmux pane: a bare
Textual app (Header, one Static, Footer), the cockpit on external sources (the demo's simulated
lanes and Hermes writer run in this benchmark's process, so their cost is not the cockpit's),
once through a real Prometheus and once by direct scrape, and `cockpit demo` for reference (its
simulators run as a process of their own, not counted). After every pane has data and a 10 s
settle, CPU is utime + stime from /proc/PID/stat over the same 60 s for all of them; RSS at the
end.
Targets (cockpit on external sources): <= 1.0 % of one core, <= 64 MB RSS; and the cockpit on
a Prometheus lane with a live ledger (`cockpit on Prometheus, lane panes`: the demo's first lane
through Prometheus, its Hermes writer's ledger) <= 0.6 % of one core, the row `bench peers`
leaves to this benchmark.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from bench.common import (
    PANES_SUBJECTS,
    TARGETED,
    compared_subjects,
    cpu_seconds,
    load_average,
    rss_mb,
    spread,
    table,
    tmux_server,
    wait_full_frame,
    warm_bytecode,
)

CPU_TARGET_PCT = 1.0
PROMETHEUS_LEDGER = PANES_SUBJECTS[0]
"""A Prometheus lane's panes with a live ledger."""
PROMETHEUS_LEDGER_TARGET_PCT = 0.6
RSS_TARGET_MB = 64.0
SETTLE_S = 10.0
MEASURE_S = 60.0
RUNS = 3


def one_run(subjects: dict[str, list[str]], seconds: float) -> dict[str, Any]:
    """All subjects at once; CPU % over the same `seconds`, RSS at the end."""
    with tmux_server() as tmux:
        windows = {name: tmux.start(command) for name, command in subjects.items()}
        try:
            for window in windows.values():
                wait_full_frame(window)
            time.sleep(SETTLE_S)
            before = {name: cpu_seconds(w.pid) for name, w in windows.items()}
            started = time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - started
            after = {name: cpu_seconds(w.pid) for name, w in windows.items()}
            rss = {name: rss_mb(w.pid) for name, w in windows.items()}
        finally:
            for window in windows.values():
                window.stop()
    return {
        name: {"cpu_pct": 100 * (after[name] - before[name]) / elapsed, "rss_mb": rss[name]}
        for name in subjects
    }


def run(runs: int = RUNS, seconds: float = MEASURE_S) -> dict[str, Any]:
    warm_bytecode()
    load_before = load_average()
    per_run: list[dict[str, Any]] = []
    with compared_subjects() as (_, subjects):
        for _ in range(runs):
            per_run.append(one_run(subjects, seconds))
    names = list(per_run[0])
    result: dict[str, Any] = {
        "refresh_s": 5,
        "seconds": seconds,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "cpu_pct": {n: spread([r[n]["cpu_pct"] for r in per_run], 3) for n in names},
        "rss_mb": {n: spread([r[n]["rss_mb"] for r in per_run], 1) for n in names},
        "targets": {
            "cpu_pct_max": CPU_TARGET_PCT,
            "rss_mb_max": RSS_TARGET_MB,
            f"cpu_pct_max, {PROMETHEUS_LEDGER}": PROMETHEUS_LEDGER_TARGET_PCT,
        },
    }
    result["ok"] = result["cpu_pct"][PROMETHEUS_LEDGER]["median"] <= PROMETHEUS_LEDGER_TARGET_PCT
    result["ok"] = result["ok"] and all(
        result["cpu_pct"][n]["median"] <= CPU_TARGET_PCT
        and result["rss_mb"][n]["max"] <= RSS_TARGET_MB
        for n in TARGETED
    )
    print_table(result)
    return result


def print_table(result: dict[str, Any]) -> None:
    rows = []
    for name, cpu in result["cpu_pct"].items():
        rss = result["rss_mb"][name]
        rows.append(
            (
                name,
                f"{cpu['median']:.3f} ({cpu['min']:.3f}–{cpu['max']:.3f})",
                f"{rss['median']:.1f} ({rss['min']:.1f}–{rss['max']:.1f})",
            )
        )
    print(table(rows, ("subject", "CPU % of a core, med (min–max)", "RSS MB med (min–max)")))
    print(
        f"{result['seconds']:g} s at a {result['refresh_s']} s refresh, 160×48; load average "
        f"before {result['load_average_before']}, after {result['load_average_after']}; "
        f"targets <= {CPU_TARGET_PCT} % and <= {RSS_TARGET_MB:g} MB; {PROMETHEUS_LEDGER} "
        f"(a live ledger) <= {PROMETHEUS_LEDGER_TARGET_PCT} %"
    )
    print("all targets met" if result["ok"] else "TARGET MISSED")


if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else RUNS
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else MEASURE_S
    print(json.dumps(run(runs, seconds), indent=2))

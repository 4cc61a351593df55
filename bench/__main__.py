"""`make bench`: every benchmark in this folder, one after another, then one summary.

`python -m bench` runs them all; `python -m bench NAME ...` runs the named ones. The soak test
is long (30 minutes) and runs only when named: `python -m bench soak [--minutes N]`; so does
the side-by-side with vllmstat and vllm-htop, which installs them from PyPI first:
`python -m bench peers [--quick]`.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import time
from pathlib import Path

import bench

LONG = {"soak", "peers"}
RESULTS = Path(__file__).resolve().parent / "results"


def available() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.iter_modules(bench.__path__)
        if not info.name.startswith("_") and info.name != "common"
    )


def main(args: list[str]) -> int:
    names = [arg for arg in args if not arg.startswith("-")]
    minutes = None
    if "--minutes" in args:
        value = args[args.index("--minutes") + 1]
        minutes = float(value)
        names.remove(value)
    chosen = names or [name for name in available() if name not in LONG]
    unknown = sorted(set(chosen) - set(available()))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(available())}")
        return 2
    RESULTS.mkdir(exist_ok=True)
    summary: dict[str, object] = {}
    for name in chosen:
        module = importlib.import_module(f"bench.{name}")
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        if name == "soak" and minutes:
            summary[name] = module.run(minutes)
        elif name == "peers":
            summary[name] = module.run(quick="--quick" in args)
        else:
            summary[name] = module.run()
        print(f"({time.perf_counter() - started:.0f} s)", flush=True)
    out = RESULTS / f"bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(summary, indent=2, default=str))
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

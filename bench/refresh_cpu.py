"""The cockpit's CPU per refresh, whatever the machine's load: main-thread CPU time, headless.

`python -m bench refresh_cpu`. The demo's simulated vLLM (`gb300-dsv4`, seed 0, with `_created`
series, the engine `bench peers` serves) is read 0.5 s apart into a list of expositions, and a
loopback server answers them in turn, so every run reads the same texts. The real cockpit
(`cockpit --metrics-url … --hardware gb300 --model deepseek-v3 --gpus 4`, a direct scrape) then
runs headless at 160×48 in a process of its own (Textual's `run_test`: the whole app, its
refresh loop, views and compositor, everything but the terminal's writes) at a 1 s and a 2 s
refresh; after a 5 s warm-up, the CPU time of its main thread (`time.thread_time`, where the
event loop, the reads and the drawing run) over the next refreshes, divided by the refreshes
read. Thread CPU time is the process's own work, so it moves little with other work on the
machine, unlike a wall-clock CPU %; a busy machine still inflates it a little (shared caches).
The same texts are also served without their `_created` samples, as `bench peers`'s second
engine (a vLLM with `PROMETHEUS_DISABLE_CREATED_SERIES`). No target of its own: it is the
measure `bench peers`'s CPU rows are made of, for profiling.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.common import PYTHON, REPO, child_env, load_average, table

PRESET = "gb300-dsv4"
TEXTS = 60
TEXT_GAP_S = 0.5
WARMUP_S = 5.0
REFRESHES = 30
INTERVALS = (1.0, 2.0)


CREATED = re.compile(rb"[^#\s{]+_created[\s{]")
"""A `_created` sample's line."""


def without_created(text: bytes) -> bytes:
    """`text` without its `_created` samples."""
    lines = text.split(b"\n")
    return b"\n".join(line for line in lines if not CREATED.match(line))


def expositions(count: int = TEXTS) -> list[bytes]:
    from cockpit.demo.lane import SimulatedLane

    with SimulatedLane(PRESET, seed=0, created_series=True) as lane:
        taken = []
        for _ in range(count):
            taken.append(lane.render().encode())
            time.sleep(TEXT_GAP_S)
        return taken


@contextmanager
def replaying(texts: list[bytes]) -> Iterator[str]:
    """A /metrics URL answering `texts` in turn (the last one again once they run out)."""
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # kept alive, as vLLM's uvicorn

        def do_GET(self) -> None:
            body = texts[min(served[0], len(texts) - 1)]
            served[0] += 1
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def child(url: str, refresh_s: float, refreshes: int) -> None:
    """In its own process: the cockpit headless on `url`; prints its CPU per refresh as JSON."""
    from cockpit.cli import script

    main = script.load()  # as the console script imports the command line
    import cockpit.cli.main as cli

    measured: dict[str, float] = {}

    def run_headless(app: Any, last_words: Any = None) -> int:
        async def drive() -> None:
            async with app.run_test(size=(160, 48)):
                await asyncio.sleep(WARMUP_S)
                began, wall = time.thread_time(), time.monotonic()
                await asyncio.sleep(refresh_s * refreshes)
                measured["cpu_s"] = time.thread_time() - began
                measured["wall_s"] = time.monotonic() - wall

        asyncio.run(drive())
        return 0

    cli.run_app = run_headless  # the app as the command builds it, run headless
    argv = ["--metrics-url", url, "--refresh", f"{refresh_s:g}", "--hardware", "gb300",
            "--model", "deepseek-v3", "--gpus", "4"]  # fmt: skip
    main(argv)
    refreshed = measured["wall_s"] / refresh_s
    print(json.dumps({"ms_per_refresh": 1000 * measured["cpu_s"] / refreshed, **measured}))


def run() -> dict[str, Any]:
    load_before = load_average()
    texts = expositions()
    result: dict[str, Any] = {
        "preset": PRESET,
        "refreshes": REFRESHES,
        "load_average_before": load_before,
    }
    engines = {"with _created": texts, "without": [without_created(t) for t in texts]}
    measured: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="lc-bench-home-") as home:
        env = child_env({"HOME": home, "XDG_CONFIG_HOME": str(Path(home) / ".config")})
        for engine, served in engines.items():
            with replaying(served) as url:
                for interval in INTERVALS:
                    done = subprocess.run(
                        [PYTHON, "-m", "bench.refresh_cpu", "child", url, f"{interval:g}",
                         str(REFRESHES)],
                        capture_output=True, text=True, env=env, cwd=REPO, check=True,
                    )  # fmt: skip
                    measured[f"{interval:g} s, {engine}"] = json.loads(
                        done.stdout.strip().splitlines()[-1]
                    )
    result.update(measured)
    result["load_average_after"] = load_average()
    rows = [(key, f"{value['ms_per_refresh']:.2f}") for key, value in measured.items()]
    print(table(rows, ("refresh", "main-thread CPU ms per refresh")))
    print(
        f"{REFRESHES} refreshes after {WARMUP_S:g} s, 160×48 headless, {len(texts)} texts of "
        f"{PRESET}; load average before {load_before}, after {result['load_average_after']}"
    )
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
    else:
        print(json.dumps(run(), indent=2))

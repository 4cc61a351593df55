"""Direct scrape, client side: the CPU of one lane refresh on `metrics_url`, by part.

`python -m bench scrape_refresh`. A refresh is what the lane's poller does with one scrape:
the /metrics text parsed into the buffer (`ingest`), the window's totals with the trend
(`totals`), the figures (`figures`). Texts are taken from the demo's first simulated lane
(in this process) a fraction of a second apart, then fed to a fresh source as if 5 s apart,
so the buffer grows as a just-started cockpit's does over its first ten minutes (1 h window:
most of the trend's steps lie before the buffer). CPU time of this process per refresh, median
with min–max over the refreshes. Target: <= 8 ms median for the whole refresh (0.16 % of a
core at the 5 s refresh).
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from bench.common import load_average, spread, table

REFRESH_S = 5.0
REFRESHES = 120
WINDOW_S = 3600.0
TARGET_MS = 8.0
PARTS = ("ingest", "totals", "figures")


def texts(count: int) -> list[str]:
    """`count` expositions of the demo's first lane, its counters moving between them."""
    from cockpit.demo import Demo

    with Demo(with_prometheus=False) as demo, httpx.Client() as client:
        url = next(iter(demo.lane_urls.values()))
        taken = []
        for _ in range(count):
            taken.append(client.get(url).text)
            time.sleep(0.05)
        return taken


def run(refreshes: int = REFRESHES) -> dict[str, Any]:
    from cockpit.core.figures import lane_figures
    from cockpit.sources.scrape import ScrapeSource

    load_before = load_average()
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    start = time.time()
    ms: dict[str, list[float]] = {part: [] for part in (*PARTS, "refresh")}
    for index, text in enumerate(texts(refreshes)):
        clock = [time.process_time()]
        source.ingest(text, start + index * REFRESH_S)
        clock.append(time.process_time())
        totals = source.totals("bench", "", WINDOW_S, None)
        clock.append(time.process_time())
        lane_figures(totals, 0.0)
        clock.append(time.process_time())
        for part, begin, end in zip(PARTS, clock, clock[1:], strict=False):
            ms[part].append(1000 * (end - begin))
        ms["refresh"].append(1000 * (clock[-1] - clock[0]))
    result: dict[str, Any] = {
        "refreshes": refreshes,
        "window_s": WINDOW_S,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "cpu_ms": {part: spread(values, 3) for part, values in ms.items()},
        "target_ms": TARGET_MS,
    }
    result["ok"] = result["cpu_ms"]["refresh"]["median"] <= TARGET_MS
    rows = [
        (part, f"{cpu['median']:.3f} ({cpu['min']:.3f}–{cpu['max']:.3f})")
        for part, cpu in result["cpu_ms"].items()
    ]
    print(table(rows, ("part", "CPU ms per refresh, med (min–max)")))
    print(
        f"{refreshes} refreshes {REFRESH_S:g} s apart from an empty buffer, {WINDOW_S:g} s "
        f"window; load average before {load_before}, after {result['load_average_after']}; "
        f"target <= {TARGET_MS:g} ms"
    )
    print("target met" if result["ok"] else "TARGET MISSED")
    return result


if __name__ == "__main__":
    run()

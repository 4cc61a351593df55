"""Work per refresh: HTTP requests per lane, client-side time, render time of all panes.

`python -m bench refresh`. Two parts, each against the demo's simulators (in this process):

- **Prometheus client** (a real Prometheus scraping the simulated lanes every second, 5 m window
  evaluated at every refresh, every vLLM figure and the trend): a lane refresh is the poller's
  cycle, the read and then the figures. Requests per refresh (counted by the source: the
  window's query, and the trend's history when a 15 s step became due), and per refresh the wall
  time minus the server's own `evalTotalTime` (`stats=all`), and the CPU time of the event-loop
  thread, which leaves out every other process (Prometheus's HTTP handling and JSON encoding
  included) and the simulators' threads. Median of 120 refreshes, with min–max. Target: <= 2
  requests, <= 5 ms median.
- **Render** (Textual headless, `run_test(size=(160, 48))`, the cockpit on the simulated
  lanes' /metrics and ledger): two real snapshots A and B are shown in turn; each time is
  showing them (views from snapshots) plus the screen update that follows (the pilot's pause
  lets Textual run it). Target: <= 16 ms median. It also counts, from the widgets'
  `render_lines` calls, what an unchanged refresh redraws (target 0).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import demo_sources, load_average, spread, table, wait_prometheus_rates
from cockpit.core.slo import NO_SLO, Slo

REQUESTS_TARGET = 2
CLIENT_TARGET_MS = 5.0
RENDER_TARGET_MS = 16.0
REFRESHES = 120
WINDOW = "5m"
PAUSE_S = 0.4
"""Between refreshes: past the 5 m window's re-evaluation interval (0.375 s), so each refresh
evaluates every figure (a longer window reuses its totals between evaluations)."""
RENDERS = 30


# --- the Prometheus client ---------------------------------------------------------------------


@dataclass
class BenchFeed:
    """A lane feed on one PrometheusSource (`stats=all`), as the cockpit's poller drives it."""

    source: Any
    selector: str
    name: str = "bench"
    hardware: Any = None
    model: Any = None
    host_kv_tokens: float = 0.0
    slo: Slo = NO_SLO
    chunk_tokens: int | None = None
    gpus: int = 1
    model_filter: str | None = None
    read_wall: list[float] = field(default_factory=list)

    def filter_model(self, model: str | None) -> None:
        self.model_filter = model

    async def read(self, window_s: float, end: float | None) -> Any:
        started = time.perf_counter()
        totals = await self.source.read_lane(self.name, None, self.selector, window_s, end)
        self.read_wall.append(time.perf_counter() - started - (totals.eval_seconds or 0.0))
        return totals

    async def close(self) -> None:
        await self.source.aclose()


async def prometheus_client(url: str, selector: str, refreshes: int) -> dict[str, Any]:
    """Per lane refresh (the poller's cycle: the read, then the figures), the client's time.

    Wall time minus the server's `evalTotalTime`, and the CPU time of the thread that runs the
    event loop (the client's; the demo's simulator threads in this process are left out).
    """
    from cockpit.runtime.poller import LanePoller
    from cockpit.sources.prometheus import PrometheusSource

    feed = BenchFeed(PrometheusSource(url, stats=True), selector)
    poller = LanePoller(feed, refresh_s=1.0)
    try:
        await poller.cycle(WINDOW)  # names, dialect
        feed.read_wall.clear()
        wall_minus_eval: list[float] = []
        cpu: list[float] = []
        requests: list[int] = []
        for _ in range(refreshes):
            before = feed.source.requests
            cpu_started, started = time.thread_time(), time.perf_counter()
            snapshot = await poller.cycle(WINDOW)
            wall = time.perf_counter() - started
            cpu.append((time.thread_time() - cpu_started) * 1000)
            totals = snapshot.totals
            if totals is None or snapshot.figures is None:
                raise RuntimeError(f"refresh failed: {snapshot.freshness.reason}")
            wall_minus_eval.append((wall - (totals.eval_seconds or 0.0)) * 1000)
            requests.append(feed.source.requests - before)
            await asyncio.sleep(PAUSE_S)
        return {
            "figures": len(totals.values) + len(totals.histograms),
            "missing": len(totals.missing),
            "requests_per_refresh": max(requests),
            "refreshes_by_requests": dict(sorted(Counter(requests).items())),
            "client_wall_minus_eval_ms": spread(wall_minus_eval, 3),
            "client_cpu_ms": spread(cpu, 3),
            "read_only_wall_minus_eval_ms": spread([w * 1000 for w in feed.read_wall], 3),
        }
    finally:
        await feed.close()


# --- rendering ---------------------------------------------------------------------------------


@contextmanager
def counting_renders() -> Iterator[Counter[str]]:
    """Count `render_lines` calls per widget class while inside."""
    from textual.widget import Widget

    renders: Counter[str] = Counter()
    render_lines = Widget.render_lines

    def counted_render(self: Widget, crop: Any) -> Any:
        renders[type(self).__name__] += 1
        return render_lines(self, crop)

    Widget.render_lines = counted_render  # type: ignore[method-assign]
    try:
        yield renders
    finally:
        Widget.render_lines = render_lines  # type: ignore[method-assign]


async def _until(check: Callable[[], bool], pilot: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the cockpit never had both snapshots")
        await pilot.pause(0.05)


async def render_costs(config_path: str, renders: int) -> dict[str, Any]:
    from cockpit.app.app import make_app
    from cockpit.cli.options import read_config
    from cockpit.runtime.feeds import build_feeds

    config = read_config(Path(config_path))
    lanes, ledger = build_feeds(config)
    app = make_app(config, lanes, ledger, refresh_s=1.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await _until(lambda: app.lane_snapshot is not None and app.ledger_snapshot is not None,
                     pilot)  # fmt: skip
        first = (app.lane_snapshot, app.ledger_snapshot)
        await _until(lambda: app.lane_snapshot is not first[0], pilot)
        await _until(lambda: app.ledger_snapshot is not first[1], pilot)
        second = (app.lane_snapshot, app.ledger_snapshot)
        app.action_pause()
        await pilot.pause(0.2)
        times: list[float] = []

        def show() -> None:
            app._show()

        with counting_renders() as counts:
            for i in range(renders):
                app.lane_snapshot, app.ledger_snapshot = (first, second)[i % 2]
                started = time.perf_counter()
                show()
                await pilot.pause()  # the screen update Textual runs next
                times.append((time.perf_counter() - started) * 1000)
            changed_renders = sum(counts.values())
            changed_by_class = dict(counts)
            counts.clear()
            unchanged: list[float] = []
            for _ in range(10):
                started = time.perf_counter()
                show()  # the same snapshots again
                await pilot.pause()
                unchanged.append((time.perf_counter() - started) * 1000)
            unchanged_renders = sum(counts.values())
    return {
        "size": "160x48",
        "show_and_update_ms": spread(times, 3),
        "show_unchanged_ms": spread(unchanged, 3),
        "widgets_rendered_per_changed_refresh": round(changed_renders / renders, 1),
        "rendered_by_class": changed_by_class,
        "widgets_rendered_per_unchanged_refresh": unchanged_renders / 10,
    }


def run(refreshes: int = REFRESHES, renders: int = RENDERS) -> dict[str, Any]:
    load_before = load_average()
    with demo_sources(with_prometheus=True) as (demo, _):
        job = next(iter(demo.lanes))
        wait_prometheus_rates(demo.prometheus_url, job)
        client = asyncio.run(prometheus_client(demo.prometheus_url, f'job="{job}"', refreshes))
    with demo_sources(with_prometheus=False) as (_, scrape_config):
        render = asyncio.run(render_costs(str(scrape_config), renders))
    result: dict[str, Any] = {
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "prometheus_client": client,
        "render": render,
        "targets": {
            "requests_per_refresh": REQUESTS_TARGET,
            "client_ms_median_max": CLIENT_TARGET_MS,
            "render_ms_median_max": RENDER_TARGET_MS,
        },
    }
    result["ok"] = (
        client["requests_per_refresh"] <= REQUESTS_TARGET
        and client["client_wall_minus_eval_ms"]["median"] <= CLIENT_TARGET_MS
        and render["show_and_update_ms"]["median"] <= RENDER_TARGET_MS
        and render["widgets_rendered_per_unchanged_refresh"] == 0
    )
    print_table(result)
    return result


def print_table(result: dict[str, Any]) -> None:
    client, render = result["prometheus_client"], result["render"]

    def ms(values: dict[str, float]) -> str:
        return f"{values['median']:.2f} ({values['min']:.2f}–{values['max']:.2f})"

    rows = [
        ("HTTP requests per lane refresh", client["requests_per_refresh"], REQUESTS_TARGET),
        ("  refreshes by requests sent", client["refreshes_by_requests"], ""),
        ("client ms: wall − server eval", ms(client["client_wall_minus_eval_ms"]),
         f"<= {CLIENT_TARGET_MS:g}"),
        ("client ms: its thread's CPU", ms(client["client_cpu_ms"]), ""),
        ("  of which the read (wall − eval)", ms(client["read_only_wall_minus_eval_ms"]), ""),
        ("render ms: show + screen update, 160×48", ms(render["show_and_update_ms"]),
         f"<= {RENDER_TARGET_MS:g}"),
        ("render ms: the same, nothing changed", ms(render["show_unchanged_ms"]), ""),
        ("widgets redrawn, changed refresh", render["widgets_rendered_per_changed_refresh"], ""),
        ("widgets redrawn, unchanged refresh", render["widgets_rendered_per_unchanged_refresh"],
         0),
    ]  # fmt: skip
    print(table(rows, ("measure", "median (min–max)", "target")))
    print(f"{client['figures']} figures; load average before {result['load_average_before']}, "
          f"after {result['load_average_after']}")  # fmt: skip
    print("all targets met" if result["ok"] else "TARGET MISSED")


if __name__ == "__main__":
    print(json.dumps(run(), indent=2, default=str))

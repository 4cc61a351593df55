"""Prometheus lane source: requests and client time per refresh, combined vs per-figure, and
the load a 7 d window puts on Prometheus over a simulated week of refreshes.

Run `python -m bench prometheus_bench`. Starts a real Prometheus on loopback, backfilled with
a generated fortnight of a vLLM lane (promtool). Refreshes are simulated every 5 s of
evaluation time (`end` moves, the wall clock doesn't wait). Targets: 1 HTTP request per lane
per refresh; client-side time per refresh (wall time minus the server's evaluation time)
<= 5 ms median; over the week, the samples Prometheus touches <= 5 % of what a full 7 d query
at every refresh would touch.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # the harness that starts Prometheus lives in tests/support

from cockpit.core import promql  # noqa: E402
from cockpit.core.timeutil import promql_duration  # noqa: E402
from cockpit.engines import dialects  # noqa: E402
from cockpit.sources.prometheus import PrometheusSource, reevaluation_interval  # noqa: E402
from tests.support.promharness import (  # noqa: E402
    OpenMetricsWriter,
    create_blocks_by_day,
    long_history,
    start_prometheus,
)

END = 1_790_000_000 - (1_790_000_000 % 86400) + 5 * 3600 + 1234
SELECTOR = '{job="lane-long"}'
FULL = '{job="lane-full"}'
"""A lane exposing every vLLM figure (2 h, 2 engines), for per-refresh costs."""
REFRESHES = 40
REFRESH_S = 5
WEEK = 7 * 86400
RUN_S = 7 * 86400
"""The simulated run: a week of refreshes every REFRESH_S."""
CLIENT_TARGET_S = 0.005
SAMPLES_TARGET = 0.05


def add_full_lane(writer: OpenMetricsWriter, end: int, hours: int = 2, interval: int = 15) -> None:
    """Every metric the vLLM dialect reads, two engines, random but monotone counters."""
    rng = random.Random(5)
    times = [float(t) for t in range(end - hours * 3600, end + 1, interval)]
    bounds = ("1.0", "5.0", "10.0", "50.0", "100.0", "500.0", "1000.0", "5000.0", "+Inf")
    added: set[tuple[str, ...]] = set()
    for engine in ("0", "1"):
        labels = {"job": "lane-full", "instance": f"e{engine}", "engine": engine, "model_name": "m"}
        for spec in dialects.lane_specs("vllm").values():
            if isinstance(spec, dialects.Gauge):
                values = [(t, rng.random()) for t in times]
                writer.add(spec.metric, "gauge", spec.metric, labels, values)
                continue
            if isinstance(spec, dialects.Histogram):
                cumulative = [0.0] * len(times)
                for le in bounds:
                    step = [rng.randint(0, 3) for _ in times]
                    cumulative = [c + sum(step[: i + 1]) for i, c in enumerate(cumulative)]
                    writer.add(
                        spec.base,
                        "histogram",
                        f"{spec.base}_bucket",
                        {**labels, "le": le},
                        list(zip(times, cumulative, strict=True)),
                    )
                continue
            if isinstance(spec, dialects.Counter):
                extra = dict(spec.extra)
                if (spec.metric, engine, *sorted(extra.items())) in added:
                    continue  # two figures read one series (finished requests, by reason)
                added.add((spec.metric, engine, *sorted(extra.items())))
                value, series = 0.0, []
                for t in times:
                    value += rng.randint(0, 50)
                    series.append((t, value))
                family = spec.metric.removesuffix("_total")
                kind = "counter" if spec.metric.endswith("_total") else "unknown"
                writer.add(family, kind, spec.metric, {**labels, **extra}, series)


async def _refresh_costs(url: str, window_s: float, selector: str) -> dict[str, Any]:
    source = PrometheusSource(url, stats=True)
    try:
        await source.read_lane("bench", None, selector, window_s, END)  # names, data start
        client: list[float] = []
        requests: list[int] = []
        for i in range(1, REFRESHES + 1):
            before = source.requests
            started = time.perf_counter()
            at = END + REFRESH_S * i
            totals = await source.read_lane("bench", None, selector, window_s, at)
            wall = time.perf_counter() - started
            requests.append(source.requests - before)
            client.append(wall - (totals.eval_seconds or 0.0))
        return {
            "figures": len(totals.values) + len(totals.histograms),
            "evaluated_every_s": reevaluation_interval(window_s),
            "requests_per_refresh": max(requests),
            "client_ms_median": round(statistics.median(client) * 1000, 3),
            "client_ms_p90": round(sorted(client)[int(len(client) * 0.9)] * 1000, 3),
        }
    finally:
        await source.aclose()


async def _combined_vs_per_figure(url: str, window_s: float, selector: str) -> dict[str, Any]:
    source = PrometheusSource(url)
    try:
        names = httpx.get(f"{url}/api/v1/label/__name__/values").json()["data"]
        escaped = dialects.names_escaped(names)
        specs = dialects.lane_specs("vllm", escaped)
        window = promql_duration(window_s)
        exprs = {
            key: expr
            for key, spec in specs.items()
            if dialects.missing_reason(spec, names) is None
            and (expr := promql.spec_expression(spec, selector, window))
        }
        combined: list[float] = []
        separate: list[float] = []
        for i in range(10):
            started = time.perf_counter()
            await source.query(promql.combined_query(exprs), END + i)
            combined.append(time.perf_counter() - started)
            started = time.perf_counter()
            for expr in exprs.values():
                await source.query(expr, END + i)
            separate.append(time.perf_counter() - started)
        return {
            "figures": len(exprs),
            "combined_ms_median": round(statistics.median(combined) * 1000, 3),
            "per_figure_ms_median": round(statistics.median(separate) * 1000, 3),
            "per_figure_over_combined": round(
                statistics.median(separate) / statistics.median(combined), 2
            ),
        }
    finally:
        await source.aclose()


async def _week_of_refreshes(url: str) -> dict[str, Any]:
    """A 7 d window refreshed every REFRESH_S for RUN_S: the samples Prometheus touched, against
    a full-window query at every refresh (each touching what the evaluation nearest it did);
    and how far reused totals drift from a fresh evaluation at the same time."""
    source = PrometheusSource(url, stats=True)
    fresh = PrometheusSource(url, stats=True)
    start = END - RUN_S
    try:
        await source.read_lane("bench", None, SELECTOR, WEEK, start)
        refreshes = samples = 0
        requests: Counter[int] = Counter()
        evaluated: list[int] = []
        drift = 0.0
        started = time.perf_counter()
        for at in range(start + REFRESH_S, END + 1, REFRESH_S):
            before = source.requests
            totals = await source.read_lane("bench", None, SELECTOR, WEEK, at)
            requests[source.requests - before] += 1
            refreshes += 1
            samples += source.last_samples or 0
            if totals.end == at:
                evaluated.append(source.last_samples or 0)
            elif len(evaluated) % 24 == 0 and at - totals.end >= reevaluation_interval(WEEK) - 5:
                now = await fresh.read_lane("bench", None, SELECTOR, WEEK, at)  # the oldest reuse
                drift = max(drift, _worst_difference(totals.values, now.values))
        naive = refreshes * statistics.mean(evaluated)
        return {
            "refreshes": refreshes,
            "evaluations": len(evaluated),
            "refreshes_by_requests": dict(sorted(requests.items())),
            "note": "2 requests when the trend's 3 h step became due or the list of metric names "
            "is looked up again (every 5 min; then the trend waits a refresh)",
            "samples_per_evaluation_median": statistics.median(evaluated),
            "samples_per_refresh_mean": round(samples / refreshes, 1),
            "over_naive": round(samples / naive, 4),
            "worst_relative_drift_of_reused_figures": drift,
            "run_seconds": round(time.perf_counter() - started, 1),
        }
    finally:
        await source.aclose()
        await fresh.aclose()


def _worst_difference(old: dict[str, float] | Any, new: dict[str, float] | Any) -> float:
    return max((abs(old[k] - new[k]) / abs(new[k]) for k in new if new[k] and k in old), default=0)


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        writer, _ = long_history(END, days=(WEEK + RUN_S) / 86400 + 0.05, interval=60)
        add_full_lane(writer, END)
        create_blocks_by_day(writer, workdir / "tsdb")
        server = start_prometheus(workdir)
        try:
            result = {
                "refresh_1h_full_lane": asyncio.run(_refresh_costs(server.url, 3600, FULL)),
                "refresh_7d": asyncio.run(_refresh_costs(server.url, 7 * 86400, SELECTOR)),
                "combined_vs_per_figure_1h": asyncio.run(
                    _combined_vs_per_figure(server.url, 3600, FULL)
                ),
                "week_of_refreshes_7d": asyncio.run(_week_of_refreshes(server.url)),
            }
        finally:
            server.stop()
    result["targets"] = {
        "requests_per_refresh": 2,
        "client_ms_median_max": CLIENT_TARGET_S * 1000,
        "over_naive_max": SAMPLES_TARGET,
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    run()

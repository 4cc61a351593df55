"""A benchmark client's own result file, read into a card: its interval and its figures.

`vllm bench serve --save-result` writes one JSON object: `date` (local time when the run
ended, `%Y%m%d-%H%M%S`), `duration` (seconds), the counts, the throughputs and each latency's
`mean_`, `median_` and `p99_` in ms. Its figures are the client's view: they include the
network, tokenization and the client's own scheduling, which the engine's histograms don't, and
they are exact per request where the engine's quantiles are bucketed.

guidellm's JSON report holds `benchmarks`, a list of runs; each has `start_time` and `end_time`
(epoch seconds, its measured period) and `metrics`, where every figure is split by request
status (`successful`, `incomplete`, `errored`, `total`) into a distribution with `mean`,
`median`, `total_sum` and `percentiles` (`p50`, `p99`...). Its latencies are in ms but for
`request_latency`, which is in seconds. The successful requests' figures are read. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cockpit.runtime.cards import CardError

LATENCIES: tuple[tuple[str, str, str], ...] = (
    ("ttft", "ttft", "TTFT"),
    ("tpot", "tpot", "TPOT"),
    ("itl", "itl", "ITL"),
    ("e2el", "e2e", "E2E"),
)
"""The client's latency name, the engine's histogram it sits beside, and the row label."""
STATS: tuple[tuple[str, str], ...] = (("mean", "mean"), ("median", "p50"), ("p99", "p99"))
"""The client's statistic and the engine figure's suffix it sits beside."""
COUNTS: tuple[tuple[str, str, str, str], ...] = (
    ("completed", "requests", "Requests completed", "count"),
    ("total_input_tokens", "prompt_tokens", "Prompt tokens", "tokens"),
    ("total_output_tokens", "generation_tokens", "Generated tokens", "tokens"),
    ("request_throughput", "requests_per_s", "Requests/s", "number"),
    ("output_throughput", "generation_tok_s", "Generated tok/s", "tok/s"),
)
"""The client's field, the engine figure it sits beside, the row label, the unit."""
REQUIRED = ("date", "duration", "completed")
CLIENT_VS_ENGINE = (
    "The client times each request from its send to its last byte: network, tokenization and "
    "its own queueing are in it. The engine times from arrival in its scheduler, and its "
    "quantiles are read from histogram buckets (interpolated within a bucket). Counts differ "
    "by what the engine counted in the interval that the client did not send (other traffic) "
    "or that failed."
)


@dataclass(frozen=True, slots=True)
class ClientResult:
    tool: str
    start: float
    end: float
    figures: Mapping[str, tuple[str, str, float, str]]
    """Client field -> (engine figure key, label, value in SI units, unit)."""
    source: str


def read_result(path: str, text: str, benchmark: int = 0) -> ClientResult:
    """The result file's interval and figures; CardError naming the file and the field.

    A guidellm report's run is its `benchmark`-th (from 0); a vLLM result has one run.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CardError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CardError(f"{path}: not a benchmark result (a JSON object was expected)")
    if "benchmarks" in data:
        return _read_guidellm(path, data, benchmark)
    for name in REQUIRED:
        if name not in data:
            raise CardError(f"{path}: {name}: missing (not a `vllm bench serve` result?)")
    duration = _field(path, data, "duration")
    if duration <= 0:
        raise CardError(f"{path}: duration: expected seconds > 0, got {duration:g}")
    try:
        end = datetime.strptime(str(data["date"]), "%Y%m%d-%H%M%S").timestamp()
    except ValueError:
        raise CardError(f"{path}: date: expected YYYYMMDD-HHMMSS, got {data['date']!r}") from None
    return ClientResult("vllm bench serve", end - duration, end, _figures(path, data), path)


def _figures(path: str, data: Mapping[str, Any]) -> dict[str, tuple[str, str, float, str]]:
    figures: dict[str, tuple[str, str, float, str]] = {}
    for field, engine, label, unit in COUNTS:
        if field in data:
            figures[field] = (engine, label, _field(path, data, field), unit)
    for client, histogram, row in LATENCIES:
        for stat, suffix in STATS:
            field = f"{stat}_{client}_ms"
            if field in data:
                ms = _field(path, data, field)
                engine = f"{histogram}_{suffix}" if suffix != "mean" else f"{histogram}_mean"
                figures[field] = (engine, f"{row} {stat}", ms / 1000, "seconds")
    return figures


GUIDELLM_COUNTS: tuple[tuple[str, str, str], ...] = (
    ("completed", "request_totals", "successful"),
    ("total_input_tokens", "prompt_token_count", "successful.total_sum"),
    ("total_output_tokens", "output_token_count", "successful.total_sum"),
    ("request_throughput", "requests_per_second", "successful.mean"),
    ("output_throughput", "output_tokens_per_second", "successful.mean"),
)
"""The client field (as a vLLM result names it), guidellm's metric and the path in it."""
GUIDELLM_LATENCIES: Mapping[str, tuple[str, float]] = {
    "ttft": ("time_to_first_token_ms", 1000.0),
    "tpot": ("time_per_output_token_ms", 1000.0),
    "itl": ("inter_token_latency_ms", 1000.0),
    "e2el": ("request_latency", 1.0),
}
"""The client's latency name -> guidellm's metric and how many of its units make a second."""
GUIDELLM_STATS = {"mean": "mean", "median": "median", "p99": "percentiles.p99"}


def _read_guidellm(path: str, data: Mapping[str, Any], index: int) -> ClientResult:
    runs = data["benchmarks"]
    if not isinstance(runs, list):
        raise CardError(f"{path}: benchmarks: expected a list, got {type(runs).__name__}")
    if not runs:
        raise CardError(f"{path}: benchmarks: empty (the report holds no run)")
    if not 0 <= index < len(runs):
        raise CardError(f"{path}: benchmarks[{index}]: missing (the report holds {len(runs)})")
    where = f"benchmarks[{index}]"
    run = runs[index]
    if not isinstance(run, dict):
        raise CardError(f"{path}: {where}: expected an object, got {type(run).__name__}")
    start = _number_at(path, run, where, "start_time")
    end = _number_at(path, run, where, "end_time")
    if end <= start:
        raise CardError(f"{path}: {where}: end_time {end:g} is not after start_time {start:g}")
    return ClientResult("guidellm", start, end, _guidellm_figures(path, run, where), path)


def _guidellm_figures(
    path: str, run: Mapping[str, Any], where: str
) -> dict[str, tuple[str, str, float, str]]:
    figures: dict[str, tuple[str, str, float, str]] = {}
    beside = {field: (engine, label, unit) for field, engine, label, unit in COUNTS}
    for field, metric, inside in GUIDELLM_COUNTS:
        engine, label, unit = beside[field]
        value = _number_at(path, run, where, f"metrics.{metric}.{inside}")
        figures[field] = (engine, label, value, unit)
    for client, histogram, row in LATENCIES:
        metric, per_second = GUIDELLM_LATENCIES[client]
        for stat, suffix in STATS:
            value = _number_at(
                path, run, where, f"metrics.{metric}.successful.{GUIDELLM_STATS[stat]}"
            )
            engine = f"{histogram}_{suffix}"
            figures[f"{stat}_{client}_ms"] = (
                engine,
                f"{row} {stat}",
                value / per_second,
                "seconds",
            )
    return figures


def _number_at(path: str, data: Mapping[str, Any], where: str, dotted: str) -> float:
    """The number at `dotted` (keys joined by dots) inside `data`, which sits at `where`."""
    value: Any = data
    walked = where
    for key in dotted.split("."):
        if not isinstance(value, dict):
            raise CardError(f"{path}: {walked}: expected an object, got {type(value).__name__}")
        walked = f"{walked}.{key}"
        if key not in value:
            raise CardError(f"{path}: {walked}: missing")
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CardError(f"{path}: {where}.{dotted}: expected a number, got {value!r}")
    return float(value)


def _field(path: str, data: Mapping[str, Any], name: str) -> float:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CardError(f"{path}: {name}: expected a number, got {value!r}")
    return float(value)


def client_json(result: ClientResult) -> dict[str, Any]:
    """What a card keeps of the client: its tool, file, interval and figures."""
    return {
        "tool": result.tool,
        "file": result.source,
        "start": result.start,
        "end": result.end,
        "figures": {
            field: {"engine": engine, "label": label, "value": value, "unit": unit}
            for field, (engine, label, value, unit) in result.figures.items()
        },
    }

"""A benchmark client's own result file, read into a card: its interval and its figures. Pure.

`vllm bench serve --save-result` writes one JSON object: `date` (local time when the run
ended, `%Y%m%d-%H%M%S`), `duration` (seconds), the counts, the throughputs and each latency's
`mean_`, `median_` and `p99_` in ms. guidellm's report holds `benchmarks`, a list of runs, each
with `start_time`, `end_time` (epoch seconds) and `metrics`, every figure split by request status
into distributions (`mean`, `median`, `total_sum`, `percentiles`); its latencies are in ms but
`request_latency`, in seconds. The successful requests' figures are read. A client's figures
include the network, tokenization and its own scheduling, and are exact per request.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cockpit.runtime.cards import CardError

_COUNTS = (
    ("completed", "requests", "Requests completed", "count", "request_totals.successful"),
    ("total_input_tokens", "prompt_tokens", "Prompt tokens", "tokens",
     "prompt_token_count.successful.total_sum"),
    ("total_output_tokens", "generation_tokens", "Generated tokens", "tokens",
     "output_token_count.successful.total_sum"),
    ("request_throughput", "requests_per_s", "Requests/s", "number",
     "requests_per_second.successful.mean"),
    ("output_throughput", "generation_tok_s", "Generated tok/s", "tok/s",
     "output_tokens_per_second.successful.mean"),
)  # fmt: skip
"""The client's field (as vLLM names it), the engine figure beside it, the row label, unit,
guidellm's metric."""
_LATENCIES = (
    ("ttft", "ttft", "TTFT", "time_to_first_token_ms", 1000.0),
    ("tpot", "tpot", "TPOT", "time_per_output_token_ms", 1000.0),
    ("itl", "itl", "ITL", "inter_token_latency_ms", 1000.0),
    ("e2el", "e2e", "E2E", "request_latency", 1.0),
)
"""The client's latency, the engine's histogram beside it, the row label, guidellm's metric and
how many of its units make a second."""
_STATS = (("mean", "mean", "mean"), ("median", "p50", "median"), ("p99", "p99", "percentiles.p99"))
"""The client's statistic, the engine figure's suffix beside it, guidellm's path to it."""
FIGURES: tuple[tuple[str, str, str, str, str, float, float], ...] = (
    *(
        (field, key, label, unit, f"metrics.{metric}", 1.0, 1.0)
        for field, key, label, unit, metric in _COUNTS
    ),
    *(
        (
            f"{stat}_{client}_ms",
            f"{histogram}_{suffix}",
            f"{row} {stat}",
            "seconds",
            f"metrics.{metric}.successful.{inside}",
            1000.0,
            per_second,
        )
        for client, histogram, row, metric, per_second in _LATENCIES
        for stat, suffix, inside in _STATS
    ),
)
"""Each client figure: field, engine figure key, label, unit, guidellm's path, and how many of
vLLM's and of guidellm's units make the figure's."""
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
    """The result file's interval and figures (a guidellm report's `benchmark`-th run, from 0);
    CardError naming the file and the field."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CardError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CardError(f"{path}: not a benchmark result (a JSON object was expected)")
    if "benchmarks" in data:
        return _read_guidellm(path, data, benchmark)
    for name in ("date", "duration", "completed"):
        if name not in data:
            raise CardError(f"{path}: {name}: missing (not a `vllm bench serve` result?)")
    duration = _number_at(path, data, "", "duration")
    if duration <= 0:
        raise CardError(f"{path}: duration: expected seconds > 0, got {duration:g}")
    try:
        end = datetime.strptime(str(data["date"]), "%Y%m%d-%H%M%S").timestamp()
    except ValueError:
        raise CardError(f"{path}: date: expected YYYYMMDD-HHMMSS, got {data['date']!r}") from None
    figures = {
        field: (key, label, _number_at(path, data, "", field) / scale, unit)
        for field, key, label, unit, _, scale, _ in FIGURES
        if field in data
    }
    return ClientResult("vllm bench serve", end - duration, end, figures, path)


def _read_guidellm(path: str, data: Mapping[str, Any], index: int) -> ClientResult:
    runs = data["benchmarks"]
    if not isinstance(runs, list):
        raise CardError(f"{path}: benchmarks: expected a list, got {type(runs).__name__}")
    if not runs:
        raise CardError(f"{path}: benchmarks: empty (the report holds no run)")
    where = f"benchmarks[{index}]"
    if not 0 <= index < len(runs):
        raise CardError(f"{path}: {where}: missing (the report holds {len(runs)})")
    run = runs[index]
    if not isinstance(run, dict):
        raise CardError(f"{path}: {where}: expected an object, got {type(run).__name__}")
    start = _number_at(path, run, where, "start_time")
    end = _number_at(path, run, where, "end_time")
    if end <= start:
        raise CardError(f"{path}: {where}: end_time {end:g} is not after start_time {start:g}")
    figures = {
        field: (key, label, _number_at(path, run, where, inside) / scale, unit)
        for field, key, label, unit, inside, _, scale in FIGURES
    }
    return ClientResult("guidellm", start, end, figures, path)


def _number_at(path: str, data: Mapping[str, Any], where: str, dotted: str) -> float:
    """The number at `dotted` (keys joined by dots) inside `data`, which sits at `where`."""
    value: Any = data
    walked = where
    for key in dotted.split("."):
        if not isinstance(value, dict):
            raise CardError(f"{path}: {walked}: expected an object, got {type(value).__name__}")
        walked = f"{walked}.{key}" if walked else key
        if key not in value:
            raise CardError(f"{path}: {walked}: missing")
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CardError(f"{path}: {walked}: expected a number, got {value!r}")
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

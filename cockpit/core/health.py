"""The health line: explicit rules over a lane's snapshot, each naming its figure and threshold.
A rule whose figure is missing says nothing (a gap is not an alarm), except the down rule."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeGuard

from cockpit.core.figures import format_figure
from cockpit.core.gpu import Gpu
from cockpit.core.gpu_figures import GpuFigures
from cockpit.core.model import Figure, Freshness, Unit, divide
from cockpit.core.timeutil import clock

if TYPE_CHECKING:
    from cockpit.core.snapshot import LaneSnapshot


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Where each health rule fires (config section `health:`)."""

    queue_refreshes: int = 3
    """Queue building: requests waiting for this many refreshes in a row."""
    kv_usage: float = 0.9
    hit_rate: float = 0.7
    failed_share: float = 0.01
    """Aborted and erred requests above this share of those finished."""
    ttft_p99_slo: float | None = None
    """TTFT p99 above this many seconds; None: no SLO, no rule."""
    gpu_memory: float = 0.98


Severity = Literal["bad", "warn"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule that fired: its name, the figure it read, and what it says on the health line."""

    rule: str
    figure_key: str
    text: str
    severity: Severity


Comparison = Literal[">", "≥", "<"]
_COMPARE = {">": operator.gt, "≥": operator.ge, "<": operator.lt}


@dataclass(frozen=True, slots=True)
class _Limit:
    """A rule that compares one figure with one threshold."""

    rule: str
    words: str
    keys: tuple[str, ...]
    """The figure read, then what stands in for it when it is missing."""
    compare: Comparison
    limit: Callable[[Thresholds], float | None]
    """None: the rule is off."""
    unit: Unit
    severity: Severity
    off: str = ""
    """What the help says when the rule is off."""


_CONNECTOR_FAILURES: tuple[tuple[str, str, str, Severity], ...] = (
    ("offload_failing", "offload_alloc_failures", "KV offload allocation failures", "warn"),
    ("transfer_failing", "nixl_failed_transfers", "NIXL failed transfers", "bad"),
    ("notify_failing", "nixl_failed_notifications", "NIXL failed notifications", "warn"),
    ("kv_expiring", "nixl_expired_reqs", "NIXL requests whose KV expired", "warn"),
)
"""A KV connector's failure counters: each rule fires when its counter moved in the window
(rule, figure, words, severity); a lane without the connector has no such figure."""
CONNECTOR_FAILURES: dict[str, Severity] = {key: sev for _, key, _, sev in _CONNECTOR_FAILURES}
"""Each connector failure figure -> its rule's severity."""

_LIMITS = (
    _Limit("kv_full", "KV cache in use", ("kv_usage_now", "kv_usage"), "≥",
           lambda t: t.kv_usage, "share", "warn"),
    _Limit("preempting", "preemptions in the window", ("preemptions",), ">",
           lambda t: 0.0, "count", "warn"),
    _Limit("cache_misses", "prefix-cache hit rate", ("prefix_cache_hit_rate",), "<",
           lambda t: t.hit_rate, "share", "warn"),
    _Limit("failing", "aborted or erred share of finished", ("finished_failed_share",), ">",
           lambda t: t.failed_share, "share", "bad"),
    *(_Limit(rule, f"{words} in the window", (key,), ">", lambda t: 0.0, "count", severity)
      for rule, key, words, severity in _CONNECTOR_FAILURES),
    _Limit("ttft_slo", "TTFT p99", ("ttft_p99",), ">", lambda t: t.ttft_p99_slo, "seconds",
           "bad", off="> the SLO (off: set health.ttft_p99_slo)"),
)  # fmt: skip
"""In the order the health line shows them, after the down rule and queue building."""
SLO_ATTAINMENT = 0.99
"""With a lane TTFT target, the TTFT rule fires when fewer requests than this met it: what a
p99 above the target means, read from the buckets."""
_ATTAINMENT = _Limit("ttft_slo", "TTFT SLO attainment", ("ttft_slo_attainment",), "<",
                     lambda t: SLO_ATTAINMENT, "share", "bad")  # fmt: skip


def check(snapshot: LaneSnapshot | None, thresholds: Thresholds) -> tuple[Finding, ...]:
    """The rules that fire for this snapshot, in rule order. Nothing before the first read;
    while the lane is down, only that (the figures kept are of before it went down)."""
    if snapshot is None:
        return ()
    if (fresh := snapshot.freshness).state != "ok":
        since = f" since {clock(fresh.since)} UTC" if fresh.since is not None else ""
        reason = f": {fresh.reason}" if fresh.reason else ""
        rule = "engine_down" if fresh.cause == "engine" else "source_down"
        return (Finding(rule, "freshness", f"{down_words(fresh)}{since}{reason}", "bad"),)
    figures = snapshot.figures.figures if snapshot.figures is not None else {}
    findings = [_queue(figures.get("waiting_now"), snapshot.waiting_streak, thresholds)]
    for limit in _LIMITS:
        if limit.rule == _ATTAINMENT.rule and _present(figures.get(_ATTAINMENT.keys[0])):
            limit = _ATTAINMENT  # the lane's TTFT target is set: read its attainment
        figure = next((figures[key] for key in limit.keys if _present(figures.get(key))), None)
        findings.append(_over(limit, figure, thresholds))
    findings += _gpu_findings(snapshot.gpu_figures(), thresholds)
    return tuple(finding for finding in findings if finding is not None)


def rule_lines(thresholds: Thresholds, ttft_target: bool = False) -> list[str]:
    """One line per rule, naming its figure and threshold (the `?` help lists them);
    `ttft_target`: a lane sets a TTFT target, whose attainment its TTFT rule reads."""
    lines = [
        "engine DOWN / source unreachable / failing: the lane's last read failed, and since when",
        f"queue building: waiting_now > 0 for ≥ {thresholds.queue_refreshes} refreshes in a row",
    ]
    for limit in _LIMITS:
        value = limit.limit(thresholds)
        said = f"{limit.compare} {_threshold(value, limit.unit)}" if value is not None else ""
        lines.append(f"{limit.words}: {' or '.join(limit.keys)} {said or limit.off}")
    lines[-1:-1] = [  # the GPU rules, ahead of the one that may be off
        "GPU XID error: a GPU reported an XID error in the window",
        f"GPU memory at its limit: a GPU's memory in use ≥ {thresholds.gpu_memory * 100:g}%",
        "GPU throttled: a GPU's clocks held down by its power limit or by heat in the window",
    ]
    if ttft_target:
        below = f"< {_threshold(SLO_ATTAINMENT, 'share')}"
        lines.append(f"{_ATTAINMENT.words}: {_ATTAINMENT.keys[0]} {below} (a lane with slo.ttft_s)")
    return lines


def _present(figure: Figure | None) -> TypeGuard[Figure]:
    return figure is not None and figure.value is not None


def down_words(freshness: Freshness) -> str:
    """What is down: the engine only when the source answers without it; else the source."""
    if freshness.cause == "engine":
        return "engine DOWN"
    return "source unreachable" if freshness.cause == "source" else "source failing"


def _queue(waiting: Figure | None, streak: int, thresholds: Thresholds) -> Finding | None:
    if streak < thresholds.queue_refreshes:
        return None
    count = f"{format_figure(waiting)} " if _present(waiting) else ""
    alert = f"alert at ≥ {thresholds.queue_refreshes}"
    text = f"queue building: {count}waiting for {streak} refreshes in a row ({alert})"
    return Finding("queue_building", "waiting_now", text, "warn")


def _over(limit: _Limit, figure: Figure | None, thresholds: Thresholds) -> Finding | None:
    value = limit.limit(thresholds)
    if figure is None or figure.value is None or figure.doubtful or value is None:
        return None
    if figure.above:  # a lower bound: past the threshold only when the bound itself is
        fires = limit.compare != "<" and figure.value >= value
    else:
        fires = _COMPARE[limit.compare](figure.value, value)
    if not fires:
        return None
    words = f"{limit.words} now" if figure.key.endswith("_now") else limit.words
    alert = f"alert at {limit.compare} {_threshold(value, limit.unit)}"
    text = f"{words}: {format_figure(figure)} ({alert})"
    return Finding(limit.rule, figure.key, text, limit.severity)


def _threshold(value: float, unit: Unit) -> str:
    """A threshold as set: `90%`, `1%`, `0.5%`, `2.5 s`, `0`."""
    if unit == "share":
        return f"{value * 100:g}%"
    return f"{value:g} s" if unit == "seconds" else f"{value:g}"


# --- the GPUs -----------------------------------------------------------------------------


def _gpu_findings(figures: GpuFigures | None, thresholds: Thresholds) -> list[Finding]:
    """The GPU rules: an XID error, a GPU at its memory limit, clocks held down, each naming
    the GPUs (by index) it fires for."""
    gpus = [gpu for gpu, _ in figures.per_gpu] if figures is not None else []

    def memory(gpu: Gpu) -> float:
        return divide(gpu.memory_used_bytes, gpu.memory_total_bytes) or 0.0

    limit = f"memory at its limit (alert at ≥ {thresholds.gpu_memory * 100:g}%)"
    rules: tuple[tuple[str, str, Severity, Callable[[Gpu], object], Callable[[Gpu], str], str], ...]
    rules = (  # rule, figure, severity, fires for a GPU, what it says of it, what it says
        ("gpu_xid", "gpu_xid_errors", "bad", lambda g: g.xid, lambda g: f"XID {g.xid:.0f}",
         "XID error in the window"),
        ("gpu_memory_full", "gpu_memory_used_bytes", "warn",
         lambda g: memory(g) >= thresholds.gpu_memory, lambda g: f"{memory(g):.0%}", limit),
        ("gpu_throttled", "gpu_power_throttled", "warn",
         lambda g: g.throttle_power or g.throttle_thermal,
         lambda g: "power" if g.throttle_power else "heat", "clocks held down in the window"),
    )  # fmt: skip
    findings = []
    for rule, key, severity, fires, detail, words in rules:
        if fired := [gpu for gpu in gpus if fires(gpu)]:
            which = ", ".join(f"GPU {gpu.id or gpu.uuid} ({detail(gpu)})" for gpu in fired)
            findings.append(Finding(rule, key, f"{which}: {words}", severity))
    return findings

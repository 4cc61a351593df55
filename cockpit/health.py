"""The health line: explicit rules over a lane's snapshot, each naming its figure and threshold.

Pure: no I/O. A rule whose figure is missing says nothing (a gap is not an alarm), except
the engine-down rule, which is about the figures being there at all.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Where each health rule fires (config section `health:`)."""

    queue_refreshes: int = 3
    """Queue building: requests waiting for this many refreshes in a row."""
    kv_usage: float = 0.9
    """KV cache in use now at or above this share."""
    hit_rate: float = 0.7
    """Prefix-cache hit rate below this share."""
    failed_share: float = 0.01
    """Aborted and erred requests above this share of those finished."""
    ttft_p99_slo: float | None = None
    """TTFT p99 above this many seconds; None: no SLO, no rule."""

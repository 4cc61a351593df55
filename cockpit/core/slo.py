"""Latency targets (a lane's `slo:`) and the share of a histogram's observations that met one:
the inverse of `histogram_quantile` (exact at a bound, interpolated inside a bucket as it does;
past the largest finite bound, a lower bound). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from cockpit.core.model import Bucket
from cockpit.core.quantiles import Envelope, envelope_of


@dataclass(frozen=True, slots=True)
class Slo:
    """A lane's latency targets in seconds (None: no target)."""

    ttft_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None

    def target(self, histogram: str) -> float | None:
        """The target of `histogram` (`ttft`, `itl`, `e2e`), in seconds."""
        return {"ttft": self.ttft_s, "itl": self.itl_s, "e2e": self.e2e_s}[histogram]


NO_SLO = Slo()
INTERPOLATED = "interpolated"
"""How the note of a share read between bounds begins."""


class Attainment(NamedTuple):
    """Observations that met a target, out of `total`; `note` says how they were read."""

    met: float
    total: float
    note: str = ""
    lower_bound: bool = False
    """Past the largest finite bound: at least `met` met it."""

    @property
    def share(self) -> float:
        return self.met / self.total


def attainment(target: float, buckets: Sequence[Bucket]) -> Attainment | None:
    """Observations ≤ `target` from cumulative `(le, count)` buckets; None without
    observations, a `+Inf` bucket or a finite bound."""
    return attained(target, envelope_of(buckets))


def attained(target: float, found: Envelope | None) -> Attainment | None:
    """`attainment` over the buckets' envelope (`envelope_of`)."""
    if found is None:
        return None
    bounds, counts = found
    total = counts[-1]
    at = next(index for index, bound in enumerate(bounds) if bound >= target)
    if bounds[at] == target:
        return Attainment(counts[at], total)
    if at == len(bounds) - 1:
        largest, within = bounds[-2], counts[-2]
        if within == total:
            return Attainment(total, total)
        note = f"past the engine's largest bucket ({largest:g} s): at least this share"
        return Attainment(within, total, note, lower_bound=True)
    low, below = (bounds[at - 1], counts[at - 1]) if at else (0.0, 0.0)
    met = below + (counts[at] - below) * (target - low) / (bounds[at] - low)
    where = f"between the engine's buckets {low:g} s and {bounds[at]:g} s" if at else (
        f"within the engine's first bucket (≤ {bounds[at]:g} s)"
    )  # fmt: skip
    return Attainment(met, total, f"{INTERPOLATED} {where}")

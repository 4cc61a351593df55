"""A quantile from a histogram's cumulative buckets by the steps of `bucketQuantile` in
Prometheus 2.42 (promql/quantile.go), so a direct scrape and the server agree to the last bit.
A rank in the `+Inf` bucket answers the largest finite bound, a lower bound: it comes back
flagged. Pure."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from itertools import accumulate, groupby, pairwise
from operator import itemgetter

from cockpit.core.model import Bucket, Missing

Envelope = tuple[list[float], list[float]]
"""A histogram's bounds and monotonic cumulative counts (`envelope`), ready to read."""


def histogram_quantile(q: float, buckets: Sequence[Bucket]) -> tuple[float, bool] | None:
    """The `q`-quantile of cumulative `(le, count)` buckets and whether it is only a lower bound
    (past the largest finite bucket). None where Prometheus answers NaN: no observations, fewer
    than two distinct bounds, no `+Inf` bucket, `q` NaN; ValueError for `q` outside [0, 1]."""
    if math.isnan(q) or not buckets:
        return None
    if not 0 <= q <= 1:
        raise ValueError(f"quantile {q} is outside [0, 1]")
    found = envelope_of(buckets)
    return None if found is None else quantile(q, found)


def envelope_of(buckets: Sequence[Bucket]) -> Envelope | None:
    """The envelope of buckets in any order; None without a `+Inf` bucket, two distinct
    bounds or an observation (Prometheus answers NaN)."""
    ordered = sorted(buckets, key=itemgetter(0))
    if not ordered or ordered[-1][0] != math.inf:
        return None
    bounds, counts = envelope(ordered)
    return (bounds, counts) if len(bounds) >= 2 and counts[-1] != 0 else None


def quantile(q: float, found: Envelope) -> tuple[float, bool]:
    """`histogram_quantile` over an envelope: the value, and whether it is a lower bound."""
    bounds, counts = found
    rank = q * counts[-1]
    b = bisect_left(counts, rank, hi=len(counts) - 1)  # the first count ≥ rank, as sort.Search
    if b == len(bounds) - 1:
        return bounds[-2], True
    if b == 0 and bounds[0] <= 0:
        return bounds[0], False
    start, count = 0.0, counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (bounds[b] - start) * (rank / count), False


def envelope(ordered: Sequence[Bucket]) -> Envelope:
    """Bounds and counts: equal bounds (series that overlap once summed) added up, then each
    count raised to the largest before it (the envelope Prometheus takes when the increases of
    separately scraped buckets disagree)."""
    merged = [(bound, sum(c for _, c in same)) for bound, same in groupby(ordered, itemgetter(0))]
    return [bound for bound, _ in merged], list(accumulate((count for _, count in merged), max))


NOT_CUMULATIVE = "buckets not cumulative"
BUCKETS_CHANGED = "bucket sets changed in the window"
FP_TOLERANCE = 1e-9
"""A dip smaller than this share of the total is floating-point noise, not a broken histogram."""


def check_buckets(
    buckets: Sequence[Bucket], seen: Mapping[float, float] | None = None
) -> tuple[tuple[Bucket, ...], str] | Missing:
    """The buckets a quantile may be read from and what was wrong with them ("" when nothing),
    or why none can be read. `seen`: how often each bound was seen in the window; one seen less
    often than `+Inf` is not in every bucket set of the window (an engine restarted with other
    buckets), so only the bounds all sets share are kept: their counts are exact in each set,
    so their sum is a true, coarser histogram. Counts that fall as the bound rises are read as
    Prometheus reads them (made monotonic), and said to be so."""
    kept, notes = tuple(buckets), []
    top = None if seen is None else seen.get(math.inf)
    if top is not None and seen is not None:
        kept = tuple(bucket for bucket in kept if seen.get(bucket[0], 0.0) == top)
        bounds = {bound for bound, _ in buckets}
        if len(kept) < len(buckets):
            shared = {bound for bound, _ in kept if math.isfinite(bound)}
            if not shared:
                return Missing(f"{BUCKETS_CHANGED} and the sets share no finite bound")
            notes.append(f"{BUCKETS_CHANGED}: read over the {len(shared)} of "
                         f"{len(bounds) - 1} finite bounds every set has")  # fmt: skip
    falls = _first_fall(kept)
    if falls:
        notes.append(f"{NOT_CUMULATIVE} ({falls}): made monotonic as Prometheus does, may be wrong")
    return tuple(sorted(kept)), "; ".join(notes)


def _first_fall(buckets: Sequence[Bucket]) -> str:
    """Where cumulative counts fall (a bound holding fewer than one below it, or below 0)."""
    merged: dict[float, float] = {}
    for bound, count in buckets:
        merged[bound] = merged.get(bound, 0.0) + count
    ordered = sorted(merged.items())
    tolerance = FP_TOLERANCE * max((abs(count) for _, count in ordered), default=0.0)
    for bound, count in ordered:
        if count < -tolerance:
            return f"le={bound:g} counts {count:g}"
    for (low, below), (high, count) in pairwise(ordered):
        if count < below - tolerance:
            return f"le={high:g} counts {count:g}, fewer than le={low:g}'s {below:g}"
    return ""

"""A GPU source's own reads (direct scrape or NVML), reduced over a window, against the plain
reading of each kind over the reads themselves: over hours of reads, past the buffer's limit,
with series and GPUs missing from some reads and counters reset."""

from __future__ import annotations

import random
from collections.abc import Iterator
from itertools import pairwise

import pytest

from cockpit.core.gpu_series import EXPORTERS, expression_key
from cockpit.sources.gpu import MAX_READS, ReadBuffer, Reading

START = 1_800_000_000.0
XID = "DCGM_FI_DEV_XID_ERRORS"
WANTED = [
    (series.metrics, expression_key(exporter, series), series.kind,
     tuple(dict.fromkeys((*exporter.gpu_labels, *series.labels))), bool(series.labels))
    for exporter in EXPORTERS for series in exporter.series
]  # fmt: skip
"""Each exporter series: the metrics it reads (several: the largest of them), its key, kind,
the labels that tell it apart, whether it counts events by a label (a code counts once it has
occurred)."""


def history(reads: int, seed: int = 7) -> Iterator[tuple[float, list[Reading]]]:
    """Four GPUs read about once a second; a series is missing from 3 % of reads, GPU 3 from
    every 97th; counters climb and now and then reset; XID errors carry an error code."""
    rnd = random.Random(seed)
    names = sorted(ReadBuffer(EXPORTERS).names)
    counters: dict[tuple[str, int], float] = {}
    at = START
    for i in range(reads):
        at += rnd.choice((0.5, 1.0, 1.0, 2.0))
        samples: list[Reading] = []
        for gpu in range(4 if i % 97 else 3):
            labels = {"gpu": str(gpu), "UUID": f"GPU-{gpu}", "Hostname": "box"}
            for name in names:
                if rnd.random() < 0.03:
                    continue
                if name.endswith(("_total", "CONSUMPTION", "ERRORS", "VIOLATION")):
                    grown = counters.get((name, gpu), 0.0) + rnd.random() * 10
                    counters[name, gpu] = 0.0 if rnd.random() < 0.002 else grown
                    value = counters[name, gpu]
                else:
                    value = rnd.random() * 100
                extra = {"err_code": rnd.choice(("0", "13", "31"))} if name == XID else {}
                samples.append((name, {**labels, **extra}, value))
        yield at, samples


Series = tuple[str, tuple[tuple[str, str], ...]]


def plainly(
    reads: list[tuple[float, list[Reading]]], window: float, end: float
) -> dict[Series, float]:
    """Each series' reduction, read off the kept reads (the last `MAX_READS`) one by one."""
    kept = [(at, samples) for at, samples in reads[-MAX_READS:] if at <= end]
    before = [r for r in kept if r[0] <= end - window][-1:]
    inside = [r for r in kept if r[0] > end - window]
    last_at = inside[-1][0] if inside else None
    expected: dict[Series, float] = {}
    for metrics, key, kind, wanted, events in WANTED:
        points: dict[Series, list[tuple[float, float]]] = {}
        for at, samples in (before + inside) if kind == "increase" else inside:
            for name, labels, value in samples:
                if name not in metrics:
                    continue
                found = points.setdefault((key, tuple((k, labels.get(k, "")) for k in wanted)), [])
                if found and found[-1][0] == at:  # one value a read: the largest
                    found[-1] = (at, max(found[-1][1], value))
                else:
                    found.append((at, value))
        for series, found in points.items():
            values = [value for _, value in found]
            reduced: float | None
            if kind == "mean":
                reduced = sum(values) / len(values)
            elif kind == "peak":
                reduced = max(values)
            elif kind == "now":
                reduced = found[-1][1] if found[-1][0] == last_at else None
            else:
                steps = pairwise(values)
                reduced = sum(b - a if b >= a else b for a, b in steps) if len(values) > 1 else None
            if reduced is not None and (reduced > 0 or not events):
                expected[series] = reduced
    return expected


@pytest.mark.parametrize("reads", [300, MAX_READS + 600, 2 * MAX_READS + 300])
def test_a_window_of_reads_reduces_as_the_reads_say(reads: int) -> None:
    buffer = ReadBuffer(EXPORTERS)
    kept = list(history(reads))
    for at, samples in kept:
        buffer.add(at, samples)
    last = kept[-1][0]
    for window in (30.0, 3600.0, 86_400.0):
        for end in (last, last - 7.3):
            values, _ = buffer.values(window, end)
            got = {
                (key, tuple(labels.items())): value
                for key, found in values.items()
                for labels, value in found
            }
            assert got == pytest.approx(plainly(kept, window, end)), (window, end)
    assert set(buffer.stamps) == {at for at, _ in kept[-MAX_READS:]}

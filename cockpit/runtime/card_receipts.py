"""A card's receipt: the lane's figures over exactly the card's interval.

Counts are the counters' own deltas between the samples at the card's edges (resets handled,
never extrapolated), and rates are over the card's own seconds. A direct-scrape lane keeps its
engine's expositions at the edges (`cockpit card start` and `stop` each take one); a Prometheus
lane's series are read back at its edges and every step between (the last sample at or before
each moment, as the server holds it) and replayed through the same arithmetic, so both paths
count alike.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from cockpit.config.schema import LaneConfig
from cockpit.core.figures import lane_figures
from cockpit.core.ledger_figures import Prices
from cockpit.core.model import LaneTotals
from cockpit.core.promql import escape_label_value, parse_selector
from cockpit.core.snapshot import LaneSnapshot
from cockpit.core.tail_figures import LATENCIES
from cockpit.core.timeutil import stamp
from cockpit.runtime.cards import Card, CardError
from cockpit.sources.exposition import ENGINE_PREFIXES
from cockpit.sources.http import SourceError
from cockpit.sources.prometheus import PrometheusSource
from cockpit.sources.scrape import ScrapeSource

MAX_STEPS = 240
"""A Prometheus card is read back at most at this many moments between its edges."""
SCRAPE_STEP_S = 15.0
"""The step when the lane's scrape interval is not known."""


def card_duration(card: Card) -> float:
    if card.end is None:
        raise CardError(f"card {card.name!r} is still running (cockpit card stop)")
    return card.end - card.start


async def edge_scrape(lane: LaneConfig) -> tuple[str, float]:
    """The engine's exposition now, for a direct-scrape lane's card edge; CardError if not."""
    assert lane.metrics_url is not None
    source = ScrapeSource(lane.metrics_url, selector=lane.selector, timeout=lane.timeout_s,
                          verify=lane.ca_file or lane.verify_tls)  # fmt: skip
    try:
        text = await source.fetch()
    except SourceError as error:
        raise CardError(f"lane {lane.name}: {error}") from None
    finally:
        await source.aclose()
    return text, time.time()


def replayed_totals(
    lane: LaneConfig, edges: Sequence[tuple[str, float]], start: float, end: float
) -> LaneTotals:
    """The lane's raw totals over [start, end] from expositions taken at `edges`' moments."""
    source = ScrapeSource(lane.metrics_url or lane.prometheus or lane.name, selector=lane.selector)
    source.dialect = None if lane.engine == "auto" else lane.engine
    try:
        for text, at in sorted(edges, key=lambda edge: edge[1]):
            source.ingest(text, at)
        return source.totals(lane.name, lane.selector, end - start, end)
    except SourceError as error:
        raise CardError(f"lane {lane.name}: {error}") from None


async def prometheus_edges(
    lane: LaneConfig, source: PrometheusSource, start: float, end: float
) -> list[tuple[str, float]]:
    """The lane's engine series at the card's edges and between, as expositions: each series'
    last sample at or before each moment (the server's lookback), never interpolated."""
    matchers = ",".join(
        f'{m.name}{m.op}"{escape_label_value(m.value)}"' for m in parse_selector(lane.selector)
    )
    names = "|".join(f"{prefix}.*" for prefix in ENGINE_PREFIXES)
    query = "{" + ",".join(filter(None, [f'__name__=~"{names}"', matchers])) + "}"
    steps = max(1, min(MAX_STEPS, math.ceil((end - start) / SCRAPE_STEP_S)))
    try:
        # The range's points stop short of `end` when the step's digits round up: the edge
        # itself is one instant query of its own.
        between = await source.query_range(query, start, end, (end - start) / steps)
        last = await source.query(query, end)
    except SourceError as error:
        raise CardError(f"lane {lane.name}: {error}") from None
    lines: dict[float, dict[str, str]] = {}
    points = [(s, s.get("values") or ()) for s in between]
    points += [(s, [(end, s["value"][1])]) for s in last.result]
    for series, values in points:
        labels = dict(series.get("metric") or {})
        name = labels.pop("__name__", "")
        text = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sorted(labels.items()))
        for at, value in values:
            lines.setdefault(float(at), {})[f"{name}{{{text}}}"] = str(value)
    if not lines:
        raise CardError(f"lane {lane.name}: the server has no engine series in the card's interval")
    return [
        ("\n".join(f"{head} {value}" for head, value in found.items()), at)
        for at, found in sorted(lines.items())
    ]


def card_snapshot(lane: LaneConfig, card: Card, totals: LaneTotals) -> LaneSnapshot:
    hardware = lane.hardware.scaled(lane.gpus) if lane.hardware else None
    return LaneSnapshot(
        lane=lane.name,
        window=f"card {card.name}",
        totals=totals,
        figures=lane_figures(totals, lane.host_kv_tokens),
        hardware=hardware,
        model=lane.model,
        gpus=lane.gpus,
        chunk_tokens=lane.chunk_tokens,
    )


def edges_note(card: Card, edges: Sequence[tuple[str, float]], replayed: bool) -> str:
    """Which samples the card's counts are the deltas of, in words."""
    if not replayed:
        moments = " and ".join(stamp(at) for _, at in edges)
        return f"counts: the counters' own deltas between the engine's scrapes at {moments}"
    step = (edges[-1][1] - edges[0][1]) / max(len(edges) - 1, 1)
    return (
        f"counts: the counters' own deltas between each series' last sample at or before "
        f"{stamp(card.start)} and {stamp(card.end or card.start)}, read back from the server "
        f"every {step:.3g} s between (a counter reset is counted from 0)"
    )


def bucket_bounds(totals: LaneTotals) -> dict[str, list[float]]:
    """The finite `le` bounds of each latency histogram: what a quantile can resolve."""
    bounds: dict[str, list[float]] = {}
    for latency in LATENCIES:
        buckets = totals.histograms.get(latency.histogram, ())
        finite = [le for le, _ in buckets if math.isfinite(le)]
        if finite:
            bounds[latency.histogram] = finite
    return bounds


def kept_receipt(snapshot: LaneSnapshot, note: str, prices: Prices) -> dict[str, Any]:
    """What a card keeps at stop: its lane receipt (JSON and markdown) and its buckets."""
    from cockpit.runtime.report import json_receipt, markdown_receipt

    assert snapshot.totals is not None
    lane = json_receipt(snapshot, None, prices)["lane"]
    lane["edges"] = note
    return {
        "lane": lane,
        "markdown": markdown_receipt(snapshot, None, prices),
        "buckets": bucket_bounds(snapshot.totals),
    }


def figures_of(receipt: Mapping[str, Any]) -> Mapping[str, Any]:
    figures = receipt.get("lane", {}).get("figures", {})
    return figures if isinstance(figures, dict) else {}

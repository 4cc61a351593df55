"""A card's receipt: the lane's figures over exactly the card's interval.

Counts are the counters' own deltas between the samples at the card's edges (resets handled,
never extrapolated), rates over the card's own seconds. A direct-scrape lane keeps its engine's
expositions at the edges; a Prometheus lane's series are read back at its edges and steps
between and replayed through the same arithmetic, so both paths count alike.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from cockpit import engines
from cockpit.config.schema import Config, LaneConfig
from cockpit.core.catalogue import LATENCIES
from cockpit.core.figures import format_value, lane_figures
from cockpit.core.ledger_figures import Prices
from cockpit.core.model import LaneTotals
from cockpit.core.promql import escape_label_value, parse_selector, spec_expression
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.core.split import SPLIT_KEYS, CardPart, WindowSplit
from cockpit.core.timeutil import promql_duration, stamp
from cockpit.engines import dialects
from cockpit.runtime.cards import Card, CardError, CardStore
from cockpit.runtime.report import json_receipt, markdown_receipt, markdown_table
from cockpit.sources.http import SourceError
from cockpit.sources.prometheus import PrometheusSource
from cockpit.sources.scrape import ScrapeSource

MAX_STEPS = 240
"""A Prometheus card is read back at most at this many moments between its edges."""
SCRAPE_STEP_S = 15.0
"""The step when the lane's scrape interval is not known."""


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
    names = "|".join(f"{re.escape(p)}.*" for p in (*engines.prefixes(), *engines.prefixes(True)))
    query = "{" + ",".join(filter(None, [f'__name__=~"{names}"', matchers])) + "}"
    steps = max(1, min(MAX_STEPS, math.ceil((end - start) / SCRAPE_STEP_S)))
    try:
        # The edges are instant queries at the card's own moments (a range's points are
        # rounded to the millisecond, which can put them outside the card); the range fills
        # in between.
        first = await source.query(query, start)
        between = await source.query_range(query, start, end, (end - start) / steps)
        last = await source.query(query, end)
    except SourceError as error:
        raise CardError(f"lane {lane.name}: {error}") from None
    points = [(s, [(start, s["value"][1])]) for s in first.result]
    points += [
        (s, [p for p in s.get("values") or () if start < float(p[0]) < end]) for s in between
    ]
    points += [(s, [(end, s["value"][1])]) for s in last.result]
    lines: dict[float, dict[str, str]] = {}
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
        figures=lane_figures(totals, lane.host_kv_tokens, lane.slo),
        hardware=hardware,
        model=lane.model,
        gpus=lane.gpus,
        chunk_tokens=lane.chunk_tokens,
    )


async def read_back(lane: LaneConfig, card: Card, increase: bool = False) -> tuple[LaneTotals, str]:
    """The stopped card's totals read back from the lane's Prometheus, and what they count
    (with `increase`, beside what the server's own `increase()` reads)."""
    from cockpit.runtime.feeds import prometheus_source

    source, end = prometheus_source(lane), card.end or card.start
    try:
        edges = await prometheus_edges(lane, source, card.start, end)
        totals = replayed_totals(lane, edges, card.start, end)
        step = (edges[-1][1] - edges[0][1]) / max(len(edges) - 1, 1)
        notes = [
            f"counts: the counters' own deltas between each series' last sample at or before "
            f"{stamp(card.start)} and {stamp(end)}, read back from the server every {step:.3g} s "
            f"between (a counter reset is counted from 0)"
        ]
        if increase:
            notes.append(await _increase_note(source, lane, totals, end))
    finally:
        await source.aclose()
    return totals, "; ".join(filter(None, notes))


async def _increase_note(
    source: PrometheusSource, lane: LaneConfig, totals: LaneTotals, end: float
) -> str:
    """What Prometheus's own `increase()` over the card's interval reads of its requests: it
    extrapolates to the interval's edges, so it can read more than the samples' delta."""
    spec = dialects.lane_specs(totals.dialect)["requests"]
    query = spec_expression(spec, lane.selector, promql_duration(totals.window_s))
    if query is None:
        return ""
    try:
        answer = await source.query(query, end)
        value = float(answer.result[0]["value"][1])
    except (SourceError, ValueError, KeyError, IndexError):  # no answer, no value
        return ""  # a note only: without it, nothing is wrong
    return f"`{query}` (extrapolated to the edges) reads {value:,.1f} requests"


def bucket_bounds(totals: LaneTotals) -> dict[str, list[float]]:
    """The finite `le` bounds of each latency histogram: what a quantile can resolve."""
    names = (latency.histogram for latency in LATENCIES)
    bounds = {
        name: [le for le, _ in totals.histograms.get(name, ()) if math.isfinite(le)]
        for name in names
    }
    return {name: finite for name, finite in bounds.items() if finite}


def kept_receipt(snapshot: LaneSnapshot, note: str, prices: Prices) -> dict[str, Any]:
    """What a card keeps at stop: its lane receipt (JSON and markdown) and its buckets."""
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


def compared_figures(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """What two cards compare: the lane's figures, then each model's as `<key>@<model>`,
    labelled with the model (a receipt from before the per-model table has none)."""
    found = dict(figures_of(receipt))
    rows = receipt.get("lane", {}).get("models")
    for row in rows if isinstance(rows, list) else ():
        figures = row.get("figures") if isinstance(row, dict) else None
        model = str(row.get("model", "")) if isinstance(row, dict) else ""
        for key, figure in (figures if isinstance(figures, dict) else {}).items():
            if isinstance(figure, dict):
                label = f"{figure.get('label', key)} ({model})"
                found[f"{key}@{model}"] = {**figure, "label": label}
    return found


async def window_split(
    config: Config,
    lane: LaneConfig,
    snapshot: LaneSnapshot,
    ledger: LedgerSnapshot | None,
    store: CardStore,
) -> WindowSplit | None:
    """The lane's window split between its cards and the rest (None: no card in the window).
    A card wholly inside counts as kept; one partly inside is evaluated over its overlap on a
    Prometheus lane, and said uncounted on a direct-scrape one (only its edges were kept)."""
    if snapshot.figures is None or snapshot.totals is None:
        return None
    end = snapshot.totals.end
    start = end - snapshot.totals.window_s
    overlapping = [
        card for card in store.cards(lane.name)
        if card.end is not None and card.start < end and card.end > start
    ]  # fmt: skip
    if not overlapping:
        return None
    parts, uncounted = [], []
    for card in overlapping:
        whole = card.within(start, end)
        values = figures_of(card.receipt)
        if not whole and lane.metrics_url:
            uncounted.append(card.name)
            continue
        if not whole:
            clipped = Card(card.name, card.lane, max(card.start, start), min(card.end or end, end))
            totals, _ = await read_back(lane, clipped)
            values = figures_of(
                json_receipt(card_snapshot(lane, clipped, totals), None, config.prices)
            )
        numbers = {key: _value(values.get(key)) for key, _ in SPLIT_KEYS}
        overlap = min(card.end or end, end) - max(card.start, start)
        parts.append(CardPart(card.name, numbers, overlap, whole))
    window = {key: snapshot.figures.value(key) for key, _ in SPLIT_KEYS}
    return WindowSplit(window, tuple(parts), tuple(uncounted), _ledger_tokens(ledger))


def _value(figure: object) -> float | None:
    value = figure.get("value") if isinstance(figure, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _ledger_tokens(ledger: LedgerSnapshot | None) -> dict[str, float | None] | None:
    """The ledger's prompt and output tokens, when it is narrowed to the lane's models."""
    if ledger is None or ledger.totals is None or ledger.totals.narrowed_to is None:
        return None
    total = ledger.totals.total
    return {"prompt_tokens": float(total.prompt), "generation_tokens": float(total.output)}


def split_markdown(split: WindowSplit) -> list[str]:
    """The window split as a receipt section."""

    def row(name: str, values: Mapping[str, float | None]) -> tuple[str, ...]:
        return (name, *(format_value(values.get(key), "count") for key, _ in SPLIT_KEYS))

    rows = [row(card.name + ("" if card.whole else " (overlap)"), card.values)
            for card in split.cards]  # fmt: skip
    rows += [row("All cards", split.in_cards), row("Outside cards", split.outside),
             row("The window", split.window)]  # fmt: skip
    header = ("Traffic", *(title for _, title in SPLIT_KEYS))
    lines = ["## Cards in the window", "", *markdown_table(header, rows), ""]
    lines.append("Cards count their counters' exact deltas; the window (and so the rest) is read "
                 "as its own figures are.")  # fmt: skip
    if split.uncounted:
        names = ", ".join(split.uncounted)
        lines.append(f"Partly in the window, not counted (a direct scrape keeps only a card's "
                     f"edges): {names}.")  # fmt: skip
    if split.ledger is not None:
        rest = split.outside.get("prompt_tokens")
        share = "" if not rest else f" ({(split.ledger['prompt_tokens'] or 0) / rest:.1%} of it)"
        lines.append(
            f"The agent ledger, narrowed to the lane's models, accounts for "
            f"{format_value(split.ledger['prompt_tokens'], 'tokens')} prompt tokens of the rest"
            f"{share}."
        )
    return lines


def split_json(split: WindowSplit) -> dict[str, Any]:
    return {
        "cards": [
            {"name": card.name, "whole": card.whole, "overlap_s": card.overlap_s,
             **dict(card.values)} for card in split.cards
        ],
        "in_cards": split.in_cards,
        "outside": split.outside,
        "window": dict(split.window),
        "uncounted": list(split.uncounted),
        "ledger": dict(split.ledger) if split.ledger is not None else None,
    }  # fmt: skip

"""Starting and stopping a card on a lane, as `cockpit card` and the cockpit's `b` both do:
a direct-scrape lane takes the engine's scrape at each edge, and at stop the card's receipt is
evaluated over its own interval and kept. The card store is read and written off the caller's
event loop (a thread), so a cockpit's keys are answered while a mark is written."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from cockpit.config.schema import Config, LaneConfig
from cockpit.core.model import LaneTotals
from cockpit.core.text import visible
from cockpit.core.timeutil import promql_duration
from cockpit.runtime.card_receipts import (
    card_duration,
    card_snapshot,
    edge_scrape,
    edges_note,
    figures_of,
    kept_receipt,
    prometheus_edges,
    replayed_totals,
)
from cockpit.runtime.cards import Card, CardError, CardStore
from cockpit.sources.http import SourceError

if TYPE_CHECKING:
    from cockpit.sources.prometheus import PrometheusSource


def card_name(text: str) -> str:
    """`text` as a card's name; CardError unless printable, without edge spaces."""
    name = text.strip()
    if not name or name != text or any(not ch.isprintable() for ch in name):
        raise CardError(f"card name {visible(text)!r}: expected printable text, no edge spaces")
    return name


async def start_card(
    store: CardStore,
    lane: LaneConfig,
    name: str,
    note: str = "",
    now: Callable[[], float] = time.time,
) -> Card:
    """Mark now as card `name`'s start on `lane` (its edge scrape on a direct-scrape lane)."""
    name = card_name(name)
    if any(card.name == name for card in await asyncio.to_thread(store.cards)):
        raise CardError(f"a card named {name!r} exists already")
    edges: tuple[tuple[str, float], ...] = ()
    start = now()
    if lane.metrics_url:
        edge = await edge_scrape(lane)
        edges, start = (edge,), edge[1]
    card = Card(name, lane.name, start, note=note, edges=edges)
    await asyncio.to_thread(store.start, card)
    return card


async def stop_card(
    config: Config,
    store: CardStore,
    lane: LaneConfig,
    card: Card,
    now: Callable[[], float] = time.time,
) -> Card:
    """Mark the running `card`'s end, evaluate its receipt and keep it; the card as kept."""
    edge = None
    end = now()
    if lane.metrics_url:
        edge = await edge_scrape(lane)
        end = edge[1]
    stopped = await asyncio.to_thread(store.stop, card.name, end, edge)
    receipt = await evaluate(config, lane, stopped)
    await asyncio.to_thread(partial(store.keep, stopped.name, receipt=receipt))
    return replace(stopped, receipt=receipt)


async def evaluate(config: Config, lane: LaneConfig, card: Card) -> dict[str, Any]:
    """The card's receipt over its own interval, from its edges or read back from Prometheus."""
    card_duration(card)  # refuses a card still running
    end = card.end or card.start
    if lane.metrics_url:
        if len(card.edges) < 2:
            raise CardError(f"card {card.name!r} has no scrape at one of its edges")
        totals = replayed_totals(lane, card.edges, card.start, end)
        note = edges_note(card, card.edges, replayed=False)
    else:
        from cockpit.runtime.feeds import prometheus_source

        source = prometheus_source(lane)
        try:
            edges = await prometheus_edges(lane, source, card.start, end)
            totals = replayed_totals(lane, edges, card.start, end)
            note = edges_note(card, edges, replayed=True)
            extrapolated = await _increase_note(source, lane, totals, end)
        finally:
            await source.aclose()
        note = "; ".join(filter(None, (note, extrapolated)))
    return kept_receipt(card_snapshot(lane, card, totals), note, config.prices)


async def _increase_note(
    source: PrometheusSource, lane: LaneConfig, totals: LaneTotals, end: float
) -> str:
    """What Prometheus's own `increase()` over the card's interval reads of its requests: it
    extrapolates to the interval's edges, so it can read more than the samples' delta."""
    from cockpit.core.promql import spec_expression
    from cockpit.engines import dialects

    spec = dialects.lane_specs(totals.dialect)["requests"]
    query = spec_expression(spec, lane.selector, promql_duration(totals.window_s))
    if query is None:
        return ""
    try:
        answer = await source.query(query, end)
        value = float(answer.result[0]["value"][1]) if answer.result else None
    except (SourceError, ValueError, KeyError, IndexError):
        return ""  # a note only: without it, nothing is wrong
    if value is None:
        return ""
    return f"`{query}` (extrapolated to the edges) reads {value:,.1f} requests"


def card_length(card: Card) -> str:
    """The card's length as the list shows it (`running` while it runs)."""
    if card.end is None:
        return "running"
    seconds = card.end - card.start
    return f"{seconds:.1f} s" if seconds < 120 else promql_duration(seconds)


def card_requests(card: Card) -> str:
    """The requests its receipt counted, as text (— before it has one)."""
    figure = figures_of(card.receipt).get("requests", {})
    return str(figure.get("text") or "—") if isinstance(figure, dict) else "—"

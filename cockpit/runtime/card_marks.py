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
from typing import Any

from cockpit.config.schema import Config, LaneConfig
from cockpit.core.text import visible
from cockpit.core.timeutil import promql_duration, stamp
from cockpit.runtime.card_receipts import (
    card_snapshot,
    edge_scrape,
    figures_of,
    kept_receipt,
    read_back,
    replayed_totals,
)
from cockpit.runtime.cards import Card, CardError, CardStore


def card_name(text: str) -> str:
    """`text` as a card's name; CardError unless printable, without edge spaces."""
    name = text.strip()
    if not name or name != text or any(not ch.isprintable() for ch in name):
        raise CardError(f"card name {visible(text)!r}: expected printable text, no edge spaces")
    return name


async def _edge(
    lane: LaneConfig, now: Callable[[], float]
) -> tuple[tuple[str, float] | None, float]:
    """A card edge: the engine's scrape and its moment on a direct-scrape lane, else now."""
    if not lane.metrics_url:
        return None, now()
    edge = await edge_scrape(lane)
    return edge, edge[1]


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
    edge, start = await _edge(lane, now)
    card = Card(name, lane.name, start, note=note, edges=(edge,) if edge else ())
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
    edge, end = await _edge(lane, now)
    stopped = await asyncio.to_thread(store.stop, card.name, end, edge)
    receipt = await evaluate(config, lane, stopped)
    await asyncio.to_thread(partial(store.keep, stopped.name, receipt=receipt))
    return replace(stopped, receipt=receipt)


async def evaluate(config: Config, lane: LaneConfig, card: Card) -> dict[str, Any]:
    """The card's receipt over its own interval, from its edges or read back from Prometheus."""
    if card.end is None:
        raise CardError(f"card {card.name!r} is still running (cockpit card stop)")
    if not lane.metrics_url:
        totals, note = await read_back(lane, card, increase=True)
    elif len(card.edges) < 2:
        raise CardError(f"card {card.name!r} has no scrape at one of its edges")
    else:
        totals = replayed_totals(lane, card.edges, card.start, card.end)
        moments = " and ".join(stamp(at) for _, at in card.edges)
        note = f"counts: the counters' own deltas between the engine's scrapes at {moments}"
    return kept_receipt(card_snapshot(lane, card, totals), note, config.prices)


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

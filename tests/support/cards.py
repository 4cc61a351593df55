"""Cards made in the test's own card store: receipts built from scripted totals."""

from __future__ import annotations

from cockpit.config.schema import LaneConfig
from cockpit.core.ledger_figures import Prices
from cockpit.runtime.card_receipts import card_snapshot, kept_receipt
from cockpit.runtime.cards import Card, CardStore
from tests.support.feeds import EVAL_AT, lane_totals


def kept_card(name: str, start: float, seconds: float, scale: float, note: str = "") -> Card:
    """A stopped card on lane-a whose receipt counts `scale` × the scripted lane's traffic."""
    card = Card(name, "lane-a", start, start + seconds, note)
    totals = lane_totals("lane-a", seconds, start + seconds, scale)
    snapshot = card_snapshot(LaneConfig("lane-a"), card, totals)
    receipt = kept_receipt(snapshot, "counts: scripted", Prices())
    return Card(card.name, card.lane, card.start, card.end, note, receipt=receipt)


def two_kept_cards() -> tuple[Card, Card]:
    """Two runs an hour apart, the second with twice the traffic, kept in the card store."""
    store = CardStore()
    a = kept_card("rate-2", EVAL_AT - 7200, 60.0, 1.0, "rate 2")
    b = kept_card("rate-4", EVAL_AT - 3600, 60.0, 2.0, "rate 4")
    for card in (a, b):
        store.add(card)
    return a, b


def running_card(name: str, seconds: float, lane: str = "lane-a") -> Card:
    """A card running on `lane` for `seconds` by the fixed clocks' wall (EVAL_AT + 5)."""
    card = Card(name, lane, EVAL_AT + 5 - seconds)
    CardStore().start(card)
    return card

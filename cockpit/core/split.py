"""How much of a window's traffic was inside benchmark cards, and what the rest was: the
window's figures less each card's exact counts (through Prometheus, `increase()`'s
extrapolation error, up to a scrape interval's worth, stays in the rest). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SPLIT_KEYS: tuple[tuple[str, str], ...] = (
    ("requests", "Requests"),
    ("prompt_tokens", "Prompt tokens"),
    ("generation_tokens", "Generated tokens"),
)
"""The lane figures split between cards and the rest, with their column names."""
Values = Mapping[str, float | None]


@dataclass(frozen=True, slots=True)
class CardPart:
    name: str
    values: Values
    overlap_s: float
    """Seconds of the card inside the window."""
    whole: bool
    """The whole card lies in the window (else its overlap was evaluated on its own)."""


@dataclass(frozen=True, slots=True)
class WindowSplit:
    window: Values
    cards: tuple[CardPart, ...]
    uncounted: tuple[str, ...] = ()
    """Cards partly in the window whose overlap could not be read (a direct-scrape lane)."""
    ledger: Values | None = None
    """The ledger's prompt and output tokens over the window, narrowed to the lane's models."""

    @property
    def in_cards(self) -> dict[str, float | None]:
        return {key: _sum([card.values.get(key) for card in self.cards]) for key, _ in SPLIT_KEYS}

    @property
    def outside(self) -> dict[str, float | None]:
        inside = self.in_cards
        return {
            key: None if self.window.get(key) is None or inside[key] is None
            else (self.window[key] or 0.0) - (inside[key] or 0.0)
            for key, _ in SPLIT_KEYS
        }  # fmt: skip


def _sum(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v or 0.0 for v in values)

"""Benchmark cards: the cockpit's own SQLite file of runs marked on a lane (never the ledger).

A card is a name, a lane, a start and an end (epoch seconds) and what was kept of it: a
direct-scrape lane's edge scrapes, the receipt at stop, the benchmark client's result. The file
is in WAL mode so two cockpits can mark at once; every change is one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from platformdirs import user_data_dir

from cockpit.core.model import frozen_map

if TYPE_CHECKING:  # imported when the store is opened: a cockpit without cards never needs it
    import sqlite3

SCHEMA = """
CREATE TABLE IF NOT EXISTS cards (
    name TEXT PRIMARY KEY,
    lane TEXT NOT NULL,
    start REAL NOT NULL,
    end REAL,
    note TEXT NOT NULL DEFAULT '',
    edges TEXT,
    receipt TEXT,
    client TEXT
)
"""
BUSY_MS = 5000
"""How long a mark waits for another cockpit's write to finish."""


class CardError(Exception):
    """A card command that can't be done: one line for the user (exit 2)."""


@dataclass(frozen=True, slots=True)
class Card:
    name: str
    lane: str
    start: float
    end: float | None = None
    """None while the card runs."""
    note: str = ""
    edges: tuple[tuple[str, float], ...] = ()
    """A direct-scrape lane's expositions at the card's edges: (text, epoch seconds)."""
    receipt: Mapping[str, Any] = field(default_factory=frozen_map)
    """The card's receipt as kept at stop: `{"lane": ..., "markdown": ..., "buckets": ...}`."""
    client: Mapping[str, Any] = field(default_factory=frozen_map)
    """The benchmark client's figures, once imported."""

    @property
    def running(self) -> bool:
        return self.end is None

    def within(self, start: float, end: float) -> bool:
        """The whole card, stopped, lies in [start, end]."""
        return self.end is not None and start <= self.start and self.end <= end


class CardStore:
    """The card file; each method one short transaction (opened per call, never held)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or Path(user_data_dir("lane-cockpit")) / "cards.db"

    @contextmanager
    def _connection(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        import sqlite3

        try:
            if write:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise CardError(f"card store {self.path}: cannot open it: {reason}") from None
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(SCHEMA)
            if write:
                connection.execute("BEGIN IMMEDIATE")
            yield connection
            if write:
                connection.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise CardError(f"card store {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise CardError(f"card store {self.path}: {exc} (not a card store?)") from None
        finally:
            connection.close()

    def cards(self, lane: str | None = None) -> list[Card]:
        """Every card (of `lane`), oldest start first."""
        if not self.path.exists():
            return []
        with self._connection() as db:
            rows = db.execute("SELECT * FROM cards ORDER BY start, name").fetchall()
        return [_card(row) for row in rows if lane is None or row[1] == lane]

    def get(self, name: str) -> Card:
        cards = self.cards()
        for card in cards:
            if card.name == name:
                return card
        known = ", ".join(card.name for card in cards[-5:]) or "none yet"
        raise CardError(f"no card named {name!r} (latest: {known})")

    def running(self, lane: str | None = None) -> list[Card]:
        return [card for card in self.cards(lane) if card.running]

    def add(self, card: Card) -> None:
        """Keep a new card, running or whole; CardError if its name is taken."""
        import sqlite3

        if card.end is not None and card.end <= card.start:
            raise CardError(f"card {card.name!r}: its end is not after its start")
        with self._connection(write=True) as db:
            try:
                db.execute(
                    "INSERT INTO cards VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (card.name, card.lane, card.start, card.end, card.note,
                     _json(card.edges), _json(card.receipt), _json(card.client)),
                )  # fmt: skip
            except sqlite3.IntegrityError:
                raise CardError(f"a card named {card.name!r} exists already") from None

    start = add

    def stop(self, name: str, end: float, edge: tuple[str, float] | None) -> Card:
        """Mark the running card's end (and its closing edge scrape); the card as kept."""
        with self._connection(write=True) as db:
            row = db.execute("SELECT * FROM cards WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise CardError(f"no card named {name!r}")
            card = _card(row)
            if not card.running:
                raise CardError(f"card {name!r} has stopped already")
            if end <= card.start:
                raise CardError(f"card {name!r}: its end is not after its start")
            edges = (*card.edges, edge) if edge else card.edges
            db.execute(
                "UPDATE cards SET end = ?, edges = ? WHERE name = ?", (end, _json(edges), name)
            )
        return Card(card.name, card.lane, card.start, end, card.note, edges)

    def keep(self, name: str, *, receipt: Mapping[str, Any] | None = None,
             client: Mapping[str, Any] | None = None) -> None:  # fmt: skip
        """Keep a card's receipt (at stop) or its client's result (at import)."""
        with self._connection(write=True) as db:
            for column, value in (("receipt", receipt), ("client", client)):
                if value is not None:
                    db.execute(
                        f"UPDATE cards SET {column} = ? WHERE name = ?", (_json(value), name)
                    )

    def remove(self, name: str) -> None:
        with self._connection(write=True) as db:
            if db.execute("DELETE FROM cards WHERE name = ?", (name,)).rowcount == 0:
                raise CardError(f"no card named {name!r}")


def _json(value: object) -> str | None:
    return json.dumps(value) if value else None


def _card(row: tuple[Any, ...]) -> Card:
    name, lane, start, end, note, edges, receipt, client = row
    kept_edges = tuple((str(text), float(at)) for text, at in json.loads(edges or "[]"))
    return Card(
        name, lane, start, end, note or "", kept_edges,
        frozen_map(json.loads(receipt or "{}")), frozen_map(json.loads(client or "{}")),
    )  # fmt: skip

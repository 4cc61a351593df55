"""What the ledger tailer keeps in memory: sums per group, sessions as read, and how the
readings of several ledgers combine into one LedgerTotals. No I/O here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cockpit.core.model import LedgerTotals, TokenCounts, frozen_map
from cockpit.sources.ledger_sql import COUNTER_COLUMNS, Schema, has_costs

GroupKey = tuple[str, str]
"""(dimension, name): total, source, profile, model_s, model_u, side, skipped."""
NONE = TokenCounts()


def model_name(raw: str | None) -> str:
    """The model as Hermes shows it: the last `/` part (`openrouter/a/b` -> `b`)."""
    if not raw:
        return "unknown"
    return raw.rsplit("/", 1)[-1] or "unknown"


def model_key(provider: str | None, model: str | None) -> str:
    """`provider/model` where the ledger names the provider, else the model alone."""
    name = model_name(model)
    return f"{provider}/{name}" if provider else name


def text_of(value: object) -> str:
    """A name column as text, whatever SQLite stored there."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class Sums(dict[GroupKey, TokenCounts]):
    """TokenCounts per (dimension, name), added to and subtracted from exactly; a row skipped
    counts as a session of ("skipped", its reason)."""

    def add(self, key: GroupKey, counts: TokenCounts, sign: int = 1) -> None:
        prior = self.get(key, NONE)
        self[key] = prior + counts if sign > 0 else prior - counts

    def counts(self, dimension: str) -> dict[str, TokenCounts]:
        return {
            name: counts
            for (dim, name), counts in sorted(self.items())
            if dim == dimension and counts != NONE
        }

    def total(self, dimension: str = "total") -> TokenCounts:
        return self.get((dimension, ""), NONE)

    def merge(self, other: Sums) -> None:
        for key, counts in other.items():
            self.add(key, counts)


@dataclass(slots=True)
class Session:
    """A session row as read: open ones are kept, closed ones go into the sums."""

    started_at: float | None
    """None when started_at is not a number: the session belongs to no window."""
    closed: bool
    sums: Sums = field(default_factory=Sums)
    """What it adds: its counts, its usage, or its rows skipped."""


@dataclass(frozen=True, slots=True)
class LedgerReading:
    """One tailer's figures, with both per-model bases so a set can pick one."""

    totals: LedgerTotals
    by_model_sessions: Mapping[str, TokenCounts]


def missing_for(schema: Schema, profile: str) -> dict[str, str]:
    """What this schema can't support, with the reason in words."""
    named = f"schema {schema.version}" if schema.version is not None else "this ledger"
    missing: dict[str, str] = {}
    if "profile_name" not in schema.columns:
        missing["by_profile"] = (
            f"{named} has no profile_name: every session is credited to this ledger's "
            f"profile '{profile}'"
        )
    if not schema.has_usage:
        missing["by_model_exact"] = (
            f"{named} has no session_model_usage: per model from sessions.model "
            "(a session that switched models counts under its first)"
        )
        missing["side_calls"] = f"{named} has no session_model_usage: side calls are not recorded"
    for name, column in COUNTER_COLUMNS:
        if column not in schema.columns:
            missing[name] = f"{named} has no sessions.{column}"
    if "model" not in schema.columns:
        missing["by_model"] = f"{named} has no sessions.model"
    if not has_costs(schema.columns):
        missing["cost_usd"] = f"{named} has no sessions.estimated_cost_usd / actual_cost_usd"
    return missing


def window_edges(
    old_low: float, old_high: float, low: float, high: float
) -> list[tuple[int, float, float]]:
    """The slices that turn (old_low, old_high] into (low, high]: +1 to add, -1 to take away.
    Windows that do not overlap give edges as wide as the new one: the tailer reads it afresh."""
    edges = []
    if low != old_low:
        edges.append((-1, old_low, low) if low > old_low else (1, low, old_low))
    if high != old_high:
        edges.append((1, old_high, high) if high > old_high else (-1, high, old_high))
    return edges


def sum_maps(maps: Iterable[Mapping[str, TokenCounts]]) -> dict[str, TokenCounts]:
    out: dict[str, TokenCounts] = {}
    for mapping in maps:
        for key, counts in mapping.items():
            out[key] = out.get(key, NONE) + counts
    return dict(sorted(out.items()))


def combine(readings: Sequence[LedgerReading], window_s: float, end: float) -> LedgerTotals:
    parts = [reading.totals for reading in readings]
    exact = all(part.model_basis == "session_model_usage" for part in parts)
    by_model = [p.by_model for p in parts] if exact else [r.by_model_sessions for r in readings]
    sides = [part.side_calls for part in parts if part.side_calls is not None]
    missing: dict[str, str] = {}
    skipped: Counter[str] = Counter()
    for part in parts:
        skipped.update(part.skipped)
        for key, reason in part.missing.items():
            note = f"{part.ledgers[0].path}: {reason}"
            missing[key] = f"{missing[key]}; {note}" if key in missing else note
    firsts = [p.first_started_at for p in parts if p.first_started_at is not None]
    return LedgerTotals(
        window_s=window_s,
        end=end,
        total=sum((part.total for part in parts), NONE),
        by_source=frozen_map(sum_maps(p.by_source for p in parts)),
        by_model=frozen_map(sum_maps(by_model)),
        model_basis="session_model_usage" if exact else "sessions.model",
        by_profile=frozen_map(sum_maps(p.by_profile for p in parts)),
        by_ledger=frozen_map(sum_maps(p.by_ledger for p in parts)),
        side_calls=sum(sides, NONE) if sides else None,
        missing=frozen_map(missing),
        ledgers=tuple(info for part in parts for info in part.ledgers),
        queries=tuple(dict.fromkeys(q for part in parts for q in part.queries)),
        first_started_at=min(firsts) if firsts else None,
        skipped=frozen_map(dict(sorted(skipped.items()))),
    )

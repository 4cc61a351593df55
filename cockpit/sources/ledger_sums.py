"""What the ledger tailer keeps in memory: sums per group, sessions as read, and how the
readings of several ledgers combine into one LedgerTotals. No I/O here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from cockpit.model import LedgerTotals, TokenCounts, frozen_map
from cockpit.sources.ledger_sql import COUNTER_COLUMNS, VALUE_COUNT, Schema, has_costs

Vector = list[int]
"""[sessions, api_calls, input, cache_read, cache_write, output, reasoning, cost_actual,
cost_estimated]: TokenCounts' fields."""
GroupKey = tuple[str, str]
"""(dimension, name): total, source, profile, model_s, model_u, side, skipped."""


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


def decode_text(data: bytes) -> str:
    """SQLite text that is not UTF-8 is read with replacement characters, not refused."""
    return data.decode("utf-8", "replace")


# --- sums ------------------------------------------------------------------------------------


def new_vector() -> Vector:
    return [0] * (1 + VALUE_COUNT)


class Sums:
    """Counter vectors per (dimension, name), added to and subtracted from exactly."""

    def __init__(self) -> None:
        self.groups: dict[GroupKey, Vector] = {}

    def add(self, key: GroupKey, values: Sequence[int], sign: int = 1) -> None:
        vector = self.groups.setdefault(key, new_vector())
        for index, value in enumerate(values):
            vector[index] += sign * value

    def skip(self, reason: str, rows: int = 1, sign: int = 1) -> None:
        self.add(("skipped", reason), [rows], sign)

    def copy(self) -> Sums:
        other = Sums()
        other.groups = {key: list(vector) for key, vector in self.groups.items()}
        return other

    def counts(self, dimension: str) -> dict[str, TokenCounts]:
        return {
            name: TokenCounts(*vector)
            for (dim, name), vector in sorted(self.groups.items())
            if dim == dimension and any(vector)
        }

    def total(self, dimension: str = "total") -> TokenCounts:
        vector = self.groups.get((dimension, ""))
        return TokenCounts(*vector) if vector else TokenCounts()

    def skipped(self) -> dict[str, int]:
        return {name: vector[0] for (dim, name), vector in self.groups.items() if dim == "skipped"}


@dataclass(slots=True)
class Session:
    """A session row as read: open ones are kept, closed ones go into the sums."""

    started_at: float | None
    """None when started_at is not a number: the session belongs to no window."""
    keys: tuple[GroupKey, ...]
    problem: str | None
    values: Vector
    usage: dict[GroupKey, Vector] = field(default_factory=dict)
    usage_problems: dict[str, int] = field(default_factory=dict)

    def add_to(self, sums: Sums) -> None:
        if self.problem:
            sums.skip(f"sessions: {self.problem}")
        else:
            for key in self.keys:
                sums.add(key, self.values)
        for key, values in self.usage.items():
            sums.add(key, values)
        for problem, rows in self.usage_problems.items():
            sums.skip(f"session_model_usage: {problem}", rows)


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
    """The slices that turn (old_low, old_high] into (low, high]: +1 to add, -1 to take away."""
    if low >= old_high or high <= old_low:
        return [(-1, old_low, old_high), (1, low, high)]
    edges = []
    if low != old_low:
        edges.append((-1, old_low, low) if low > old_low else (1, low, old_low))
    if high != old_high:
        edges.append((1, old_high, high) if high > old_high else (-1, high, old_high))
    return edges


# --- several ledgers -------------------------------------------------------------------------


def sum_counts(maps: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for mapping in maps:
        for key, count in mapping.items():
            out[key] = out.get(key, 0) + count
    return dict(sorted(out.items()))


def sum_maps(maps: Iterable[Mapping[str, TokenCounts]]) -> dict[str, TokenCounts]:
    out: dict[str, TokenCounts] = {}
    for mapping in maps:
        for key, counts in mapping.items():
            out[key] = out.get(key, TokenCounts()) + counts
    return dict(sorted(out.items()))


def combine(readings: Sequence[LedgerReading], window_s: float, end: float) -> LedgerTotals:
    parts = [reading.totals for reading in readings]
    exact = all(part.model_basis == "session_model_usage" for part in parts)
    by_model = [p.by_model for p in parts] if exact else [r.by_model_sessions for r in readings]
    sides = [part.side_calls for part in parts if part.side_calls is not None]
    missing: dict[str, str] = {}
    for part in parts:
        for key, reason in part.missing.items():
            path = part.ledgers[0].path if part.ledgers else "?"
            note = f"{path}: {reason}"
            missing[key] = f"{missing[key]}; {note}" if key in missing else note
    firsts = [p.first_started_at for p in parts if p.first_started_at is not None]
    basis: Literal["session_model_usage", "sessions.model"] = (
        "session_model_usage" if exact else "sessions.model"
    )
    total = TokenCounts()
    for part in parts:
        total = total + part.total
    return LedgerTotals(
        window_s=window_s,
        end=end,
        total=total,
        by_source=frozen_map(sum_maps(p.by_source for p in parts)),
        by_model=frozen_map(sum_maps(by_model)),
        model_basis=basis,
        by_profile=frozen_map(sum_maps(p.by_profile for p in parts)),
        by_ledger=frozen_map(sum_maps(p.by_ledger for p in parts)),
        side_calls=sum(sides, TokenCounts()) if sides else None,
        missing=frozen_map(missing),
        ledgers=tuple(info for part in parts for info in part.ledgers),
        queries=tuple(dict.fromkeys(q for part in parts for q in part.queries)),
        first_started_at=min(firsts) if firsts else None,
        skipped=frozen_map(sum_counts(p.skipped for p in parts)),
    )

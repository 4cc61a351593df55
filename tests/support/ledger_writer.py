"""A writer that touches a ledger the way Hermes does, for tests and benchmarks.

WAL mode, `BEGIN IMMEDIATE` with a 1 s busy timeout, counters incremented in place on the
`sessions` row and upserted into `session_model_usage` in the same transaction, sessions
inserted with zero counters and ended once, a passive checkpoint every 50 writes.
"""

from __future__ import annotations

import math
import shutil
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import TypeVar

from cockpit.config.schema import Config, LedgerConfig
from cockpit.core.model import LedgerTotals, TokenCounts
from tests.support.repo import HERMES_FIXTURES, require_fixture

COUNTERS = (
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
)

T = TypeVar("T")


@dataclass
class Usage:
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def values(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in COUNTERS)


@dataclass
class Cost:
    """What Hermes records of one call's price (`agent.usage_pricing.CostResult`): a status of
    `actual`, `estimated`, `included` (subscription, 0) or `unknown` (no price, 0)."""

    estimated: float | None = None
    actual: float | None = None
    status: str | None = None
    provider: str | None = None


class HermesLikeWriter:
    """Writes sessions into an existing ledger as Hermes's SessionDB does."""

    def __init__(self, path: Path, *, wal: bool = True, retries: int = 3) -> None:
        self.path = path
        self.conn = sqlite3.connect(
            str(path), timeout=1.0, isolation_level=None, check_same_thread=False
        )
        if wal:
            self.conn.execute("PRAGMA journal_mode=WAL")
        self.retries = retries
        self.busy_errors = 0
        self.writes = 0
        tables = {row[0] for row in self.conn.execute("SELECT name FROM sqlite_master")}
        self.has_usage = "session_model_usage" in tables
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(sessions)")}
        self.has_profile = "profile_name" in columns

    def close(self) -> None:
        self.conn.close()

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        for attempt in range(self.retries + 1):
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                self.busy_errors += 1
                if attempt == self.retries:
                    raise
                time.sleep(0.02)
                continue
            try:
                result = work(self.conn)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.writes += 1
            if self.writes % 50 == 0:
                self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            return result
        raise AssertionError("unreachable")

    def start_session(
        self,
        session_id: str,
        source: str,
        model: str | None,
        started_at: float,
        profile: str | None = None,
    ) -> None:
        def work(conn: sqlite3.Connection) -> None:
            if self.has_profile:
                conn.execute(
                    "INSERT INTO sessions (id, source, model, started_at, profile_name) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (session_id, source, model, started_at, profile),
                )
            else:
                conn.execute(
                    "INSERT INTO sessions (id, source, model, started_at) VALUES (?, ?, ?, ?)",
                    (session_id, source, model, started_at),
                )

        self._transaction(work)

    def record_call(
        self,
        session_id: str,
        model: str,
        usage: Usage,
        *,
        task: str = "",
        at: float = 0.0,
        cost: Cost | None = None,
    ) -> None:
        """One API call: the main loop adds to `sessions`; a side call only to the usage table.
        Costs as Hermes's `update_token_counts` and usage upsert write them."""
        cost = cost or Cost()

        def work(conn: sqlite3.Connection) -> None:
            if task == "":
                conn.execute(
                    "UPDATE sessions SET input_tokens = input_tokens + ?, "
                    "cache_read_tokens = cache_read_tokens + ?, "
                    "cache_write_tokens = cache_write_tokens + ?, "
                    "output_tokens = output_tokens + ?, reasoning_tokens = reasoning_tokens + ?, "
                    "api_call_count = api_call_count + 1, "
                    "estimated_cost_usd = COALESCE(estimated_cost_usd, 0) + COALESCE(?, 0), "
                    "actual_cost_usd = CASE WHEN ? IS NULL THEN actual_cost_usd "
                    "ELSE COALESCE(actual_cost_usd, 0) + ? END, "
                    "cost_status = COALESCE(?, cost_status), "
                    "billing_provider = COALESCE(billing_provider, ?) WHERE id = ?",
                    (
                        *usage.values(),
                        cost.estimated,
                        cost.actual,
                        cost.actual,
                        cost.status,
                        cost.provider,
                        session_id,
                    ),
                )
            if self.has_usage:
                conn.execute(
                    "INSERT INTO session_model_usage (session_id, model, billing_provider, task, "
                    "api_call_count, input_tokens, cache_read_tokens, cache_write_tokens, "
                    "output_tokens, reasoning_tokens, estimated_cost_usd, actual_cost_usd, "
                    "cost_status, first_seen, last_seen) "
                    "VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (session_id, model, billing_provider, billing_base_url, "
                    "billing_mode, task) DO UPDATE SET api_call_count = api_call_count + 1, "
                    "input_tokens = input_tokens + excluded.input_tokens, "
                    "cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens, "
                    "cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens, "
                    "output_tokens = output_tokens + excluded.output_tokens, "
                    "reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens, "
                    "estimated_cost_usd = estimated_cost_usd + excluded.estimated_cost_usd, "
                    "actual_cost_usd = actual_cost_usd + excluded.actual_cost_usd, "
                    "cost_status = COALESCE(excluded.cost_status, cost_status), "
                    "last_seen = excluded.last_seen",
                    (
                        session_id,
                        model,
                        cost.provider or "",
                        task,
                        *usage.values(),
                        cost.estimated or 0.0,
                        cost.actual or 0.0,
                        cost.status,
                        at,
                        at,
                    ),
                )

        self._transaction(work)

    def end_session(self, session_id: str, ended_at: float, reason: str = "cli_close") -> None:
        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE sessions SET ended_at = ?, end_reason = ? "
                "WHERE id = ? AND ended_at IS NULL",
                (ended_at, reason, session_id),
            )

        self._transaction(work)

    def open_sessions(self) -> list[tuple[str, str | None]]:
        return [
            (str(row[0]), row[1])
            for row in self.conn.execute("SELECT id, model FROM sessions WHERE ended_at IS NULL")
        ]


# --- the oracle: a full recount, row by row in Python ---------------------------------------


@dataclass
class Recount:
    total: tuple[int, ...]
    by_source: dict[str, tuple[int, ...]]
    by_profile: dict[str, tuple[int, ...]]
    by_model_sessions: dict[str, tuple[int, ...]]
    """Keyed `provider/model` (the model's last `/` part), or the model alone without one."""
    by_model_usage: dict[str, tuple[int, ...]] | None
    side_calls: tuple[int, ...] | None
    skipped: dict[str, int]
    """`table: why` -> rows that can't be read (a counter not a whole number, or negative;
    a session without a numeric start, whatever the window)."""


SESSION_COUNTERS = ("api_call_count", *COUNTERS)
COST_COLUMNS = ("actual_cost_usd", "estimated_cost_usd", "cost_status")


def _short(model: object) -> str:
    return str(model).split("/")[-1] or "unknown" if model else "unknown"


def _key(provider: object, model: object) -> str:
    return f"{provider}/{_short(model)}" if provider else _short(model)


def _why(values: tuple[object, ...]) -> str | None:
    """Why a row (its counters, then actual, estimated, status) can't be read."""
    counters, costs = values[: len(SESSION_COUNTERS)], values[len(SESSION_COUNTERS) :][:2]
    if any(v is not None and type(v) is not int for v in counters):
        return "a token count that is not a whole number"
    if any(type(v) is int and v < 0 for v in counters):
        return "a negative token count"
    if any(v is not None and not (type(v) in (int, float) and 0 <= v <= 1e9) for v in costs):
        return "a cost that is not a dollar amount"
    return None


def _nano(usd: object) -> int:
    """USD in whole billionths, rounded half up."""
    return math.floor(float(usd) * 1_000_000_000 + 0.5)  # type: ignore[arg-type]


def _vector(values: tuple[object, ...]) -> list[int]:
    """Counters, then the actual cost where recorded (an actual of 0 only when the status
    says actual), else the estimate: the two in billionths of a dollar."""
    counters = [int(v or 0) for v in values[: len(SESSION_COUNTERS)]]  # type: ignore[call-overload]
    actual, estimated, status = values[len(SESSION_COUNTERS) :]
    if actual is not None and (actual != 0 or status == "actual"):
        return [*counters, _nano(actual), 0]
    return [*counters, 0, _nano(estimated or 0)]


def _add(groups: dict[str, list[int]], key: str, values: tuple[object, ...]) -> None:
    vector = groups.setdefault(key, [0] * 9)
    vector[0] += 1
    for index, value in enumerate(_vector(values), start=1):
        vector[index] += value


def _tuples(groups: dict[str, list[int]]) -> dict[str, tuple[int, ...]]:
    return {key: tuple(vector) for key, vector in sorted(groups.items()) if any(vector)}


def recount(path: Path, low: float, high: float, profile: str = "default") -> Recount:
    """Everything a tailer reports for (low, high], from scratch, on a fresh connection."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.text_factory = lambda data: data.decode("utf-8", "replace")
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        columns = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}

        def column(name: str) -> str:
            return name if name in columns else "NULL"

        conn.execute("BEGIN")  # one snapshot for every query below
        sessions = conn.execute(
            f"SELECT id, started_at, source, {column('profile_name')}, {column('model')}, "
            f"{column('billing_provider')}, "
            + ", ".join(column(name) for name in (*SESSION_COUNTERS, *COST_COLUMNS))
            + " FROM sessions"
        ).fetchall()
        usage_rows = []
        if "session_model_usage" in tables:
            usage_columns = {
                row[1] for row in conn.execute("PRAGMA table_info(session_model_usage)")
            }
            costs = [name if name in usage_columns else "NULL" for name in COST_COLUMNS]
            usage_rows = conn.execute(
                "SELECT session_id, model, billing_provider, task, "
                + ", ".join((*SESSION_COUNTERS, *costs))
                + " FROM session_model_usage"
            ).fetchall()
        conn.execute("COMMIT")
    finally:
        conn.close()
    groups: dict[str, dict[str, list[int]]] = {
        name: {} for name in ("total", "source", "profile", "model")
    }
    skipped: dict[str, int] = {}
    inside: set[object] = set()
    for sid, started, source, prof, model, provider, *values in sessions:
        if type(started) not in (int, float):
            skipped["sessions: no start time"] = skipped.get("sessions: no start time", 0) + 1
            continue
        if not low < started <= high:
            continue
        inside.add(sid)
        why = _why(tuple(values))
        if why:
            skipped[f"sessions: {why}"] = skipped.get(f"sessions: {why}", 0) + 1
            continue
        _add(groups["total"], "", tuple(values))
        _add(groups["source"], str(source) if source else "unknown", tuple(values))
        _add(groups["profile"], str(prof) if prof else profile, tuple(values))
        _add(groups["model"], _key(provider, model), tuple(values))
    usage: dict[str, tuple[int, ...]] | None = None
    side: tuple[int, ...] | None = None
    if "session_model_usage" in tables:
        usage, side = _fold_usage([row for row in usage_rows if row[0] in inside], skipped)
    return Recount(
        total=tuple(groups["total"].get("", [0] * 9)),
        by_source=_tuples(groups["source"]),
        by_profile=_tuples(groups["profile"]),
        by_model_sessions=_tuples(groups["model"]),
        by_model_usage=usage,
        side_calls=side,
        skipped=skipped,
    )


def _fold_usage(
    rows: list[tuple[object, ...]], skipped: dict[str, int]
) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
    """Main-loop usage per provider/model and side calls, sessions counted once each."""
    sessions: dict[str, set[object]] = {}
    sums: dict[str, list[int]] = {}
    for session_id, model, provider, task, *values in rows:
        why = _why(tuple(values))
        if why:
            key = f"session_model_usage: {why}"
            skipped[key] = skipped.get(key, 0) + 1
            continue
        name = _key(provider, model) if not task else "\0side"
        sessions.setdefault(name, set()).add(session_id)
        vector = sums.setdefault(name, [0] * 8)
        for index, value in enumerate(_vector(tuple(values))):
            vector[index] += value
    folded = {name: (len(sessions[name]), *vector) for name, vector in sums.items()}
    side = folded.pop("\0side", (0,) * 9)
    return {k: v for k, v in sorted(folded.items()) if any(v)}, side


def as_tuples(mapping: Mapping[str, TokenCounts]) -> dict[str, tuple[int, ...]]:
    return {key: astuple(value) for key, value in mapping.items()}


def assert_matches(totals: LedgerTotals, expected: Recount) -> None:
    assert astuple(totals.total) == expected.total
    assert dict(totals.skipped) == expected.skipped
    assert as_tuples(totals.by_source) == expected.by_source
    assert as_tuples(totals.by_profile) == expected.by_profile
    if expected.by_model_usage is None:
        assert totals.model_basis == "sessions.model"
        assert as_tuples(totals.by_model) == expected.by_model_sessions
        assert totals.side_calls is None
    else:
        assert totals.model_basis == "session_model_usage"
        assert as_tuples(totals.by_model) == expected.by_model_usage
        assert totals.side_calls is not None
        assert astuple(totals.side_calls) == expected.side_calls


def make_wal(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()


# --- a ledger of exactly these sessions --------------------------------------------------

LEDGER_REFRESH_S = 0.5
Tokens = tuple[int, int, int, int]
"""input, cache read, cache write, output of one session."""
GOOD: list[Tokens] = [(100, 300, 100, 50), (200, 500, 100, 70)]


def make_ledger(path: Path, sessions: list[Tokens], *, wal: bool = True) -> Path:
    """A Hermes schema-22 ledger holding exactly `sessions`, each started an hour ago."""
    shutil.copyfile(require_fixture(HERMES_FIXTURES / "state-v22.db"), path)
    conn = sqlite3.connect(path, isolation_level=None)
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for table in ("session_model_usage", "messages", "sessions"):
        if table in tables:
            conn.execute(f"DELETE FROM {table}")
    now = time.time()
    for index, (fresh, read, write, output) in enumerate(sessions):
        conn.execute(
            "INSERT INTO sessions (id, source, model, started_at, ended_at, input_tokens, "
            "cache_read_tokens, cache_write_tokens, output_tokens, api_call_count) "
            "VALUES (?, 'cli', 'test-model', ?, ?, ?, ?, ?, ?, 1)",
            (f"s{index}", now - 3600 - index, now - 3000, fresh, read, write, output),
        )
    conn.execute("VACUUM")
    conn.execute(f"PRAGMA journal_mode={'WAL' if wal else 'DELETE'}")
    conn.close()
    return path


def ledger_config(path: Path) -> Config:
    return Config(
        source="<test>",
        ledgers=(LedgerConfig(str(path)),),
        window="24h",
        refresh_s=LEDGER_REFRESH_S,
    )

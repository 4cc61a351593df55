"""A writer that touches a ledger the way Hermes does, for tests and benchmarks.

WAL mode, `BEGIN IMMEDIATE` with a 1 s busy timeout, counters incremented in place on the
`sessions` row and upserted into `session_model_usage` in the same transaction, sessions
inserted with zero counters and ended once, a passive checkpoint every 50 writes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

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
        self, session_id: str, model: str, usage: Usage, *, task: str = "", at: float = 0.0
    ) -> None:
        """One API call: the main loop adds to `sessions`; a side call only to the usage table."""

        def work(conn: sqlite3.Connection) -> None:
            if task == "":
                conn.execute(
                    "UPDATE sessions SET input_tokens = input_tokens + ?, "
                    "cache_read_tokens = cache_read_tokens + ?, "
                    "cache_write_tokens = cache_write_tokens + ?, "
                    "output_tokens = output_tokens + ?, reasoning_tokens = reasoning_tokens + ?, "
                    "api_call_count = api_call_count + 1 WHERE id = ?",
                    (*usage.values(), session_id),
                )
            if self.has_usage:
                conn.execute(
                    "INSERT INTO session_model_usage (session_id, model, task, api_call_count, "
                    "input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, "
                    "reasoning_tokens, first_seen, last_seen) "
                    "VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (session_id, model, billing_provider, billing_base_url, "
                    "billing_mode, task) DO UPDATE SET api_call_count = api_call_count + 1, "
                    "input_tokens = input_tokens + excluded.input_tokens, "
                    "cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens, "
                    "cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens, "
                    "output_tokens = output_tokens + excluded.output_tokens, "
                    "reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens, "
                    "last_seen = excluded.last_seen",
                    (session_id, model, task, *usage.values(), at, at),
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


# --- the oracle: a full recount with plain SQL -----------------------------------------------


@dataclass
class Recount:
    total: tuple[int, ...]
    by_source: dict[str, tuple[int, ...]]
    by_profile: dict[str, tuple[int, ...]]
    by_model_sessions: dict[str, tuple[int, ...]]
    by_model_usage: dict[str, tuple[int, ...]] | None
    side_calls: tuple[int, ...] | None


_SUMS = (
    "COUNT(*), SUM(COALESCE(api_call_count, 0)), SUM(COALESCE(input_tokens, 0)), "
    "SUM(COALESCE(cache_read_tokens, 0)), SUM(COALESCE(cache_write_tokens, 0)), "
    "SUM(COALESCE(output_tokens, 0)), SUM(COALESCE(reasoning_tokens, 0))"
)


def _short(model: str | None) -> str:
    return model.split("/")[-1] if model else "unknown"


def _fold(
    rows: list[tuple[object, ...]], key: Callable[[object], str]
) -> dict[str, tuple[int, ...]]:
    out: dict[str, list[int]] = {}
    for row in rows:
        vector = out.setdefault(key(row[0]), [0] * 7)
        for index, value in enumerate(row[1:]):
            vector[index] += int(value or 0)  # type: ignore[call-overload]
    return {name: tuple(vector) for name, vector in out.items() if any(vector)}


def _fold_usage(
    rows: list[tuple[object, ...]],
) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
    """Main-loop usage per short model name and side calls, sessions counted once each."""
    sessions: dict[str, set[object]] = {}
    sums: dict[str, list[int]] = {}
    for session_id, model, task, *values in rows:
        name = _short(str(model)) if task == "" else "\0side"
        sessions.setdefault(name, set()).add(session_id)
        vector = sums.setdefault(name, [0] * 6)
        for index, value in enumerate(values):
            vector[index] += int(value)  # type: ignore[call-overload]
    folded = {name: (len(sessions[name]), *vector) for name, vector in sums.items()}
    side = folded.pop("\0side", (0,) * 7)
    return {k: v for k, v in folded.items() if any(v)}, side


def recount(path: Path, low: float, high: float, profile: str = "default") -> Recount:
    """Everything a tailer reports for (low, high], from scratch, on a fresh connection."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        columns = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
        window = "started_at > ? AND started_at <= ?"
        conn.execute("BEGIN")  # one snapshot for every query below
        total = conn.execute(f"SELECT {_SUMS} FROM sessions WHERE {window}", (low, high)).fetchone()
        by_source = conn.execute(
            f"SELECT source, {_SUMS} FROM sessions WHERE {window} GROUP BY source", (low, high)
        ).fetchall()
        profile_col = "profile_name" if "profile_name" in columns else "NULL"
        by_profile = conn.execute(
            f"SELECT {profile_col}, {_SUMS} FROM sessions WHERE {window} GROUP BY 1", (low, high)
        ).fetchall()
        by_model = conn.execute(
            f"SELECT model, {_SUMS} FROM sessions WHERE {window} GROUP BY model", (low, high)
        ).fetchall()
        usage: dict[str, tuple[int, ...]] | None = None
        side: tuple[int, ...] | None = None
        if "session_model_usage" in tables:
            rows = conn.execute(
                "SELECT u.session_id, u.model, u.task, u.api_call_count, u.input_tokens, "
                "u.cache_read_tokens, u.cache_write_tokens, u.output_tokens, u.reasoning_tokens "
                "FROM session_model_usage u JOIN sessions s ON s.id = u.session_id "
                "WHERE s.started_at > ? AND s.started_at <= ?",
                (low, high),
            ).fetchall()
            usage, side = _fold_usage(rows)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return Recount(
        total=tuple(int(v or 0) for v in total),
        by_source=_fold(by_source, lambda s: str(s)),
        by_profile=_fold(by_profile, lambda p: str(p) if p else profile),
        by_model_sessions=_fold(by_model, lambda m: _short(m)),  # type: ignore[arg-type]
        by_model_usage=usage,
        side_calls=side,
    )

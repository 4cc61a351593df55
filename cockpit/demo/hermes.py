"""A simulated Hermes agent writing its `state.db` with Hermes's own statements."""

from __future__ import annotations

import functools
import json
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from importlib.resources import files
from operator import add
from pathlib import Path
from types import TracebackType

from cockpit.demo.hermes_workload import (
    END_REASONS,
    INTERACTIVE,
    TITLE_NOUNS,
    TITLE_ROUTE,
    TITLE_VERBS,
    CallUsage,
    Route,
    Session,
    call_usage,
    new_session,
)

DAY = 86400.0

HERMES_SCHEMA_VERSION = 22

HERMES_SCHEMA_V22 = (files("cockpit.demo") / "hermes_schema_v22.sql").read_text(encoding="utf-8")
"""Copied from a schema-22 ledger's sqlite_master."""

CREATE_SESSION_SQL = """INSERT OR IGNORE INTO sessions (
                   id, source, user_id, model, model_config, parent_session_id, started_at,
                   cwd, chat_id, chat_type, profile_name
               ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""

TOKEN_UPDATE_DELTA_SQL = """UPDATE sessions SET
                   input_tokens = input_tokens + ?,
                   output_tokens = output_tokens + ?,
                   cache_read_tokens = cache_read_tokens + ?,
                   cache_write_tokens = cache_write_tokens + ?,
                   reasoning_tokens = reasoning_tokens + ?,
                   estimated_cost_usd = COALESCE(estimated_cost_usd, 0) + COALESCE(?, 0),
                   actual_cost_usd = CASE
                       WHEN ? IS NULL THEN actual_cost_usd
                       ELSE COALESCE(actual_cost_usd, 0) + ?
                   END,
                   cost_status = COALESCE(?, cost_status),
                   cost_source = COALESCE(?, cost_source),
                   pricing_version = COALESCE(?, pricing_version),
                   billing_provider = COALESCE(billing_provider, ?),
                   billing_base_url = COALESCE(billing_base_url, ?),
                   billing_mode = COALESCE(billing_mode, ?),
                   model = COALESCE(model, ?),
                   api_call_count = COALESCE(api_call_count, 0) + ?
                   WHERE id = ?"""

MODEL_USAGE_UPSERT_SQL = """INSERT INTO session_model_usage (
                   session_id, model, billing_provider, billing_base_url, billing_mode,
                   task, api_call_count, input_tokens, output_tokens,
                   cache_read_tokens, cache_write_tokens, reasoning_tokens,
                   estimated_cost_usd, actual_cost_usd, cost_status, cost_source,
                   first_seen, last_seen
               ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT(session_id, model, billing_provider, billing_base_url, billing_mode,
                           task)
               DO UPDATE SET
                   api_call_count = api_call_count + excluded.api_call_count,
                   input_tokens = input_tokens + excluded.input_tokens,
                   output_tokens = output_tokens + excluded.output_tokens,
                   cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
                   cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
                   reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
                   estimated_cost_usd = estimated_cost_usd + excluded.estimated_cost_usd,
                   actual_cost_usd = actual_cost_usd + excluded.actual_cost_usd,
                   cost_status = COALESCE(excluded.cost_status, cost_status),
                   cost_source = COALESCE(excluded.cost_source, cost_source),
                   last_seen = excluded.last_seen"""

END_SESSION_SQL = (
    "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL"
)
SET_TITLE_SQL = "UPDATE sessions SET title = ? WHERE id = ?"


def _is_lock_error(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SimulatedHermes:
    """Writes a Hermes schema-22 `state.db` with Hermes's statements: history, then live calls.

    `start()` seeds `history_sessions` sessions over the past `history_days` days (a few left
    open), then writes one API call every ~`interval` seconds in a daemon thread until `close()`.
    """

    WRITE_RETRIES = 15
    CHECKPOINT_EVERY = 50
    LIVE_SESSIONS = 3

    def __init__(
        self,
        path: Path | str,
        *,
        seed: int | None = 0,
        history_sessions: int = 200,
        history_days: float = 30.0,
        open_sessions: int = 3,
        interval: float = 0.3,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.interval = interval
        self.history_sessions = history_sessions
        self.history_days = history_days
        self.open_sessions = open_sessions
        self._clock = clock
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: list[Session] = []
        self._titles: set[str] = set()
        self._conn = sqlite3.connect(
            self.path, timeout=1.0, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self.writes = 0
        """Committed write transactions."""
        self.busy_errors = 0
        """Write attempts that met SQLITE_BUSY / `database is locked` (then retried)."""
        self.error = ""
        """Why the live writer stopped early, if it did."""
        self._create_schema()

    # - writing, the way Hermes does -

    def _create_schema(self) -> None:
        if self._conn.execute("SELECT name FROM sqlite_master WHERE name='sessions'").fetchone():
            return
        self._conn.executescript(HERMES_SCHEMA_V22)
        self._execute_write(
            lambda c: c.execute(
                "INSERT INTO schema_version (version) VALUES (?)", (HERMES_SCHEMA_VERSION,)
            )
        )

    def _execute_write(self, work: Callable[[sqlite3.Connection], object]) -> None:
        """One `BEGIN IMMEDIATE` transaction, retried with jitter when the database is locked."""
        with self._lock:
            for attempt in range(self.WRITE_RETRIES):
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    if not _is_lock_error(exc) or attempt == self.WRITE_RETRIES - 1:
                        raise
                    self.busy_errors += 1
                    time.sleep(self._rng.uniform(0.02, 0.15))
                    continue
                try:
                    work(self._conn)
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                break
            self.writes += 1
            if self.writes % self.CHECKPOINT_EVERY == 0:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _create_session(self, c: sqlite3.Connection, s: Session) -> None:
        rng = self._rng
        config = json.dumps({"provider": s.route.provider, "max_iterations": 90})
        cwd = rng.choice(("/home/dev/src/cockpit", "/home/dev/src/api", "/home/dev/notes"))
        telegram = s.source == "telegram"
        c.execute(
            CREATE_SESSION_SQL,
            (
                s.id, s.source, str(700100 + rng.randrange(3)) if telegram else None,
                s.route.model, config, s.parent_id, s.started_at,
                None if telegram or s.source == "cron" else cwd,
                str(-100200 - rng.randrange(4)) if telegram else None,
                "dm" if telegram else None,
                "work" if rng.random() < 0.25 else None,
            ),
        )  # fmt: skip

    def _next_call(self, s: Session) -> CallUsage:
        """The session's next API call, counted as done."""
        u = call_usage(self._rng, s)
        s.done += 1
        s.prev_prompt = u.prompt
        return u

    def _record_calls(
        self, c: sqlite3.Connection, s: Session, calls: Sequence[tuple[float, CallUsage]]
    ) -> None:
        """`update_token_counts(...)` for these `(when, usage)` calls of one session: the session
        row and the per-model row, by their delta statements. Several calls are summed and written
        at once, which leaves the rows that writing them one by one leaves: the token counts are
        sums, and the costs are added in the same order from the same start."""
        if not calls:
            return
        route = s.route
        # A running total, as SQLite keeps one (not sum(): from Python 3.12 it compensates for
        # rounding). A call's cost is None only on a route without prices.
        cost = functools.reduce(add, (u.cost(route) or 0.0 for _, u in calls), 0.0)
        session_cost = None if route.prices is None else cost
        usage = CallUsage.total([u for _, u in calls])
        status = "unknown" if session_cost is None else "estimated"
        source = "none" if session_cost is None else "official_docs_snapshot"
        c.execute(
            TOKEN_UPDATE_DELTA_SQL,
            (
                usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
                usage.cache_write_tokens, usage.reasoning_tokens, session_cost, None, None,
                status, source, None, route.provider, route.base_url, None, route.model,
                len(calls), s.id,
            ),
        )  # fmt: skip
        first, last = calls[0][0], calls[-1][0]
        self._upsert_model_usage(
            c, s.id, route, usage, len(calls), cost, status, source, "", first, last
        )

    def _upsert_model_usage(
        self,
        c: sqlite3.Connection,
        session_id: str,
        route: Route,
        u: CallUsage,
        calls: int,
        cost: float,
        status: str | None,
        source: str | None,
        task: str,
        first_seen: float,
        last_seen: float,
    ) -> None:
        c.execute(
            MODEL_USAGE_UPSERT_SQL,
            (
                session_id, route.model, route.provider, route.base_url, "", task, calls,
                u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens,
                u.reasoning_tokens, cost, 0.0, status, source, first_seen, last_seen,
            ),
        )  # fmt: skip

    def _title(self, c: sqlite3.Connection, s: Session, when: float) -> None:
        """Title generation: a side call recorded only in `session_model_usage`, then the title."""
        rng = self._rng
        u = CallUsage(300 + rng.randrange(500), 8 + rng.randrange(16), 0, 0, 0, 0)
        cost = float(u.cost(TITLE_ROUTE) or 0.0)
        self._upsert_model_usage(
            c, s.id, TITLE_ROUTE, u, 1, cost, None, None, "title_generation", when, when
        )
        title = f"{rng.choice(TITLE_VERBS)} {rng.choice(TITLE_NOUNS)}"
        suffix = 2
        candidate = title
        while candidate in self._titles:
            candidate = f"{title} #{suffix}"
            suffix += 1
        self._titles.add(candidate)
        c.execute(SET_TITLE_SQL, (candidate, s.id))

    # - planning sessions -

    def _plan_history(self, now: float) -> list[Session]:
        rng = self._rng
        sessions: list[Session] = []
        for _ in range(self.history_sessions):
            while True:
                t = now - rng.uniform(2 * 3600, self.history_days * DAY)
                if 7 <= time.gmtime(t).tm_hour <= 23 or rng.random() < 0.2:
                    break
            sessions.append(new_session(self._rng, t))
        parents = [s for s in sessions if s.source in ("desktop", "cli", "tui")]
        for s in sessions:
            if s.source == "subagent" and parents:
                parent = rng.choice(parents)
                s.parent_id = parent.id
                s.started_at = parent.started_at + rng.uniform(60, 900)
        sessions.sort(key=lambda s: s.started_at)
        interactive = [s for s in sessions if s.source in INTERACTIVE]
        for s in rng.sample(interactive, min(self.open_sessions, len(interactive))):
            s.started_at = now - rng.uniform(5 * 60, 50 * 60)  # inside the default 1h window
            s.calls = max(s.calls, 40)  # still going: the live writer continues it
            self._live.append(s)
        return sessions

    def seed_history(self, *, call_by_call: bool = False) -> None:
        """Write the past sessions in one transaction; timestamps from the plan, not the clock.

        A session's past calls are written at once (see `_record_calls`), ~2× faster than one by
        one; `call_by_call=True` writes each on its own, as the live writer does."""
        now = self._clock()
        sessions = self._plan_history(now)
        live_ids = {s.id for s in self._live}

        def work(c: sqlite3.Connection) -> None:
            for s in sessions:
                self._create_session(c, s)
                t = s.started_at
                calls: list[tuple[float, CallUsage]] = []
                for _ in range(s.calls if s.id not in live_ids else s.calls // 3):
                    t += self._rng.uniform(15, 150)
                    if t > now - 30:
                        break
                    calls.append((t, self._next_call(s)))
                if call_by_call:
                    for call in calls:
                        self._record_calls(c, s, [call])
                else:
                    self._record_calls(c, s, calls)
                if s.source in INTERACTIVE and self._rng.random() < 0.6:
                    self._title(c, s, s.started_at + self._rng.uniform(3, 12))
                if s.id not in live_ids:
                    c.execute(END_SESSION_SQL, (min(t + 30, now - 30), END_REASONS[s.source], s.id))

        self._execute_write(work)

    # - live writing -

    def write_call(self) -> None:
        """One live step: maybe open a session, then one API call (ending the session when done)."""
        now = self._clock()
        if len(self._live) < self.LIVE_SESSIONS or self._rng.random() < 0.01:
            s = new_session(self._rng, now)
            self._execute_write(lambda c: self._create_session(c, s))
            self._live.append(s)
        s = self._rng.choice(self._live)
        call = (now, self._next_call(s))
        self._execute_write(lambda c: self._record_calls(c, s, [call]))
        if s.done == 1 and s.source in INTERACTIVE and self._rng.random() < 0.6:
            self._execute_write(lambda c: self._title(c, s, now))
        if s.done >= s.calls:
            self._live.remove(s)
            self._execute_write(
                lambda c: c.execute(END_SESSION_SQL, (now, END_REASONS[s.source], s.id))
            )

    def start(self) -> SimulatedHermes:
        """Seed the history (if the ledger is empty) and start writing live."""
        if not self._conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchone():
            self.seed_history()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="demo-hermes", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval * self._rng.uniform(0.5, 1.5)):
            try:
                self.write_call()
            except sqlite3.Error as exc:
                self.error = f"the simulated Hermes stopped writing {self.path}: {exc}"
                return

    def close(self) -> None:
        """Stop the writer and close the ledger (the file stays)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SimulatedHermes:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# --- a real Prometheus scraping the lanes (optional) ------------------------------------

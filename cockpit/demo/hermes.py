"""A simulated Hermes agent writing its `state.db` with Hermes's own statements."""

from __future__ import annotations

import functools
import json
import math
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from operator import add
from pathlib import Path
from types import TracebackType

from cockpit.demo.lane import DAY

# --- the simulated Hermes ---------------------------------------------------------------

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


@dataclass(frozen=True, slots=True)
class Route:
    """A model as Hermes stores it, and how it is billed."""

    model: str
    provider: str
    base_url: str
    prices: tuple[float, float, float, float] | None
    """$ per million (input, cache read, cache write, output); None when unknown (local)."""
    reasoning_share: float
    context: int
    reports_cache: bool = True


ROUTES: dict[str, Route] = {
    r.model: r
    for r in (
        Route("claude-sonnet-4.6", "anthropic", "https://api.anthropic.invalid",
              (3.0, 0.30, 3.75, 15.0), 0.15, 400_000),
        Route("openrouter/anthropic/claude-sonnet-4.6", "openrouter",
              "https://openrouter.invalid/api/v1", (3.0, 0.30, 3.75, 15.0), 0.15, 400_000),
        Route("gpt-5.4", "openai", "https://api.openai.invalid/v1",
              (1.25, 0.125, 0.0, 10.0), 0.40, 400_000),
        Route("openrouter/qwen/qwen3-coder", "openrouter", "https://openrouter.invalid/api/v1",
              (0.22, 0.022, 0.0, 0.95), 0.0, 256_000),
        Route("deepseek-ai/DeepSeek-V3", "custom", "http://127.0.0.1:8000/v1",
              None, 0.20, 500_000, reports_cache=False),
        Route("meta-llama/Llama-3.1-8B-Instruct", "custom", "http://127.0.0.1:8001/v1",
              None, 0.0, 120_000, reports_cache=False),
    )
}  # fmt: skip
"""Includes the two demo lanes' models (provider `custom`) and provider-prefixed names."""

SOURCE_ROUTES: dict[str, dict[str, int]] = {
    "desktop": {"claude-sonnet-4.6": 6, "openrouter/anthropic/claude-sonnet-4.6": 1, "gpt-5.4": 4,
                "deepseek-ai/DeepSeek-V3": 1},
    "cli": {"claude-sonnet-4.6": 4, "gpt-5.4": 2, "openrouter/qwen/qwen3-coder": 2,
            "deepseek-ai/DeepSeek-V3": 1},
    "tui": {"claude-sonnet-4.6": 3, "deepseek-ai/DeepSeek-V3": 1,
            "meta-llama/Llama-3.1-8B-Instruct": 1},
    "telegram": {"gpt-5.4": 3, "openrouter/anthropic/claude-sonnet-4.6": 1,
                 "meta-llama/Llama-3.1-8B-Instruct": 1},
    "cron": {"meta-llama/Llama-3.1-8B-Instruct": 2, "openrouter/qwen/qwen3-coder": 2, "gpt-5.4": 1},
    "subagent": {"openrouter/qwen/qwen3-coder": 3, "deepseek-ai/DeepSeek-V3": 1,
                 "claude-sonnet-4.6": 2},
}  # fmt: skip
SOURCE_WEIGHTS: dict[str, int] = {
    "desktop": 80, "cli": 55, "tui": 30, "telegram": 30, "cron": 35, "subagent": 50,
}  # fmt: skip
CALLS_MEDIAN: dict[str, float] = {
    "desktop": 24, "cli": 28, "tui": 18, "telegram": 8, "cron": 5, "subagent": 14,
}  # fmt: skip
END_REASONS: dict[str, str] = {
    "desktop": "agent_close", "cli": "cli_close", "tui": "cli_close",
    "telegram": "session_reset", "cron": "cron_complete", "subagent": "agent_close",
}  # fmt: skip
INTERACTIVE = frozenset({"desktop", "cli", "tui", "telegram"})
TITLE_VERBS = (
    "Fix",
    "Refactor",
    "Review",
    "Debug",
    "Draft",
    "Plan",
    "Benchmark",
    "Profile",
    "Trace",
)
TITLE_NOUNS = (
    "ledger tailer", "prefix cache stats", "CI pipeline", "config loader", "GPU memory spike",
    "retry policy", "metrics scrape", "tmux layout", "roofline plot", "queue latency",
)  # fmt: skip
TITLE_ROUTE = Route("gemini-3-flash", "google", "https://generativelanguage.invalid/v1beta",
                    (0.30, 0.03, 0.0, 2.50), 0.0, 1_000_000)  # fmt: skip


@dataclass(slots=True)
class _Session:
    """A session being written: what it will do and how far it got."""

    id: str
    source: str
    route: Route
    calls: int
    base: int
    growth: int
    started_at: float
    parent_id: str | None = None
    done: int = 0
    prev_prompt: int = 0


@dataclass(frozen=True, slots=True)
class CallUsage:
    """One API call's usage delta, as Hermes adds it to the session row."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    prompt: int

    @classmethod
    def total(cls, usages: Sequence[CallUsage]) -> CallUsage:
        """The calls' token counts summed, with the last call's prompt."""
        return cls(
            input_tokens=sum(u.input_tokens for u in usages),
            output_tokens=sum(u.output_tokens for u in usages),
            cache_read_tokens=sum(u.cache_read_tokens for u in usages),
            cache_write_tokens=sum(u.cache_write_tokens for u in usages),
            reasoning_tokens=sum(u.reasoning_tokens for u in usages),
            prompt=usages[-1].prompt,
        )

    def cost(self, route: Route) -> float | None:
        if route.prices is None:
            return None
        p_in, p_read, p_write, p_out = route.prices
        return (
            self.input_tokens * p_in
            + self.cache_read_tokens * p_read
            + self.cache_write_tokens * p_write
            + self.output_tokens * p_out
        ) / 1e6


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
        self._live: list[_Session] = []
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

    def _create_session(self, c: sqlite3.Connection, s: _Session) -> None:
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

    def _call_usage(self, s: _Session) -> CallUsage:
        """The next call of a session: the context grows each turn and mostly hits the cache."""
        rng, route = self._rng, s.route
        prompt = min(s.base + s.done * s.growth + rng.randrange(0, 3000), route.context)
        if not route.reports_cache:
            cached = int(prompt * rng.uniform(0.0, 0.04))
        elif s.done == 0:
            cached = int(s.base * rng.uniform(0.0, 0.7))
        else:
            cached = int(min(s.prev_prompt, prompt) * rng.uniform(0.80, 0.99))
        fresh = prompt - cached
        anthropic = route.provider == "anthropic" or "anthropic/" in route.model
        cache_write = int(fresh * rng.uniform(0.6, 0.95)) if anthropic else 0
        output = max(1, int(rng.lognormvariate(math.log(480), 1.0)))
        reasoning = min(output, int(output * route.reasoning_share * rng.uniform(0.5, 1.5)))
        return CallUsage(fresh - cache_write, output, cached, cache_write, reasoning, prompt)

    def _next_call(self, s: _Session) -> CallUsage:
        """The session's next API call, counted as done."""
        u = self._call_usage(s)
        s.done += 1
        s.prev_prompt = u.prompt
        return u

    def _record_calls(
        self, c: sqlite3.Connection, s: _Session, calls: Sequence[tuple[float, CallUsage]]
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

    def _title(self, c: sqlite3.Connection, s: _Session, when: float) -> None:
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

    def _new_session(self, started_at: float, source: str | None = None) -> _Session:
        rng = self._rng
        if source is None:
            source = _pick(rng, SOURCE_WEIGHTS)
        route = ROUTES[_pick(rng, SOURCE_ROUTES[source])]
        calls = int(rng.lognormvariate(math.log(CALLS_MEDIAN[source]), 0.7))
        stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(started_at))
        if source == "cron":
            sid = f"cron_{rng.getrandbits(48):012x}_{stamp}"
        else:
            sid = f"{stamp}_{rng.getrandbits(24):06x}"
        return _Session(
            id=sid,
            source=source,
            route=route,
            calls=max(1, min(120, calls)),
            base=rng.randrange(12_000, 30_000),
            growth=rng.randrange(4_000, 12_000),
            started_at=started_at,
        )

    def _plan_history(self, now: float) -> list[_Session]:
        rng = self._rng
        sessions: list[_Session] = []
        for _ in range(self.history_sessions):
            while True:
                t = now - rng.uniform(2 * 3600, self.history_days * DAY)
                if 7 <= time.gmtime(t).tm_hour <= 23 or rng.random() < 0.2:
                    break
            sessions.append(self._new_session(t))
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
            s = self._new_session(now)
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


def _pick(rng: random.Random, weights: dict[str, int]) -> str:
    keys = list(weights)
    return rng.choices(keys, [weights[k] for k in keys])[0]


# --- a real Prometheus scraping the lanes (optional) ------------------------------------

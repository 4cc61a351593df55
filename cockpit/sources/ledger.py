"""Read-only tailer of the Hermes agent's SQLite ledger (`state.db`).

- The file is opened `mode=ro` with a short busy timeout; nothing here writes. Every read is
  one SELECT, so it sees one committed snapshot and holds it only for that statement.
- `PRAGMA data_version` says whether another connection committed: unchanged data and window
  bounds read no rows.
- Sessions are *known closed* (rowid <= the highest read, not in the open set) or *open*
  (`ended_at IS NULL` when last read). Closed sessions never change, so only their sums are
  kept; a change re-reads the open set and the rows added since, in one statement. A sliding
  window adds and subtracts the known-closed sessions in the slices between the old and new
  bounds: exact whatever snapshot those reads see, and no row per session kept in memory.
- A window read afresh (the first read, a window switch) is one statement: the open sessions,
  and the closed ones summed. Its session_model_usage follows; on a big ledger in the
  background on a second connection (seconds at a million sessions): meanwhile per model
  comes from sessions.model and `missing` says so.
- A row that can't be read (see `ledger_sql`) is skipped and counted in
  `LedgerTotals.skipped`, never summed, never fatal.
- Any failure part-way forgets everything read, so figures are never built from a partial
  read; so does a replaced file (other inode or device, a smaller size) or a schema change.

Per model, a session counts once per `provider/model` it used; `side_calls.sessions` counts
sessions with any side call. Not noticed until the file is replaced, by design: a row changed
after it was read as closed (Hermes never does this), a deleted session, a VACUUM that
renumbers rowids.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from cockpit.core.ledger_figures import ledger_window_sql
from cockpit.core.model import LedgerInfo, LedgerTotals, TokenCounts, frozen_map
from cockpit.sources.ledger_files import (
    BUSY_TIMEOUT_S,
    FileFacts,
    LedgerError,
    describe_failure,
    inspect_file,
    look,
    profile_of,
    resolve_ledger,
    same_files,
)
from cockpit.sources.ledger_sql import (
    CHANGED,
    CLOSED_IN_RANGE,
    NO_START,
    VERSIONS,
    Col,
    Schema,
    first_read,
    read_schema,
    rows_statement,
    session_groups,
    usage_groups,
)
from cockpit.sources.ledger_sums import (
    GroupKey,
    LedgerReading,
    Session,
    Sums,
    combine,
    missing_for,
    model_key,
    text_of,
    window_edges,
)

__all__ = [
    "LedgerError",
    "LedgerSet",
    "LedgerTailer",
    "profile_of",
    "resolve_ledger",
    "same_files",
]

BIG_LEDGER_ROWS = 100_000
"""A window summed afresh on a ledger with more sessions than this scans the table, and reads
its session_model_usage in the background (see `LedgerTailer._full_read`)."""


class LedgerTailer:
    """Tails one Hermes ledger file, read-only."""

    def __init__(
        self,
        path: str | Path,
        profile: str | None = None,
        *,
        big_rows: int = BIG_LEDGER_ROWS,
        also_named: tuple[str, ...] = (),
    ) -> None:
        """`also_named`: the other names the same file was given (read once, said so)."""
        self.path = Path(path).expanduser()
        self.profile = profile or "default"
        self.also_named = also_named
        self.big_rows = big_rows
        self._conn: aiosqlite.Connection | None = None
        self._usage_conn: aiosqlite.Connection | None = None
        """A second connection, opened for session_model_usage read in the background."""
        self._usage_read: asyncio.Task[Iterable[Any]] | None = None
        """That read, while it runs: per model comes from sessions.model meanwhile."""
        self._facts: FileFacts | None = None
        self._schema: Schema | None = None
        self._data_version: int | None = None
        self._bounds: tuple[float, float] | None = None
        """The window the sums are for; None: the next refresh reads one afresh."""
        self._closed = Sums()
        """Known-closed sessions started inside the bounds, and those with no start skipped."""
        self._open: dict[int, Session] = {}
        """By rowid: rowids are integers whatever the id column holds."""
        self._max_rowid = 0
        self._first_started: float | None = None
        self._failed_on: tuple[object, ...] | None = None
        """The file as a stat saw it when the last read failed (None after a good read)."""

    async def refresh(self, window_s: float, end: float | None = None) -> LedgerTotals:
        """Totals for sessions with `started_at` in (end - window_s, end]."""
        return (await self.read(window_s, end)).totals

    async def read(self, window_s: float, end: float | None = None) -> LedgerReading:
        """The totals plus the per-model split by `sessions.model` (for sets of mixed schemas)."""
        if end is None:
            end = _now()
        low, high = float(end) - float(window_s), float(end)
        try:
            reading = await self._refresh(window_s, low, high)
        except asyncio.CancelledError:  # (a window switch) sums may be half-moved:
            self._bounds = None  # the next refresh reads the window afresh
            raise
        except Exception as exc:  # whatever went wrong, nothing half-read is kept
            reason = describe_failure(self.path, exc, self._facts)
            await self.close()
            self._failed_on = look(self.path)
            raise LedgerError(reason) from None
        self._failed_on = None
        return reading

    async def probe(self) -> bool:
        """After a failed read: has the file changed since (so a full read is worth it now)?"""
        return self._failed_on is not None and look(self.path) != self._failed_on

    async def settle(self) -> None:
        """Wait for a background read of session_model_usage (benchmarks and tests)."""
        if self._usage_read is not None:
            await asyncio.wait([self._usage_read])

    async def _cancel_usage_read(self) -> None:
        task, self._usage_read = self._usage_read, None
        if task is None:
            return
        if not task.done() and self._usage_conn is not None:
            await self._usage_conn.interrupt()  # stop the statement, not only wait for it
        task.cancel()
        await asyncio.wait([task])

    async def close(self) -> None:
        """Close the connections: the next refresh opens the file and reads it afresh."""
        self._facts = self._schema = self._bounds = None
        await self._cancel_usage_read()
        connections = (self._conn, self._usage_conn)
        self._conn = self._usage_conn = None
        for conn in connections:
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):  # a broken one has nothing to release
                    await conn.close()

    # -- the refresh steps -------------------------------------------------------------------

    async def _refresh(self, window_s: float, low: float, high: float) -> LedgerReading:
        facts = self._facts.now(self.path) if self._facts is not None else None
        schema = self._schema
        if schema is None or facts is None:
            await self.close()
            schema = await self._open_file()
        else:
            self._facts = facts
        ((version, cookie),) = await self._fetch(VERSIONS)
        if cookie != schema.schema_cookie:
            await self.close()
            return await self._refresh(window_s, low, high)
        if self._bounds is None:
            await self._full_read(schema, low, high)
        else:  # unchanged data and bounds read no rows
            self._merge_usage_read()
            if version != self._data_version:
                await self._read_changes(schema)
            await self._slide(schema, low, high)
        self._data_version = version
        return self._build(schema, window_s, high)

    async def _open_file(self) -> Schema:
        self._facts = inspect_file(self.path)
        self._conn = await self._connect()
        self._schema = await read_schema(self._fetch)
        if self._schema is None:
            raise LedgerError(f"{self.path} has no sessions table: not a Hermes ledger")
        return self._schema

    async def _connect(self) -> aiosqlite.Connection:
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        conn = await aiosqlite.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        conn.text_factory = lambda data: data.decode("utf-8", "replace")  # not UTF-8: not refused
        return conn

    async def _fetch(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one statement."""
        assert self._conn is not None
        return list(await self._conn.execute_fetchall(statement, params))

    def _known_closed(self) -> list[Any]:
        """The parameters of CHANGED, and the last two of CLOSED_IN_RANGE."""
        return [self._max_rowid, json.dumps(sorted(self._open))]

    async def _full_read(self, schema: Schema, low: float, high: float) -> None:
        """The open sessions and the closed ones in the window, in one statement; their usage
        beside it (in the background on a big ledger)."""
        await self._cancel_usage_read()  # it was for sums that start over here
        self._closed = Sums()
        self._open = {}
        self._bounds = (low, high)
        (size,) = await self._fetch("SELECT MAX(rowid) FROM sessions")
        big = int(size[0] or 0) > self.big_rows
        rows = await self._fetch(first_read(schema, scan=big), [low, high])
        self._take_rows(rows)
        self._add_groups(rows, 1)
        if not schema.has_usage:
            return
        statement = usage_groups(schema, CLOSED_IN_RANGE, scan=big)
        params = [low, high, *self._known_closed()]
        if not big:
            self._add_groups(await self._fetch(statement, params), 1)
            return
        if self._usage_conn is None:
            self._usage_conn = await self._connect()
        usage = self._usage_conn.execute_fetchall(statement, params)
        self._usage_read = asyncio.ensure_future(usage)

    async def _read_changes(self, schema: Schema) -> None:
        """Re-read the open sessions and the rows added since the last read."""
        rows = await self._fetch(rows_statement(schema, CHANGED), self._known_closed())
        self._open = {}  # all read again: one deleted while open is gone
        self._take_rows(rows)

    async def _slide(self, schema: Schema, low: float, high: float) -> None:
        """Move the closed sums to new bounds: add (+1) or subtract (-1) the known-closed
        sessions started in each slice between old and new. Known-closed rows never change, so
        these reads agree with the sums whatever snapshot they see (and with a background read
        of usage still running). Edges wider than half the window (a switch): read it afresh."""
        assert self._bounds is not None
        edges = window_edges(*self._bounds, low, high)
        if sum(stop - start for _, start, stop in edges) >= (high - low) / 2:
            await self._full_read(schema, low, high)
            return
        statement = session_groups(schema, CLOSED_IN_RANGE)
        if schema.has_usage:
            statement = f"{statement} UNION ALL {usage_groups(schema, CLOSED_IN_RANGE)}"
        for sign, start, stop in edges:
            params = [start, stop, *self._known_closed()]
            self._add_groups(await self._fetch(statement, params), sign)
        self._bounds = (low, high)

    def _merge_usage_read(self) -> None:
        """Fold a finished background read into the closed sums (a failed one raises)."""
        task = self._usage_read
        if task is not None and task.done():
            self._usage_read = None
            self._add_groups(task.result(), 1)

    # -- turning rows into sums --------------------------------------------------------------

    def _session_keys(self, row: Sequence[Any]) -> tuple[GroupKey, ...]:
        return (
            ("total", ""),
            ("source", text_of(row[Col.SOURCE]) or "unknown"),
            ("profile", text_of(row[Col.PROFILE]) or self.profile),
            ("model_s", model_key(text_of(row[Col.PROVIDER]), text_of(row[Col.MODEL]))),
        )

    def _add_groups(self, rows: Iterable[Any], sign: int) -> None:
        """Summed rows ('S', 'U') into the closed sums; other kinds are passed over."""
        for row in rows:
            if row[Col.KIND] in ("S", "U"):
                self._add_row(self._closed, row, sign)

    def _add_row(self, sums: Sums, row: Sequence[Any], sign: int = 1) -> None:
        """A row of sessions ('S', 'R') or of their usage ('U', 'V'), or its rows skipped."""
        count, problem = int(row[Col.COUNT]), row[Col.PROBLEM]
        of_sessions = row[Col.KIND] in ("S", "R")
        if problem:
            table = "sessions" if of_sessions else "session_model_usage"
            sums.add(("skipped", f"{table}: {problem}"), TokenCounts(count), sign)
            return
        for key in self._session_keys(row) if of_sessions else (_usage_key(row),):
            sums.add(key, _counts(row, count), sign)

    def _take_rows(self, rows: Sequence[Sequence[Any]]) -> None:
        """The mark ('M'), and session rows ('R') with their usage ('V'): open ones kept,
        closed ones summed."""
        sessions: dict[int, Session] = {}
        for row in rows:
            if row[Col.KIND] == "M":
                self._max_rowid = int(row[Col.ROWID] or 0)
                first = row[Col.STARTED]
                self._first_started = float(first) if isinstance(first, int | float) else None
            elif row[Col.KIND] == "R":
                started = None if row[Col.PROBLEM] == NO_START else float(row[Col.STARTED])
                session = Session(started, closed=bool(row[Col.CLOSED]))
                self._add_row(session.sums, row)
                sessions[int(row[Col.ROWID])] = session
        for row in rows:
            if row[Col.KIND] != "V":
                continue
            session = sessions[int(row[Col.ROWID])]
            if session.started_at is not None:  # one in no window is only its row skipped
                self._add_row(session.sums, row)
        for rowid, session in sessions.items():
            if session.closed:
                self._add_session(session, self._closed)
            else:
                self._open[rowid] = session

    def _add_session(self, session: Session, sums: Sums) -> None:
        """A session started inside the bounds, or one with no start (its row skipped)."""
        bounds = self._bounds
        if session.started_at is None or (bounds and bounds[0] < session.started_at <= bounds[1]):
            sums.merge(session.sums)

    def _build(self, schema: Schema, window_s: float, end: float) -> LedgerReading:
        sums = Sums(self._closed)
        for session in self._open.values():
            self._add_session(session, sums)
        total = sums.total()
        exact = schema.has_usage and self._usage_read is None
        missing = missing_for(schema, self.profile)
        if self._usage_read is not None:
            reason = (
                f"session_model_usage is still being read ({self._max_rowid:,} sessions); "
                "per model from sessions.model meanwhile"
            )
            missing.update(by_model_exact=reason, side_calls=reason)
        info = LedgerInfo(
            str(self.path), self.profile, schema.version, schema.journal_mode, self.also_named
        )
        totals = LedgerTotals(
            window_s=window_s,
            end=end,
            total=total,
            by_source=frozen_map(sums.counts("source")),
            by_model=frozen_map(sums.counts("model_u" if exact else "model_s")),
            model_basis="session_model_usage" if exact else "sessions.model",
            by_profile=frozen_map(sums.counts("profile")),
            by_ledger=frozen_map({str(self.path): total}),
            side_calls=sums.total("side") if exact else None,
            missing=frozen_map(missing),
            ledgers=(info,),
            queries=(ledger_window_sql(end - window_s, end),),  # what a user can run
            first_started_at=self._first_started,
            skipped=frozen_map({k: c.sessions for k, c in sums.counts("skipped").items()}),
        )
        return LedgerReading(totals, frozen_map(sums.counts("model_s")))


@dataclass(eq=False)
class LedgerSet:
    """Several ledgers (one per Hermes profile) summed into one LedgerTotals.

    A ledger that fails makes the whole refresh raise LedgerError naming that file: a total
    silently missing one profile would look right and be wrong. The app marks the pane stale.
    """

    tailers: Sequence[LedgerTailer]

    async def read(self, window_s: float, end: float | None = None) -> LedgerTotals:
        if end is None:
            end = _now()
        readings = [await tailer.read(window_s, end) for tailer in self.tailers]
        return combine(readings, window_s, end)

    async def probe(self) -> bool:
        """Has a ledger that failed changed since (see `LedgerTailer.probe`)?"""
        return any([await tailer.probe() for tailer in self.tailers])

    async def close(self) -> None:
        for tailer in self.tailers:
            await tailer.close()


def _usage_key(row: Sequence[Any]) -> GroupKey:
    """A usage row's group: its main-loop model (`provider/model`), or the side calls."""
    if row[Col.MAIN]:
        return ("model_u", model_key(text_of(row[Col.PROVIDER]), text_of(row[Col.MODEL])))
    return ("side", "")


def _counts(row: Sequence[Any], sessions: int) -> TokenCounts:
    """A row's counters, each put together from its (summed) high and low 32 bits."""
    halves = [int(half or 0) for half in row[Col.VALUES :]]
    pairs = zip(halves[0::2], halves[1::2], strict=True)
    return TokenCounts(sessions, *((high << 32) + low for high, low in pairs))


def _now() -> float:
    """The window's end when none is given: now, to the second (the query shown stays plain)."""
    return float(int(time.time()))

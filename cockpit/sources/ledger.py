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
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite

from cockpit.core.ledger_figures import ledger_window_sql
from cockpit.core.model import LedgerInfo, LedgerTotals, SourceFailure, TokenCounts, frozen_map
from cockpit.sources.ledger_sql import (
    CHANGED,
    CLOSED_IN_RANGE,
    COUNTER_COLUMNS,
    NO_START,
    VERSIONS,
    Col,
    Schema,
    first_read,
    has_costs,
    read_schema,
    rows_statement,
    session_groups,
    usage_groups,
)

BUSY_TIMEOUT_S = 0.25
"""How long a read waits for a lock before it gives up (Hermes's writers keep theirs short)."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class LedgerError(SourceFailure):
    """A ledger that can't be read as the file is now. Unreachable: a stat of the file
    (`LedgerTailer.probe`) says cheaply when it has changed."""

    def __init__(self, reason: str) -> None:
        super().__init__(" ".join(reason.split()) or "unknown error", unreachable=True)


def resolve_ledger(arg: str) -> Path:
    """A ledger path from a path or a Hermes profile name (`default`, `work`, ...) under
    Hermes's home (`HERMES_HOME`, else `~/.hermes`)."""
    text = arg.strip()
    looks_like_path = (
        "/" in text or os.sep in text or text.endswith(".db") or text.startswith(("~", "."))
    )
    if looks_like_path or Path(text).exists() or not _PROFILE_NAME.match(text):
        return Path(text).expanduser()
    home = Path(os.environ.get("HERMES_HOME") or "~/.hermes").expanduser()
    return home / "state.db" if text == "default" else home / "profiles" / text / "state.db"


def profile_of(arg: str) -> str | None:
    """The profile an argument names: a profile name, or a path `.../profiles/<name>/x.db`."""
    text = arg.strip()
    path = resolve_ledger(text)
    if path != Path(text).expanduser():
        return text
    if path.parent.parent.name == "profiles" and path.parent.name:
        return path.parent.name
    return None


def same_files(paths: Sequence[Path]) -> list[list[int]]:
    """The indices of `paths` grouped by the file each names, in the order first named. A file
    is its device and inode, or (while it does not exist) its resolved path, so a symlink, `..`
    or a profile name naming it count once."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for index, path in enumerate(paths):
        try:
            facts = path.stat()
            identity: tuple[object, ...] = ("inode", facts.st_dev, facts.st_ino)
        except OSError:
            identity = ("path", str(path.resolve()))
        groups.setdefault(identity, []).append(index)
    return list(groups.values())


@dataclass(frozen=True, slots=True)
class FileFacts:
    """The ledger file as it was opened: a different identity or a smaller size is a new file."""

    dev: int
    ino: int
    size: int
    wal: bool

    def now(self, path: Path) -> FileFacts | None:
        """The same file as it is now (it may have grown), or None if replaced or shortened."""
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise LedgerError(f"ledger not found: {path} (it was removed)") from None
        if (stat.st_dev, stat.st_ino) != (self.dev, self.ino) or stat.st_size < self.size:
            return None
        return FileFacts(self.dev, self.ino, stat.st_size, self.wal)


def inspect_file(path: Path) -> FileFacts:
    """Check what can be checked without SQLite, with a clear reason for each failure."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise LedgerError(f"ledger not found: {path}") from None
    except PermissionError:
        raise LedgerError(f"permission denied: {path} (can't reach the file)") from None
    if path.is_dir():
        raise LedgerError(f"{path} is a folder, not a ledger file")
    if stat.st_size == 0:
        raise LedgerError(f"{path} is empty (0 bytes): not a Hermes ledger")
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except PermissionError:
        raise LedgerError(f"permission denied: {path} (the file is not readable)") from None
    if not header.startswith(_SQLITE_MAGIC):
        raise LedgerError(f"{path} is not a SQLite database")
    if len(header) < 100:
        raise LedgerError(f"{path} is truncated ({stat.st_size} bytes, shorter than its header)")
    wal = header[18] == 2
    page_size = int.from_bytes(header[16:18], "big")
    length = (65536 if page_size == 1 else page_size) * int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96] and length > 0
    # with a -wal beside it, a checkpoint may be extending the file
    if (not wal or not Path(f"{path}-wal").exists()) and header_valid and stat.st_size < length:
        raise LedgerError(f"{path} is truncated: {stat.st_size} bytes, its header says {length}")
    # `mode=ro` on a WAL database needs its -shm file, or a folder where it can be made
    if wal and not Path(f"{path}-shm").exists() and not os.access(path.parent, os.W_OK | os.X_OK):
        raise LedgerError(_read_only_folder(path))
    return FileFacts(stat.st_dev, stat.st_ino, stat.st_size, wal)


def _read_only_folder(path: Path) -> str:
    return (
        f"read-only folder: {path.parent} holds a WAL ledger; {path.name} needs its -shm file "
        "(run Hermes once there, or copy the ledger to a writable folder)"
    )


def look(path: Path) -> tuple[object, ...]:
    """The file and its WAL as a stat sees them: identity, size, time, mode (or errno)."""
    seen: list[object] = []
    for name in (path, Path(f"{path}-wal")):
        try:
            stat = name.stat()
        except OSError as exc:
            seen.append(exc.errno)
            continue
        seen.append((stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_mode))
    return tuple(seen)


def describe_failure(path: Path, exc: Exception, facts: FileFacts | None) -> str:
    """One line for any failure of a read: ours, SQLite's, or an unexpected one."""
    if isinstance(exc, LedgerError):
        return exc.reason
    if not isinstance(exc, sqlite3.Error):
        return f"{path} could not be read ({type(exc).__name__}: {exc})"
    text = str(exc)
    if "file is not a database" in text:
        return f"{path} is not a SQLite database"
    if "malformed" in text or "disk image" in text or "short read" in text:
        return f"{path} is truncated or corrupt ({text})"
    if "locked" in text or "busy" in text:
        return f"{path} stayed locked longer than {BUSY_TIMEOUT_S:g} s ({text})"
    if "unable to open" in text:
        if facts is not None and facts.wal and not Path(f"{path}-shm").exists():
            return _read_only_folder(path)
        if not os.access(path, os.R_OK):
            return f"permission denied: {path}"
        return f"{path} can't be opened ({text})"
    if "no such table" in text:
        return f"{path} has no sessions table: not a Hermes ledger"
    if "no such column" in text:
        column = text.rpartition(":")[2].strip().removeprefix("s.").removeprefix("u.")
        return f"{path} has no {column} column: not a Hermes ledger"
    return f"{path}: SQLite error: {text}"


GroupKey = tuple[str, str]
"""(dimension, name): total, source, profile, model_s, model_u, side, skipped."""
NONE = TokenCounts()


def model_name(raw: str | None) -> str:
    """The model as Hermes shows it: the last `/` part (`openrouter/a/b` -> `b`)."""
    return (raw or "").rsplit("/", 1)[-1] or "unknown"


def model_key(provider: str | None, model: str | None) -> str:
    """`provider/model` where the ledger names the provider, else the model alone."""
    name = model_name(model)
    return f"{provider}/{name}" if provider else name


def text_of(value: object) -> str:
    """A name column as text, whatever SQLite stored there."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


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
    """One ledger's sums over a window, and what it says of the ledger."""

    sums: Sums
    exact: bool
    """Per model from session_model_usage, not sessions.model."""
    info: LedgerInfo
    first_started: float | None
    missing: Mapping[str, str]


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


def ledger_totals(
    window_s: float, end: float, readings: Sequence[LedgerReading], missing: Mapping[str, str]
) -> LedgerTotals:
    """The readings of one window (of one ledger or several) summed."""
    sums = Sums()
    by_ledger: dict[str, TokenCounts] = {}
    for reading in readings:
        sums.merge(reading.sums)
        path = reading.info.path
        by_ledger[path] = by_ledger.get(path, NONE) + reading.sums.total()
    exact = all(reading.exact for reading in readings)
    sides = [reading.sums.total("side") for reading in readings if reading.exact]
    firsts = [r.first_started for r in readings if r.first_started is not None]
    return LedgerTotals(
        window_s=window_s,
        end=end,
        total=sums.total(),
        by_source=frozen_map(sums.counts("source")),
        by_model=frozen_map(sums.counts("model_u" if exact else "model_s")),
        model_basis="session_model_usage" if exact else "sessions.model",
        by_profile=frozen_map(sums.counts("profile")),
        by_ledger=frozen_map(dict(sorted(by_ledger.items()))),
        side_calls=sum(sides, NONE) if sides else None,
        missing=frozen_map(missing),
        ledgers=tuple(reading.info for reading in readings),
        queries=(ledger_window_sql(end - window_s, end),) if readings else (),  # a user can run it
        first_started_at=min(firsts) if firsts else None,
        skipped=frozen_map({k: c.sessions for k, c in sums.counts("skipped").items()}),
    )


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
        end = _now() if end is None else float(end)
        reading = await self.read(window_s, end)
        return ledger_totals(window_s, end, [reading], reading.missing)

    async def read(self, window_s: float, end: float) -> LedgerReading:
        """The sums for sessions with `started_at` in (end - window_s, end]."""
        low, high = float(end) - float(window_s), float(end)
        try:
            reading = await self._refresh(low, high)
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

    async def _refresh(self, low: float, high: float) -> LedgerReading:
        facts = self._facts.now(self.path) if self._facts is not None else None
        schema = self._schema
        if schema is None or facts is None:
            await self.close()
            self._facts = inspect_file(self.path)
            self._conn = await self._connect()
            schema = self._schema = await read_schema(self._fetch)
            if schema is None:
                raise LedgerError(f"{self.path} has no sessions table: not a Hermes ledger")
        else:
            self._facts = facts
        ((version, cookie),) = await self._fetch(VERSIONS)
        if cookie != schema.schema_cookie:
            await self.close()
            return await self._refresh(low, high)
        if self._bounds is None:
            await self._full_read(schema, low, high)
        else:  # unchanged data and bounds read no rows
            task = self._usage_read
            if task is not None and task.done():  # fold it in (a failed one raises)
                self._usage_read = None
                self._add_groups(task.result(), 1)
            if version != self._data_version:  # the open sessions and the rows added since
                rows = await self._fetch(rows_statement(schema, CHANGED), self._known_closed())
                self._open = {}  # all read again: one deleted while open is gone
                self._take_rows(rows)
            await self._slide(schema, low, high)
        self._data_version = version
        return self._build(schema)

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

    def _add_groups(self, rows: Iterable[Any], sign: int) -> None:
        """Summed rows ('S', 'U') into the closed sums; other kinds are passed over."""
        for row in rows:
            if row[Col.KIND] in ("S", "U"):
                self._add_row(self._closed, row, sign)

    def _add_row(self, sums: Sums, row: Sequence[Any], sign: int = 1) -> None:
        """A row of sessions ('S', 'R') or of their usage ('U', 'V': its main-loop model or the
        side calls), or its rows skipped."""
        count, problem = int(row[Col.COUNT]), row[Col.PROBLEM]
        of_sessions = row[Col.KIND] in ("S", "R")
        if problem:
            table = "sessions" if of_sessions else "session_model_usage"
            sums.add(("skipped", f"{table}: {problem}"), TokenCounts(count), sign)
            return
        model = model_key(text_of(row[Col.PROVIDER]), text_of(row[Col.MODEL]))
        if of_sessions:
            keys: list[GroupKey] = [
                ("total", ""),
                ("source", text_of(row[Col.SOURCE]) or "unknown"),
                ("profile", text_of(row[Col.PROFILE]) or self.profile),
                ("model_s", model),
            ]
        else:
            keys = [("model_u", model) if row[Col.MAIN] else ("side", "")]
        # each counter put together from its (summed) high and low 32 bits
        halves = [int(half or 0) for half in row[Col.VALUES :]]
        pairs = zip(halves[0::2], halves[1::2], strict=True)
        counts = TokenCounts(count, *((high << 32) + low for high, low in pairs))
        for key in keys:
            sums.add(key, counts, sign)

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

    def _build(self, schema: Schema) -> LedgerReading:
        sums = Sums(self._closed)
        for session in self._open.values():
            self._add_session(session, sums)
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
        exact = schema.has_usage and self._usage_read is None
        return LedgerReading(sums, exact, info, self._first_started, missing)


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
        missing: dict[str, str] = {}
        for reading in readings:
            for key, reason in reading.missing.items():
                note = f"{reading.info.path}: {reason}"
                missing[key] = f"{missing[key]}; {note}" if key in missing else note
        return ledger_totals(window_s, end, readings, missing)

    async def probe(self) -> bool:
        """Has a ledger that failed changed since (see `LedgerTailer.probe`)?"""
        return any([await tailer.probe() for tailer in self.tailers])

    async def close(self) -> None:
        for tailer in self.tailers:
            await tailer.close()


def _now() -> float:
    """The window's end when none is given: now, to the second (the query shown stays plain)."""
    return float(int(time.time()))

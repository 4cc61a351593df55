"""Read-only tailer of the Hermes agent's SQLite ledger (`state.db`).

How a refresh stays cheap and exact:

- The file is opened `file:...?mode=ro`; nothing here writes, runs DDL or sets a journal mode.
  Every read is one SELECT statement, so each sees one committed snapshot and holds it only
  for the length of that statement.
- `PRAGMA data_version` on the kept connection says whether another connection committed.
  Unchanged data and unchanged window bounds return the cached totals without reading rows.
- Sessions are split into *known closed* (rowid <= the highest rowid read, and not in the
  open set) and *open* (`ended_at IS NULL` when last read). Closed sessions never change, so
  their sums are kept per window; a change re-reads only the open set (by id) and rows with a
  rowid above the last one read, in one statement. A sliding window adds and subtracts the
  known-closed sessions in the slices between the old and new bounds (`started_at` is
  indexed), so the sums stay exact without keeping a row per session in memory. Known-closed
  rows never change, so those reads may see any snapshot and still agree.
- Big slices (a first read or a window switch over more than `scan_rows` sessions) are summed
  by parallel scans on extra read-only connections, and their `session_model_usage` is read
  in the background: until it lands, per-model figures come from `sessions.model` and
  `missing` says so. `settle()` waits for it.
- A replaced file (other inode or device, or a smaller size) or a schema change reopens the
  file and reads everything again.

Per model, `sessions` counts a session once per model name it used (provider prefix dropped);
`side_calls.sessions` counts sessions with any side call.

Limits, by design: a row that changes after it was read as closed (Hermes never does this),
or a deleted session, is not noticed until the file is replaced or the tailer reopened;
`data_version` cannot tell which rows changed. A VACUUM that renumbers rowids is not seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from cockpit.model import LedgerInfo, LedgerTotals, TokenCounts, frozen_map

SCAN_ROWS = 100_000
"""Window slices with more sessions than this are read by parallel scans (see LedgerTailer)."""

WORKERS = max(2, min(4, os.cpu_count() or 2))
"""Read-only connections that scan a big slice side by side."""

BUSY_TIMEOUT_S = 0.25
"""How long a read waits for a lock before it gives up (Hermes's writers keep theirs short)."""

END_RESOLUTION_S = 1.0
"""`end=None` means now, rounded down to this, so repeated refreshes can hit the cache."""

COUNTER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("api_calls", "api_call_count"),
    ("input", "input_tokens"),
    ("cache_read", "cache_read_tokens"),
    ("cache_write", "cache_write_tokens"),
    ("output", "output_tokens"),
    ("reasoning", "reasoning_tokens"),
)
"""TokenCounts field -> the column that holds it, in TokenCounts order after `sessions`."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SEP = "\x1f"
"""Joins source, profile and model into one grouping key (SQL `char(31)`)."""
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

Vector = list[int]
"""[sessions, api_calls, input, cache_read, cache_write, output, reasoning]."""
GroupKey = tuple[str, str]
"""(dimension, name): dimensions total, source, profile, model_s, model_u, side."""


class LedgerError(Exception):
    """A ledger that can't be read; the message is one line for the user."""

    unreachable = True
    """Unreadable as the file is now: `LedgerTailer.probe` (a stat) says when it changed."""


# --- paths ------------------------------------------------------------------------------


def hermes_home() -> Path:
    """Hermes's home folder: `HERMES_HOME`, else `~/.hermes`."""
    return Path(os.environ.get("HERMES_HOME") or "~/.hermes").expanduser()


def resolve_ledger(arg: str) -> Path:
    """A ledger path from a path or a Hermes profile name (`default`, `work`, ...)."""
    text = arg.strip()
    looks_like_path = (
        "/" in text or os.sep in text or text.endswith(".db") or text.startswith(("~", "."))
    )
    if looks_like_path or Path(text).exists() or not _PROFILE_NAME.match(text):
        return Path(text).expanduser()
    if text == "default":
        return hermes_home() / "state.db"
    return hermes_home() / "profiles" / text / "state.db"


def profile_of(arg: str) -> str | None:
    """The profile an argument names: a profile name, or a path `.../profiles/<name>/x.db`."""
    text = arg.strip()
    path = resolve_ledger(text)
    if path != Path(text).expanduser():
        return text
    if path.parent.parent.name == "profiles" and path.parent.name:
        return path.parent.name
    return None


def model_name(raw: str | None) -> str:
    """The model as Hermes shows it: the last `/` part (`openrouter/a/b` -> `b`)."""
    if not raw:
        return "unknown"
    return raw.rsplit("/", 1)[-1] or "unknown"


# --- the file before SQLite sees it -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FileFacts:
    dev: int
    ino: int
    size: int
    wal: bool


def _inspect_file(path: Path) -> _FileFacts:
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
    if not wal or not Path(f"{path}-wal").exists():  # a checkpoint may be extending the file
        _check_length(path, header, stat.st_size)
    if wal:
        _check_shm(path)
    return _FileFacts(stat.st_dev, stat.st_ino, stat.st_size, wal)


def _check_length(path: Path, header: bytes, size: int) -> None:
    """The header's page count (when valid) times the page size must fit in the file."""
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96] and pages > 0
    if header_valid and size < pages * page_size:
        raise LedgerError(f"{path} is truncated: {size} bytes, its header says {pages * page_size}")


def _check_shm(path: Path) -> None:
    """`mode=ro` on a WAL database needs its -shm file, or a folder where it can be made."""
    shm = Path(f"{path}-shm")
    if not shm.exists() and not os.access(path.parent, os.W_OK | os.X_OK):
        raise LedgerError(_read_only_folder(path))


def _read_only_folder(path: Path) -> str:
    return (
        f"read-only folder: {path.parent} holds a WAL ledger; {path.name} needs its -shm file "
        "(run Hermes once there, or copy the ledger to a writable folder)"
    )


def _describe(path: Path, exc: sqlite3.Error, facts: _FileFacts | None) -> str:
    """One line for a SQLite failure."""
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


# --- sums -------------------------------------------------------------------------------


def _zero() -> Vector:
    return [0, 0, 0, 0, 0, 0, 0]


class _Sums:
    """Counter vectors per (dimension, name), added to and subtracted from exactly."""

    def __init__(self) -> None:
        self.groups: dict[GroupKey, Vector] = {}

    def add(self, key: GroupKey, values: Sequence[int], sign: int = 1) -> None:
        vector = self.groups.get(key)
        if vector is None:
            vector = self.groups[key] = _zero()
        for index, value in enumerate(values):
            vector[index] += sign * value

    def merge(self, other: _Sums) -> None:
        for key, values in other.groups.items():
            self.add(key, values)

    def counts(self, dimension: str) -> dict[str, TokenCounts]:
        return {
            name: TokenCounts(*vector)
            for (dim, name), vector in sorted(self.groups.items())
            if dim == dimension and any(vector)
        }

    def total(self, dimension: str = "total") -> TokenCounts:
        vector = self.groups.get((dimension, ""))
        return TokenCounts(*vector) if vector else TokenCounts()


@dataclass(slots=True)
class _OpenSession:
    """A session that was open when last read: its current row and usage rows."""

    started_at: float
    source: str
    profile: str
    model: str
    values: Vector
    usage: dict[tuple[str, bool], Vector] = field(default_factory=dict)
    """(stripped model, main loop?) -> summed usage of its session_model_usage rows."""


@dataclass(frozen=True, slots=True)
class _Schema:
    columns: frozenset[str]
    has_usage: bool
    usage_has_task: bool
    version: int | None
    journal_mode: str
    schema_cookie: int
    started_index: bool = False
    """`idx_sessions_started` exists: small slices of the window read through it."""


# --- SQL --------------------------------------------------------------------------------


def _counter(schema: _Schema, column: str, alias: str = "s") -> str:
    return f"COALESCE({alias}.{column}, 0)" if column in schema.columns else "0"


def _summed(schema: _Schema, column: str, alias: str = "s") -> str:
    """SUM skips NULLs by itself: a COALESCE per row would cost a fifth of a big scan."""
    return f"COALESCE(SUM({alias}.{column}), 0)" if column in schema.columns else "0"


def _profile_expr(schema: _Schema) -> str:
    return "s.profile_name" if "profile_name" in schema.columns else "NULL"


def _model_expr(schema: _Schema) -> str:
    return "s.model" if "model" in schema.columns else "NULL"


def _main_expr(schema: _Schema) -> str:
    return "(COALESCE(u.task, '') = '')" if schema.usage_has_task else "1"


def _sessions_from(schema: _Schema, scan: bool) -> str:
    """Scan the table for big slices; use the `started_at` index for small ones."""
    if scan:
        return "sessions AS s NOT INDEXED"
    return (
        "sessions AS s INDEXED BY idx_sessions_started" if schema.started_index else "sessions AS s"
    )


def _session_groups(schema: _Schema, sign: int, where: str, scan: bool = False) -> str:
    """Sessions summed per (source, profile, model) for the rows `where` selects."""
    sums = ", ".join(_summed(schema, column) for _, column in COUNTER_COLUMNS)
    # one text key sorts a quarter faster than three; NULL and '' mean the same downstream
    key = " || char(31) || ".join(
        f"IFNULL({expr}, '')" for expr in ("s.source", _profile_expr(schema), _model_expr(schema))
    )
    return (
        f"SELECT 'S', {sign}, NULL, NULL, {key} AS k, NULL, NULL, NULL, NULL, 1, "
        f"COUNT(*), {sums} FROM {_sessions_from(schema, scan)} WHERE {where} GROUP BY k"
    )


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class _Codes:
    """The (source, profile, model) values a sample of the ledger holds, as small integers.

    A big scan grouped by the text key spends most of its time sorting; grouped by an integer
    code it sorts about twice as fast. Values outside the sample get no code (NULL), and
    those rows are summed again by their text (`_scan_groups`), so the sums stay exact.
    """

    sources: tuple[str, ...]
    profiles: tuple[str, ...]
    models: tuple[str, ...]

    def expression(self, schema: _Schema) -> str:
        def code(expr: str, values: tuple[str, ...]) -> str:
            cases = " ".join(f"WHEN {_sql_text(v)} THEN {i}" for i, v in enumerate(values))
            return f"(CASE IFNULL({expr}, '') {cases} END)"

        source = code("s.source", self.sources)
        profile = code(_profile_expr(schema), self.profiles)
        model = code(_model_expr(schema), self.models)
        return f"(({source} * {len(self.profiles)} + {profile}) * {len(self.models)} + {model})"

    def key(self, code: int) -> str:
        """The text key (`source␟profile␟model`) of a code."""
        rest, model = divmod(code, len(self.models))
        source, profile = divmod(rest, len(self.profiles))
        return _SEP.join((self.sources[source], self.profiles[profile], self.models[model]))


def _coded_groups(schema: _Schema, codes: _Codes, sign: int, where: str) -> str:
    """`_session_groups` for a big scan, grouped by the integer code (NULL: not in `codes`)."""
    sums = ", ".join(_summed(schema, column) for _, column in COUNTER_COLUMNS)
    return (
        f"SELECT 'C', {sign}, NULL, NULL, {codes.expression(schema)} AS k, NULL, NULL, NULL, "
        f"NULL, 1, COUNT(*), {sums} FROM sessions AS s NOT INDEXED WHERE {where} GROUP BY k"
    )


_SAMPLE_LAST = 20_000
_SAMPLE_SPREAD = 2_000


def _codes_sample(schema: _Schema) -> str:
    """Distinct (source, profile, model) of the newest sessions and of rowids spread evenly."""
    columns = (
        f"IFNULL(s.source, ''), IFNULL({_profile_expr(schema)}, ''), "
        f"IFNULL({_model_expr(schema)}, '')"
    )
    return (
        f"SELECT DISTINCT {columns} FROM sessions AS s WHERE s.rowid > ? "
        f"UNION SELECT {columns} FROM sessions AS s WHERE s.rowid IN "
        "(WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + ? FROM r WHERE x + ? <= ?) "
        "SELECT x FROM r)"
    )


def _short_model_sql(column: str) -> str:
    """SQL for the last `/` part of a model name (what `model_name` does in Python)."""
    return f"substr({column}, length(rtrim({column}, replace({column}, '/', ''))) + 1)"


def _usage_groups(schema: _Schema, sign: int, where: str, scan: bool = False) -> str:
    """session_model_usage per model (main loop) or all side calls together, for `where`."""
    sums = ", ".join(_summed(schema, column, "u") for _, column in COUNTER_COLUMNS)
    main = _main_expr(schema)
    model = f"CASE WHEN {main} THEN {_short_model_sql('u.model')} ELSE '' END"
    return (
        f"SELECT 'U', {sign}, NULL, NULL, NULL, NULL, {model}, {main}, NULL, 1, "
        f"COUNT(DISTINCT u.session_id), {sums} FROM {_sessions_from(schema, scan)} "
        f"JOIN session_model_usage AS u ON u.session_id = s.id WHERE {where} "
        f"GROUP BY {model}, {main}"
    )


def _session_rows(schema: _Schema, where: str) -> str:
    values = ", ".join(_counter(schema, column) for _, column in COUNTER_COLUMNS)
    return (
        f"SELECT 'R', 1, s.id, s.rowid, s.source, {_profile_expr(schema)}, {_model_expr(schema)}, "
        f"NULL, s.started_at, s.ended_at IS NOT NULL, 1, {values} FROM sessions AS s WHERE {where}"
    )


def _usage_rows(schema: _Schema, where: str) -> str:
    values = ", ".join(_counter(schema, column, "u") for _, column in COUNTER_COLUMNS)
    return (
        f"SELECT 'V', 1, u.session_id, NULL, NULL, NULL, u.model, {_main_expr(schema)}, NULL, "
        f"NULL, 1, {values} FROM session_model_usage AS u "
        f"WHERE u.session_id IN (SELECT s.id FROM sessions AS s WHERE {where})"
    )


def _open_read(schema: _Schema) -> str:
    """The highest rowid and every open session with its usage rows: one scan, one snapshot."""
    values = ", ".join(
        f"{_counter(schema, column)} AS c{index}"
        for index, (_, column) in enumerate(COUNTER_COLUMNS)
    )
    names = ", ".join(f"c{index}" for index in range(len(COUNTER_COLUMNS)))
    parts = [
        _MARK,
        f"SELECT 'R', 1, id, rid, source, profile, model, NULL, started_at, 0, 1, {names} FROM o",
    ]
    if schema.has_usage:
        usage = ", ".join(_counter(schema, column, "u") for _, column in COUNTER_COLUMNS)
        parts.append(
            f"SELECT 'V', 1, u.session_id, NULL, NULL, NULL, u.model, {_main_expr(schema)}, "
            f"NULL, NULL, 1, {usage} FROM session_model_usage AS u "
            "WHERE u.session_id IN (SELECT id FROM o)"
        )
    return (
        "WITH o AS MATERIALIZED (SELECT s.id AS id, s.rowid AS rid, s.source AS source, "
        f"{_profile_expr(schema)} AS profile, {_model_expr(schema)} AS model, "
        f"s.started_at AS started_at, {values} FROM sessions AS s WHERE s.ended_at IS NULL) "
        + " UNION ALL ".join(parts)
    )


_MARK = (
    "SELECT 'M', 1, NULL, (SELECT MAX(rowid) FROM sessions), NULL, NULL, NULL, NULL, "
    "(SELECT MIN(started_at) FROM sessions), NULL, 0, 0, 0, 0, 0, 0, 0"
)
"""The highest rowid and the first start, in the same snapshot as the rest (index lookups)."""

_IN_RANGE = "s.started_at > ? AND s.started_at <= ?"
_KNOWN_CLOSED = "s.rowid <= ? AND s.id NOT IN (SELECT value FROM json_each(?))"
_CHANGED = "(s.rowid > ? OR s.id IN (SELECT value FROM json_each(?)))"
_ROWID_RANGE = "s.rowid > ? AND s.rowid <= ?"
_SCAN_WHERE = f"{_ROWID_RANGE} AND {_IN_RANGE} AND {_KNOWN_CLOSED}"


# --- the tailer -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LedgerReading:
    """One tailer's figures, with both per-model bases so a set can pick one."""

    totals: LedgerTotals
    by_model_sessions: Mapping[str, TokenCounts]


class LedgerTailer:
    """Tails one Hermes ledger file, read-only."""

    def __init__(
        self,
        path: str | Path,
        profile: str | None = None,
        *,
        scan_rows: int = SCAN_ROWS,
        workers: int = WORKERS,
    ) -> None:
        self.path = Path(path).expanduser()
        self.profile = profile or "default"
        self.scan_rows = scan_rows
        """Slices of the window with more sessions than this are scanned in parallel and their
        session_model_usage is read in the background (per model from sessions.model meanwhile)."""
        self.workers = max(1, workers)
        self._uri = ""
        self._pending: list[asyncio.Task[list[Any]]] = []
        self._conn: aiosqlite.Connection | None = None
        self._facts: _FileFacts | None = None
        self._schema: _Schema | None = None
        self._data_version: int | None = None
        self._bounds: tuple[float, float] | None = None
        self._closed = _Sums()
        self._open: dict[str, _OpenSession] = {}
        self._max_rowid = 0
        self._first_started: float | None = None
        self._queries: dict[str, str] = {}
        self._cached: LedgerReading | None = None
        self._cache_key: tuple[float, float, float, float] | None = None
        self._failed_on: tuple[object, ...] | None = None
        """The file as a stat saw it when the last read failed (None after a good read)."""
        self._interrupted = False
        """A refresh was cancelled part-way: the next one reads the file afresh."""
        self.stats: dict[str, int] = {
            "full_reads": 0,
            "change_reads": 0,
            "slides": 0,
            "cached": 0,
            "scans": 0,
            "backfills": 0,
        }
        """How refreshes were served (for benchmarks and tests)."""

    async def refresh(self, window_s: float, end: float | None = None) -> LedgerTotals:
        """Totals for sessions with `started_at` in (end - window_s, end]."""
        return (await self.read(window_s, end)).totals

    async def read(self, window_s: float, end: float | None = None) -> LedgerReading:
        """The totals plus the per-model split by `sessions.model` (for sets of mixed schemas)."""
        if end is None:
            end = math.floor(time.time() / END_RESOLUTION_S) * END_RESOLUTION_S
        low, high = float(end) - float(window_s), float(end)
        try:
            reading = await self._refresh(window_s, low, high)
        except sqlite3.Error as exc:
            message = _describe(self.path, exc, self._facts)
            await self.close()
            self._failed_on = self._look()
            raise LedgerError(message) from None
        except LedgerError:
            await self.close()
            self._failed_on = self._look()
            raise
        except asyncio.CancelledError:
            # A refresh cut short (the user switched window) may leave half-moved sums:
            # the next refresh starts over from the file.
            self._interrupted = True
            raise
        self._failed_on = None
        return reading

    async def probe(self) -> bool:
        """After a failed read: has the file changed since (so a full read is worth it now)?"""
        return self._failed_on is not None and self._look() != self._failed_on

    def _look(self) -> tuple[object, ...]:
        """The file and its WAL as a stat sees them: identity, size, time, mode (or errno)."""
        seen: list[object] = []
        for path in (self.path, Path(f"{self.path}-wal")):
            try:
                stat = path.stat()
            except OSError as exc:
                seen.append(exc.errno)
                continue
            seen.append((stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_mode))
        return tuple(seen)

    async def settle(self) -> None:
        """Wait for background reads of session_model_usage (tests and benchmarks use this)."""
        for task in list(self._pending):
            await asyncio.wait([task])

    async def _cancel_pending(self) -> None:
        pending, self._pending = self._pending, []
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    async def close(self) -> None:
        """Close the connection and forget what was read."""
        await self._cancel_pending()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):  # a broken connection has nothing to release
                await conn.close()
        self._facts = self._schema = self._cached = self._bounds = None
        self._data_version = None
        self._closed = _Sums()
        self._open = {}
        self._max_rowid = 0

    # -- the refresh steps ---------------------------------------------------------------

    async def _refresh(self, window_s: float, low: float, high: float) -> LedgerReading:
        if self._conn is None or self._interrupted or self._file_replaced():
            self._interrupted = False
            await self.close()
            await self._open_file()
            version, cookie = await self._versions()
            await self._full_read(low, high)
            self._data_version = version
            return self._build(window_s, high)
        version, cookie = await self._versions()
        assert self._schema is not None
        if cookie != self._schema.schema_cookie:
            await self.close()
            return await self._refresh(window_s, low, high)
        changed = version != self._data_version
        key = (window_s, high, low, float(version))
        merged = self._merge_finished()
        if not (changed or merged) and self._cached is not None and key == self._cache_key:
            self.stats["cached"] += 1
            return self._cached
        if changed:
            await self._read_changes()
            self._data_version = version
        if self._bounds != (low, high):
            await self._slide(low, high)
        return self._build(window_s, high)

    def _file_replaced(self) -> bool:
        facts = self._facts
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            raise LedgerError(f"ledger not found: {self.path} (it was removed)") from None
        if facts is None:
            return True
        replaced = (stat.st_dev, stat.st_ino) != (facts.dev, facts.ino) or stat.st_size < facts.size
        self._facts = _FileFacts(facts.dev, facts.ino, stat.st_size, facts.wal)
        return replaced

    async def _open_file(self) -> None:
        facts = _inspect_file(self.path)
        self._facts = facts
        self._uri = f"file:{urllib.parse.quote(str(self.path.resolve()))}?mode=ro"
        self._conn = await self._connect()
        self._schema = await self._read_schema()

    async def _connect(self) -> aiosqlite.Connection:
        connection = aiosqlite.connect(
            self._uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None
        )
        # aiosqlite's worker thread is not a daemon: a connection whose opening was cancelled
        # (the user quit mid-read) is never closed and would keep the process from exiting.
        # Reads hold no write lock, so dropping the thread at exit loses nothing.
        connection._thread.daemon = True
        return await connection

    async def _fetch(self, name: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        assert self._conn is not None
        self._queries[name] = sql
        return list(await self._conn.execute_fetchall(sql, tuple(params)))

    async def _versions(self) -> tuple[int, int]:
        rows = await self._fetch(
            "versions", "SELECT * FROM pragma_data_version, pragma_schema_version"
        )
        return int(rows[0][0]), int(rows[0][1])

    async def _read_schema(self) -> _Schema:
        tables = {
            str(name)
            for (name,) in await self._fetch(
                "tables", "SELECT name FROM sqlite_master WHERE type = 'table'"
            )
        }
        if "sessions" not in tables:
            raise LedgerError(f"{self.path} has no sessions table: not a Hermes ledger")
        columns = frozenset(
            str(row[1]) for row in await self._fetch("columns", "PRAGMA table_info(sessions)")
        )
        has_usage = "session_model_usage" in tables
        usage_columns: set[str] = set()
        if has_usage:
            usage_columns = {
                str(row[1])
                for row in await self._fetch(
                    "usage_columns", "PRAGMA table_info(session_model_usage)"
                )
            }
        version = None
        if "schema_version" in tables:
            rows = await self._fetch("schema_version", "SELECT MAX(version) FROM schema_version")
            version = int(rows[0][0]) if rows and rows[0][0] is not None else None
        indexes = await self._fetch(
            "indexes",
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sessions'",
        )
        mode = await self._fetch("journal_mode", "PRAGMA journal_mode")
        cookie = await self._fetch("schema_cookie", "PRAGMA schema_version")
        return _Schema(
            columns=columns,
            has_usage=has_usage and "session_id" in usage_columns and "model" in usage_columns,
            usage_has_task="task" in usage_columns,
            version=version,
            journal_mode=str(mode[0][0]) if mode else "",
            schema_cookie=int(cookie[0][0]),
            started_index=("idx_sessions_started",) in {tuple(row) for row in indexes},
        )

    async def _full_read(self, low: float, high: float) -> None:
        """Every open session in one statement, then the closed ones in the window."""
        self._closed = _Sums()
        self._open = {}
        self._bounds = (low, high)
        self.stats["full_reads"] += 1
        self._take_mark(await self._fetch("mark", _MARK))
        if await self._slice_is_big(low, high):
            await self._full_scan(low, high)
            return
        rows = await self._fetch("open_read", _open_read(self._require_schema()))
        self._take_mark(rows)
        self._take_rows(rows, add_closed=False)
        await self._apply_slices([(1, low, high)])

    async def _full_scan(self, low: float, high: float) -> None:
        """A big first read: parallel scans, then one statement for everything that can move.

        Each scan sums the sessions closed in its own snapshot and lists those still open;
        the change read that follows re-reads all of those (and any newer row) in one
        snapshot, so the result is that snapshot's state, exactly.
        """
        schema = self._require_schema()
        closed = f"{_ROWID_RANGE} AND {_IN_RANGE} AND s.ended_at IS NOT NULL"
        still_open = (
            "SELECT 'O', 1, s.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 "
            f"FROM sessions AS s NOT INDEXED WHERE {_ROWID_RANGE} AND s.ended_at IS NULL"
        )
        rows = await self._scan_groups(
            1,
            closed,
            lambda first, last: (first, last, low, high),
            extra=(still_open, lambda first, last: (first, last)),
        )
        self._add_groups(rows)
        await self._read_changes([str(row[2]) for row in rows if row[0] == "O"])
        if schema.has_usage:
            known = [self._max_rowid, json.dumps(sorted(self._open))]
            usage = _usage_groups(schema, 1, _SCAN_WHERE, scan=True)
            self._backfill(usage, _ranged_params(low, high, known))

    async def _read_changes(self, candidates: Iterable[str] | None = None) -> None:
        """Re-read the open sessions and the rows added since the last read."""
        schema = self._require_schema()
        if candidates is not None:
            self._open = {}
        ids = sorted(self._open) if candidates is None else sorted(candidates)
        open_ids = json.dumps(ids)
        parts = [_MARK, _session_rows(schema, _CHANGED)]
        params: list[Any] = [self._max_rowid, open_ids]
        if schema.has_usage:
            parts.append(_usage_rows(schema, _CHANGED))
            params += [self._max_rowid, open_ids]
        rows = await self._fetch("changes", " UNION ALL ".join(parts), params)
        seen = {str(row[2]) for row in rows if row[0] == "R"}
        for gone in set(self._open) - seen:  # deleted while open
            del self._open[gone]
        self._max_rowid = 0 if candidates is None else self._max_rowid
        self._take_mark(rows)
        self._take_rows(rows, add_closed=True)
        self.stats["change_reads"] += 1

    async def _slide(self, low: float, high: float) -> None:
        """Move the closed sums to new bounds by the slices between old and new."""
        assert self._bounds is not None
        old_low, old_high = self._bounds
        if low >= old_high or high <= old_low:
            await self._cancel_pending()  # they were for sums that start over here
            self._closed = _Sums()
            slices = [(1, low, high)]
        else:
            slices = []
            if low != old_low:
                slices.append((-1, old_low, low) if low > old_low else (1, low, old_low))
            if high != old_high:
                slices.append((1, old_high, high) if high > old_high else (-1, high, old_high))
        await self._apply_slices(slices)
        self._bounds = (low, high)
        self.stats["slides"] += 1

    async def _apply_slices(self, slices: Sequence[tuple[int, float, float]]) -> None:
        """Add (+1) or subtract (-1) the known-closed sessions started in each slice.

        Known closed = rowid <= the highest rowid read and not open when last read. Those rows
        never change, so these reads give the same answer whatever snapshot they see.
        """
        schema = self._require_schema()
        known = [self._max_rowid, json.dumps(sorted(self._open))]
        where = f"{_IN_RANGE} AND {_KNOWN_CLOSED}"
        parts: list[str] = []
        params: list[Any] = []
        for sign, start, stop in slices:
            if await self._slice_is_big(start, stop):
                ranged = _ranged_params(start, stop, known)
                self._add_groups(await self._scan_groups(sign, _SCAN_WHERE, ranged))
                if schema.has_usage:
                    self._backfill(_usage_groups(schema, sign, _SCAN_WHERE, scan=True), ranged)
                continue
            parts.append(_session_groups(schema, sign, where))
            params += [start, stop, *known]
            if schema.has_usage:
                parts.append(_usage_groups(schema, sign, where))
                params += [start, stop, *known]
        if parts:
            self._add_groups(await self._fetch("slide", " UNION ALL ".join(parts), params))

    async def _slice_is_big(self, start: float, stop: float) -> bool:
        """More than `scan_rows` sessions started in the slice (counting stops there)."""
        if self._max_rowid <= self.scan_rows:
            return False
        rows = await self._fetch(
            "count",
            f"SELECT COUNT(*) FROM (SELECT 1 FROM sessions AS s WHERE {_IN_RANGE} LIMIT ?)",
            [start, stop, self.scan_rows + 1],
        )
        return int(rows[0][0]) > self.scan_rows

    async def _parallel(
        self, name: str, sql: str, params: Callable[[int, int], Sequence[Any]]
    ) -> list[Any]:
        """One statement per rowid range, each on its own read-only connection, side by side."""
        self._queries[name] = sql
        self.stats["scans"] += 1
        top = self._max_rowid
        step = max(1, -(-top // self.workers))
        ranges = [(first, min(first + step, top)) for first in range(0, top, step)]

        async def one(first: int, last: int) -> list[Any]:
            conn = await self._connect()
            try:
                return list(await conn.execute_fetchall(sql, tuple(params(first, last))))
            finally:
                await conn.close()

        results = await asyncio.gather(*(one(first, last) for first, last in ranges))
        return [row for rows in results for row in rows]

    async def _scan_groups(
        self,
        sign: int,
        where: str,
        params: Callable[[int, int], Sequence[Any]],
        extra: tuple[str, Callable[[int, int], Sequence[Any]]] | None = None,
    ) -> list[Any]:
        """A big slice summed per (source, profile, model) by parallel scans, as 'S' rows.

        Grouped by the integer codes of a sample's values (see `_Codes`); rows whose values
        the sample lacked are then summed by their text key in a second scan. `extra` is one
        more statement (and its parameters) run in the same scans.
        """
        schema = self._require_schema()
        codes = await self._sample_codes()
        sql = _coded_groups(schema, codes, sign, where)
        if extra is not None:
            more_sql, more_params = extra
            sql = f"{sql} UNION ALL {more_sql}"

            def both(first: int, last: int) -> Sequence[Any]:
                return (*params(first, last), *more_params(first, last))

            rows = await self._parallel("scan", sql, both)
        else:
            rows = await self._parallel("scan", sql, params)
        decoded: list[Any] = []
        uncoded = 0
        for row in rows:
            if row[0] != "C":
                decoded.append(row)
            elif row[4] is None:
                uncoded += int(row[10])
            else:
                decoded.append(("S", row[1], None, None, codes.key(int(row[4])), *row[5:]))
        if uncoded:
            rest = f"{where} AND {codes.expression(schema)} IS NULL"
            sql = _session_groups(schema, sign, rest, scan=True)
            decoded += await self._parallel("scan_rest", sql, params)
        return decoded

    async def _sample_codes(self) -> _Codes:
        schema = self._require_schema()
        top = self._max_rowid
        step = max(1, top // _SAMPLE_SPREAD)
        rows = await self._fetch(
            "sample", _codes_sample(schema), [top - _SAMPLE_LAST, step, step, top]
        )
        return _Codes(
            tuple(sorted({str(row[0]) for row in rows} | {""})),
            tuple(sorted({str(row[1]) for row in rows} | {""})),
            tuple(sorted({str(row[2]) for row in rows} | {""})),
        )

    def _backfill(self, sql: str, params: Callable[[int, int], Sequence[Any]]) -> None:
        """Read a big slice of session_model_usage in the background; merged when done."""
        self.stats["backfills"] += 1
        self._pending.append(asyncio.ensure_future(self._parallel("backfill", sql, params)))

    def _merge_finished(self) -> bool:
        """Fold finished background reads into the closed sums; a failed one raises."""
        finished = [task for task in self._pending if task.done()]
        for task in finished:
            self._pending.remove(task)
            self._add_groups(task.result())
        return bool(finished)

    # -- turning rows into sums ----------------------------------------------------------

    def _require_schema(self) -> _Schema:
        assert self._schema is not None
        return self._schema

    def _take_mark(self, rows: Iterable[Sequence[Any]]) -> None:
        for row in rows:
            if row[0] == "M":
                self._max_rowid = max(self._max_rowid, int(row[3] or 0))
                self._first_started = float(row[8]) if row[8] is not None else None

    def _add_groups(self, rows: Iterable[Sequence[Any]]) -> None:
        for row in rows:
            kind, sign = row[0], int(row[1])
            values = [int(v or 0) for v in row[10:]]
            if kind == "S":
                source, profile, model = str(row[4]).split(_SEP, 2)
                for key in self._session_keys(source, profile, model):
                    self._closed.add(key, values, sign)
            elif kind == "U":
                dimension = "model_u" if row[7] else "side"
                name = model_name(row[6]) if row[7] else ""
                self._closed.add((dimension, name), values, sign)

    def _session_keys(self, source: Any, profile: Any, model: Any) -> tuple[GroupKey, ...]:
        return (
            ("total", ""),
            ("source", str(source) if source else "unknown"),
            ("profile", str(profile) if profile else self.profile),
            ("model_s", model_name(model)),
        )

    def _take_rows(self, rows: Sequence[Sequence[Any]], *, add_closed: bool) -> None:
        """Session rows ('R') and their usage rows ('V'): open ones kept, closed ones summed."""
        usage: dict[str, dict[tuple[str, bool], Vector]] = {}
        for row in rows:
            if row[0] == "V":
                per_session = usage.setdefault(str(row[2]), {})
                main = bool(row[7])
                key = (model_name(row[6]) if main else "", main)
                vector = per_session.setdefault(key, _zero())
                for index, value in enumerate(row[11:], start=1):
                    vector[index] += int(value or 0)
                vector[0] = 1
        for row in rows:
            if row[0] != "R":
                continue
            session_id = str(row[2])
            session = _OpenSession(
                started_at=float(row[8]),
                source=str(row[4]) if row[4] else "unknown",
                profile=str(row[5]) if row[5] else self.profile,
                model=model_name(row[6]),
                values=[int(v or 0) for v in row[10:]],
                usage=usage.get(session_id, {}),
            )
            if not row[9]:
                self._open[session_id] = session
                continue
            self._open.pop(session_id, None)
            if add_closed and self._in_bounds(session.started_at):
                self._add_session(self._closed, session)

    def _in_bounds(self, started_at: float) -> bool:
        return self._bounds is not None and self._bounds[0] < started_at <= self._bounds[1]

    def _add_session(self, sums: _Sums, session: _OpenSession) -> None:
        for key in self._session_keys(session.source, session.profile, session.model):
            sums.add(key, session.values)
        for (model, main), values in session.usage.items():
            sums.add(("model_u", model) if main else ("side", ""), values)

    def _build(self, window_s: float, end: float) -> LedgerReading:
        sums = _Sums()
        sums.merge(self._closed)
        for session in self._open.values():
            if self._in_bounds(session.started_at):
                self._add_session(sums, session)
        schema = self._require_schema()
        total = sums.total()
        info = LedgerInfo(str(self.path), self.profile, schema.version, schema.journal_mode)
        by_profile = sums.counts("profile")  # no profile_name column: all under self.profile
        exact = schema.has_usage and not self._pending
        missing = _missing(schema, self.profile)
        if self._pending:
            reason = (
                f"session_model_usage is still being read ({self._max_rowid:,} sessions); "
                "per model from sessions.model meanwhile"
            )
            missing.update(by_model_exact=reason, side_calls=reason)
        totals = LedgerTotals(
            window_s=window_s,
            end=end,
            total=total,
            by_source=frozen_map(sums.counts("source")),
            by_model=frozen_map(sums.counts("model_u" if exact else "model_s")),
            model_basis="session_model_usage" if exact else "sessions.model",
            by_profile=frozen_map(by_profile),
            by_ledger=frozen_map({str(self.path): total}),
            side_calls=sums.total("side") if exact else None,
            missing=frozen_map(missing),
            ledgers=(info,),
            queries=tuple(self._queries[name] for name in _QUERY_ORDER if name in self._queries),
            first_started_at=self._first_started,
        )
        reading = LedgerReading(totals, frozen_map(sums.counts("model_s")))
        self._cached = reading
        assert self._data_version is not None
        self._cache_key = (window_s, end, end - window_s, float(self._data_version))
        return reading


_QUERY_ORDER = (
    "mark",
    "open_read",
    "changes",
    "slide",
    "count",
    "sample",
    "scan",
    "scan_rest",
    "backfill",
    "columns",
    "versions",
)


def _ranged_params(
    start: float, stop: float, known: Sequence[Any]
) -> Callable[[int, int], tuple[Any, ...]]:
    """Parameters of `_SCAN_WHERE` for one rowid range."""

    def params(first: int, last: int) -> tuple[Any, ...]:
        return (first, last, start, stop, *known)

    return params


def _missing(schema: _Schema, profile: str) -> dict[str, str]:
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
    return missing


# --- several ledgers --------------------------------------------------------------------


def _sum_maps(maps: Iterable[Mapping[str, TokenCounts]]) -> dict[str, TokenCounts]:
    out: dict[str, TokenCounts] = {}
    for mapping in maps:
        for key, counts in mapping.items():
            out[key] = out.get(key, TokenCounts()) + counts
    return dict(sorted(out.items()))


class LedgerSet:
    """Several ledgers (one per Hermes profile) summed into one LedgerTotals.

    A ledger that fails makes the whole refresh raise LedgerError naming that file: a total
    silently missing one profile would look right and be wrong. The app marks the pane stale.
    """

    def __init__(self, tailers: Iterable[LedgerTailer]) -> None:
        self.tailers = tuple(tailers)
        if not self.tailers:
            raise LedgerError("no ledger given")

    @classmethod
    def from_args(cls, args: Iterable[str]) -> LedgerSet:
        """From paths and/or profile names, as the command line gives them."""
        return cls(LedgerTailer(resolve_ledger(arg), profile_of(arg)) for arg in args)

    async def refresh(self, window_s: float, end: float | None = None) -> LedgerTotals:
        if end is None:
            end = math.floor(time.time() / END_RESOLUTION_S) * END_RESOLUTION_S
        readings = [await tailer.read(window_s, end) for tailer in self.tailers]
        return _combine(readings, window_s, end)

    async def probe(self) -> bool:
        """Has a ledger that failed changed since (see `LedgerTailer.probe`)?"""
        return any([await tailer.probe() for tailer in self.tailers])

    async def close(self) -> None:
        for tailer in self.tailers:
            await tailer.close()


def _combine(readings: Sequence[LedgerReading], window_s: float, end: float) -> LedgerTotals:
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
        by_source=frozen_map(_sum_maps(p.by_source for p in parts)),
        by_model=frozen_map(_sum_maps(by_model)),
        model_basis=basis,
        by_profile=frozen_map(_sum_maps(p.by_profile for p in parts)),
        by_ledger=frozen_map(_sum_maps(p.by_ledger for p in parts)),
        side_calls=sum(sides, TokenCounts()) if sides else None,
        missing=frozen_map(missing),
        ledgers=tuple(info for part in parts for info in part.ledgers),
        queries=tuple(dict.fromkeys(q for part in parts for q in part.queries)),
        first_started_at=min(firsts) if firsts else None,
    )

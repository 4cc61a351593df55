"""The SQL the ledger tailer runs: read-only SELECTs and PRAGMA reads, nothing that writes.

Every statement returns rows of one layout (see `Col`), tagged by kind:

- `M` mark: the highest rowid and the first `started_at`, in the statement's own snapshot;
- `R` one session row;
- `S` sessions summed per (source, profile, model, provider, problem), or the closed sessions
  without a numeric started_at counted (they are in no window);
- `U` session_model_usage summed per (model, provider, main loop?, problem); `V` the same for
  one session read as `R`.

Each row read is judged here, by one rule (`_problem`): a counter that is not a whole number or
is negative, a cost that is not a dollar amount, or a session without a numeric `started_at`,
makes the row unreadable; the reason travels with the row (NULL when it is fine) so the tailer
skips and counts it. A plain SUM raises past 2**63 and TOTAL() rounds past 2**53, so each
counter is summed as its high and low 32 bits (the tailer puts them together): exact, and no
overflow below 2**31 rows per group. Costs are REAL in the ledger: each row's is turned into
whole billionths of a dollar first (`NANO_USD`), then summed by TOTAL(), so they too add and
subtract exactly (below $9 million per group and statement) and never raise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from cockpit.core.model import NANO_USD

COUNTER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("api_calls", "api_call_count"),
    ("input", "input_tokens"),
    ("cache_read", "cache_read_tokens"),
    ("cache_write", "cache_write_tokens"),
    ("output", "output_tokens"),
    ("reasoning", "reasoning_tokens"),
)
"""TokenCounts field -> the column that holds it, in TokenCounts order after `sessions`."""
COST_COLUMNS = ("actual_cost_usd", "estimated_cost_usd")
"""Summed after the counters: a row's actual cost where Hermes recorded one, else its estimate
(TokenCounts' `cost_actual` and `cost_estimated`)."""
VALUE_COUNT = len(COUNTER_COLUMNS) + len(COST_COLUMNS)

NO_START = "no start time"


class Col(IntEnum):
    """Column positions in every row the tailer reads."""

    KIND = 0
    ROWID = 1
    """R: the session's rowid; V: its session's rowid; M: the highest rowid."""
    SOURCE = 2
    PROFILE = 3
    MODEL = 4
    PROVIDER = 5
    MAIN = 6
    """V, U: the main loop (task ''), not a side call."""
    STARTED = 7
    """R: started_at; M: the first started_at."""
    CLOSED = 8
    """R: ended_at is set."""
    PROBLEM = 9
    """Why the row can't be read, or NULL."""
    COUNT = 10
    """S: sessions; U, V: distinct sessions (rows when PROBLEM is set); R: 1."""
    VALUES = 11
    """COUNTER_COLUMNS then the two costs (in billionths), each as its high and low 32 bits."""


@dataclass(frozen=True, slots=True)
class Schema:
    """What this ledger's tables hold (older schemas lack columns and tables)."""

    columns: frozenset[str]
    usage_columns: frozenset[str]
    has_usage: bool
    version: int | None
    journal_mode: str
    schema_cookie: int


Fetch = Callable[[str, Sequence[Any]], Awaitable[list[Any]]]


async def read_schema(fetch: Fetch) -> Schema | None:
    """The schema, or None when there is no `sessions` table."""
    tables: dict[str, set[str]] = {}
    for table, column in await fetch(_COLUMNS, ()):
        tables.setdefault(str(table), set()).add(str(column))
    if "sessions" not in tables:
        return None
    usage = frozenset(tables.get("session_model_usage", ()))
    version = None
    if "schema_version" in tables:
        rows = await fetch("SELECT MAX(version) FROM schema_version", ())
        version = rows[0][0] if isinstance(rows[0][0], int) else None
    ((mode, cookie),) = await fetch("SELECT * FROM pragma_journal_mode, pragma_schema_version", ())
    has_usage = {"session_id", "model"} <= usage
    return Schema(frozenset(tables["sessions"]), usage, has_usage, version, str(mode), int(cookie))


_COLUMNS = (
    "SELECT m.name, p.name FROM sqlite_master AS m, pragma_table_info(m.name) AS p "
    "WHERE m.type = 'table' AND m.name IN ('sessions', 'session_model_usage', 'schema_version')"
)
VERSIONS = "SELECT * FROM pragma_data_version, pragma_schema_version"

IN_RANGE = "s.started_at > ?1 AND s.started_at <= ?2"
"""Started in (start, stop]: a started_at that is not a number is never inside."""
CLOSED_IN_RANGE = (
    f"{IN_RANGE} AND s.rowid <= ?3 AND s.rowid NOT IN (SELECT value FROM json_each(?4))"
)
"""Known closed (read before and closed then) and in range (parameters: start, stop, the
highest rowid read, the open rowids as JSON)."""
CHANGED = "(s.rowid > ?1 OR s.rowid IN (SELECT value FROM json_each(?2)))"
"""Added since, or open when last read (parameters: the highest rowid read, the open rowids)."""


def _counters(present: frozenset[str], alias: str) -> list[str | None]:
    """`alias.column` per counter, None where this schema lacks the column."""
    return [f"{alias}.{column}" if column in present else None for _, column in COUNTER_COLUMNS]


def has_costs(present: frozenset[str]) -> bool:
    return set(COST_COLUMNS) <= present


def _costs(present: frozenset[str], alias: str) -> list[str | None]:
    """The actual cost where recorded, else the estimate, in billionths of a dollar: two values
    of which one is 0. session_model_usage stores no cost as 0, so an actual of 0 counts only
    when `cost_status` says it is actual."""
    if not has_costs(present):
        return [None, None]
    actual, estimated = (f"{alias}.{column}" for column in COST_COLUMNS)
    status = f"{alias}.cost_status = 'actual'" if "cost_status" in present else "0"
    is_actual = f"{actual} IS NOT NULL AND ({actual} <> 0 OR {status})"
    # rounded half up, as ROUND does, without a function call per row: costs are >= 0
    return [
        f"CAST(IIF({is_actual}, {actual}, 0) * {NANO_USD} + 0.5 AS INTEGER)",
        f"CAST(IIF({is_actual}, 0, COALESCE({estimated}, 0)) * {NANO_USD} + 0.5 AS INTEGER)",
    ]


def _problem(present: frozenset[str], alias: str, *, start: bool) -> str:
    """Why a row can't be read (SQL text), NULL when it can."""
    columns = [c for c in _counters(present, alias) if c is not None]
    cases = []
    if start:
        cases.append(f"WHEN typeof(s.started_at) NOT IN ('integer', 'real') THEN '{NO_START}'")
    if columns:
        # a fraction, text or a blob is not its own integer cast (and costs no call per row)
        not_whole = " OR ".join(f"{c} <> CAST({c} AS INTEGER)" for c in columns)
        negative = " OR ".join(f"{c} < 0" for c in columns)
        cases.append(f"WHEN {not_whole} THEN 'a token count that is not a whole number'")
        cases.append(f"WHEN {negative} THEN 'a negative token count'")
    if has_costs(present):  # above $1e9 would not fit the sums; text and blobs sort above it
        bad = " OR ".join(f"{alias}.{c} < 0 OR {alias}.{c} > 1000000000" for c in COST_COLUMNS)
        cases.append(f"WHEN {bad} THEN 'a cost that is not a dollar amount'")
    return f"CASE {' '.join(cases)} END" if cases else "NULL"


def _values(present: frozenset[str], alias: str) -> str:
    """Each counter as its high and low 32 bits, like `_sums`, so every row has one layout (a
    cost is all in its low half; a column this schema lacks is 0, 0)."""
    counters = (f"COALESCE({c}, 0)" if c else "0" for c in _counters(present, alias))
    pairs = [f"{value} >> 32, {value} & 4294967295" for value in counters]
    pairs += [f"0, {cost or '0'}" for cost in _costs(present, alias)]
    return ", ".join(pairs)


_VALUE_NAMES = ", ".join(f"h{index}, l{index}" for index in range(VALUE_COUNT))


def _sums(present: frozenset[str], alias: str) -> str:
    """Each counter summed as its high and low 32 bits, the costs (in billionths) by TOTAL."""
    counters = [
        f"SUM({c} >> 32), SUM({c} & 4294967295)" if c else "0, 0" for c in _counters(present, alias)
    ]
    costs = [f"0, TOTAL({c})" if c else "0, 0" for c in _costs(present, alias)]
    return ", ".join(counters + costs)


def _names(schema: Schema) -> str:
    """A session's source, profile, model and provider (NULL where this schema lacks one)."""
    columns = ("profile_name", "model", "billing_provider")
    return ", ".join(["s.source", *(f"s.{c}" if c in schema.columns else "NULL" for c in columns)])


def _short_model(column: str) -> str:
    """The last `/` part of a model name, as `model_name` does in Python."""
    return f"substr({column}, length(rtrim({column}, replace({column}, '/', ''))) + 1)"


_ZEROS = ", ".join(["0"] * 2 * VALUE_COUNT)
_MARK = (
    "SELECT 'M', (SELECT MAX(rowid) FROM sessions), NULL, NULL, NULL, NULL, NULL, "
    f"(SELECT MIN(started_at) FROM sessions), NULL, NULL, 0, {_ZEROS}"
)
_STARTLESS = (
    f"SELECT 'S', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, '{NO_START}', COUNT(*), "
    f"{_ZEROS} FROM sessions AS s WHERE (s.started_at IS NULL OR s.started_at >= '') "
    "AND s.ended_at IS NOT NULL"
)
"""Closed sessions whose started_at is not a number (NULL, text or a blob: all sort above '')."""


def rows_statement(schema: Schema, where: str) -> str:
    """The mark, the sessions `where` selects (on `s`), and their usage rows: one snapshot.
    No column of `chosen` may share a name with the usage groups' aliases (m, v, k, p): SQLite
    binds a GROUP BY name to a FROM column before a result alias."""
    chosen = (
        "WITH chosen(rid, id, source, profile, model, provider, started, closed, problem, "
        f"{_VALUE_NAMES}) AS MATERIALIZED (SELECT s.rowid, s.id, {_names(schema)}, "
        f"s.started_at, s.ended_at IS NOT NULL, {_problem(schema.columns, 's', start=True)}, "
        f"{_values(schema.columns, 's')} FROM sessions AS s WHERE {where}) "
    )
    parts = [
        _MARK,
        "SELECT 'R', rid, source, profile, model, provider, NULL, started, closed, problem, 1, "
        f"{_VALUE_NAMES} FROM chosen",
    ]
    if schema.has_usage:
        parts.append(_usage_groups(schema, "'V', s.rid", "chosen AS s", "1", "s.rid, "))
    return chosen + " UNION ALL ".join(parts)


def _sessions(scan: bool) -> str:
    """A wide slice reads faster scanning the table than through the started_at index."""
    return "sessions AS s NOT INDEXED" if scan else "sessions AS s"


def session_groups(schema: Schema, where: str, *, scan: bool = False) -> str:
    """Sessions `where` selects, summed per (source, profile, model, provider, problem)."""
    return (
        f"SELECT 'S', NULL, {_names(schema)}, NULL, NULL, 1, "
        f"{_problem(schema.columns, 's', start=False)} AS p, COUNT(*), "
        f"{_sums(schema.columns, 's')} FROM {_sessions(scan)} WHERE {where} GROUP BY 3, 4, 5, 6, p"
    )


def first_read(schema: Schema, *, scan: bool) -> str:
    """Everything but the usage of closed sessions, in one snapshot (parameters: the window):
    the mark, the open sessions with their usage, the sessions closed in that snapshot and
    started in the window summed, and the closed ones without a start counted."""
    closed = session_groups(schema, f"{IN_RANGE} AND s.ended_at IS NOT NULL", scan=scan)
    return (
        f"{rows_statement(schema, 's.ended_at IS NULL')} UNION ALL {closed} UNION ALL {_STARTLESS}"
    )


def usage_groups(schema: Schema, where: str, *, scan: bool = False) -> str:
    """Usage of the sessions `where` selects: per short model and provider for the main loop,
    all side calls together; sessions counted once per group."""
    return _usage_groups(schema, "'U', NULL", _sessions(scan), where, "")


def _usage_groups(schema: Schema, head: str, sessions: str, where: str, by: str) -> str:
    main = "(u.task = '' OR u.task IS NULL)" if "task" in schema.usage_columns else "1"
    model = f"CASE WHEN {main} THEN {_short_model('u.model')} ELSE '' END"
    provider = "u.billing_provider" if "billing_provider" in schema.usage_columns else "''"
    provider = f"CASE WHEN {main} THEN {provider} ELSE '' END"
    problem = _problem(schema.usage_columns, "u", start=False)
    count = f"CASE WHEN {problem} IS NULL THEN COUNT(DISTINCT u.session_id) ELSE COUNT(*) END"
    return (
        f"SELECT {head}, NULL, NULL, {model} AS m, {provider} AS v, {main} AS k, NULL, NULL, "
        f"{problem} AS p, {count}, {_sums(schema.usage_columns, 'u')} FROM {sessions} JOIN "
        f"session_model_usage AS u ON u.session_id = s.id WHERE {where} GROUP BY {by}m, v, k, p"
    )

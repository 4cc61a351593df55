"""Bad rows in a real Hermes ledger: each is skipped and counted, the rest stays exact.

Every ledger here is the real schema-22 fixture with a few rows spoiled the way a broken
writer, a hand edit or a foreign tool could spoil them. The expected figures come from
`ledger_writer.recount`, which judges each row in Python, independently of the tailer's SQL.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from dataclasses import astuple
from pathlib import Path

import pytest

from cockpit.core.ledger_figures import ledger_figures
from cockpit.sources.ledger import LedgerTailer
from tests.support.ledger_writer import HermesLikeWriter, Usage, assert_matches, make_wal, recount

NOW = 1794700800.0
DAY = 86400.0
WINDOW = 120 * DAY
NOT_WHOLE = "sessions: a token count that is not a whole number"
NEGATIVE = "sessions: a negative token count"
NO_START = "sessions: no start time"
NOT_A_COST = "sessions: a cost that is not a dollar amount"


def session_ids(path: Path, *, open_: bool) -> list[str]:
    """Sessions with API calls, open or closed, in a stable order."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT id FROM sessions WHERE api_call_count > 0 AND ended_at IS "
            + ("NULL" if open_ else "NOT NULL")
            + " ORDER BY rowid"
        ).fetchall()
    return [str(row[0]) for row in rows]


def spoil(path: Path, sql: str, *, open_: bool, rows: int = 1) -> list[str]:
    """Run `sql` (one `?` for the session id) on `rows` sessions; their ids."""
    ids = session_ids(path, open_=open_)[:rows]
    with sqlite3.connect(path) as conn:
        for session_id in ids:
            assert conn.execute(sql, (session_id,)).rowcount == 1
    return ids


def allow_null_starts(path: Path) -> None:
    """Drop the NOT NULL on sessions.started_at, as an older or foreign writer might have."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute(
        "UPDATE sqlite_master SET sql = replace(sql, 'started_at REAL NOT NULL', "
        "'started_at REAL') WHERE type = 'table' AND name = 'sessions'"
    )
    conn.execute("PRAGMA writable_schema = OFF")
    conn.close()


Spoil = Callable[[Path], str]
"""Spoils the ledger; returns the reason the skipped rows are counted under."""

CASES: dict[str, Spoil] = {
    "text in a counter of an open session": lambda path: (
        spoil(path, "UPDATE sessions SET input_tokens = 'lots' WHERE id = ?", open_=True),
        NOT_WHOLE,
    )[1],
    "text in a counter of closed sessions": lambda path: (
        spoil(path, "UPDATE sessions SET output_tokens = 'n/a' WHERE id = ?", open_=False, rows=3),
        NOT_WHOLE,
    )[1],
    "a blob in a counter of an open session": lambda path: (
        spoil(path, "UPDATE sessions SET cache_read_tokens = x'00ff' WHERE id = ?", open_=True),
        NOT_WHOLE,
    )[1],
    "a fraction in a counter of a closed session": lambda path: (
        spoil(path, "UPDATE sessions SET api_call_count = 2.5 WHERE id = ?", open_=False),
        NOT_WHOLE,
    )[1],
    "negative tokens in closed sessions": lambda path: (
        spoil(path, "UPDATE sessions SET output_tokens = -500 WHERE id = ?", open_=False, rows=2),
        NEGATIVE,
    )[1],
    "negative tokens in an open session": lambda path: (
        spoil(path, "UPDATE sessions SET input_tokens = -7 WHERE id = ?", open_=True),
        NEGATIVE,
    )[1],
    "a text started_at on an open session": lambda path: (
        spoil(path, "UPDATE sessions SET started_at = 'yesterday' WHERE id = ?", open_=True),
        NO_START,
    )[1],
    "a text started_at on closed sessions": lambda path: (
        spoil(path, "UPDATE sessions SET started_at = 'soon' WHERE id = ?", open_=False, rows=2),
        NO_START,
    )[1],
    "a NULL started_at on an open session": lambda path: (
        allow_null_starts(path),
        spoil(path, "UPDATE sessions SET started_at = NULL WHERE id = ?", open_=True),
        NO_START,
    )[2],
    "negative tokens in a usage row": lambda path: (
        spoil(
            path,
            "UPDATE session_model_usage SET input_tokens = -3 WHERE rowid = "
            "(SELECT MIN(rowid) FROM session_model_usage WHERE session_id = ?)",
            open_=False,
        ),
        "session_model_usage: a negative token count",
    )[1],
    "text in a cost of closed sessions": lambda path: (
        spoil(
            path,
            "UPDATE sessions SET estimated_cost_usd = 'free' WHERE id = ?",
            open_=False,
            rows=2,
        ),
        NOT_A_COST,
    )[1],
    "a negative actual cost on an open session": lambda path: (
        spoil(path, "UPDATE sessions SET actual_cost_usd = -0.5 WHERE id = ?", open_=True),
        NOT_A_COST,
    )[1],
    "an infinite cost in a usage row": lambda path: (
        spoil(
            path,
            "UPDATE session_model_usage SET estimated_cost_usd = 1e999 WHERE rowid = "
            "(SELECT MIN(rowid) FROM session_model_usage WHERE session_id = ?)",
            open_=False,
        ),
        "session_model_usage: a cost that is not a dollar amount",
    )[1],
}


def usage(rng: random.Random) -> Usage:
    return Usage(rng.randrange(900), rng.randrange(9000), rng.randrange(99), rng.randrange(300), 5)


@pytest.mark.parametrize("case", list(CASES))
async def test_a_bad_row_is_skipped_counted_and_the_rest_exact(hermes_v22: Path, case: str) -> None:
    """Twice in a row, with writes between: never a traceback, never a partial read."""
    reason = CASES[case](hermes_v22)
    make_wal(hermes_v22)
    expected = recount(hermes_v22, NOW - WINDOW, NOW)
    assert expected.skipped.get(reason, 0) >= 1, expected.skipped
    writer = HermesLikeWriter(hermes_v22)
    tailer = LedgerTailer(hermes_v22)
    rng = random.Random(5)
    try:
        first = await tailer.refresh(WINDOW, NOW)
        assert_matches(first, expected)
        good_open = [
            sid
            for sid in session_ids(hermes_v22, open_=True)
            if sid in {s for s, _ in writer.open_sessions()}
        ]
        for _ in range(3):  # a live writer keeps committing between refreshes
            writer.record_call(good_open[-1], "gpt-5.4", usage(rng))
            totals = await tailer.refresh(WINDOW, NOW)
            assert_matches(totals, recount(hermes_v22, NOW - WINDOW, NOW))
        writer.end_session(good_open[-1], NOW - 1)
        totals = await tailer.refresh(WINDOW, NOW)
        assert_matches(totals, recount(hermes_v22, NOW - WINDOW, NOW))
        assert totals.total.sessions > first.total.sessions / 2  # not only the open ones
    finally:
        await tailer.close()
        writer.close()
    figures = ledger_figures(totals)
    for key in ("prompt_output", "fresh_output", "cache_read_share"):
        value = figures[key].value
        assert value is not None and value >= 0
    count = sum(totals.skipped.values())
    assert figures.skipped.startswith(f"{count} row{'s' if count > 1 else ''} skipped")
    assert reason in figures.skipped


async def test_skipped_rows_follow_the_window(hermes_v22: Path) -> None:
    """A spoiled session counts while its start is inside the window, not after it leaves."""
    spoil(hermes_v22, "UPDATE sessions SET output_tokens = -1 WHERE id = ?", open_=False, rows=4)
    tailer = LedgerTailer(hermes_v22)
    try:
        for end in (NOW, NOW + 30 * DAY, NOW + 60 * DAY, NOW + 90 * DAY, NOW):
            totals = await tailer.refresh(WINDOW, end)
            assert_matches(totals, recount(hermes_v22, end - WINDOW, end))
        totals = await tailer.refresh(7 * DAY, NOW + 200 * DAY)
        assert dict(totals.skipped) == {}
    finally:
        await tailer.close()


async def test_sums_past_the_int64_range_do_not_overflow(hermes_v22: Path) -> None:
    """Three sessions of one source, profile and model, 2**62 output tokens each: SQLite's SUM
    raises past 2**63 (the whole ledger became unreadable); the totals are the exact sum."""
    huge = 2**62
    ids = spoil(
        hermes_v22,
        f"UPDATE sessions SET output_tokens = {huge}, source = 'cli', model = 'gpt-5.4', "
        "billing_provider = 'openai', profile_name = NULL WHERE id = ?",
        open_=False,
        rows=3,
    )
    with sqlite3.connect(hermes_v22) as conn:
        conn.execute(
            f"UPDATE session_model_usage SET output_tokens = {huge}, model = 'gpt-5.4', "
            "billing_provider = 'openai' WHERE task = '' AND session_id IN (?, ?, ?)",
            ids,
        )
    tailer = LedgerTailer(hermes_v22)
    try:
        totals = await tailer.refresh(WINDOW, NOW)
    finally:
        await tailer.close()
    assert_matches(totals, recount(hermes_v22, NOW - WINDOW, NOW))
    assert totals.total.output > 3 * huge
    assert totals.by_source["cli"].output > 3 * huge
    assert totals.by_model["openai/gpt-5.4"].output > 3 * huge


async def test_names_that_are_not_utf8_are_read_not_refused(hermes_v22: Path) -> None:
    closed = spoil(
        hermes_v22, "UPDATE sessions SET source = CAST(x'ff636c69' AS TEXT) WHERE id = ?",
        open_=False, rows=2,
    )  # fmt: skip
    spoil(hermes_v22, "UPDATE sessions SET model = CAST(x'67c3' AS TEXT) WHERE id = ?", open_=True)
    tailer = LedgerTailer(hermes_v22)
    try:
        totals = await tailer.refresh(WINDOW, NOW)
    finally:
        await tailer.close()
    assert_matches(totals, recount(hermes_v22, NOW - WINDOW, NOW))
    assert totals.by_source["\ufffdcli"].sessions == len(closed)


async def test_every_read_under_a_writer_is_a_committed_state_despite_bad_rows(
    hermes_v22: Path,
) -> None:
    """Bad rows open and closed, a writer adding good and bad sessions between refreshes."""
    CASES["text in a counter of an open session"](hermes_v22)
    CASES["negative tokens in closed sessions"](hermes_v22)
    make_wal(hermes_v22)
    writer = HermesLikeWriter(hermes_v22)
    tailer = LedgerTailer(hermes_v22, profile="p")
    rng = random.Random(17)
    try:
        for serial in range(40):
            sid = f"w{serial}"
            writer.start_session(sid, rng.choice(["cli", "cron"]), "gpt-5.4", NOW - serial)
            writer.record_call(sid, "gpt-5.4", usage(rng))
            if serial % 3 == 0:
                with sqlite3.connect(hermes_v22) as conn:  # another bad writer
                    conn.execute("UPDATE sessions SET output_tokens = -1 WHERE id = ?", (sid,))
            if serial % 2 == 0:
                writer.end_session(sid, NOW - serial + 1)
            window = rng.choice([DAY, 7 * DAY, WINDOW])
            totals = await tailer.refresh(window, NOW)
            assert_matches(totals, recount(hermes_v22, NOW - window, NOW, profile="p"))
            assert astuple(totals.total)[5] >= 0
    finally:
        await tailer.close()
        writer.close()


async def test_an_open_session_s_bad_usage_row_is_skipped_while_open_and_after(
    hermes_v22: Path,
) -> None:
    """Two main-loop usage rows of one model and provider, one with a negative count: the bad
    one is skipped while the session is open, when it closes, and once the window slides past."""
    writer = sqlite3.connect(hermes_v22, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("DELETE FROM session_model_usage")
    writer.execute("DELETE FROM sessions")
    writer.execute(
        "INSERT INTO sessions (id, source, model, started_at, input_tokens) "
        "VALUES ('a', 'cli', 'm', ?, 100)",
        (NOW - 10,),
    )
    for tokens, url in ((100, "https://one"), (-5, "https://other")):
        writer.execute(
            "INSERT INTO session_model_usage (session_id, model, billing_provider, "
            "billing_base_url, task, input_tokens, output_tokens) "
            "VALUES ('a', 'm', 'p', ?, '', ?, 7)",
            (url, tokens),
        )
    tailer = LedgerTailer(hermes_v22)
    try:
        ends = (NOW, None, NOW + 1800, NOW + 3595)  # None: the session closes first
        for end in ends:
            if end is None:
                writer.execute("UPDATE sessions SET ended_at = ? WHERE id = 'a'", (NOW,))
                end = NOW
            totals = await tailer.refresh(3600, end)
            assert_matches(totals, recount(hermes_v22, end - 3600, end))
        assert sum(totals.skipped.values()) == 0 and not totals.by_model
    finally:
        await tailer.close()
        writer.close()

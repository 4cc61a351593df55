"""The ledger tailer on real Hermes ledgers: figures, tailing, sliding windows, replacement."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import shutil
import sqlite3
import threading
import time
from dataclasses import astuple
from pathlib import Path

import pytest

from cockpit.core.ledger_figures import ledger_figures
from cockpit.sources.ledger import (
    BIG_LEDGER_ROWS,
    LedgerError,
    LedgerSet,
    LedgerTailer,
    ledger_totals,
    model_key,
    model_name,
    profile_of,
    resolve_ledger,
)
from tests.support.ledger_writer import (
    HermesLikeWriter,
    Usage,
    as_tuples,
    assert_matches,
    make_wal,
    recount,
)

NOW = 1794700800.0
DAY = 86400.0
WINDOW_DAYS = (1, 7, 30, 90, 120)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


# --- figures on the fixtures -------------------------------------------------------------


@pytest.mark.parametrize("days", WINDOW_DAYS)
async def test_v22_figures_match_independent_sql(hermes_v22: Path, days: int) -> None:
    tailer = LedgerTailer(hermes_v22)
    try:
        reading = await tailer.read(days * DAY, NOW)
    finally:
        await tailer.close()
    totals = ledger_totals(days * DAY, NOW, [reading], reading.missing)
    expected = recount(hermes_v22, NOW - days * DAY, NOW)
    assert expected.total[0] > 0
    assert_matches(totals, expected)
    assert as_tuples(reading.sums.counts("model_s")) == expected.by_model_sessions
    assert totals.missing == {}
    assert totals.by_ledger == {str(hermes_v22): totals.total}
    (info,) = totals.ledgers
    assert (info.schema_version, info.profile, info.journal_mode) == (22, "default", "delete")


@pytest.mark.parametrize("days", WINDOW_DAYS)
async def test_v11_figures_and_missing(hermes_v11: Path, days: int) -> None:
    tailer = LedgerTailer(hermes_v11, profile="old")
    try:
        totals = await tailer.refresh(days * DAY, NOW)
    finally:
        await tailer.close()
    expected = recount(hermes_v11, NOW - days * DAY, NOW, profile="old")
    assert_matches(totals, expected)
    assert set(totals.by_profile) == {"old"}
    assert set(totals.missing) == {"by_profile", "by_model_exact", "side_calls"}
    assert "schema 11 has no profile_name" in totals.missing["by_profile"]
    assert totals.ledgers[0].schema_version == 11


async def test_v22_details_profiles_side_calls_and_first_start(hermes_v22: Path) -> None:
    tailer = LedgerTailer(hermes_v22, profile="main")
    try:
        totals = await tailer.refresh(120 * DAY, NOW)
    finally:
        await tailer.close()
    conn = sqlite3.connect(hermes_v22)
    profiles = {row[0] or "main" for row in conn.execute("SELECT profile_name FROM sessions")}
    first = conn.execute("SELECT MIN(started_at) FROM sessions").fetchone()[0]
    conn.close()
    assert set(totals.by_profile) == profiles and len(profiles) == 2
    assert totals.first_started_at == first
    assert totals.side_calls is not None and totals.side_calls.api_calls > 0


async def test_the_same_model_from_two_providers_stays_two_rows(hermes_v22: Path) -> None:
    """Claude through Anthropic and through OpenRouter: two rows, each with its own calls."""
    conn = sqlite3.connect(hermes_v22)
    calls = dict(
        conn.execute(
            "SELECT billing_provider, SUM(api_call_count) FROM session_model_usage "
            "WHERE task = '' AND model LIKE '%claude-sonnet-4.6' GROUP BY billing_provider"
        ).fetchall()
    )
    session_calls = dict(
        conn.execute(
            "SELECT billing_provider, SUM(api_call_count) FROM sessions "
            "WHERE model LIKE '%claude-sonnet-4.6' AND billing_provider IS NOT NULL "
            "GROUP BY billing_provider"
        ).fetchall()
    )
    conn.close()
    assert set(calls) == {"anthropic", "openrouter"}
    tailer = LedgerTailer(hermes_v22)
    try:
        reading = await tailer.read(120 * DAY, NOW)
    finally:
        await tailer.close()
    exact = ledger_totals(120 * DAY, NOW, [reading], reading.missing).by_model
    assert exact["anthropic/claude-sonnet-4.6"].api_calls == calls["anthropic"]
    assert exact["openrouter/claude-sonnet-4.6"].api_calls == calls["openrouter"]
    assert "claude-sonnet-4.6" not in exact
    by_sessions = reading.sums.counts("model_s")
    for provider, count in session_calls.items():
        assert by_sessions[f"{provider}/claude-sonnet-4.6"].api_calls == count


def test_model_names_drop_the_provider() -> None:
    assert model_name("openrouter/anthropic/claude-sonnet-4.6") == "claude-sonnet-4.6"
    assert model_name("Qwen/Qwen3-32B") == "Qwen3-32B"
    assert model_name("gpt-5.4") == "gpt-5.4"
    assert model_name(None) == "unknown"
    assert model_name("") == "unknown"
    assert model_key("openrouter", "openrouter/anthropic/claude-sonnet-4.6") == (
        "openrouter/claude-sonnet-4.6"
    )
    assert model_key(None, "Qwen/Qwen3-32B") == "Qwen3-32B"
    assert model_key("", "gpt-5.4") == "gpt-5.4"


def test_resolve_ledger_paths_and_profiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    assert resolve_ledger("default") == tmp_path / "home" / "state.db"
    assert resolve_ledger("work") == tmp_path / "home" / "profiles" / "work" / "state.db"
    assert resolve_ledger(str(tmp_path / "x.db")) == tmp_path / "x.db"
    assert resolve_ledger("./state.db") == Path("./state.db")
    monkeypatch.delenv("HERMES_HOME")
    assert resolve_ledger("default") == Path("~/.hermes/state.db").expanduser()
    assert profile_of("work") == "work"
    assert profile_of("/srv/h/profiles/lab/state.db") == "lab"
    assert profile_of(str(tmp_path / "x.db")) is None


async def test_ledger_set_from_profile_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, hermes_v22: Path, hermes_v11: Path
) -> None:
    home = tmp_path / "home"
    (home / "profiles" / "old").mkdir(parents=True)
    shutil.copyfile(hermes_v22, home / "state.db")
    shutil.copyfile(hermes_v11, home / "profiles" / "old" / "state.db")
    monkeypatch.setenv("HERMES_HOME", str(home))
    ledgers = LedgerSet(
        [LedgerTailer(resolve_ledger(a), profile_of(a)) for a in ("default", "old")]
    )
    try:
        totals = await ledgers.read(120 * DAY, NOW)
    finally:
        await ledgers.close()
    assert [(i.path, i.profile) for i in totals.ledgers] == [
        (str(home / "state.db"), "default"),
        (str(home / "profiles" / "old" / "state.db"), "old"),
    ]
    old = recount(home / "profiles" / "old" / "state.db", NOW - 120 * DAY, NOW, profile="old")
    assert astuple(totals.by_profile["old"]) == old.total


async def test_ledger_set_sums_and_keeps_ledgers_apart(hermes_v22: Path, hermes_v11: Path) -> None:
    ledgers = LedgerSet([LedgerTailer(hermes_v22, "a"), LedgerTailer(hermes_v11, "b")])
    try:
        totals = await ledgers.read(30 * DAY, NOW)
    finally:
        await ledgers.close()
    one = recount(hermes_v22, NOW - 30 * DAY, NOW, profile="a")
    two = recount(hermes_v11, NOW - 30 * DAY, NOW, profile="b")
    assert astuple(totals.total) == tuple(x + y for x, y in zip(one.total, two.total, strict=True))
    assert astuple(totals.by_ledger[str(hermes_v22)]) == one.total
    assert astuple(totals.by_ledger[str(hermes_v11)]) == two.total
    assert astuple(totals.by_profile["b"]) == two.total
    # one old ledger: per-model falls back to sessions.model for all, and says why
    assert totals.model_basis == "sessions.model"
    models = dict(one.by_model_sessions)
    for name, vector in two.by_model_sessions.items():
        models[name] = tuple(x + y for x, y in zip(models.get(name, (0,) * 9), vector, strict=True))
    assert as_tuples(totals.by_model) == models
    assert str(hermes_v11) in totals.missing["by_model_exact"]
    assert [info.path for info in totals.ledgers] == [str(hermes_v22), str(hermes_v11)]


async def test_ledger_set_names_the_failing_file(hermes_v22: Path, tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "state.db"
    ledgers = LedgerSet([LedgerTailer(hermes_v22), LedgerTailer(missing, "gone")])
    with pytest.raises(LedgerError, match=str(missing)):
        await ledgers.read(DAY, NOW)
    await ledgers.close()


# --- tailing -----------------------------------------------------------------------------


def usage(rng: random.Random) -> Usage:
    return Usage(
        input_tokens=rng.randrange(0, 5000),
        cache_read_tokens=rng.randrange(0, 50000),
        cache_write_tokens=rng.randrange(0, 3000),
        output_tokens=rng.randrange(0, 1500),
        reasoning_tokens=rng.randrange(0, 300),
    )


async def test_tailing_follows_every_write_exactly(hermes_v22: Path) -> None:
    make_wal(hermes_v22)
    writer = HermesLikeWriter(hermes_v22)
    tailer = LedgerTailer(hermes_v22)
    rng = random.Random(7)
    window = 7 * DAY
    try:
        assert_matches(await tailer.refresh(window, NOW), recount(hermes_v22, NOW - window, NOW))
        assert_matches(await tailer.refresh(window, NOW), recount(hermes_v22, NOW - window, NOW))

        open_ids = [sid for sid, _ in writer.open_sessions()]
        assert open_ids
        for sid in open_ids[:3]:
            writer.record_call(sid, "openrouter/anthropic/claude-sonnet-4.6", usage(rng))
        writer.record_call(open_ids[0], "gemini-3-flash", usage(rng), task="title_generation")
        assert_matches(await tailer.refresh(window, NOW), recount(hermes_v22, NOW - window, NOW))

        writer.start_session("new-1", "cli", "Qwen/Qwen3-32B", NOW - 30, profile="work")
        writer.start_session("new-2", "cron", None, NOW - 20)
        assert_matches(await tailer.refresh(window, NOW), recount(hermes_v22, NOW - window, NOW))
        writer.record_call("new-1", "Qwen/Qwen3-32B", usage(rng))
        writer.record_call("new-2", "deepseek-v3.2", usage(rng))
        writer.end_session(open_ids[1], NOW - 5)
        writer.end_session("new-2", NOW - 1)
        assert_matches(await tailer.refresh(window, NOW), recount(hermes_v22, NOW - window, NOW))
        writer.record_call("new-1", "gpt-5.4", usage(rng))  # a model switch
        assert_matches(await tailer.refresh(window, NOW), recount(hermes_v22, NOW - window, NOW))
    finally:
        await tailer.close()
        writer.close()


@pytest.mark.parametrize(
    ("seed", "big_rows"), [(1, BIG_LEDGER_ROWS), (2, BIG_LEDGER_ROWS), (3, 0), (4, 0)]
)
async def test_random_writes_and_sliding_windows_equal_a_recount(
    hermes_v22: Path, seed: int, big_rows: int
) -> None:
    """Writes, window changes and ends that move both ways: always equal to a recount.

    With big_rows=0 the ledger counts as big: a window summed afresh reads its
    session_model_usage in the background, per model from sessions.model until it lands.
    """
    make_wal(hermes_v22)
    writer = HermesLikeWriter(hermes_v22)
    tailer = LedgerTailer(hermes_v22, profile="p", big_rows=big_rows)
    meanwhile = 0
    rng = random.Random(seed)
    clock = NOW
    serial = 0
    windows = [DAY / 24, DAY, 7 * DAY, 30 * DAY, 90 * DAY, 120 * DAY]
    window = rng.choice(windows)
    try:
        for _ in range(60):
            action = rng.random()
            opened = writer.open_sessions()
            if action < 0.35 and opened:
                sid, model = rng.choice(opened)
                task = "" if rng.random() < 0.8 else "title_generation"
                writer.record_call(sid, model or "gpt-5.4", usage(rng), task=task)
            elif action < 0.5:
                serial += 1
                clock += rng.uniform(1, 4000)
                source = rng.choice(["cli", "tui", "cron", "telegram"])
                profile = rng.choice([None, "work"])
                model = rng.choice(["openrouter/qwen/qwen3-coder", "gpt-5.4", None])
                writer.start_session(f"s{serial}", source, model, clock, profile)
            elif action < 0.62 and opened:
                writer.end_session(rng.choice(opened)[0], clock + 1)
            elif action < 0.75:
                window = rng.choice(windows)
            elif action < 0.95:
                clock += rng.choice([1.0, 600.0, 5 * 3600.0, 2 * DAY, -3 * 3600.0])
            end = clock + rng.choice([0.0, 0.5, 100.0])
            totals = await tailer.refresh(window, end)
            expected = recount(hermes_v22, end - window, end, profile="p")
            if totals.model_basis == "sessions.model":  # usage still being read
                meanwhile += 1
                assert "still being read" in totals.missing["by_model_exact"]
                assert astuple(totals.total) == expected.total
                assert as_tuples(totals.by_model) == expected.by_model_sessions
                assert totals.side_calls is None
                await tailer.settle()
                totals = await tailer.refresh(window, end)
            assert_matches(totals, expected)
        assert (meanwhile > 0) == (big_rows == 0)
    finally:
        await tailer.close()
        writer.close()


async def test_sliding_drops_sessions_that_leave_the_window(hermes_v22: Path) -> None:
    tailer = LedgerTailer(hermes_v22)
    conn = sqlite3.connect(hermes_v22)
    starts = [row[0] for row in conn.execute("SELECT started_at FROM sessions ORDER BY 1")]
    conn.close()
    try:
        for end in (NOW, NOW + DAY, NOW + 3 * DAY, NOW + 5 * DAY, NOW + 7.5 * DAY):
            totals = await tailer.refresh(7 * DAY, end)
            inside = sum(1 for t in starts if end - 7 * DAY < t <= end)
            assert totals.total.sessions == inside
            assert_matches(totals, recount(hermes_v22, end - 7 * DAY, end))
        assert totals.total.sessions == 0
    finally:
        await tailer.close()


async def test_replaced_file_is_detected(hermes_v22: Path, hermes_v11: Path) -> None:
    make_wal(hermes_v22)
    tailer = LedgerTailer(hermes_v22)
    try:
        before = await tailer.refresh(30 * DAY, NOW)
        assert_matches(before, recount(hermes_v22, NOW - 30 * DAY, NOW))
        staged = hermes_v22.with_name("staged.db")
        shutil.copyfile(hermes_v11, staged)
        staged.replace(hermes_v22)  # atomic rename over the ledger
        for suffix in ("-wal", "-shm"):
            Path(f"{hermes_v22}{suffix}").unlink(missing_ok=True)
        after = await tailer.refresh(30 * DAY, NOW)
        assert_matches(after, recount(hermes_v22, NOW - 30 * DAY, NOW))
        assert after.ledgers[0].schema_version == 11
        assert before.total != after.total
    finally:
        await tailer.close()


async def test_reader_alone_changes_no_byte_of_db_or_wal(hermes_v22: Path) -> None:
    make_wal(hermes_v22)
    writer = HermesLikeWriter(hermes_v22)
    writer.conn.execute("PRAGMA wal_autocheckpoint=0")  # keep the commits in the -wal file
    rng = random.Random(3)
    sid = writer.open_sessions()[0][0]
    for _ in range(5):
        writer.record_call(sid, "gpt-5.4", usage(rng))
    wal = Path(f"{hermes_v22}-wal")
    assert wal.stat().st_size > 0
    before = (digest(hermes_v22), digest(wal))
    tailer = LedgerTailer(hermes_v22)
    try:
        for days in (1, 7, 90, 120):
            totals = await tailer.refresh(days * DAY, NOW)
            assert_matches(totals, recount(hermes_v22, NOW - days * DAY, NOW))
    finally:
        await tailer.close()
    assert (digest(hermes_v22), digest(wal)) == before
    writer.close()


@pytest.mark.slow
@pytest.mark.parametrize(("fresh_every", "big_rows"), [(0, BIG_LEDGER_ROWS), (5, 0)])
async def test_concurrent_writer_never_busy_and_every_read_is_a_committed_state(
    hermes_v22: Path, fresh_every: int, big_rows: int
) -> None:
    """A writer commits as fast as it can while the tailer refreshes as fast as it can.

    With fresh_every=5 the tailer is made afresh every 5 reads, so first reads meet the
    writer too (the open sessions in one snapshot, the closed ones summed in others, usage
    in the background).
    """
    make_wal(hermes_v22)
    writer = HermesLikeWriter(hermes_v22)
    window, end = 200 * DAY, NOW + DAY
    committed: set[tuple[int, ...]] = {recount(hermes_v22, end - window, end).total}
    stop = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        rng = random.Random(11)
        serial = 0
        try:
            while not stop.is_set():
                opened = writer.open_sessions()
                roll = rng.random()
                if roll < 0.08 or not opened:
                    serial += 1
                    writer.start_session(f"c{serial}", "cli", "gpt-5.4", NOW + serial)
                elif roll < 0.12:
                    writer.end_session(rng.choice(opened)[0], NOW + serial + 1)
                else:
                    writer.record_call(rng.choice(opened)[0], "gpt-5.4", usage(rng))
                committed.add(recount(hermes_v22, end - window, end).total)
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    thread = threading.Thread(target=write)
    tailer = LedgerTailer(hermes_v22, big_rows=big_rows)
    observed: list[tuple[int, ...]] = []
    thread.start()
    try:
        # At least 2.5 s and 100 committed writes; a loaded machine gets up to 20 s for them.
        started = time.monotonic()
        while time.monotonic() - started < 2.5 or (
            writer.writes <= 100 and time.monotonic() - started < 20
        ):
            observed.append(astuple((await tailer.refresh(window, end)).total))
            if fresh_every and len(observed) % fresh_every == 0:
                await tailer.close()
                tailer = LedgerTailer(hermes_v22, big_rows=big_rows)
    finally:
        stop.set()
        thread.join()
    try:
        assert not failures
        assert writer.busy_errors == 0
        assert writer.writes > 100
        assert len(observed) > 50
        assert len(set(observed)) > 20, "the tailer should have seen many states"
        unknown = [total for total in observed if total not in committed]
        assert unknown == []
        # with the writer idle but still open: the reader changes neither file
        wal = Path(f"{hermes_v22}-wal")
        before = (digest(hermes_v22), digest(wal))
        for _ in range(3):
            await tailer.refresh(window, end)
        await tailer.refresh(DAY, NOW)
        assert (digest(hermes_v22), digest(wal)) == before
    finally:
        await tailer.close()
        writer.close()


async def test_a_refresh_cancelled_part_way_leaves_no_half_state(hermes_v22: Path) -> None:
    """The app cancels a ledger read when the user switches window; the next must be exact."""
    end = 1794700800.0
    for delay in (0.0, 0.0005, 0.001, 0.002, 0.004, 0.008):
        tailer = LedgerTailer(hermes_v22)
        try:
            task = asyncio.ensure_future(tailer.refresh(30 * 86400, end))
            await asyncio.sleep(delay)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            totals = await tailer.refresh(7 * 86400, end)
            assert totals.total.sessions == _count_sessions(hermes_v22, end - 7 * 86400, end)
        finally:
            await tailer.close()


def _count_sessions(path: Path, start: float, end: float) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        (count,) = db.execute(
            "SELECT COUNT(*) FROM sessions WHERE started_at > ? AND started_at <= ?", (start, end)
        ).fetchone()
    return int(count)


SHOWN_FIGURES = (
    "sessions", "api_calls", "input_tokens", "cache_read_tokens", "cache_write_tokens",
    "output_tokens", "reasoning_tokens",
)  # fmt: skip
"""The ledger figures in the order the shown query's columns give them."""


@pytest.mark.parametrize("fixture", ["hermes_v22", "hermes_v11"])
async def test_the_query_the_details_show_gives_the_figures_in_the_sqlite3_shell(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """A figure without its own query (the token ratios) shows the totals' queries: run as
    shown on the ledger, they give the figures of the window read, after it slid too."""
    path: Path = request.getfixturevalue(fixture)
    tailer = LedgerTailer(path)
    try:
        await tailer.refresh(7 * DAY, NOW - DAY)
        totals = await tailer.refresh(7 * DAY, NOW)
    finally:
        await tailer.close()
    figures = ledger_figures(totals)
    assert totals.total.sessions > 0
    (shown,) = totals.queries
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        row = db.execute(shown).fetchone()
    assert list(row) == [figures[key].value for key in SHOWN_FIGURES]
    assert figures["prompt_output"].value == pytest.approx(sum(row[2:5]) / row[5])

"""The agent ledger going wrong under the running cockpit: real SQLite files, the real feeds.

Each fault is made on the file while the app polls it every 0.5 s: the pane says why, keeps
the last good figures marked stale, recovers when the file is good again, and the reader
never writes (the database file and its WAL keep their bytes).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cockpit.app.app import CockpitApp
from cockpit.config.schema import Config, LedgerConfig
from cockpit.widgets import RatiosPane
from tests.support.faultlane import error_notices, running_app, screen_text, share_text, wait_until
from tests.support.repo import HERMES_FIXTURES, REPO, require_binary, require_fixture

REFRESH_S = 0.5
MEASURED: dict[str, float] = {}

Tokens = tuple[int, int, int, int]
"""input, cache read, cache write, output of one session."""
GOOD: list[Tokens] = [(100, 300, 100, 50), (200, 500, 100, 70)]
OTHER: list[Tokens] = [(100, 800, 100, 40)]


def cache_read_share(sessions: list[Tokens]) -> str:
    """The ledger's cache-read share of prompt tokens, computed here from the rows written."""
    read = sum(s[1] for s in sessions)
    prompt = sum(s[0] + s[1] + s[2] for s in sessions)
    return share_text(read, prompt)


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
        refresh_s=REFRESH_S,
    )


def share_row(app: CockpitApp) -> str:
    text = app.query_one(RatiosPane).render().plain
    return next(line for line in text.splitlines() if "Cache-read share" in line)


def ledger_state(app: CockpitApp) -> str:
    return app.ledger_snapshot.freshness.state if app.ledger_snapshot else "none"


def ledger_reason(app: CockpitApp) -> str:
    return app.ledger_snapshot.freshness.reason if app.ledger_snapshot else ""


def fresh_with(app: CockpitApp, text: str) -> bool:
    return ledger_state(app) == "ok" and text in share_row(app)


EMPTY = hashlib.sha256(b"").hexdigest()


def file_bytes(path: Path) -> dict[str, str]:
    """Hashes of the database and its WAL (the -shm is the readers' shared lock table).

    No WAL and an empty one are the same content: SQLite itself may create the empty file
    when it opens a WAL database, read-only or not.
    """
    hashes = {
        name.name: hashlib.sha256(name.read_bytes()).hexdigest()
        for name in (path, Path(f"{path}-wal"))
        if name.exists()
    }
    return {name: digest for name, digest in hashes.items() if digest != EMPTY}


def replace_atomically(path: Path, make: Any) -> None:
    """Write a new file beside `path` with `make(tmp)`, then rename it over `path`."""
    tmp = path.with_name(f".{path.name}.new")
    make(tmp)
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    tmp.replace(path)


def truncate_mid_page(path: Path) -> None:
    data = path.read_bytes()
    page = int.from_bytes(data[16:18], "big")
    path.write_bytes(data[: page * (len(data) // page // 2) + page // 2])


def corrupt_copy(good: Path) -> Any:
    def make(tmp: Path) -> None:
        data = bytearray(good.read_bytes())
        page = int.from_bytes(data[16:18], "big")
        for offset in range(page, len(data)):  # every page after the schema page
            data[offset] = (offset * 151 + 7) % 256
        tmp.write_bytes(bytes(data))

    return make


FAULTS: dict[str, tuple[Any, str]] = {
    "deleted": (lambda path, good: path.unlink(), "ledger not found"),
    "truncated mid-page": (lambda path, good: truncate_mid_page(path), "is truncated"),
    "corrupt pages": (
        lambda path, good: replace_atomically(path, corrupt_copy(good)),
        "corrupt",
    ),
    "empty file": (
        lambda path, good: replace_atomically(path, lambda tmp: tmp.write_bytes(b"")),
        "is empty (0 bytes): not a Hermes ledger",
    ),
    "not a database": (
        lambda path, good: replace_atomically(path, lambda tmp: tmp.write_text("hello\n" * 99)),
        "is not a SQLite database",
    ),
}
"""Fault -> (what to do to the file, the words the user reads)."""


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """The live ledger (WAL, as Hermes keeps it) and a pristine copy to restore it from."""
    path = make_ledger(tmp_path / "state.db", GOOD, wal=False)
    good = tmp_path / "good.db"
    shutil.copyfile(path, good)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    yield path, good


@pytest.mark.slow
async def test_each_fault_goes_stale_with_its_reason_and_recovers(
    ledger: tuple[Path, Path],
) -> None:
    path, good = ledger
    expected = cache_read_share(GOOD)
    pristine = file_bytes(path)
    async with running_app(ledger_config(path)) as (app, pilot):
        await wait_until(pilot, lambda: fresh_with(app, expected))
        await pilot.pause(2 * REFRESH_S)
        assert file_bytes(path) == pristine  # reading wrote nothing
        pane = app.query_one(RatiosPane)
        before = pane.render().plain
        for name, (fault, words) in FAULTS.items():
            bytes_before = file_bytes(path) if path.exists() else {}
            fault(path, good)
            damaged = file_bytes(path) if path.exists() else {}
            await wait_until(pilot, lambda: ledger_state(app) == "stale")
            assert words in ledger_reason(app), (name, ledger_reason(app))
            assert "\n" not in ledger_reason(app)
            assert pane.render().plain == before, name  # last good figures, kept
            assert pane.border_subtitle.startswith("ledger stale since "), name
            assert words in str(pane.tooltip), name
            await pilot.pause(REFRESH_S)  # a fault that lasts: the back-off grows
            assert (file_bytes(path) if path.exists() else {}) == damaged, name  # never written

            replace_atomically(path, lambda tmp: shutil.copyfile(good, tmp))
            restored = time.perf_counter()
            await wait_until(pilot, lambda: fresh_with(app, expected), timeout=30)
            MEASURED[name] = time.perf_counter() - restored  # printed, not a pass mark
            assert not pane.has_class("-stale")
            assert bytes_before == {} or file_bytes(path).keys() <= bytes_before.keys() | {
                "state.db"
            }
        assert "Traceback" not in screen_text(app)
        assert error_notices(app) == []


async def test_a_replaced_file_is_followed_to_its_new_figures(ledger: tuple[Path, Path]) -> None:
    path, _ = ledger
    async with running_app(ledger_config(path)) as (app, pilot):
        await wait_until(pilot, lambda: fresh_with(app, cache_read_share(GOOD)))
        replace_atomically(path, lambda tmp: make_ledger(tmp, OTHER))
        replaced = time.perf_counter()
        other = cache_read_share(OTHER)
        await wait_until(pilot, lambda: fresh_with(app, other))
        MEASURED["replaced by rename"] = time.perf_counter() - replaced
        assert cache_read_share(OTHER) != cache_read_share(GOOD)


async def test_an_old_schema_reads_with_its_gaps_named(hermes_v11: Path, tmp_path: Path) -> None:
    config = Config(source="<t>", ledgers=(LedgerConfig(str(hermes_v11)),), window="90d")
    config = Config(
        source="<t>", ledgers=config.ledgers, window="90d", windows=("90d",), refresh_s=REFRESH_S
    )
    before = file_bytes(hermes_v11)
    async with running_app(config) as (app, pilot):
        await wait_until(pilot, lambda: app.ledger_snapshot is not None)
        assert ledger_state(app) == "ok"
        totals = app.ledger_snapshot.totals  # type: ignore[union-attr]
        assert totals is not None and "session_model_usage" in " ".join(totals.missing.values())
        assert error_notices(app) == []
    assert file_bytes(hermes_v11) == before


@pytest.mark.slow
@pytest.mark.parametrize("wal", [True, False], ids=["wal", "rollback-journal"])
async def test_a_writer_holding_a_write_transaction(tmp_path: Path, wal: bool) -> None:
    """Hermes's WAL: readers never wait. A rollback journal's exclusive lock: stale, then back."""
    path = make_ledger(tmp_path / "state.db", GOOD, wal=wal)
    expected = cache_read_share(GOOD)
    hold_s = 5.0 if wal else 2.0
    holding = threading.Event()
    release = threading.Event()

    def writer() -> None:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("BEGIN IMMEDIATE" if wal else "BEGIN EXCLUSIVE")
        conn.execute("UPDATE sessions SET output_tokens = output_tokens + 1000")
        holding.set()
        release.wait(hold_s)
        conn.execute("ROLLBACK")
        conn.close()

    async with running_app(ledger_config(path)) as (app, pilot):
        await wait_until(pilot, lambda: fresh_with(app, expected))
        thread = threading.Thread(target=writer)
        thread.start()
        await asyncio.to_thread(holding.wait, 5)
        states: set[str] = set()
        started = time.perf_counter()
        while time.perf_counter() - started < hold_s:
            states.add(ledger_state(app))
            if ledger_state(app) == "stale":
                assert "locked" in ledger_reason(app)
                assert expected in share_row(app)
            await asyncio.sleep(0.05)
        release.set()
        await asyncio.to_thread(thread.join, 5)
        freed = time.perf_counter()
        await wait_until(pilot, lambda: fresh_with(app, expected), timeout=30)
        MEASURED[f"write lock held {hold_s:g} s ({'WAL' if wal else 'rollback'})"] = (
            time.perf_counter() - freed
        )
        if wal:
            assert states == {"ok"}  # the reader never waited on the writer
        else:
            assert "stale" in states


async def test_a_bad_row_is_skipped_and_every_refresh_stays_whole(tmp_path: Path) -> None:
    """An open session with text in a token column: skipped and counted, never a half read."""
    path = make_ledger(tmp_path / "state.db", GOOD)
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO sessions (id, source, model, started_at, input_tokens, cache_read_tokens, "
        "output_tokens, api_call_count) "
        "VALUES ('bad', 'cli', 'test-model', ?, 'lots', 99999, 5, 1)",
        (time.time() - 600,),
    )
    conn.commit()
    conn.close()
    expected = cache_read_share(GOOD)
    async with running_app(ledger_config(path)) as (app, pilot):
        await wait_until(pilot, lambda: fresh_with(app, expected))
        for _ in range(3):  # the refreshes after the first stay whole
            await pilot.pause(REFRESH_S)
            assert fresh_with(app, expected)
        totals = app.ledger_snapshot.totals  # type: ignore[union-attr]
        assert totals is not None and totals.total.sessions == len(GOOD)
        assert dict(totals.skipped) == {"sessions: a token count that is not a whole number": 1}
        assert "1 row skipped: sessions: a token count" in screen_text(app)  # said on the pane
        assert error_notices(app) == []


PERMISSION_SCRIPT = """
import asyncio, json, os, shutil, sys, time
from pathlib import Path
sys.path[:0] = {paths!r}
from tests.integration.test_faults_ledger import fresh_with, ledger_config, ledger_reason
from tests.integration.test_faults_ledger import ledger_state, cache_read_share
from tests.integration.test_faults_ledger import replace_atomically, share_row, GOOD
from tests.support.faultlane import running_app, wait_until
path = Path({path!r})
expected = cache_read_share(GOOD)
async def main():
    out = {{}}
    path.chmod(0)
    async with running_app(ledger_config(path)) as (app, pilot):
        await wait_until(pilot, lambda: ledger_state(app) == "missing")
        out["first"] = ledger_reason(app)
        path.chmod(0o644)
        back = time.perf_counter()
        await wait_until(pilot, lambda: fresh_with(app, expected), timeout=30)
        out["first_recovered_s"] = time.perf_counter() - back

        def unreadable_copy(tmp):
            shutil.copyfile(path, tmp)
            tmp.chmod(0)
        replace_atomically(path, unreadable_copy)
        await wait_until(pilot, lambda: ledger_state(app) == "stale")
        out["later"] = ledger_reason(app)
        out["kept"] = expected in share_row(app)
        path.chmod(0o644)
        back = time.perf_counter()
        await wait_until(pilot, lambda: fresh_with(app, expected), timeout=30)
        out["recovered_s"] = time.perf_counter() - back
    print(json.dumps(out))
asyncio.run(main())
"""


def test_a_permission_denied_file_says_so_and_recovers(tmp_path: Path) -> None:
    """In a process of its own; as root, without the capabilities that bypass file modes."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        prefix = [
            require_binary("setpriv"),
            "--bounding-set=-dac_override,-dac_read_search",
            "--inh-caps=-dac_override,-dac_read_search",
        ]
    path = make_ledger(tmp_path / "state.db", GOOD, wal=False)
    script = PERMISSION_SCRIPT.format(paths=[str(REPO)], path=str(path))
    done = subprocess.run(
        [*prefix, sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[:3000]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["first"].startswith("permission denied"), out
    assert out["later"].startswith("permission denied"), out
    assert out["kept"]
    MEASURED["permission denied from the start, then readable"] = out["first_recovered_s"]
    MEASURED["replaced by an unreadable file, then readable"] = out["recovered_s"]


@pytest.fixture(scope="module", autouse=True)
def report_measurements() -> Iterator[None]:
    yield
    for name, seconds in MEASURED.items():
        print(f"\nrecovery {name}: {seconds:.2f} s")

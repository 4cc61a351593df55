"""Bad ledgers, from the tailer to the running cockpit: real SQLite files, nothing written.

Each bad ledger gives the tailer one clear LedgerError line, writes nothing, and the tailer
recovers. Then each fault is made on the file while the app polls it every 0.5 s: the pane says
why, keeps the last good figures marked stale, recovers when the file is good again, and the
reader never writes (the database file and its WAL keep their bytes).
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
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cockpit.app.app import CockpitApp
from cockpit.config.schema import Config, LedgerConfig
from cockpit.core.model import SourceFailure
from cockpit.sources.ledger import LedgerError, LedgerTailer
from cockpit.widgets import RatiosPane
from tests.support.faultlane import error_notices, running_app, screen_text, share_text, wait_until
from tests.support.ledger_writer import GOOD, LEDGER_REFRESH_S, Tokens, ledger_config, make_ledger
from tests.support.repo import REPO, require_binary

# --- the tailer --------------------------------------------------------------------------------

NOW = 1794700800.0
DAY = 86400.0
NOBODY = 65534


def folder_state(folder: Path) -> dict[str, str]:
    """Every file in the folder with a hash of its bytes."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        for path in sorted(folder.iterdir())
    }


async def failure(path: Path) -> str:
    tailer = LedgerTailer(path)
    try:
        with pytest.raises(LedgerError) as info:
            await tailer.refresh(DAY, NOW)
    finally:
        await tailer.close()
    message = str(info.value)
    assert "\n" not in message and message
    error = info.value  # no chained SQLite traceback behind the one line
    # the poller's one failure type; a stat (LedgerTailer.probe) tells when to try again
    assert isinstance(error, SourceFailure) and error.unreachable and error.reason == message
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
    return message


def make_wal_without_shm(source: Path, target: Path) -> None:
    shutil.copyfile(source, target)
    conn = sqlite3.connect(target)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    assert target.read_bytes()[18] == 2  # the header says WAL


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder under /tmp that an unprivileged user can reach (pytest's tmp_path is 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="ledger-faults-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in folder.rglob("*"):
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(folder)


def as_unprivileged(check: Callable[[], str]) -> str:
    """Run `check` in a forked child with no privileges: root would bypass file modes."""
    if os.geteuid() != 0:
        return check()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop to nobody, run, report through the pipe
        code = 0
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            result = "ok:" + check()
        except BaseException as exc:
            result = f"error:{type(exc).__name__}: {exc}"
            code = 1
        os.write(write_end, result.encode())
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        output = pipe.read().decode()
    os.waitpid(pid, 0)
    assert output.startswith("ok:"), output
    return output[3:]


def refresh_message(path: Path) -> str:
    """The LedgerError message of one refresh, run on a fresh event loop."""

    async def run() -> str:
        tailer = LedgerTailer(path)
        try:
            await tailer.refresh(DAY, NOW)
        except LedgerError as exc:
            return str(exc)
        finally:
            await tailer.close()
        return "no error"

    return asyncio.run(run())


async def test_missing_file(tmp_path: Path) -> None:
    message = await failure(tmp_path / "nope" / "state.db")
    assert "not found" in message and "nope" in message
    assert not (tmp_path / "nope").exists()


async def test_folder_instead_of_file(tmp_path: Path) -> None:
    assert "folder" in await failure(tmp_path)


async def test_text_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_text("this is not a database\n" * 20)
    before = folder_state(tmp_path)
    assert "not a SQLite database" in await failure(path)
    assert folder_state(tmp_path) == before


async def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.touch()
    before = folder_state(tmp_path)
    assert "empty" in await failure(path)
    assert folder_state(tmp_path) == before


async def test_truncated_file(hermes_v22: Path) -> None:
    data = hermes_v22.read_bytes()
    hermes_v22.write_bytes(data[: len(data) // 2])
    before = folder_state(hermes_v22.parent)
    assert "truncated" in await failure(hermes_v22)
    assert folder_state(hermes_v22.parent) == before


async def test_corrupt_pages(hermes_v22: Path) -> None:
    data = bytearray(hermes_v22.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for offset in range(page, len(data)):  # everything after page 1 (the schema) is garbage
        data[offset] = (offset * 151 + 7) % 256
    hermes_v22.write_bytes(bytes(data))
    before = folder_state(hermes_v22.parent)
    message = await failure(hermes_v22)
    assert "corrupt" in message or "not a SQLite database" in message
    assert folder_state(hermes_v22.parent) == before


async def test_database_without_sessions(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    before = folder_state(tmp_path)
    assert "no sessions table" in await failure(path)
    assert folder_state(tmp_path) == before


async def test_a_sessions_table_of_another_shape_names_what_it_lacks(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, started_at REAL, ended_at REAL)")
    conn.execute("INSERT INTO sessions VALUES ('a', strftime('%s', 'now') - 60, NULL)")
    conn.commit()
    conn.close()
    before = folder_state(tmp_path)
    message = await failure(path)
    assert "has no source column: not a Hermes ledger" in message and "SQLite error" not in message
    assert folder_state(tmp_path) == before


async def test_locked_past_the_timeout_then_recovers(hermes_v22: Path) -> None:
    holder = sqlite3.connect(hermes_v22, isolation_level=None)  # rollback journal: locks block
    holder.execute("BEGIN EXCLUSIVE")
    try:
        message = await failure(hermes_v22)
        assert "locked" in message and str(hermes_v22) in message
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    tailer = LedgerTailer(hermes_v22)
    try:
        assert (await tailer.refresh(120 * DAY, NOW)).total.sessions > 0
    finally:
        await tailer.close()


def test_wal_ledger_in_a_read_only_folder_without_shm(hermes_v22: Path, shared_dir: Path) -> None:
    folder = shared_dir / "ro"
    folder.mkdir()
    path = folder / "state.db"
    make_wal_without_shm(hermes_v22, path)
    path.chmod(0o644)
    folder.chmod(0o555)
    before = folder_state(folder)

    def check() -> str:
        try:  # the situation is real: SQLite itself can't open it here
            sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("SELECT 1 FROM sessions")
        except sqlite3.OperationalError:
            pass
        else:
            return "sqlite opened it"
        return refresh_message(path)

    message = as_unprivileged(check)
    assert message.startswith("read-only folder:"), message
    assert "-shm" in message and str(folder) in message
    assert folder_state(folder) == before


def test_unreadable_file(hermes_v22: Path, shared_dir: Path) -> None:
    path = shared_dir / "state.db"
    shutil.copyfile(hermes_v22, path)
    path.chmod(0o000)
    before = folder_state(shared_dir)
    message = as_unprivileged(lambda: refresh_message(path))
    assert message.startswith("permission denied"), message
    assert folder_state(shared_dir) == before


async def test_recovers_when_a_bad_file_is_replaced_by_a_good_one(
    hermes_v22: Path, tmp_path: Path
) -> None:
    path = tmp_path / "live.db"
    path.write_text("garbage")
    tailer = LedgerTailer(path)
    try:
        with pytest.raises(LedgerError):
            await tailer.refresh(DAY, NOW)
        shutil.copyfile(hermes_v22, path)
        assert (await tailer.refresh(120 * DAY, NOW)).total.sessions > 0
        path.unlink()
        with pytest.raises(LedgerError, match="not found"):
            await tailer.refresh(120 * DAY, NOW)
    finally:
        await tailer.close()


def corrupt_page(path: Path, page: int) -> None:
    """Overwrite one page of the file with garbage."""
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    start = (page - 1) * size
    data[start : start + size] = bytes((offset * 151 + 7) % 256 for offset in range(size))
    path.write_bytes(bytes(data))


OPEN_READ = (
    "SELECT s.*, u.* FROM sessions AS s LEFT JOIN session_model_usage AS u "
    "ON u.session_id = s.id WHERE s.ended_at IS NULL"
)
ALL_USAGE = "SELECT * FROM session_model_usage"


def reads(path: Path, sql: str) -> bool:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            conn.execute(sql).fetchall()
    except sqlite3.DatabaseError:
        return False
    return True


async def test_a_failure_part_way_through_a_read_keeps_nothing_half_read(
    hermes_v22: Path, tmp_path: Path
) -> None:
    """A usage page of closed sessions only is corrupt: the open sessions read well, the
    window's usage does not. Every refresh fails with the reason; none shows a part as good."""
    with sqlite3.connect(hermes_v22) as conn:
        pages = [
            row[0]
            for row in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'session_model_usage' "
                "AND pagetype = 'leaf' ORDER BY pageno"
            )
        ]
    trial = tmp_path / "trial.db"
    for page in pages:  # the first page whose loss the open sessions don't see
        shutil.copyfile(hermes_v22, trial)
        corrupt_page(trial, page)
        if reads(trial, OPEN_READ) and not reads(trial, ALL_USAGE):
            break
    else:
        pytest.fail("no usage page holds closed sessions only")
    shutil.copyfile(trial, hermes_v22)
    tailer = LedgerTailer(hermes_v22)
    try:
        for _ in range(3):
            with pytest.raises(LedgerError, match="corrupt"):
                await tailer.refresh(120 * DAY, NOW)
    finally:
        await tailer.close()


# --- under the running cockpit -----------------------------------------------------------------

REFRESH_S = LEDGER_REFRESH_S
MEASURED: dict[str, float] = {}

OTHER: list[Tokens] = [(100, 800, 100, 40)]


def cache_read_share(sessions: list[Tokens]) -> str:
    """The ledger's cache-read share of prompt tokens, computed here from the rows written."""
    read = sum(s[1] for s in sessions)
    prompt = sum(s[0] + s[1] + s[2] for s in sessions)
    return share_text(read, prompt)


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
from tests.integration.test_ledger_faults import fresh_with, ledger_config, ledger_reason
from tests.integration.test_ledger_faults import ledger_state, cache_read_share
from tests.integration.test_ledger_faults import replace_atomically, share_row, GOOD
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

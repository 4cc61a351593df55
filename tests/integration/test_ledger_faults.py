"""Bad ledgers: each gives one clear LedgerError line, writes nothing, and the tailer recovers."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cockpit.core.model import SourceFailure
from cockpit.sources.ledger import LedgerError, LedgerTailer

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

"""Where Hermes keeps its ledgers, and what can be checked on a ledger file before SQLite opens it.

Every failure is a `LedgerError` whose text is one line for the user.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cockpit.core.model import SourceFailure

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


def file_identity(path: Path) -> tuple[object, ...]:
    """What tells one file from another: its device and inode, or (while it does not exist)
    its resolved path, so a symlink, `..` or a profile name naming it count once."""
    try:
        facts = path.stat()
    except OSError:
        return ("path", str(path.resolve()))
    return ("inode", facts.st_dev, facts.st_ino)


def same_files(paths: Sequence[Path]) -> list[list[int]]:
    """The indices of `paths` grouped by the file each names, in the order first named."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for index, path in enumerate(paths):
        groups.setdefault(file_identity(path), []).append(index)
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
    if not wal or not Path(f"{path}-wal").exists():  # a checkpoint may be extending the file
        _check_length(path, header, stat.st_size)
    # `mode=ro` on a WAL database needs its -shm file, or a folder where it can be made
    if wal and not Path(f"{path}-shm").exists() and not os.access(path.parent, os.W_OK | os.X_OK):
        raise LedgerError(_read_only_folder(path))
    return FileFacts(stat.st_dev, stat.st_ino, stat.st_size, wal)


def _check_length(path: Path, header: bytes, size: int) -> None:
    """The header's page count (when valid) times the page size must fit in the file."""
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96] and pages > 0
    if header_valid and size < pages * page_size:
        raise LedgerError(f"{path} is truncated: {size} bytes, its header says {pages * page_size}")


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

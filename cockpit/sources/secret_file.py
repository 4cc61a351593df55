"""Secret files (a bearer token, a password): read with a size cap, regular files only,
decoded BOM-aware, and read again when the file changes (a rotated token).

A secret is the file's first line, stripped. Every failure is a `SecretFileError` whose text
is one line naming the file, never its content.
"""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

MAX_SECRET_BYTES = 1 << 20
"""The largest secret file read (1 MiB): more than any HTTP server takes in a header."""

_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
"""Byte-order marks and their encodings (PowerShell saves UTF-16 LE with a BOM)."""


class SecretFileError(ValueError):
    """A secret file that can't be used; `str()` is one line naming the file."""


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def read_bounded(path: Path, limit: int = MAX_SECRET_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; a FIFO or a device is refused
    without blocking or reading it (opened non-blocking, checked with fstat)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise SecretFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise SecretFileError(f"{path} is {kind_of(mode)}, not a regular file")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise SecretFileError(f"{path} is over {limit // 1024} KiB: not a secret file")
        return b"".join(chunks)
    except OSError as exc:
        raise SecretFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def decode_secret(path: Path, data: bytes) -> str:
    """The text of a secret file: UTF-8, or UTF-8/UTF-16 LE/BE after their byte-order mark."""
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), "utf-8")
    if encoding.startswith("utf-16"):
        data = data[2:]
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        raise SecretFileError(
            f"{path} is not UTF-8 text (UTF-16 needs its byte-order mark): save it as UTF-8"
        ) from None


def first_line_secret(path: Path, text: str) -> str:
    """The secret: the text's first line, stripped; refused when empty or not printable."""
    lines = text.splitlines()
    secret = lines[0].strip() if lines else ""
    if not secret:
        raise SecretFileError(f"{path} is empty")
    if not secret.isprintable():
        raise SecretFileError(
            f"{path} has control characters in its first line (a binary file? UTF-16 without "
            "its byte-order mark?)"
        )
    return secret


def read_secret_file(path: str | Path) -> str:
    """The secret a file holds (see the module's docstring), or SecretFileError."""
    where = Path(path).expanduser()
    return first_line_secret(where, decode_secret(where, read_bounded(where)))


class SecretFile:
    """A secret file, read again when it changes: its identity, size or mtime differ from the
    last read (a Kubernetes projected token rotates by swapping a symlink), or after `forget`
    (the server refused the secret)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._seen: tuple[int, int, int, int] | None = None
        self._secret = ""
        self.reads = 0
        """How often the file was read (not counting the stat each `current` does)."""

    def current(self) -> str:
        """The secret as the file holds it now: one stat, a read only when it changed."""
        try:
            now = self.path.stat()
        except OSError as exc:
            raise SecretFileError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        stamp = (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns)
        if stamp != self._seen:
            self._secret = read_secret_file(self.path)
            self.reads += 1
            self._seen = stamp
        return self._secret

    def forget(self) -> None:
        """Read the file again at the next `current`."""
        self._seen = None

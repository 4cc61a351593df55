"""Small text files from outside (a config, a token) read without trusting what the path is:
a size cap, regular files only, and a decode that says what is wrong."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


class UnreadableFile(Exception):
    """Why a small text file can't be read, in one line that never quotes its content."""


def read_small_text(path: Path, limit: int) -> str:
    """The text of the regular file at `path` (symlinks followed), at most `limit` bytes:
    UTF-8, a UTF-8 byte-order mark dropped, or UTF-16 with its byte-order mark (what Windows
    tools save). UnreadableFile saying why not; nothing that isn't a regular file is read."""
    try:
        _refuse_special(path.stat().st_mode)
        # O_NONBLOCK: should the path become a FIFO after the stat, opening it can't block
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            _refuse_special(os.fstat(fd).st_mode)
            data = _read_at_most(fd, limit)
        finally:
            os.close(fd)
    except OSError as exc:
        raise UnreadableFile(exc.strerror or str(exc)) from None
    return decode_text(data)


def _refuse_special(mode: int) -> None:
    for test, kind in _KINDS:
        if test(mode):
            raise UnreadableFile(f"is {kind}, not a regular file")


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(1 << 16, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    cap = f"{limit // 1024 // 1024} MiB" if limit >= 1 << 20 else f"{limit // 1024} KiB"
    raise UnreadableFile(f"is larger than {cap}, the cap for this file")


def decode_text(data: bytes) -> str:
    """`data` as text (see `read_small_text`); UnreadableFile for bytes that aren't text."""
    if data.startswith(_UTF16_BOMS):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise UnreadableFile("starts as UTF-16 but is not UTF-16 text") from None
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = bom + exc.start
        raise UnreadableFile(
            f"is not UTF-8 text (byte 0x{data[at]:02x} at offset {at}): save it as UTF-8"
        ) from None
    if "\x00" in text:
        raise UnreadableFile("holds NUL bytes: not a text file (UTF-16 without a byte-order mark?)")
    return text

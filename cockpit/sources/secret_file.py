"""Secret files (a bearer token, a password): read with a size cap, regular files only,
decoded BOM-aware, and read again when the file changes (a rotated token).

A secret is the file's first line, stripped. Every failure is a `SecretFileError` whose text
is one line naming the file, never its content.
"""

from __future__ import annotations

from pathlib import Path

from cockpit.sources.small_files import UnreadableFile, read_small_text

MAX_SECRET_BYTES = 1 << 20
"""The largest secret file read (1 MiB): more than any HTTP server takes in a header."""


class SecretFileError(ValueError):
    """A secret file that can't be used; `str()` is one line naming the file."""


def read_secret_file(path: str | Path) -> str:
    """The secret a file holds (see the module's docstring), or SecretFileError."""
    where = Path(path).expanduser()
    try:
        lines = read_small_text(where, MAX_SECRET_BYTES).splitlines()
    except UnreadableFile as exc:
        raise SecretFileError(f"{where} {exc}") from None
    secret = lines[0].strip() if lines else ""
    if not secret:
        raise SecretFileError(f"{where} is empty")
    if not secret.isprintable():
        raise SecretFileError(
            f"{where} has control characters in its first line (a binary file? UTF-16 without "
            "its byte-order mark?)"
        )
    return secret


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

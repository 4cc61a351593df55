"""The headless commands' output streams: the symbols their encoding can carry, and the end of a
run whose output can't be written (a reader gone, a full disk)."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Iterator

from cockpit.app.lifecycle import discard_output

PLAIN_SYMBOLS = {
    "≤": "<=", "≥": ">=", "—": "--", "–": "-", "−": "-", "…": "...", "×": "x", "÷": "/",
    "·": "*", "±": "+/-", "µ": "u", "²": "^2", "ᵀ": "^T", "∞": "inf", "§": "S", "“": '"',
    "”": '"', "→": "->", "←": "<-", "↑": "^", "↓": "v", "▲": "^", "▼": "v", "✓": "ok",
    "│": "|", "█": "#", "▓": "#", "▒": "=", "░": ".", "▚": "%", "▁": "_", "▂": "_", "▃": "-",
    "▄": "-", "▅": "=", "▆": "=", "▇": "#", "▏": "|", "▎": "|", "▍": "|", "▌": "|", "▋": "#",
    "▊": "#", "▉": "#", "␡": "^?", "�": "?",
    **{chr(0x2400 + code): "^" + chr(0x40 + code) for code in range(0x20)},  # ␛ as ^[
}  # fmt: skip
"""The project's symbols, each as ASCII for an output that can't carry them (control pictures
in caret notation: ESC as `^[`)."""
_PLAIN = str.maketrans(PLAIN_SYMBOLS)

OUTPUT_GONE = 128 + 13
"""The exit code when the reader closed the output (`| head`): 128 + SIGPIPE, what the shell
reports for a tool that SIGPIPE ended (`cat`, `grep`), so `set -o pipefail` sees the same."""
OUTPUT_FAILED = 74
"""The exit code when the output can't be written (a full disk): sysexits' EX_IOERR; 1 is
for a source that failed and 2 for a wrong config or flag."""
_WRITE_FAILURES = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)


def carries_symbols(encoding: str | None) -> bool:
    """Whether text in `encoding` holds every symbol the project writes (None: a text buffer,
    which holds anything)."""
    if encoding is None:
        return True
    try:
        "".join(PLAIN_SYMBOLS).encode(encoding)
    except (UnicodeError, LookupError):
        return False
    return True


class PlainText(io.TextIOWrapper):
    """A text stream writing the project's symbols as ASCII, anything else it can't carry as a
    `\\u` escape."""

    def write(self, text: str) -> int:
        return super().write(text.translate(_PLAIN))


@contextlib.contextmanager
def symbols_that_fit() -> Iterator[None]:
    """sys.stdout and sys.stderr, for the while, writing only what their encoding can carry:
    the symbols as ASCII when it can't carry them all (chosen once, here), never an encoding
    error. Streams with no byte buffer beneath (a StringIO) are left alone."""
    swapped: list[tuple[str, io.TextIOWrapper, PlainText]] = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, io.TextIOWrapper) and not carries_symbols(stream.encoding):
            stream.flush()
            plain = PlainText(
                stream.buffer,
                encoding=stream.encoding,
                errors="backslashreplace",
                line_buffering=stream.line_buffering,
                write_through=stream.write_through,
            )
            setattr(sys, name, plain)
            swapped.append((name, stream, plain))
    try:
        yield
    finally:
        for name, stream, plain in reversed(swapped):
            setattr(sys, name, stream)
            with contextlib.suppress(OSError):
                plain.flush()
            with contextlib.suppress(OSError, ValueError):
                plain.detach()  # the buffer stays the original stream's, open


def output_failed(error: OSError) -> int:
    """The end of a run whose output write failed with `error` (raised again when it's not a
    failed write): quiet for a closed pipe, one line for a full disk; the exit code."""
    if isinstance(error, BrokenPipeError):
        discard_output()
        return OUTPUT_GONE
    if error.errno not in _WRITE_FAILURES or error.filename is not None:
        raise error
    reason = os.strerror(error.errno)
    with contextlib.suppress(OSError):
        print(
            f"cockpit: cannot write the output: {reason[:1].lower()}{reason[1:]}", file=sys.stderr
        )
    discard_output()
    return OUTPUT_FAILED


def unfit_terminal() -> str | None:
    """Why this terminal can't show the full-screen cockpit (None when it can): a `TERM=dumb`
    one moves no cursor, and through an encoding that can't carry the lines and symbols every
    one becomes a `\\u` escape (Textual has no ASCII mode to fall back on)."""
    if os.environ.get("TERM") == "dumb":
        return ("TERM=dumb: this terminal can't show the full-screen cockpit; `cockpit report` "
                "prints its figures as text")  # fmt: skip
    stream = sys.__stderr__  # what Textual writes the screen through
    if stream is not None and not carries_symbols(stream.encoding):
        return (f"the terminal's encoding ({stream.encoding}) can't carry the cockpit's lines "
                "and symbols: run it in a UTF-8 locale (LANG=C.UTF-8), or `cockpit report` "
                "for text")  # fmt: skip
    return None

"""Text from outside (names, labels, server messages, paths) made safe to print: no I/O."""

from __future__ import annotations

_PICTURES = {
    **{code: chr(0x2400 + code) for code in range(0x20)},  # ␀ … ␟: ␛ for ESC, ␊ for a newline
    0x7F: "␡",
    **{code: "�" for code in range(0x80, 0xA0)},  # C1 controls, CSI and OSC among them
}


def visible(text: str) -> str:
    """`text` with its control characters shown as symbols (ESC as ␛): a name or a reason may
    not move the cursor, set a title, write the clipboard or start an escape sequence."""
    return text.translate(_PICTURES)


def first_line(text: str) -> str:
    """The first line of `text`, stripped ('' when there is none)."""
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""

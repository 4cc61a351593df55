"""Text from outside (names, labels, server messages, paths) made safe to print: no I/O."""

from __future__ import annotations

_PICTURES = {
    **{code: chr(0x2400 + code) for code in range(0x20)},  # ␀ … ␟: ␛ for ESC, ␊ for a newline
    0x7F: "␡",
    **{code: "�" for code in range(0x80, 0xA0)},  # C1 controls, CSI and OSC among them
}
_PICTURES_BUT_NEWLINES = {code: shown for code, shown in _PICTURES.items() if code != 0x0A}


def visible(text: str, *, newlines: bool = False) -> str:
    """`text` with its control characters shown as symbols (ESC as ␛): a name or a reason may
    not move the cursor, set a title, write the clipboard or start an escape sequence. With
    `newlines`, line breaks stay (for whole documents, whose fields were made visible first)."""
    return text.translate(_PICTURES_BUT_NEWLINES if newlines else _PICTURES)

"""Text from outside (names, labels, server messages, paths) made safe to print: no I/O."""

from __future__ import annotations

import unicodedata

_PICTURES = {
    **{code: chr(0x2400 + code) for code in range(0x20)},  # ␀ … ␟: ␛ for ESC, ␊ for a newline
    0x7F: "␡",
    **{code: "�" for code in range(0x80, 0xA0)},  # C1 controls, CSI and OSC among them
}

_ESCAPED_CATEGORIES = frozenset({"Cf", "Cs", "Zl", "Zp"})
"""Format characters (zero-width spaces and joiners, bidi embeddings, overrides and
isolates, the BOM, tag characters), lone surrogates, line and paragraph separators."""
_INVISIBLE_MARKS = frozenset(
    (0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0,
     *range(0x180B, 0x1810), *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0))
)  # fmt: skip
"""Default-ignorable characters outside those categories: the combining grapheme joiner,
Hangul fillers, Mongolian and other variation selectors. They draw nothing."""


class _Pictures(dict[int, str]):
    """`str.translate`'s table, filled in per character the first time it is seen."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        if code in _INVISIBLE_MARKS or unicodedata.category(char) in _ESCAPED_CATEGORIES:
            shown = f"<U+{code:04X}>"
        else:
            shown = char
        self[code] = shown
        return shown


_TABLE = _Pictures(_PICTURES)


def visible(text: str) -> str:
    """`text` with its control characters shown as symbols (ESC as ␛), so it can't move the
    cursor or start an escape sequence, and characters that draw nothing or reorder what
    follows (`_ESCAPED_CATEGORIES`, `_INVISIBLE_MARKS`) as `<U+XXXX>`, so two names that differ
    only by one look different. Combining accents stay: an accent is visible where it lands."""
    if text.isascii() and text.isprintable():
        return text
    return text.translate(_TABLE)


def first_line(text: str) -> str:
    """The first line of `text`, stripped ('' when there is none)."""
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""

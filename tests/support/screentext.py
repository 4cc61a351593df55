"""The screen of a running app as plain text, read from Textual's public SVG screenshot."""

from __future__ import annotations

import html
import re

from rich.cells import cell_len
from textual.app import App

_TEXT = re.compile(
    r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="([\d.]+)"'
    r' clip-path="url\(#[\w-]+-line-(\d+)\)">([^<]*)</text>'
)


def screen_text(app: App[object]) -> str:
    """Every row of the screen as the terminal shows it (trailing blanks dropped)."""
    return svg_text(app.export_screenshot())


def svg_text(svg: str) -> str:
    """The rows of a Textual SVG screenshot as text."""
    pieces = [
        (int(line), float(x), float(length), html.unescape(text).replace("\xa0", " "))
        for x, length, line, text in _TEXT.findall(svg)
    ]
    widths = [length / cell_len(text) for _, _, length, text in pieces if cell_len(text)]
    cell = min(widths, default=1.0)
    rows: dict[int, list[str]] = {}
    for line, x, _, text in pieces:
        row = rows.setdefault(line, [])
        column = round(x / cell)
        for char in text:  # a wide character takes two cells: keep the columns in step
            end = column + max(cell_len(char), 1)
            row.extend(" " * (end - len(row)))
            row[column:end] = [char] + [""] * (end - column - 1)
            column = end
    last = max(rows, default=-1)
    return "\n".join("".join(rows.get(y, [])).rstrip() for y in range(last + 1))

"""The scan that proves no product module outside the engine adapters names an engine: the
strings a module decides on, and its non-prose strings, against every adapter's words."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from cockpit.engines import engines
from tests.support.repo import REPO

SCANNED = ("cockpit", "widgets", "themes")
ALLOWED = ("cockpit/engines/", "cockpit/demo/")
"""The adapters themselves, and the simulated engines of the demo."""


def engine_words() -> re.Pattern[str]:
    """An engine's name or its metrics' stem as a word (`sglang`, `vllm-legacy`, `vLLM`)."""
    words = {e.name for e in engines()} | {e.prefix.rstrip(":_") for e in engines()}
    alternatives = "|".join(sorted(map(re.escape, words), key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9])({alternatives})(?![A-Za-z0-9])", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string statements (docstrings, attribute notes): prose, not code."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _strings(node: ast.AST | None) -> Iterator[ast.Constant]:
    """The string constants `node` is, or holds as a tuple, list or set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from _strings(element)


def _decided_on(tree: ast.AST) -> Iterator[ast.Constant]:
    """Strings in the places where code tells kinds apart: compared (`==`, `in`), used as a
    key (`x["k"]`, `{"k": v}`, `.get("k")`), matched (`.startswith("k")`), or listed."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                yield from _strings(operand)
        elif isinstance(node, ast.Subscript):
            yield from _strings(node.slice)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                yield from _strings(key)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("get", "startswith", "endswith", "removeprefix", "pop"):
                for argument in node.args[:1]:
                    yield from _strings(argument)
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            yield from _strings(node)


def violations(source: str, filename: str) -> list[str]:
    """`file:line: text` for each string that decides on an engine, or that names one and is
    no prose (no space in it: a metric name, a pattern, an id)."""
    tree = ast.parse(source, filename=filename)
    prose, words = _docstrings(tree), engine_words()
    found: dict[tuple[int, int], str] = {}
    for node in _decided_on(tree):
        if words.search(node.value):
            found[(node.lineno, node.col_offset)] = node.value
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) not in prose and words.search(node.value) and " " not in node.value:
            found[(node.lineno, node.col_offset)] = node.value
    return [f"{filename}:{line}: {text!r}" for (line, _), text in sorted(found.items())]


def product_modules() -> Iterator[Path]:
    for root in SCANNED:
        for path in sorted((REPO / root).rglob("*.py")):
            if not path.relative_to(REPO).as_posix().startswith(ALLOWED):
                yield path

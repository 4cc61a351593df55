"""Engines are told apart only inside `cockpit.engines`: no other product module compares a
string with an engine's name, keys on one, lists them, or names an engine's metric."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

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


def test_no_module_outside_the_adapters_names_an_engine() -> None:
    paths = list(product_modules())
    assert len(paths) > 40 and not any("engines" in p.parts for p in paths)
    found = [v for p in paths for v in violations(p.read_text(), str(p.relative_to(REPO)))]
    assert found == []


@pytest.mark.parametrize(
    "line",
    [
        'if dialect == "sglang":\n    pass',
        'kind = "vllm-legacy" if old else "vllm"\nok = kind != "vllm"',
        'if dialect in ("vllm", "vllm-legacy"):\n    pass',
        'notes = {"sglang": {}}',
        'notes = table["sglang"]',
        'notes = table.get("vllm-legacy", {})',
        'if name.startswith(("vllm:", "sglang:")):\n    pass',
        'metric = "sglang:num_running_reqs"',
        'escaped = "vllm_prompt_tokens_total"',
        """ENGINE_NAMES = '{__name__=~"(vllm|sglang)[:_].+"}'""",
        'DIALECTS = ("vllm", "sglang")',
        "Engine = Literal['auto', 'vllm']",
        'if "SGLang" in title:\n    pass',
    ],
)
def test_the_check_sees_a_module_that_names_an_engine(line: str) -> None:
    assert violations(line, "sample.py"), line


def test_prose_about_engines_is_no_violation() -> None:
    source = (
        '"""vLLM observes one ITL per step, SGLang one per token."""\n'
        "GLOSSARY = {'itl': 'in vLLM the step, in SGLang the token'}\n"
        "def f(dialect: str) -> str:\n"
        '    """Read as `vllm:` names or `sglang:` ones."""\n'
        "    return dialect\n"
    )
    assert violations(source, "sample.py") == []

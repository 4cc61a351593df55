"""YAML read node by node, so every value keeps its line: the config's error messages name
file:line: key. Pure: the caller reads the file."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any, NoReturn

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cockpit.core.text import visible


class ConfigError(Exception):
    """A config problem, said in one line: `file:line: key: what was expected`."""

    def __init__(self, source: str, line: int | None, key: str, problem: str) -> None:
        self.source, self.line, self.key, self.problem = source, line, key, problem
        where = f"{source}:{line}" if line is not None else source
        super().__init__(visible(f"{where}: {key}: {problem}" if key else f"{where}: {problem}"))


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's loader where PyYAML was built with it: ten times faster on a big config."""
_E_NOTATION = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


class YamlReader:
    """Walks the YAML node tree so every value keeps its line for messages."""

    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self._text = text

    def fail(self, node: Node | None, key: str, problem: str) -> NoReturn:
        line = node.start_mark.line + 1 if node is not None else None
        raise ConfigError(self.source, line, key, problem)

    def root(self) -> MappingNode | None:
        try:
            self._loader = _LOADER(self._text)
            try:
                node = self._loader.get_single_node()
            finally:
                self._loader.dispose()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = (exc.problem or exc.context or "invalid YAML").strip()
            raise ConfigError(self.source, line, "", f"YAML syntax error: {problem}") from None
        except yaml.reader.ReaderError as exc:  # a character YAML refuses (a control character)
            line = self._text.count("\n", 0, max(exc.position, 0)) + 1
            problem = f"YAML syntax error: unacceptable character #x{exc.character:04x}"
            raise ConfigError(self.source, line, "", problem) from None
        except yaml.YAMLError as exc:
            raise ConfigError(self.source, None, "", f"YAML syntax error: {exc}") from None
        except RecursionError:
            problem = "YAML syntax error: exceeded maximum nesting depth"
            raise ConfigError(self.source, None, "", problem) from None
        if node is None:
            return None
        if not isinstance(node, MappingNode):
            self.fail(node, "", "expected a mapping of options at the top level")
        return node

    def scalar(self, node: Node, key: str) -> Any:
        if not isinstance(node, ScalarNode):
            self.fail(node, key, "expected a single value, not a list or mapping")
        try:
            return self._loader.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as exc:  # an unknown tag, say: its problem, not its caret
            self.fail(node, key, f"unreadable value ({exc.problem or exc.context})")
        except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer of 5,000 digits
            self.fail(node, key, f"unreadable value ({str(exc)[:80]})")

    def mapping(
        self, node: Node, key: str, allowed: tuple[str, ...]
    ) -> dict[str, tuple[Node, Node]]:
        """`{name: (key node, value node)}`, rejecting unknown and repeated keys."""
        if not isinstance(node, MappingNode):
            self.fail(node, key, f"expected a mapping with keys: {', '.join(allowed)}")
        items: dict[str, tuple[Node, Node]] = {}
        for key_node, value_node in node.value:
            name = self.scalar(key_node, key or "key")
            path = f"{key}.{name}" if key else str(name)
            if not isinstance(name, str):
                self.fail(key_node, path, "expected a text key")
            if name not in allowed:
                expected = f" (expected one of: {', '.join(allowed)})"
                self.fail(key_node, path, f"unknown option{did_you_mean(name, allowed, expected)}")
            if name in items:
                self.fail(key_node, path, "given twice")
            items[name] = (key_node, value_node)
        return items

    def sequence(self, node: Node, key: str) -> list[Node]:
        if not isinstance(node, SequenceNode):
            self.fail(node, key, "expected a list")
        return list(node.value)


def did_you_mean(name: str, allowed: Sequence[str], otherwise: str = "") -> str:
    """` (did you mean 'x'?)` when an allowed name is near the mistyped one, else `otherwise`."""
    near = difflib.get_close_matches(name, allowed, n=1)
    return f" (did you mean {near[0]!r}?)" if near else otherwise


def number(
    reader: YamlReader, node: Node, key: str, most: float, *, least: float = 0.0, zero: bool = False
) -> float:
    """A finite number from `least` (or above 0, or 0 itself with `zero`) to `most`."""
    value = e_notation(reader.scalar(node, key))
    if isinstance(value, bool) or not isinstance(value, int | float):
        reader.fail(node, key, f"expected a number, got {shown(value)}")
    if not (least <= value <= most and (zero or value > 0)):  # NaN is in no range
        lowest = f"from {least:g} to" if least else "up to"
        kind = "zero or more" if zero else "a positive number"
        reader.fail(node, key, f"expected {kind} {lowest} {most:g}, got {shown(value)}")
    return float(value)


def shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:40]}… ({len(text)} characters)"


def e_notation(value: Any) -> Any:
    """YAML 1.1 reads `8.9e14` (no exponent sign) as text; people mean the number."""
    if isinstance(value, str) and _E_NOTATION.fullmatch(value.strip()):
        try:
            return float(value)
        except ValueError:  # strip() drops \x1c-\x1f, which float() refuses
            return value
    return value


def integer(reader: YamlReader, node: Node, key: str, most: int) -> int:
    value = reader.scalar(node, key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        reader.fail(node, key, f"expected a whole number from 1 to {most:,}, got {shown(value)}")
    return value


def text(reader: YamlReader, node: Node, key: str) -> str:
    value = reader.scalar(node, key)
    if not isinstance(value, str) or not value.strip():
        reader.fail(node, key, f"expected text, got {value!r}")
    return value.strip()


def boolean(reader: YamlReader, node: Node, key: str) -> bool:
    value = reader.scalar(node, key)
    if not isinstance(value, bool):
        reader.fail(node, key, f"expected true or false, got {value!r}")
    return value


def choice(reader: YamlReader, node: Node, key: str, choices: tuple[str, ...]) -> str:
    value = str(reader.scalar(node, key)).strip()
    if value not in choices:
        hint = did_you_mean(value, choices)
        reader.fail(node, key, f"expected one of {', '.join(choices)}, got {value!r}{hint}")
    return value

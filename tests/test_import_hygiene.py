"""The core never imports Textual: only the app (and its parts), its screens, the panes and the
themes do; and nothing uses a private part of Textual, plotext or rich."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import textual
from textual.app import App
from textual.screen import Screen
from textual.widget import Widget

REPO = Path(__file__).resolve().parent.parent
CORE = REPO / "cockpit"
APP_MODULES = ("app.py", "app_panes.py", "app_polling.py", "app_fleet.py", "screens.py")
"""The app, its parts (each a base of the app's class) and its screens."""
ALLOWED = {CORE / name for name in APP_MODULES}
UI_PACKAGES = {"widgets", "themes"}
"""cockpit.widgets and cockpit.themes (widgets/, themes/ through package-dir) are UI."""


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def textual_importers() -> list[str]:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        if path in ALLOWED or path.relative_to(CORE).parts[0] in UI_PACKAGES:
            continue
        modules = imported_modules(path)
        if any(m == "textual" or m.startswith(("textual.", "textual_plotext")) for m in modules):
            offenders.append(str(path.relative_to(REPO)))
    return offenders


def test_no_core_module_imports_textual() -> None:
    assert textual_importers() == []


def test_the_check_sees_a_textual_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from textual.widget import Widget\nimport os\n", encoding="utf-8")
    assert "textual.widget" in imported_modules(sample)


def core_modules() -> list[str]:
    names = ["cockpit.figures", "cockpit.ledger_figures", "cockpit.engine_figures",
             "cockpit.dialects", "cockpit.decode_pace", "cockpit.promql", "cockpit.text",
             "cockpit.yaml_values",
             "cockpit.roofline", "cockpit.config", "cockpit.model",
             "cockpit.poller", "cockpit.snapshot", "cockpit.timeutil", "cockpit.lifecycle",
             "cockpit.cli"]  # fmt: skip
    for path in sorted((CORE / "sources").glob("*.py")):
        names.append(
            "cockpit.sources" if path.stem == "__init__" else f"cockpit.sources.{path.stem}"
        )
    return names


def test_importing_the_core_leaves_textual_unloaded() -> None:
    modules = core_modules()
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "ui = ('textual', 'textual_plotext')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ui))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == "[]"


def test_importing_the_app_does_load_textual() -> None:
    code = "import sys, cockpit.app; print('textual' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == "True"


# --- no private API of a dependency ---------------------------------------------------------

PACKAGE_FILES = sorted(
    path for folder in ("cockpit", "widgets", "themes") for path in (REPO / folder).rglob("*.py")
)
PRIVATE_IMPORT = re.compile(
    r"^\s*(from\s+(textual|plotext|rich|textual_plotext)(\.\w+)*\._\w*\s+import"
    r"|import\s+(textual|plotext|rich|textual_plotext)(\.\w+)*\._)",
    re.MULTILINE,
)
PRIVATE_ACCESS = re.compile(r"\b(plt|self\.app|self\.screen|app|screen)\.(_[a-z]\w*)")
"""An underscore name read off plotext, the app or a screen (our own live on our classes)."""


def textual_private_names() -> set[str]:
    """The private attributes of Textual's App, Screen and Widget (and what they inherit):
    named in a widget or app of ours, they would read or replace Textual's own."""
    root = Path(textual.__file__).parent
    names: set[str] = set()
    for name in ("app.py", "screen.py", "widget.py", "dom.py", "message_pump.py", "driver.py"):
        names.update(re.findall(r"self\.(_[a-z]\w*)", (root / name).read_text(encoding="utf-8")))
    for cls in (App, Screen, Widget):
        names.update(name for name in dir(cls) if re.fullmatch(r"_[a-z]\w*", name))
    return names


def private_uses(path: Path, textual_names: set[str]) -> list[str]:
    """`file:line: what` for each private import or private attribute of a dependency."""
    text = path.read_text(encoding="utf-8")
    ui = re.search(r"^\s*(from|import)\s+(textual|textual_plotext|plotext)\b", text, re.MULTILINE)
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if PRIVATE_IMPORT.match(line):
            found.append(f"{path.name}:{number}: {PRIVATE_IMPORT.match(line).group(0).strip()}")  # type: ignore[union-attr]
            continue
        names = {match.group(2) for match in PRIVATE_ACCESS.finditer(line)}
        if ui and not re.match(r"\s*(from|import)\s", line):
            names.update(name for name in re.findall(r"\.(_[a-z]\w*)\b", line)
                         if name in textual_names)  # fmt: skip
        found.extend(f"{path.name}:{number}: .{name}" for name in sorted(names))
    return found


def test_no_private_api_of_textual_plotext_or_rich() -> None:
    names = textual_private_names()
    uses = [use for path in PACKAGE_FILES for use in private_uses(path, names)]
    assert uses == []


def test_the_private_api_check_sees_each_kind(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from textual._xterm_parser import XTermParser\n"
        "import plotext._utility\n"
        "from rich._loop import loop_last\n"
        "from textual.widget import Widget\n"
        "class Pane(Widget):\n"
        "    def f(self, plt):\n"
        "        self._dirty_regions.clear()\n"
        "        self._tooltip = None\n"
        "        self.screen._compositor\n"
        "        plt._figure\n"
        "        self._own_name = 1\n",
        encoding="utf-8",
    )
    uses = private_uses(sample, textual_private_names())
    assert [use.split(": ", 1)[1] for use in uses] == [
        "from textual._xterm_parser import",
        "import plotext._",
        "from rich._loop import",
        "._dirty_regions",
        "._tooltip",
        "._compositor",
        "._figure",
    ]

"""The layers hold: no module imports another in a circle (lazy and TYPE_CHECKING imports
count), nothing outside `cockpit.app`, the panes and the themes imports Textual, and nothing uses
a private part of Textual, plotext or rich."""

from __future__ import annotations

import ast
import graphlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import textual
from textual.app import App
from textual.screen import Screen
from textual.widget import Widget

REPO = Path(__file__).resolve().parent.parent.parent
PACKAGE_DIRS = {"cockpit": REPO / "cockpit", "cockpit.widgets": REPO / "widgets",
                "cockpit.themes": REPO / "themes"}  # fmt: skip
"""Each installed package and its folder (widgets/ and themes/ install through package-dir)."""
UI_PACKAGES = ("cockpit.app", "cockpit.widgets", "cockpit.themes")
"""The only packages that may import Textual."""
STARTS_WITHOUT_TEXTUAL = ("cockpit.app.lifecycle",)
"""Of the app package, what the command line imports before it decides to draw anything."""


def package_modules(dirs: dict[str, Path]) -> dict[str, Path]:
    """Module name -> file, for every module under each package folder."""
    found: dict[str, Path] = {}
    for package, folder in dirs.items():
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported_names(path: Path, module: str) -> Iterator[str]:
    """Every name an import in the file can load, at any depth of the file (lazy imports and
    `if TYPE_CHECKING:` ones too), relative imports made absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (a package importing its own parts is no edge)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for name in imported_names(path, module):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module and not name.startswith(module + "."):
                targets.add(name)
        graph[module] = targets
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of imports, empty when there is none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        return list(error.args[1])
    return []


def test_no_module_imports_in_a_circle() -> None:
    assert import_cycle(import_graph(package_modules(PACKAGE_DIRS))) == []


def test_the_cycle_check_sees_a_lazy_and_a_type_checking_cycle(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import f\n"
    )
    cycle = import_cycle(import_graph(package_modules({"pkg": tmp_path / "pkg"})))
    assert set(cycle) == {"pkg.a", "pkg.sub.b"}


def textual_importers() -> list[str]:
    offenders = []
    for module, path in sorted(package_modules(PACKAGE_DIRS).items()):
        if module.startswith(UI_PACKAGES) and module not in STARTS_WITHOUT_TEXTUAL:
            continue
        names = imported_names(path, module)
        if any(name.split(".")[0] in ("textual", "textual_plotext") for name in names):
            offenders.append(module)
    return offenders


def test_nothing_outside_the_app_and_the_panes_imports_textual() -> None:
    assert textual_importers() == []


@pytest.mark.parametrize("line", ["from textual.widget import Widget", "import textual_plotext"])
def test_the_check_sees_a_textual_import(tmp_path: Path, line: str) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(f"def f():\n    {line}\n", encoding="utf-8")
    assert any(name.startswith("textual") for name in imported_names(sample, "sample"))


def headless_modules() -> list[str]:
    """Every module that must load without Textual (the demo's simulators among them); a
    `__main__` runs its command when imported."""
    modules = package_modules(PACKAGE_DIRS)
    return sorted(
        module for module in modules
        if not module.endswith(".__main__")
        and (not module.startswith(UI_PACKAGES) or module in STARTS_WITHOUT_TEXTUAL)
    )  # fmt: skip


def test_importing_everything_but_the_ui_leaves_textual_unloaded() -> None:
    modules = headless_modules()
    assert "cockpit.cli.main" in modules and "cockpit.core.figures" in modules
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
    code = "import sys, cockpit.app.app; print('textual' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == "True"


OPENED_LATER = ("cockpit.app.overview", "cockpit.app.screens", "cockpit.core.fleet",
                "cockpit.widgets.fleet", "cockpit.widgets.fleet_table")  # fmt: skip
"""What a lane's panes don't show at start: the fleet's overview and the pop-up screens load
when opened, so `cockpit --metrics-url URL` starts without importing them."""


def test_the_lane_panes_start_without_the_overview_or_the_pop_up_screens() -> None:
    code = (
        "import sys, cockpit.cli.main, cockpit.app.app\n"
        f"print(sorted(m for m in {OPENED_LATER!r} if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == "[]"


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


def test_a_scraped_lane_starts_without_the_prometheus_source(tmp_path: Path) -> None:
    """A lane read by direct scrape, its feeds built as the cockpit builds them: the PromQL
    source is never imported (a Prometheus lane imports it when its feed is built)."""
    code = (
        "import sys\n"
        "from cockpit.cli.main import parse_args\n"
        "from cockpit.cli.options import effective_config\n"
        "from cockpit.runtime.feeds import build_feeds\n"
        "for url in ('--metrics-url', 'http://127.0.0.1:1/metrics'), "
        "('--prometheus', 'http://127.0.0.1:1'):\n"
        "    build_feeds(effective_config(parse_args(list(url))))\n"
        "    print('cockpit.sources.prometheus' in sys.modules)\n"
    )
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={**os.environ, **home},
    )
    assert result.stdout.split() == ["False", "True"]

"""The core never imports Textual: only the app, its screens and driver, the panes and the
themes do."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORE = REPO / "cockpit"
ALLOWED = {CORE / "app.py", CORE / "screens.py", CORE / "driver.py"}
UI_PACKAGES = {"widgets", "themes"}
"""cockpit.widgets and cockpit.themes (linked into cockpit/ for the type checker) are UI."""


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
    names = ["cockpit.figures", "cockpit.roofline", "cockpit.config", "cockpit.model",
             "cockpit.poller", "cockpit.snapshot", "cockpit.timeutil"]  # fmt: skip
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


def _loaded_after_building(urls: dict[str, str]) -> str:
    """Which of httpx / urllib.request the cockpit has imported once its app and feeds for
    these lanes (name -> `prometheus` or `metrics_url` URL) are built."""
    lanes = "".join(
        f"- name: {name}\n  {'metrics_url' if 'metrics' in url else 'prometheus'}: {url}\n"
        for name, url in urls.items()
    )
    code = (
        "import sys\n"
        "import cockpit.app\n"
        "from cockpit.config import parse_config\n"
        "from cockpit.feeds import build_feeds\n"
        f"build_feeds(parse_config({'lanes:' + chr(10) + lanes!r}, 'test'))\n"
        "print(sorted(m for m in ('httpx', 'urllib.request') if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO, env=env
    )
    return result.stdout.strip()


def test_plain_http_lanes_start_without_httpx() -> None:
    """httpx (and urllib.request with http.client and email) costs ~50 ms of start-up; the
    light client needs none of it."""
    urls = {"a": "http://127.0.0.1:9090", "b": "http://127.0.0.1:8000/metrics"}
    assert _loaded_after_building(urls) == "[]"


def test_a_tls_lane_loads_httpx() -> None:
    assert "httpx" in _loaded_after_building({"a": "https://prometheus.example:9090"})

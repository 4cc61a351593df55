"""mypy on the package as it installs: widgets/ and themes/ as cockpit.widgets and cockpit.themes.

mypy names a module after the folders it sits in, so on its own it would check widgets/ as a
top-level `widgets` package and find no `cockpit.widgets`. This runs mypy (its options and files
from pyproject.toml, or the arguments given) with the names that pyproject.toml's
[tool.setuptools.package-dir] gives those folders.

Usage: .venv/bin/python tools/typecheck.py [mypy arguments]
"""

from __future__ import annotations

import sys
import time
import tomllib
from pathlib import Path

from mypy import util
from mypy.fscache import FileSystemCache
from mypy.main import process_options, run_build
from mypy.modulefinder import BuildSource

REPO = Path(__file__).resolve().parent.parent


def package_dirs() -> dict[str, str]:
    """Top-level folder -> the package it installs as, e.g. {"widgets": "cockpit.widgets"}."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = pyproject["tool"]["setuptools"]["package-dir"]
    return {folder: package for package, folder in mapping.items()}


def installed_name(source: BuildSource, renames: dict[str, str]) -> BuildSource:
    if source.module is None:
        return source
    top, _, rest = source.module.partition(".")
    if top not in renames:
        return source
    module = renames[top] + ("." + rest if rest else "")
    return BuildSource(source.path, module, source.text, source.base_dir, source.followed)


def main() -> int:
    started = time.time()
    fscache = FileSystemCache()
    sources, options = process_options(sys.argv[1:], fscache=fscache)
    renames = package_dirs()
    sources = [installed_name(source, renames) for source in sources]
    _, messages, blockers = run_build(sources, options, fscache, started, sys.stdout, sys.stderr)
    n_errors, _, n_files = util.count_stats(messages)
    formatter = util.FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    if n_errors:
        print(formatter.format_error(n_errors, n_files, len(sources), blockers=blockers))
        return 2 if blockers else 1
    print(formatter.format_success(len(sources), options.color_output))
    return 0


if __name__ == "__main__":
    sys.exit(main())

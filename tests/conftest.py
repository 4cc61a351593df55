"""Fixtures every test area shares: private copies of the Hermes ledgers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.repo import HERMES_FIXTURES, require_fixture


@pytest.fixture
def hermes_v22(tmp_path: Path) -> Path:
    """A private copy of the schema-22 ledger written by Hermes's own code."""
    source = require_fixture(HERMES_FIXTURES / "state-v22.db")
    target = tmp_path / "state.db"
    shutil.copyfile(source, target)
    return target


@pytest.fixture
def hermes_v11(tmp_path: Path) -> Path:
    """A private copy of the old schema-11 ledger."""
    source = require_fixture(HERMES_FIXTURES / "state-v11.db")
    target = tmp_path / "state-v11.db"
    shutil.copyfile(source, target)
    return target

"""Shared test helpers: where the fixtures are, and the rule for tests that need a binary."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures"
HERMES_FIXTURES = FIXTURES / "hermes"
VLLM_FIXTURES = FIXTURES / "vllm"


def require_binary(name: str) -> str:
    """The binary's path; under CI=true a missing binary fails the test, elsewhere it skips."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} is not installed (apt-get install -y {name})"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def require_fixture(path: Path) -> Path:
    """A file from ../shared/fixtures; missing is a failure under CI, a skip elsewhere."""
    if path.exists():
        return path
    message = f"fixture {path} is missing (the shared/ folder must sit beside the repo)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


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

"""Shared test helpers: where the fixtures are, and the rule for tests that need a binary."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
"""Small files made by real software (Hermes's own code, a real vLLM); see their READMEs."""
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
    """A file from tests/fixtures: they ship with the repo, so a missing one is a failure."""
    if not path.exists():
        pytest.fail(f"fixture {path} is missing from the repo")
    return path


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

"""Where the repo and its fixtures are, and the rule for tests that need a binary or a fixture."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
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

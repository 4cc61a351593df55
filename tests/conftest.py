"""Fixtures every test area shares: the run's Prometheus, private copies of the Hermes ledgers."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.promharness import PromServer, start_prometheus
from tests.support.repo import HERMES_FIXTURES, require_fixture


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromServer]:
    """One Prometheus for the run: each test module writes its history under jobs of its
    own (`remote_write`), so modules never see each other's series."""
    server = start_prometheus(tmp_path_factory.mktemp("prometheus"))
    yield server
    server.stop()


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

"""Fixtures every test area shares: the run's servers, private copies of the Hermes ledgers."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.faultlane import shared_lane_prometheus, start_shared_lane_prometheus
from tests.support.fleet import LOADERS, load_fleet
from tests.support.promharness import PromServer, start_victoria_metrics
from tests.support.repo import HERMES_FIXTURES, require_fixture


@pytest.fixture(scope="session", autouse=True)
def lane_prometheus_early(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The run's Prometheus (tests/support/faultlane.py) starts with the run, in the
    background: its first scrapes come ~5 s after its start, while the first tests run."""
    start_shared_lane_prometheus(tmp_path_factory.mktemp("prometheus"))


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> PromServer:
    """The run's one Prometheus (stopped at exit): it scrapes the live lanes' jobs
    (tests/support/faultlane.py) and takes history by `remote_write`, each test module's under
    jobs (or a label) of its own, so modules never see each other's series."""
    return shared_lane_prometheus(tmp_path_factory.mktemp("prometheus"))[1]


@pytest.fixture(scope="session")
def victoria_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromServer]:
    """The run's one VictoriaMetrics: each test module imports its history under jobs (or a
    label) of its own (`import_history`), so modules never see each other's series."""
    server = start_victoria_metrics(tmp_path_factory.mktemp("victoria-metrics"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def fleet_prometheus(prometheus: PromServer) -> PromServer:
    """The run's Prometheus, holding the live fleet's history (tests/support/fleet.py)."""
    return load_fleet(prometheus, "prometheus")


@pytest.fixture(scope="session")
def fleet_victoria_metrics(victoria_metrics: PromServer) -> PromServer:
    """The run's VictoriaMetrics, holding the live fleet's history."""
    return load_fleet(victoria_metrics, "victoria-metrics")


@pytest.fixture(params=sorted(LOADERS))
def fleet_server(request: pytest.FixtureRequest) -> PromServer:
    """The live fleet on each server in turn (the test runs once per server)."""
    name = {"prometheus": "fleet_prometheus", "victoria-metrics": "fleet_victoria_metrics"}
    server: PromServer = request.getfixturevalue(name[request.param])
    return server


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

"""Engines that go down behind a real Prometheus: `up == 0` for some or all of the lane's
scrape targets, seen on the screen, by `cockpit check` and in `cockpit report`."""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
import yaml

from cockpit.app.app import CockpitApp
from cockpit.sources.prometheus import STALE, PrometheusSource, SourceError
from tests.support.cli import run_cockpit
from tests.support.faultlane import (
    lane_config,
    lane_state,
    running_app,
    shared_lane_prometheus,
    start_exporter,
    status_text,
    take_ports,
    wait_until,
)
from tests.support.promharness import PromServer

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

JOB = "pair-lane"
WEEK_JOB = "week-lane"


@pytest.fixture(scope="module")
def scraping(tmp_path_factory: pytest.TempPathFactory) -> PromServer:
    """The run's Prometheus: it scrapes this module's jobs every second."""
    return shared_lane_prometheus(tmp_path_factory.mktemp("prom-lane"))[1]


def wait_up(server: PromServer, up: int, job: str = JOB) -> None:
    """Until `sum(up)` of the job is `up` (Prometheus scrapes every second)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        params = {"query": f'sum(up{{job="{job}"}})'}
        result = httpx.get(f"{server.url}/api/v1/query", params=params).json()["data"]["result"]
        if result and float(result[0]["value"][1]) == up:
            return
        time.sleep(0.2)
    raise AssertionError(f"up of {job} never became {up}")


def check_and_report(config: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    checked = run_cockpit("check", "--config", str(config))
    reported = run_cockpit("report", "--config", str(config), "--format", "json")
    assert "Traceback" not in checked.stderr + reported.stderr
    lane: dict[str, object] = json.loads(reported.stdout)["lane"]
    lane["exit"] = reported.returncode
    return checked, lane


async def test_targets_down_are_said_on_screen_by_check_and_in_the_report(
    scraping: PromServer, tmp_path: Path
) -> None:
    first, second = (start_exporter(port) for port in take_ports(JOB))
    server = scraping
    config = tmp_path / "config.yaml"
    lane = {"name": "pair", "prometheus": server.url, "selector": f'job="{JOB}"'}
    config.write_text(yaml.safe_dump({"lanes": [lane], "window": "5m"}))
    try:
        wait_up(server, 2)
        time.sleep(2)  # a few scrapes of both
        checked, reported = check_and_report(config)
        assert checked.returncode == 0 and "targets down" not in checked.stdout
        assert reported["exit"] == 0 and reported["freshness"] == "ok"

        second.stop()
        wait_up(server, 1)
        checked, reported = check_and_report(config)
        some = "1 of 2 scrape targets down (up == 0)"
        assert checked.returncode == 0 and some in checked.stdout.splitlines()[-1]
        assert reported["exit"] == 0 and some in str(reported["freshness"])
        async with running_app(lane_config(server.url, selector=f'job="{JOB}"')) as (app, pilot):
            await wait_until(pilot, lambda: some in status_text(app))
            assert "server warning" not in status_text(app)  # the cockpit's own note

            first.stop()
            wait_up(server, 0)
            await wait_until(pilot, lambda: lane_state(app) != "ok")
            status = status_text(app)
            assert "lane ok" not in status and "scrape target(s) are down" in status, status
        checked, reported = check_and_report(config)
        down = "the lane's 2 scrape target(s) are down (up == 0)"
        assert checked.returncode == 1
        assert checked.stdout.splitlines()[-1].startswith("FAIL lane pair:")
        assert down in checked.stdout.splitlines()[-1]
        assert reported["exit"] == 1 and down in str(reported["freshness"])
        # A selector on a label `up` lacks: the lane's own series, gone stale, say it is down.
        source = PrometheusSource(server.url)
        try:
            selector = f'{{job="{JOB}",engine="0"}}'
            with pytest.raises(SourceError, match=re.escape(STALE)) as stale:
                await source.read_lane("pair", None, selector, 300.0)
            assert stale.value.engine_absent
            past = await source.read_lane("pair", None, selector, 300.0, time.time())
            assert past.warnings == (STALE,)  # read as of a moment (`--at`): a note
        finally:
            await source.aclose()
    finally:
        first.stop()  # again: a stopped server's stop returns at once
        second.stop()


async def test_the_refresh_key_evaluates_a_long_window_anew(scraping: PromServer) -> None:
    """A week's totals are reused for up to 10 minutes between evaluations; `r` asks anew."""
    exporter = start_exporter(take_ports(WEEK_JOB)[0])
    server = scraping
    week = replace(lane_config(server.url, selector=f'job="{WEEK_JOB}"'), window="7d")
    try:
        wait_up(server, 1, WEEK_JOB)
        async with running_app(week) as (app, pilot):
            await wait_until(pilot, lambda: lane_state(app) == "ok")
            assert app.lane_snapshot is not None and app.lane_snapshot.totals is not None
            evaluated = app.lane_snapshot.totals.end
            await pilot.pause(1.5)  # refreshes every 0.5 s reuse the week's totals
            assert app.lane_snapshot.totals is not None
            assert app.lane_snapshot.totals.end == evaluated
            await pilot.press("r")
            await wait_until(pilot, lambda: evaluated_at(app) > evaluated)
    finally:
        exporter.stop()


def evaluated_at(app: CockpitApp) -> float:
    snapshot = app.lane_snapshot
    return -1.0 if snapshot is None or snapshot.totals is None else snapshot.totals.end

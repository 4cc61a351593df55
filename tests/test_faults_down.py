"""Engines that go down behind a real Prometheus: `up == 0` for some or all of the lane's
scrape targets, seen on the screen, by `cockpit check` and in `cockpit report`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from faultlane import lane_config, lane_state, running_app, start_exporter, status_text, wait_until
from promharness import PromServer, ScrapeJob, start_prometheus

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
JOB = "pair-lane"


def wait_up(server: PromServer, up: int) -> None:
    """Until `sum(up)` of the job is `up` (Prometheus scrapes every second)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        params = {"query": f'sum(up{{job="{JOB}"}})'}
        result = httpx.get(f"{server.url}/api/v1/query", params=params).json()["data"]["result"]
        if result and float(result[0]["value"][1]) == up:
            return
        time.sleep(0.2)
    raise AssertionError(f"up of {JOB} never became {up}")


def cockpit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([COCKPIT, *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ))  # fmt: skip


def check_and_report(config: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    checked = cockpit("check", "--config", str(config))
    reported = cockpit("report", "--config", str(config), "--format", "json")
    assert "Traceback" not in checked.stderr + reported.stderr
    lane: dict[str, object] = json.loads(reported.stdout)["lane"]
    lane["exit"] = reported.returncode
    return checked, lane


async def test_targets_down_are_said_on_screen_by_check_and_in_the_report(tmp_path: Path) -> None:
    first, second = start_exporter(), start_exporter()
    server = start_prometheus(tmp_path, [ScrapeJob(JOB, [first.address, second.address], "1s")])
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
    finally:
        first.stop()  # again: a stopped server's stop returns at once
        second.stop()
        server.stop()

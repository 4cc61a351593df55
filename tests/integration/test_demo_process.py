"""`cockpit demo`'s simulators as their own process: the config they hand over, how they end
(their stdin closed, their cockpit killed), and what a failure to start says."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cockpit.config.schema import parse_config
from cockpit.core.model import LaneTotals
from cockpit.roofline.profiles import hardware_profiles, model_profiles
from cockpit.runtime.demo_process import DemoProcess, DemoProcessError
from cockpit.runtime.feeds import build_feeds
from tests.support.loopback import Scrape, get
from tests.support.repo import REPO
from tests.support.tmux import ended

DEMO_PREFIX = "lane-cockpit-demo-"


def demo_folders(tmpdir: Path) -> list[Path]:
    return sorted(tmpdir.glob(f"{DEMO_PREFIX}*"))


def wait_until(condition: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


@pytest.fixture
def tmpdir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The simulators' temp folder goes under this test's own $TMPDIR."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


def test_config_handed_over_reads_as_the_cockpits_and_stdin_closed_cleans_up(
    tmpdir_env: Path,
) -> None:
    simulators = DemoProcess.start()
    try:
        ready = simulators.ready()
        config = parse_config(
            ready.config_text, "<cockpit demo>", hardware_profiles(), model_profiles()
        )
        assert ready.note == ""
        assert [lane.name for lane in config.lanes] == ["gb300-dsv4", "h100-llama8b"]
        for lane in config.lanes:
            assert lane.metrics_url is not None and lane.prometheus is None
            scrape = Scrape(get(lane.metrics_url).decode())
            assert scrape.total("vllm:request_success_total") > 0
        (ledger,) = config.ledgers
        assert Path(ledger.path).is_file()
        assert [Path(ledger.path).parent] == demo_folders(tmpdir_env)
    finally:
        simulators.stop()
    assert demo_folders(tmpdir_env) == [], "stdin closed: the simulators removed their folder"
    assert simulators.process.returncode == 0


def test_simulators_outlive_no_killed_cockpit(tmpdir_env: Path) -> None:
    """A stand-in for the cockpit starts them, then is killed with SIGKILL, which no handler
    sees: the simulators still stop and remove their folder."""
    parent = subprocess.Popen(
        python("""
            import time
            from cockpit.runtime.demo_process import DemoProcess
            simulators = DemoProcess.start()
            simulators.ready()
            print(simulators.process.pid, flush=True)
            time.sleep(60)
        """),
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert parent.stdout is not None
        simulators_pid = int(parent.stdout.readline())
        assert not ended(simulators_pid) and len(demo_folders(tmpdir_env)) == 1
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        assert wait_until(lambda: ended(simulators_pid)), "the simulators ended"
        assert demo_folders(tmpdir_env) == []
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def test_sigterm_stops_the_simulators_cleanly(tmpdir_env: Path) -> None:
    simulators = DemoProcess.start()
    try:
        simulators.ready()
        os.kill(simulators.process.pid, signal.SIGTERM)
        assert wait_until(lambda: not demo_folders(tmpdir_env))
    finally:
        simulators.stop()
    assert simulators.process.returncode == 128 + signal.SIGTERM


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("import sys; print('no port left', file=sys.stderr); sys.exit(3)",
         ["did not start (exit 3): no port left"]),
        ("print('hello', flush=True); import sys; sys.stdin.read()",
         ["answered 'hello' instead of their config"]),
        ("print('{\"note\": \"\"}', flush=True); import sys; sys.stdin.read()",
         ["instead of their config"]),
    ],
    ids=["exits", "garbage", "no config"],
)  # fmt: skip
def test_a_failed_start_is_one_clear_error(code: str, words: list[str]) -> None:
    simulators = DemoProcess(python(code))
    try:
        with pytest.raises(DemoProcessError) as error:
            simulators.ready(timeout=15)
    finally:
        simulators.stop()
    for text in words:
        assert text in str(error.value)


def test_simulators_not_ready_in_time_say_so() -> None:
    simulators = DemoProcess(python("import sys; sys.stdin.read()"))
    try:
        with pytest.raises(DemoProcessError, match=r"not ready in 0\.3 s"):
            simulators.ready(timeout=0.3)
    finally:
        simulators.stop()
    assert simulators.process.returncode == 0


def test_simulators_that_do_not_stop_are_killed_with_what_they_started(tmp_path: Path) -> None:
    """Deaf to their stdin and to SIGTERM, with a child of their own (as Prometheus is): after
    the stop timeout both are killed and their folder is removed from the cockpit's side."""
    folder, child_pid = tmp_path / "lane-cockpit-demo-stuck", tmp_path / "child.pid"
    simulators = DemoProcess(
        python(f"""
            import json, os, pathlib, signal, subprocess, sys, time
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.mkdir({str(folder)!r})
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            pathlib.Path({str(child_pid)!r}).write_text(str(child.pid))
            print(json.dumps({{"folder": {str(folder)!r}, "config": {{}}}}), flush=True)
            time.sleep(60)
        """)
    )
    simulators.ready()
    child = int(child_pid.read_text())
    started = time.monotonic()
    simulators.stop(timeout=0.5)
    assert time.monotonic() - started < 5
    assert simulators.process.returncode == -signal.SIGKILL
    assert wait_until(lambda: ended(child)), "the simulators' child was killed too"
    assert not folder.exists()


def test_the_demos_first_lane_read_has_the_trend_of_its_warm_start(tmpdir_env: Path) -> None:
    """The simulators hand over each lane's warm start (an exposition every 15 s of it); the
    cockpit's lanes take them in as scrapes, so the first read's trend covers those 5 minutes:
    a point at every 15 s step from the second scrape of the warm start on."""
    simulators = DemoProcess.start()
    try:
        ready = simulators.ready()
        profiles = hardware_profiles(), model_profiles()
        config = parse_config(ready.config_text, "<cockpit demo>", *profiles)
        lanes, _ = build_feeds(config)
        ready.warm(lanes)

        async def first_read() -> LaneTotals:
            try:
                return await lanes[0].read(300.0, None)
            finally:
                for lane in lanes:
                    await lane.close()

        totals = asyncio.run(first_read())
    finally:
        simulators.stop()
    scraped = [at for at, _ in ready.history[totals.lane]]
    assert len(scraped) == 20 and scraped[-1] - scraped[0] == 285, "5 min, one every 15 s"
    trend = totals.trend
    assert trend is not None and trend.step_s == 15
    times = [trend.end - 15 * (len(trend.series["running"]) - 1 - i) for i in range(20)]
    covered = [i for i, t in enumerate(times) if scraped[0] + 15 <= t <= scraped[-1]]
    assert len(covered) >= 18, f"the warm start lies in the window: {times}, {scraped}"
    for key in ("generation_tok_s", "hit_rate", "ttft_p95", "running", "kv_usage"):
        points = trend.series[key]
        assert all(points[i] is not None for i in covered), f"{key}: {points}"

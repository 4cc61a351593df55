"""The `cockpit` command: help, version, bad config (exit 2, one line), packaging; the config
and flag mistakes run through main in this process (`cockpit_here`), the rest as the real
command."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from cockpit import __version__
from cockpit.app.lifecycle import Setup, build_app
from cockpit.cli.main import main
from tests.support.cli import cockpit_here, run_cockpit
from tests.support.repo import REPO


def test_version_and_help() -> None:
    assert run_cockpit("--version", home=REPO).stdout.strip() == f"lane-cockpit {__version__}"
    help_text = run_cockpit("--help", home=REPO).stdout
    for command in ("run", "demo", "report", "roofline", "check"):
        assert command in help_text
    assert "--prometheus" in run_cockpit("report", "--help", home=REPO).stdout


BROKEN = {
    "unknown key": ("refresh: 5\nrefrsh: 2\n", 2, "refrsh", "did you mean"),
    "wrong type": ("refresh: [1]\n", 1, "refresh", "single value"),
    "bad url": ("lanes:\n  - name: a\n    prometheus: 'not a url'\n", 3, "lanes[0].prometheus",
                "URL"),
    "negative refresh": ("refresh: -2\n", 1, "refresh", "positive"),
    "unknown hardware": ("lanes:\n  - name: a\n    metrics_url: http://x/m\n    hardware: tpu9\n",
                         4, "lanes[0].hardware", "known: "),
    "duplicate lane": ("lanes:\n  - {name: a, metrics_url: 'http://x/m'}\n"
                       "  - {name: a, metrics_url: 'http://x/n'}\n", 3, "lanes[1].name",
                       "duplicate"),
    "yaml syntax": ("lanes:\n  - name: a\n   bad: [\n", None, "", "YAML syntax error"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_config_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    text, line, key, words = BROKEN[case]
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    result = cockpit_here("--config", str(path), cwd=tmp_path, home=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"cockpit: {path}:")
    if line is not None:
        assert lines[0].startswith(f"cockpit: {path}:{line}: {key}: ")
    assert words in lines[0]


def test_unreadable_config(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = run_cockpit("--config", str(missing), cwd=tmp_path, home=tmp_path)
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"cockpit: {missing}: cannot read the config file: No such file or directory"
    )
    folder = run_cockpit("report", "--config", str(tmp_path), cwd=tmp_path, home=tmp_path)
    assert folder.returncode == 2 and "is a directory, not a regular file" in folder.stderr


def test_not_utf8_config(tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00bad")
    result = run_cockpit("check", "--config", str(path), cwd=tmp_path, home=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_nothing_to_read_says_what_to_do(tmp_path: Path) -> None:
    result = run_cockpit(
        "report", cwd=tmp_path, home=tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path)}
    )
    assert result.returncode == 2
    assert "cockpit demo" in result.stderr and "--prometheus" in result.stderr


def test_adhoc_flags_are_validated(tmp_path: Path) -> None:
    result = run_cockpit("report", "--prometheus", "ftp://x", cwd=tmp_path, home=tmp_path)
    assert result.returncode == 2 and "<command line>" in result.stderr and "URL" in result.stderr
    bad_at = run_cockpit(
        "report", "--ledger", "x.db", "--at", "yesterday-ish", cwd=tmp_path, home=tmp_path
    )
    assert bad_at.returncode == 2 and "--at" in bad_at.stderr


def test_a_relative_at_may_follow_its_flag(hermes_v22: Path) -> None:
    before = time.time()
    result = run_cockpit("report", "--ledger", str(hermes_v22), "--at", "-2h", "--format", "json",
                 cwd=hermes_v22.parent, home=hermes_v22.parent)  # fmt: skip
    assert result.returncode == 0, result.stderr
    end = json.loads(result.stdout)["ledger"]["end"]
    assert before - 2 * 3600 - 1 <= end <= time.time() - 2 * 3600 + 1


def test_replay_refuses_a_moment_to_come(hermes_v22: Path) -> None:
    result = run_cockpit("report", "--ledger", str(hermes_v22), "--at", "-2h", "--at", "2099-01-01",
                 cwd=hermes_v22.parent, home=hermes_v22.parent)  # fmt: skip
    assert result.returncode == 2
    assert "--at: 2099-01-01 00:00:00 UTC is in the future" in result.stderr


def test_an_unknown_command_is_said_as_one(tmp_path: Path) -> None:
    typo = run_cockpit("reprot", "--ledger", "x.db", cwd=tmp_path, home=tmp_path)
    assert typo.returncode == 2
    assert "unknown command 'reprot' (did you mean 'report'?)" in typo.stderr
    other = run_cockpit("bogus", cwd=tmp_path, home=tmp_path)
    assert other.returncode == 2 and "commands: run, demo, report" in other.stderr


def test_check_counts_its_sources_in_words(hermes_v22: Path) -> None:
    result = run_cockpit(
        "check", "--ledger", str(hermes_v22), cwd=hermes_v22.parent, home=hermes_v22.parent
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok (0 lanes, 1 ledger)" in result.stdout


def test_replay_refuses_a_lane_read_from_its_metrics(tmp_path: Path) -> None:
    result = run_cockpit("report", "--metrics-url", "http://127.0.0.1:9/metrics", "--at", "-2h",
                 cwd=tmp_path, home=tmp_path)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--at: replays Prometheus's history" in result.stderr and "'lane'" in result.stderr


@pytest.mark.parametrize(
    "flags",
    [
        ["--selector", 'job="x"'],
        ["--hardware", "h100"],
        ["--model", "llama-3.1-8b"],
        ["--engine", "vllm"],
    ],
)
def test_lane_flags_without_a_lane_are_refused(hermes_v22: Path, flags: list[str]) -> None:
    result = cockpit_here(
        "check", "--ledger", str(hermes_v22), *flags, cwd=hermes_v22.parent, home=hermes_v22.parent
    )
    assert result.returncode == 2
    assert f"<command line>: {flags[0]}: describes an ad-hoc lane" in result.stderr


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--metrics-url", "http://127.0.0.1:9/metrics", "--hardware", "h900"], "--hardware"),
        (["--prometheus", "http://u:p@127.0.0.1:9"], "--prometheus"),
        (["--prometheus", "http://127.0.0.1:9", "--selector", "job=x"], "--selector"),
        (["--prometheus", "http://127.0.0.1:9", "--model", os.fsdecode(b"m\xff")], "--model"),
        (
            ["--prometheus", "http://127.0.0.1:9", "--metrics-url", "http://127.0.0.1:9/metrics"],
            "--prometheus, --metrics-url",
        ),
    ],
)
def test_an_adhoc_lane_mistake_names_its_flag(tmp_path: Path, flags: list[str], named: str) -> None:
    result = run_cockpit("report", *flags, cwd=tmp_path, home=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"cockpit: <command line>: {named}: " in result.stderr
    assert "lanes[0]" not in result.stderr


def test_unknown_lane(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("lanes:\n  - {name: a, metrics_url: 'http://127.0.0.1:9/metrics'}\n")
    result = cockpit_here(
        "report", "--config", str(path), "--lane", "b", cwd=tmp_path, home=tmp_path
    )
    assert result.returncode == 2 and "unknown lane 'b' (a)" in result.stderr


def test_demo_whose_simulators_fail_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    """A `prometheus` that dies at once: `cockpit demo --prometheus` ends with one line that
    says why, exit 1, and leaves no temp folder."""
    bin_dir, tmpdir = tmp_path / "bin", tmp_path / "tmp"
    bin_dir.mkdir()
    tmpdir.mkdir()
    fake = bin_dir / "prometheus"
    fake.write_text("#!/bin/sh\necho 'err=\"opening storage failed\"' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmpdir)}
    result = run_cockpit("demo", "--prometheus", env=env, cwd=tmp_path, home=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "cockpit demo: the demo's simulators did not start (exit 1): "
        'RuntimeError: prometheus exited with 1: err="opening storage failed"'
    ]
    assert list(tmpdir.iterdir()) == []


@pytest.mark.slow
def test_wheel_has_no_generic_top_level_modules(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("lane_cockpit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {
        name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")
    }
    assert top_level == {"cockpit"}
    assert "cockpit/widgets/__init__.py" in names
    assert "cockpit/themes/__init__.py" in names
    assert "cockpit/roofline/profiles.yaml" in names
    packages = {f"{path.parent.relative_to(REPO).as_posix()}/__init__.py"
                for path in (REPO / "cockpit").rglob("__init__.py")}  # fmt: skip
    assert packages - set(names) == set()
    assert "cockpit/demo/hermes_schema_v22.sql" in names
    assert "cockpit/themes/cockpit.tcss" in names


async def test_the_cockpit_starts_with_the_collector_off_until_its_first_read_is_drawn() -> None:
    from cockpit.app.app import FIRST_READ_WAIT_S
    from tests.support.feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config
    from tests.support.pilot import on_screen

    collecting_during_setup: list[bool] = []

    def setup() -> Setup:
        collecting_during_setup.append(gc.isenabled())
        return Setup(config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed())

    frozen_before = gc.get_freeze_count()
    try:
        app = build_app(setup)
        assert app.lane_name == "lane-a"
        assert app.first_read_wait_s == FIRST_READ_WAIT_S > 0  # the command's app waits
        assert collecting_during_setup == [False]
        assert not gc.isenabled()
        async with app.run_test(size=(120, 40)) as pilot:
            await on_screen(pilot, "Prefill")
            while app.settles_collector:
                await pilot.pause(0.01)
            assert gc.isenabled()
            assert gc.get_freeze_count() > frozen_before
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_start_up_that_fails_turns_the_collector_back_on(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("refrsh: 2\n")
    frozen_before = gc.get_freeze_count()
    assert main(["--config", str(config)]) == 2
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen_before


def test_a_collector_that_was_off_stays_off() -> None:
    from tests.support.feeds import ScriptedLaneFeed, config

    gc.disable()
    try:
        app = build_app(lambda: Setup(config("lane-a"), [ScriptedLaneFeed()], None))
        app.settle_collector()
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_the_console_script_imports_the_command_line_without_collecting() -> None:
    code = (
        "import gc, sys\n"
        "collections = lambda: sum(stats['collections'] for stats in gc.get_stats())\n"
        "from cockpit.cli.script import load\n"
        "before = collections()\n"
        "main = load()\n"
        "print(collections() - before, gc.isenabled(), gc.get_freeze_count() > 10_000,\n"
        "      main is sys.modules['cockpit.cli.main'].main)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert done.stdout.split() == ["0", "True", "True", "True"]


def test_python_dash_m_cockpit_runs_the_console_script() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cockpit", "--version"], capture_output=True, text=True, cwd=REPO
    )
    assert done.stdout.strip() == f"lane-cockpit {__version__}"

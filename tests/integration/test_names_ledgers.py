"""One ledger file named several times (the same path twice, a symlink, a profile name and its
path) is read once, and `check`, `report` and the receipt say so."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cockpit.config.schema import Config, LedgerConfig
from cockpit.runtime.feeds import build_feeds, distinct_ledgers
from tests.support.cli import COCKPIT
from tests.support.ledger_writer import GOOD, make_ledger


def cockpit(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COCKPIT, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=home,
        env={**os.environ, "HOME": str(home), "HERMES_HOME": str(home / ".hermes")},
    )


def names_of_one_ledger(home: Path) -> tuple[Path, list[str]]:
    """A ledger at Hermes's default place, and five names for it."""
    (home / ".hermes").mkdir()
    ledger = make_ledger(home / ".hermes" / "state.db", GOOD)
    (home / "link.db").symlink_to(ledger)
    (home / "sub").mkdir()
    return ledger, [str(ledger), str(ledger), str(home / "link.db"), "default",
                    str(home / "sub" / ".." / ".hermes" / "state.db")]  # fmt: skip


async def test_a_ledger_named_five_ways_is_summed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / ".hermes"))
    ledger, names = names_of_one_ledger(tmp_path)
    config = Config(source="<test>", ledgers=tuple(LedgerConfig(n) for n in names))
    kept = distinct_ledgers(config.ledgers)
    assert [(one.path, others) for one, others in kept] == [(names[0], tuple(names[1:]))]
    _, feed = build_feeds(config)
    assert feed is not None
    try:
        totals = await feed.read(86400.0 * 365)
    finally:
        await feed.close()
    assert totals.total.sessions == len(GOOD)
    assert totals.total.input == sum(session[0] for session in GOOD)
    (info,) = totals.ledgers
    assert info.path == str(ledger) and info.also_named == tuple(names[1:])


def test_a_file_not_there_yet_is_one_by_its_resolved_path(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    names = [str(tmp_path / "new.db"), str(tmp_path / "sub" / ".." / "new.db")]
    kept = distinct_ledgers([LedgerConfig(name) for name in names])
    assert [(one.path, others) for one, others in kept] == [(names[0], (names[1],))]
    other = distinct_ledgers([LedgerConfig(names[0]), LedgerConfig(str(tmp_path / "b.db"))])
    assert len(other) == 2


def test_check_says_ok_once_and_that_the_file_was_named_twice(tmp_path: Path) -> None:
    _, names = names_of_one_ledger(tmp_path)
    done = cockpit("check", *(f"--ledger={name}" for name in names[2:4]), home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "(0 lanes, 1 ledger (1 named twice))" in lines[0], lines[0]
    oks = [line for line in lines if line.startswith("ok   ledger")]
    assert len(oks) == 1, done.stdout
    assert f"{len(GOOD)} sessions in 90d; also named as default: read once" in oks[0]


def test_report_and_its_provenance_count_the_file_once(tmp_path: Path) -> None:
    ledger, names = names_of_one_ledger(tmp_path)
    args = [f"--ledger={name}" for name in names]
    done = cockpit("report", "--format", "json", "--window", "24h", *args, home=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (listed,) = report["ledger"]["provenance"]["ledgers"]
    assert listed["path"] == str(ledger) and listed["also_named"] == names[1:]
    assert report["ledger"]["figures"]["sessions"]["value"] == len(GOOD)
    markdown = cockpit("report", "--format", "md", "--window", "24h", *args, home=tmp_path)
    assert f"also named as {', '.join(names[1:])}: read once" in markdown.stdout

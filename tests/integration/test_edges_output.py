"""The headless commands' output through the real `cockpit` entry point when it can't be
written as is: a reader that closed the pipe, a full disk, an encoding other than UTF-8."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import COCKPIT
from tests.support.repo import HERMES_FIXTURES, require_binary, require_fixture

FIXTURE_NOW = "1794700800"  # the fixtures' README: nothing starts after it
OUTPUT_GONE = 141
"""The exit code for a closed pipe: 128 + SIGPIPE, as the shell reports for `cat | head`."""
OUTPUT_FAILED = 74
"""The exit code for an output that can't be written: sysexits' EX_IOERR (the README)."""
SYMBOLS = "≤≥—–−…×·±µ∞→▲▼✓█▏▌░␛␊�"
"""Symbols the project writes, none of which an ASCII or Latin-1 output may carry."""
ROOFLINE = ("roofline", "--hardware", "h100", "--model", "llama-3.1-8b")


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    target = tmp_path / "state.db"
    shutil.copyfile(require_fixture(HERMES_FIXTURES / "state-v22.db"), target)
    return target


def commands(ledger: Path) -> dict[str, tuple[str, ...]]:
    report = ("report", "--ledger", str(ledger), "--at", FIXTURE_NOW, "--window", "90d")
    return {
        "report": report,
        "report json": (*report, "--format", "json"),
        "check": ("check", "--ledger", str(ledger)),
        "roofline": ROOFLINE,
        "roofline list": ("roofline", "--list"),
    }


def cockpit(
    args: tuple[str, ...], stdout: int, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        [COCKPIT, *args], stdout=stdout, stderr=subprocess.PIPE, env=environment, timeout=60
    )


NAMES = ["report", "report json", "check", "roofline", "roofline list"]


# --- a closed pipe, a full disk ----------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_closed_pipe_ends_quietly(ledger: Path, name: str) -> None:
    """`cockpit … | true`: the reader is gone before the first write."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = cockpit(commands(ledger)[name], stdout=writer)
    finally:
        os.close(writer)
    assert done.stderr == b"", done.stderr.decode()
    assert done.returncode == OUTPUT_GONE


def test_a_reader_that_leaves_early(ledger: Path) -> None:
    """`cockpit report --format json | head -c 10`: the reader takes 10 bytes of a report larger
    than the pipe holds, and closes it while the report is still being written."""
    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096)
    args = (COCKPIT, *commands(ledger)["report json"])
    report = subprocess.Popen(args, stdout=writer, stderr=subprocess.PIPE)
    os.close(writer)
    taken = os.read(reader, 10)
    os.close(reader)
    _, said = report.communicate(timeout=60)
    assert taken == b'{\n  "ledge'
    assert said == b"", said.decode()
    assert report.returncode == OUTPUT_GONE


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("name", NAMES)
def test_a_full_disk_says_so_in_one_line(ledger: Path, name: str, buffered: bool) -> None:
    env = {"PYTHONUNBUFFERED": "" if buffered else "1"}
    with Path("/dev/full").open("wb") as full:
        done = cockpit(commands(ledger)[name], stdout=full.fileno(), env=env)
    said = done.stderr.decode()
    assert said.splitlines() == ["cockpit: cannot write the output: no space left on device"]
    assert done.returncode == OUTPUT_FAILED


def test_a_failed_source_still_exits_1(tmp_path: Path) -> None:
    done = cockpit(("report", "--ledger", str(tmp_path / "none.db")), stdout=subprocess.PIPE)
    assert done.returncode == 1
    assert b"Traceback" not in done.stderr


# --- encodings other than UTF-8 -----------------------------------------------------------------


@pytest.fixture(scope="module")
def latin1_locale(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A real ISO-8859-1 locale, built by glibc's localedef into a private folder."""
    localedef = require_binary("localedef")
    folder = tmp_path_factory.mktemp("locales")
    built = subprocess.run(
        [localedef, "-i", "en_US", "-f", "ISO-8859-1", str(folder / "en_US.ISO-8859-1")],
        capture_output=True,
        timeout=60,
    )
    if not (folder / "en_US.ISO-8859-1").exists():
        pytest.skip(f"localedef can't build en_US.ISO-8859-1: {built.stderr.decode()[-300:]}")
    return {"LOCPATH": str(folder), "LC_ALL": "en_US.ISO-8859-1", "PYTHONIOENCODING": ""}


def _environment(kind: str, latin1_locale: dict[str, str]) -> tuple[dict[str, str], str]:
    if kind == "latin-1 locale":
        return latin1_locale, "latin-1"
    if kind == "C locale":  # Python writes UTF-8 there (PEP 538/540)
        return {"LC_ALL": "C", "PYTHONIOENCODING": ""}, "utf-8"
    return {"PYTHONIOENCODING": kind}, kind


@pytest.mark.parametrize("kind", ["ascii", "latin-1", "latin-1 locale", "C locale"])
@pytest.mark.parametrize("name", NAMES)
def test_output_in_any_encoding(
    ledger: Path, latin1_locale: dict[str, str], name: str, kind: str
) -> None:
    env, encoding = _environment(kind, latin1_locale)
    done = cockpit(commands(ledger)[name], stdout=subprocess.PIPE, env=env)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stderr == b""
    text = done.stdout.decode(encoding)  # strictly: every byte is the encoding's
    assert text.strip()
    if encoding != "utf-8":
        shown = [symbol for symbol in SYMBOLS if symbol in text]
        assert not shown, f"{shown} in a {encoding} output"
        assert "\\u2" not in text  # no symbol written as an escape
    if name == "report":
        assert ("…" if encoding == "utf-8" else "(title generation, ...)") in text
    if name == "roofline":
        assert ("params × 2 bytes" if encoding == "utf-8" else "params x 2 bytes") in text


@pytest.mark.parametrize("kind", ["ascii", "latin-1 locale"])
def test_a_refusal_on_stderr_fits_the_encoding(
    tmp_path: Path, latin1_locale: dict[str, str], kind: str
) -> None:
    """A refusal quoting a path with an escape sequence in it: ESC shown as `^[`."""
    env, encoding = _environment(kind, latin1_locale)
    done = cockpit(
        ("report", "--config", str(tmp_path / "a\x1b[2Jb.yaml")), subprocess.PIPE, env=env
    )
    assert done.returncode == 2
    said = done.stderr.decode(encoding)
    missing = "cannot read the config file: No such file or directory"
    assert said.splitlines() == [f"cockpit: {tmp_path}/a^[[2Jb.yaml: {missing}"]

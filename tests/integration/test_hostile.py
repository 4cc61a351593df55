"""Hostile input through the real `cockpit` commands: no raw control byte reaches any output,
a name can't break a markdown table, numbers are finite and bounded, and every mistake is one
line with exit 2, never a traceback."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from cockpit.cli.main import main
from tests.support.ledger_writer import HermesLikeWriter, Usage
from tests.support.loopback import serving
from tests.support.repo import HERMES_FIXTURES, require_fixture

FIXTURE_NOW = 1794700800  # the fixtures' README: nothing starts after it
HOSTILE = "\x1b]52;c;cHduZWQ=\x07\x1b[2J|cell\nline\x9b1m\r\x00"
"""OSC 52 (a clipboard write), clear screen, a table's `|`, a line break, CSI, CR and NUL."""
RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def run(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_no_raw_control(text: str, where: str) -> None:
    found = RAW_CONTROL.search(text)
    assert found is None, f"a raw control byte {found.group()!r} in {where}: {text[:3000]!r}"


class _Hostile(BaseHTTPRequestHandler):
    """A Prometheus whose every answer is an API error full of escape sequences."""

    def do_GET(self) -> None:
        body = json.dumps({"status": "error", "errorType": HOSTILE, "error": HOSTILE}).encode()
        self.send_response(422, "Unprocessable \x1b]0;title\x07\x1b[2J")  # one line on the wire
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile_prometheus() -> Iterator[str]:
    with serving(_Hostile) as url:
        yield url


@pytest.fixture
def hostile_ledger(tmp_path: Path) -> Path:
    """The Hermes-made ledger plus sessions whose source and model names are escape sequences,
    in a folder whose name is one."""
    folder = tmp_path / f"ledger{HOSTILE.replace('/', '').replace(chr(0), '')}"
    folder.mkdir()
    path = folder / "state.db"
    shutil.copyfile(require_fixture(HERMES_FIXTURES / "state-v22.db"), path)
    writer = HermesLikeWriter(path)
    try:
        for number in range(3):
            session = f"hostile-{number}"
            writer.start_session(session, f"cli{HOSTILE}", f"model{HOSTILE}", FIXTURE_NOW - 60)
            writer.record_call(session, f"model{HOSTILE}", Usage(100, 50, 0, 20, 0), at=FIXTURE_NOW)
    finally:
        writer.close()
    return path


def table_widths(markdown: str) -> list[int]:
    """Each table row's cell count, `\\|` inside a cell not counted."""
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    return [len(re.split(r"(?<!\\)\|", row)) for row in rows]


def test_no_output_carries_a_raw_control_byte(
    hostile_ledger: Path,
    hostile_prometheus: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sources = ("--ledger", str(hostile_ledger), "--prometheus", hostile_prometheus)
    at = ("--at", str(FIXTURE_NOW), "--window", "7d")
    code, markdown, err = run("report", *sources, *at, capsys=capsys)
    assert code == 1 and "␛]52;c;cHduZWQ=␇" in err  # the lane's failure is said, shown
    assert_no_raw_control(markdown + err, "report --format md")
    assert "cli␛]52;c;cHduZWQ=␇␛[2J\\|cell␊line" in markdown  # shown, not dropped
    tables = [block for block in markdown.split("\n\n") if block.startswith("|")]
    assert tables and all(len(set(table_widths(table))) == 1 for table in tables), markdown
    ledger_lines = [line for line in markdown.splitlines() if line.startswith("- Ledger `")]
    assert ledger_lines and all("state.db` (profile" in line for line in ledger_lines)

    code, data, err = run("report", *sources, *at, "--format", "json", capsys=capsys)
    assert code == 1
    assert_no_raw_control(data + err, "report --format json")
    sources_named = [group["name"] for group in json.loads(data)["ledger"]["by_source"]]
    assert f"cli{HOSTILE}" in sources_named  # JSON keeps the name exactly, escaped

    code, out, err = run("check", *sources, capsys=capsys)
    assert code == 1 and "FAIL" in out
    assert_no_raw_control(out + err, "check")

    from cockpit.config.schema import Config, LedgerConfig
    from cockpit.runtime.feeds import read_once
    from cockpit.runtime.receipts import write_receipt

    config = Config(ledgers=(LedgerConfig(str(hostile_ledger)),), window="7d")
    _, ledger, _ = asyncio.run(read_once(config, None, FIXTURE_NOW))
    exported = write_receipt(None, ledger, config.prices, tmp_path / "receipt.md").read_bytes()
    assert b"\x1b" not in exported and b"\x07" not in exported and b"\xc2\x9b" not in exported


def test_a_config_error_naming_a_hostile_path_is_one_clean_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / f"config{HOSTILE.replace(chr(0), '')}.yaml"
    for command in ("check", "report"):
        code, out, err = run(command, "--config", str(config), capsys=capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert_no_raw_control(out + err, f"{command}'s config error")


UNREACHABLE = "http://127.0.0.1:1"


def assert_one_line_naming(err: str, where: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert lines[0].startswith("cockpit: ") and where in lines[0], lines[0]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e9", "0.001"])
@pytest.mark.parametrize("command", ["run", "demo"])
def test_a_refresh_out_of_range_is_refused_naming_the_flag(
    command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lane = ("--prometheus", UNREACHABLE) if command == "run" else ()
    code, _, err = run(command, f"--refresh={value}", *lane, capsys=capsys)
    assert code == 2
    assert_one_line_naming(err, "<command line>: --refresh: expected seconds from 0.1 to 86400")


LANE = "lanes:\n- name: a\n  prometheus: http://127.0.0.1:1\n"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("refresh: .nan\n", ":1: refresh: "),
        ("refresh: .inf\n", ":1: refresh: "),
        ("refresh: 0\n", ":1: refresh: "),
        ("refresh: -1\n", ":1: refresh: "),
        ("refresh: 1e9\n", ":1: refresh: "),
        ("refresh: 0.0001\n", ":1: refresh: "),
        (LANE + "  timeout: .nan\n", ":4: lanes[0].timeout: "),
        (LANE + "  timeout: 1e12\n", ":4: lanes[0].timeout: "),
        (LANE + "  gpus: 100000000000\n", ":4: lanes[0].gpus: "),
        (LANE + "  host_kv_tokens: .inf\n", ":4: lanes[0].host_kv_tokens: "),
        ("prices:\n  output: 1e300\n", ":2: prices.output: "),
        ("prices:\n  input: .nan\n", ":2: prices.input: "),
        ("window: 99999999999999d\n", ":1: window: "),
        ("windows: [5m, 100000w]\n", ":1: windows[1]: "),
        # never a traceback: Python's limits, YAML's depth, URLs the client can't use, tags
        ("refresh: " + "9" * 1_000_000 + "\n", ":1: refresh: "),
        ("theme: " + "[" * 50_000 + "]" * 50_000 + "\n", ":1: YAML syntax error: exceeded max"),
        ("lanes:\n- name: a\n  prometheus: 'http://[::1'\n", ":3: lanes[0].prometheus: "),
        ("lanes:\n- name: a\n  prometheus: 'http://x☃.invalid'\n", ":3: lanes[0].prometheus: "),
        ("lanes:\n- name: a\n  metrics_url: 'http://-ü-/metrics'\n", ":3: lanes[0].metrics_url: "),
        ("refresh: !fast 3\n", ":1: refresh: unreadable value (could not determine"),
    ],
    ids=lambda value: value[:30] if "config" not in value else "",
)
def test_a_bad_config_number_url_or_shape_is_one_line_exit_2(
    text: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    code, out, err = run("check", "--config", str(config), capsys=capsys)
    assert code == 2 and out == ""
    assert_one_line_naming(err, f"{config}{where}")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("check", "--prometheus", "http://[::1"), "--prometheus"),
        (("check", "--metrics-url", "http://x☃.invalid/metrics"), "--metrics-url"),
        (("report", "--prometheus", UNREACHABLE, "--at", "nan"), "--at"),
        (("report", "--prometheus", UNREACHABLE, "--at", "inf"), "--at"),
        (("report", "--prometheus", UNREACHABLE, "--at", "1e20"), "--at"),
        (("report", "--prometheus", UNREACHABLE, "--at", "-99999999999999d"), "--at"),
        (("report", "--prometheus", UNREACHABLE, "--at", "0001-01-01T00:00:00Z"), "--at"),
        (("report", "--prometheus", UNREACHABLE, "--window", "999999999d"), "--window"),
        (("check", "--prometheus", UNREACHABLE, "--at", "garbage"), "--at"),
        (("check", "--prometheus", UNREACHABLE, "--at", "-2h"), "--at"),
    ],
)
def test_a_bad_flag_is_one_line_exit_2_naming_it(
    args: tuple[str, ...], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(*args, capsys=capsys)
    assert code == 2 and out == ""
    assert_one_line_naming(err, f"<command line>: {flag}: ")

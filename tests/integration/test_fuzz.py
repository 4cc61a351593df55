"""Hypothesis over every door the outside has: config files (special files among them),
command-line flags, Prometheus answers, /metrics texts, ledger rows and output encodings, each
through the real `cockpit` entry (`main`).

Whatever comes in: no traceback, an exit code of 0, 1 or 2 (2: one line saying what was
expected), no raw control byte and no secret in any output, JSON that is strict JSON, and every
figure either a finite number, or marked missing (with its reason) or stale. Ledger figures
are checked against an independent recount of the same rows. Derandomized: CI runs the same
examples every time.
"""

from __future__ import annotations

import codecs
import io
import json
import math
import os
import re
import shutil
import sqlite3
import threading
import unicodedata
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.cli.main import main
from cockpit.cli.output import PLAIN_SYMBOLS, carries_symbols
from tests.support.ledger_writer import recount
from tests.support.repo import HERMES_FIXTURES, VLLM_FIXTURES, require_fixture
from tests.support.strategies import documents

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
SECRET = "tok-FUZZ-SECRET-5517"
RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
NOW = 1794700800.0
WEEK = 7 * 86400
HOSTILE = ["\x1b]52;c;cHduZWQ=\x07", "\x1b[2J", "a|b", "line\nbreak", "\x9b31m", "[/x]", "{auth}"]
INVISIBLE = [
    "cli\u202egnp.exe",
    "lane-0007\u200b",
    "lane-0007\u034f",
    "\u2066x\u2069",
    "\ufeffa\u2028b",
]
"""Format and bidi characters, the combining grapheme joiner, a line separator: never raw."""
HOSTILE += INVISIBLE
RAW_INVISIBLE = re.compile(r"[\u034f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
FORMAT_TEXT = st.text(st.characters(categories=["Cf", "Mn", "Zl", "Zp"]), max_size=4)


def _strict(constant: str) -> Any:
    raise AssertionError(f"JSON output carries {constant}, which is not JSON")


def cockpit(*args: str) -> tuple[int, str, str]:
    """The real entry point, its outputs checked for what must never be in them."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit:  # argparse's own refusals (exit 2) and --help (exit 0)
            code = exit.code if isinstance(exit.code, int) else 0
    said = out.getvalue() + err.getvalue()
    assert code in (0, 1, 2), (code, said[-2000:])
    found = RAW_CONTROL.search(said)
    assert found is None, f"raw control byte {found.group()!r} in {args}: {said[-2000:]!r}"
    hidden = RAW_INVISIBLE.search(said) or next(
        (c for c in said if unicodedata.category(c) == "Cf"), None
    )
    assert hidden is None, f"raw format character in {args}: {said[-2000:]!r}"
    assert SECRET not in said, f"the secret shows for {args}: {said[-2000:]}"
    if code == 2 and not err.getvalue().startswith("usage:"):
        assert len(err.getvalue().strip().splitlines()) == 1, err.getvalue()
    return code, out.getvalue(), err.getvalue()


def check_json(text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text, parse_constant=_strict)
    for part in ("lane", "ledger"):
        section = data.get(part)
        if not section or "figures" not in section:
            continue
        fresh = str(section["freshness"]).startswith("ok")
        for key, figure in section["figures"].items():
            value = figure["value"]
            if isinstance(value, float):
                assert math.isfinite(value), (part, key, figure)
            if value is None and fresh:
                assert figure.get("reason"), f"{part} {key} is blank without a reason"
    return data


# --- servers: a Prometheus and an engine whose answers the examples choose ----------------------


@dataclass
class Answer:
    status: int = 200
    reason: str = "OK"
    body: str = ""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    answer = Answer()
    names: list[str] = []  # noqa: RUF012

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, answer: Answer) -> None:
        auth = self.headers.get("Authorization", "")
        body = answer.body.replace("{auth}", auth).encode("utf-8", "surrogatepass")
        self.send_response(answer.status, answer.reason.replace("{auth}", auth))
        self.send_header("Content-Type", answer.content_type)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/api/v1/label/__name__/values"):
            self._send(Answer(body=json.dumps({"status": "success", "data": self.names})))
        else:  # an engine's /metrics, or a Prometheus's instant GET query
            self._send(self.answer)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._send(self.answer)


FIXTURE_LINES = [
    line
    for line in require_fixture(VLLM_FIXTURES / "metrics_real.txt").read_text().splitlines()
    if line.startswith("vllm:")
]
ENGINE_NAMES = sorted({re.match(r"[^{ ]+", line).group() for line in FIXTURE_LINES})  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"answer": Answer(), "names": ENGINE_NAMES})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("fuzz-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(folder))
        patch.setenv("XDG_CONFIG_HOME", str(folder))
        patch.setenv("FUZZ_TOKEN", SECRET)
        patch.chdir(folder)
        yield folder


def lane_config(home: Path, url: str, kind: str) -> Path:
    lane: dict[str, Any] = {"name": "fuzz", kind: url, "selector": 'job="fuzz"'}
    if kind == "prometheus":
        lane["auth"] = {"bearer_env": "FUZZ_TOKEN"}
    path = home / f"{kind}.yaml"
    path.write_text(yaml.safe_dump({"lanes": [lane], "window": "5m"}))
    return path


# --- config files and flags ----------------------------------------------------------------


@FUZZ
@given(document=documents)
def test_any_config_file(home: Path, document: dict[str, Any]) -> None:
    path = home / "fuzzed.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True, sort_keys=False))
    code, out, err = cockpit("check", "--config", str(path))
    if code == 2:
        assert err.startswith(f"cockpit: {path}"), err
    else:
        assert out.startswith(f"config: {path}: ok")


VALUES = st.one_of(
    st.sampled_from(
        ["nan", "inf", "-inf", "0", "-1", "1e9", "1e400", "9" * 5000, "-2h", "5m", "7d", "90d",
         str(int(NOW)), "2026-10-26T11:19:00Z", "http://[::1", "http://127.0.0.1:1",
         "http://x☃.invalid", "https://127.0.0.1:1/x", 'job="a"', 'job=~"[/]v1.*"', "h100",
         "llama-3.1-8b", "md", "json", "vllm", "auto", *HOSTILE]
    ),
    st.text(max_size=12),
)  # fmt: skip
FLAGS = ["--lane", "--window", "--at", "--prometheus", "--metrics-url", "--selector", "--engine",
         "--hardware", "--model", "--ledger", "--format", "--prompt", "--batch", "--context",
         "--gpus", "--config"]  # fmt: skip


@settings(FUZZ, max_examples=150)
@given(
    command=st.sampled_from(["report", "check", "roofline"]),
    pairs=st.lists(st.tuples(st.sampled_from(FLAGS), VALUES), max_size=4),
)
def test_any_flags(home: Path, command: str, pairs: list[tuple[str, str]]) -> None:
    cockpit(command, *(f"{flag}={value}" for flag, value in pairs))


# --- Prometheus answers --------------------------------------------------------------------

FIGS = ["prompt_tokens", "generation_tokens", "requests", "prefix_cache_hits",
        "prefix_cache_queries", "kv_usage", "running", "kv_capacity", "targets", "targets_up",
        "data_start", "live", "ttft", ""]  # fmt: skip
NUMBERS = st.sampled_from(["NaN", "+Inf", "-Inf", "1e308", "-5", "0", "12.5", "abc", "", "{auth}"])
JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.sampled_from(HOSTILE)
)
ANY_JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
SAMPLE = st.fixed_dictionaries(
    {
        "metric": st.fixed_dictionaries({"fig": st.sampled_from(FIGS)}),
        "value": st.tuples(st.just(NOW), st.one_of(NUMBERS, JSON_LEAVES)),
    }
)
VECTOR = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["success", "error", "warning"]),
        "data": st.one_of(
            st.fixed_dictionaries(
                {
                    "resultType": st.sampled_from(["vector", "matrix"]),
                    "result": st.lists(SAMPLE, max_size=8),
                }
            ),
            ANY_JSON,
        ),
        "warnings": st.lists(st.sampled_from(HOSTILE), max_size=2),
        "error": st.sampled_from(HOSTILE),
        "errorType": st.sampled_from(HOSTILE),
    }
)


@FUZZ
@given(
    body=st.one_of(VECTOR.map(json.dumps), ANY_JSON.map(json.dumps), st.text(max_size=40)),
    status=st.sampled_from([200, 200, 200, 400, 401, 422, 429, 500, 503]),
    reason=st.sampled_from(["OK", "Forbidden {auth}", "Bad \x1b]0;t\x07", ""]),
    retry_after=st.sampled_from(["", "inf", "1e12", "nan", "-5", "2"]),
    form=st.sampled_from(["json", "md"]),
)
def test_any_prometheus_answer(
    home: Path,
    server: tuple[str, type[_Handler]],
    body: str,
    status: int,
    reason: str,
    retry_after: str,
    form: str,
) -> None:
    url, handler = server
    headers = {"Retry-After": retry_after} if retry_after else {}
    handler.answer = Answer(status, reason, body, headers=headers)
    config = lane_config(home, url, "prometheus")
    code, out, _ = cockpit("report", "--config", str(config), "--format", form)
    assert code in (0, 1)
    if form == "json":
        check_json(out)


# --- /metrics texts ------------------------------------------------------------------------

VALUE_TEXT = st.sampled_from(["NaN", "+Inf", "-Inf", "1e400", "-1", "0", "3.5", "x", "", "1 2"])
LABEL = st.sampled_from(
    ['model_name="m"', 'model_name="\x1b[2J"', 'le="+Inf"', 'le="x"', "", 'a="',
     'model_name="qwen\u200b\u202e"', 'engine="\u2066x\u034f"']
)  # fmt: skip


@st.composite
def exposition(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.sampled_from(FIXTURE_LINES), min_size=1, max_size=30))
    changed = []
    for line in lines:
        name = line.partition(" ")[0] if "{" not in line else line.partition("} ")[0]
        choice = draw(st.integers(0, 3))
        if choice == 0:
            changed.append(line)
        elif choice == 1:
            changed.append(f"{name}{'}' if '{' in name else ''} {draw(VALUE_TEXT)}")
        elif choice == 2:
            changed.append(f"{name.split('{')[0]}{{{draw(LABEL)}}} {draw(VALUE_TEXT)}")
        else:
            changed.append(draw(st.text(max_size=30)))
    return "\n".join(changed) + draw(st.sampled_from(["\n", "", "\n# EOF\n"]))


@FUZZ
@given(text=exposition(), form=st.sampled_from(["json", "md"]))
def test_any_metrics_text(
    home: Path, server: tuple[str, type[_Handler]], text: str, form: str
) -> None:
    url, handler = server
    handler.answer = Answer(body=text, content_type="text/plain; version=0.0.4")
    config = lane_config(home, f"{url}/metrics", "metrics_url")
    code, out, _ = cockpit("report", "--config", str(config), "--format", form, "--sample=0")
    assert code in (0, 1)
    if form == "json":
        check_json(out)


# --- ledger rows ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def empty_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Hermes-made schema with no rows, in WAL mode."""
    path = tmp_path_factory.mktemp("fuzz-ledger") / "empty.db"
    shutil.copyfile(require_fixture(HERMES_FIXTURES / "state-v22.db"), path)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("DELETE FROM session_model_usage")
        db.execute("DELETE FROM sessions")
    return path


COUNT = st.one_of(
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.sampled_from([-1, 2**63 - 1, 2**62, 1.5, 1e19, "12", "abc", b"\x00\xff", None]),
)
STARTED = st.one_of(
    st.floats(NOW - 2 * WEEK, NOW + 3600, allow_nan=False),
    st.sampled_from(["yesterday", NOW - 10, b"\x01", -1e308]),
)
NAME = st.one_of(
    st.sampled_from(["cli", "telegram", "", *HOSTILE]),
    st.text(max_size=8),
    st.tuples(st.sampled_from(["cli", "m"]), FORMAT_TEXT).map("".join),
)
ROW = st.tuples(NAME, NAME, STARTED, st.lists(COUNT, min_size=6, max_size=6), st.booleans())


@FUZZ
@given(rows=st.lists(ROW, max_size=12))
def test_any_ledger_rows(home: Path, empty_ledger: Path, rows: list[tuple[Any, ...]]) -> None:
    path = home / "fuzzed.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(empty_ledger, path)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        for number, (source, model, started, counts, bad_utf8) in enumerate(rows):
            db.execute(
                "INSERT INTO sessions (id, source, model, started_at, api_call_count, "
                "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "
                "reasoning_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (f"s{number}", source, model, started, *counts),
            )
            if bad_utf8:
                db.execute(
                    "UPDATE sessions SET source = CAST(x'ff63fe' AS TEXT) WHERE id = ?",
                    (f"s{number}",),
                )
    code, out, _ = cockpit(
        "report", "--ledger", str(path), "--at", str(NOW), "--window", "7d", "--format", "json"
    )
    assert code in (0, 1)
    ledger = check_json(out)["ledger"]
    expected = recount(path, NOW - WEEK, NOW)
    if code == 0 and "figures" in ledger:
        figures = ledger["figures"]
        assert figures["sessions"]["value"] == expected.total[0], (ledger, expected)
        assert figures["api_calls"]["value"] == expected.total[1], (ledger, expected)
        assert figures["output_tokens"]["value"] == expected.total[5], (ledger, expected)
        assert ledger["skipped"] == expected.skipped, (ledger["skipped"], expected.skipped)
    else:
        assert not str(ledger["freshness"]).startswith("ok"), ledger
    code, out, _ = cockpit("report", "--ledger", str(path), "--at", str(NOW), "--window", "7d")
    assert code in (0, 1)


# --- histograms whose buckets lie ------------------------------------------------------------

BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 2560.0)
BUCKET_SET = st.lists(st.sampled_from(BOUNDS), min_size=0, max_size=5, unique=True)


@st.composite
def lying_histograms(draw: st.DrawFn) -> list[str]:
    """Expositions of one TTFT histogram whose bucket set may change between the window's
    ends (a restart with other buckets) and whose counts may not be cumulative."""
    sets = [sorted(draw(BUCKET_SET)), sorted(draw(BUCKET_SET))]
    change = draw(st.integers(1, 5))
    texts, counts = [], dict[str, float]()
    for scrape in range(6):
        bounds = sets[scrape >= change]
        if scrape == change:
            counts = {}
        for le in [*map(repr, bounds), "+Inf"]:
            step = draw(st.one_of(st.integers(0, 9), st.sampled_from([-3, -50, 1e6])))
            counts[le] = counts.get(le, 0.0) + step
        lines = [
            f'vllm:time_to_first_token_seconds_bucket{{le="{le}"}} {n!r}'
            for le, n in counts.items()
        ]
        lines += ["vllm:num_requests_running 2", f"vllm:time_to_first_token_seconds_count {scrape}"]
        texts.append("\n".join(lines) + "\n")
    return texts


@settings(FUZZ, max_examples=80)
@given(texts=lying_histograms())
def test_any_bucket_sets_and_counts(texts: list[str]) -> None:
    from cockpit.core.figures import lane_figures
    from cockpit.core.health import Thresholds, check
    from cockpit.core.snapshot import LaneSnapshot
    from cockpit.sources.scrape import ScrapeSource

    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for k, text in enumerate(texts):
        source.ingest(text, NOW + 5 * k)
    totals = source.totals("fuzz", "{}", 300, None)
    figures = lane_figures(totals)
    for key, figure in figures.figures.items():
        if figure.value is None:
            assert figure.reason, key
        else:
            assert math.isfinite(figure.value), (key, figure)
    for key in ("ttft_p50", "ttft_p99"):
        figure = figures.figures[key]
        broken = totals.bucket_notes.get("ttft", "")
        assert figure.doubtful == bool(broken and figure.value is not None), (figure, broken)
    lane = LaneSnapshot("fuzz", "5m", totals, figures, None, None)
    fired = check(lane, Thresholds(ttft_p99_slo=0.0))
    assert not (figures.figures["ttft_p99"].doubtful and any(f.rule == "ttft_slo" for f in fired))


# --- output encodings other than UTF-8 ---------------------------------------------------------

ENCODINGS = ["ascii", "latin-1", "cp1252", "iso8859-15", "koi8-r", "cp437", "mac-roman",
             "shift_jis", "utf-16", "utf-8"]  # fmt: skip
HEADLESS = [
    ("report", "--at", str(NOW), "--window", "90d"),
    ("report", "--at", str(NOW), "--window", "90d", "--format", "json"),
    ("check",),
    ("roofline", "--hardware", "h100", "--model", "llama-3.1-8b"),
    ("roofline", "--list"),
]


def cockpit_in(encoding: str, *args: str) -> tuple[int, str, str]:
    """The real entry point writing to byte streams in `encoding`, as a locale or
    PYTHONIOENCODING sets them: every byte written must be that encoding's."""
    out = io.TextIOWrapper(io.BytesIO(), encoding=encoding)
    err = io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="backslashreplace")
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 0
    texts = []
    for stream in (out, err):
        stream.flush()
        assert isinstance(stream.buffer, io.BytesIO)
        texts.append(stream.buffer.getvalue().decode(encoding))
    assert code in (0, 1, 2), (code, texts)
    for text in texts:
        found = RAW_CONTROL.search(text)
        assert found is None, f"raw control byte {found.group()!r} in {args}: {text[-2000:]!r}"
    return code, texts[0], texts[1]


@FUZZ
@given(
    encoding=st.sampled_from(ENCODINGS),
    command=st.sampled_from(HEADLESS),
    ledger=st.sampled_from(["fixture", *HOSTILE, "naïve ☃ 名前"]),
)
def test_any_output_encoding(
    home: Path, encoding: str, command: tuple[str, ...], ledger: str
) -> None:
    fixture = home / "encoded.db"
    if not fixture.exists():
        shutil.copyfile(require_fixture(HERMES_FIXTURES / "state-v22.db"), fixture)
    path = str(fixture) if ledger == "fixture" else str(home / ledger)
    ledgers = ("--ledger", path) if command[0] != "roofline" else ()
    code, out, _ = cockpit_in(encoding, *command, *ledgers)
    if not carries_symbols(encoding):
        shown = [symbol for symbol in PLAIN_SYMBOLS if symbol in out]
        assert not shown, f"{shown} in a {encoding} output of {command}"
    if ledger == "fixture" or command[0] == "roofline":
        assert code == 0, out[-2000:]
    if "json" in command and code in (0, 1):
        check_json(out)


# --- special files as config -------------------------------------------------------------------

SPECIAL_CONFIGS = ["fifo", "directory", "/dev/null", "/dev/zero", "/dev/urandom", "oversized",
                   "fifo symlink"]  # fmt: skip


def special_config(home: Path, kind: str) -> Path:
    path = home / f"special-{kind.replace('/', '_').replace(' ', '_')}"
    if kind.startswith("/dev/"):
        return Path(kind)
    if not path.exists() and not path.is_symlink():
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "fifo symlink":
            os.mkfifo(home / "special-target-fifo")
            path.symlink_to(home / "special-target-fifo")
        elif kind == "directory":
            path.mkdir()
        else:
            path.write_bytes(b"#" * ((1 << 20) + 1))
    return path


@settings(FUZZ, max_examples=30)
@given(
    kind=st.one_of(st.sampled_from(SPECIAL_CONFIGS), st.binary(max_size=48)),
    bom=st.sampled_from([b"", codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE]),
)
def test_any_special_file_as_config(home: Path, kind: str | bytes, bom: bytes) -> None:
    if isinstance(kind, bytes):  # a regular file of any bytes, after a byte-order mark or not
        path = home / "bytes.yaml"
        path.write_bytes(bom + kind)
        cockpit("check", "--config", str(path))
        return
    path = special_config(home, kind)
    if not path.exists():
        return
    code, _, err = cockpit("check", "--config", str(path))
    assert code == 2
    assert err.startswith(f"cockpit: {path}: cannot read the config file: "), err


# --- special and mis-encoded secret files ----------------------------------------------------


@pytest.fixture(scope="module")
def secret_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Files no token should come from, and two it may (UTF-16 with its mark, UTF-8 BOM)."""
    folder = tmp_path_factory.mktemp("fuzz-secrets")
    os.mkfifo(folder / "fifo")
    (folder / "big").write_bytes(b"t" * (2 << 20))
    (folder / "utf16-bom").write_bytes(f"\ufeff{SECRET}\r\n".encode("utf-16-le"))
    (folder / "utf16-bare").write_bytes(SECRET.encode("utf-16-le"))
    (folder / "utf8-bom").write_bytes(f"\ufeff{SECRET}".encode())
    (folder / "latin1").write_bytes("caf\xe9".encode("latin-1"))
    (folder / "empty").write_bytes(b"")
    files = {path.name: path for path in folder.iterdir()}
    return {**files, "zero": Path("/dev/zero"), "dir": folder, "missing": folder / "nope"}


@settings(FUZZ, max_examples=20)
@given(kind=st.sampled_from(["zero", "fifo", "dir", "big", "utf16-bom", "utf16-bare",
                             "utf8-bom", "latin1", "empty", "missing"]),
       key=st.sampled_from(["bearer_file", "password_file"]),
       command=st.sampled_from(["check", "report"]))  # fmt: skip
def test_any_secret_file(
    home: Path,
    server: tuple[str, type[_Handler]],
    secret_files: dict[str, Path],
    kind: str,
    key: str,
    command: str,
) -> None:
    url, handler = server
    handler.answer = Answer(body=json.dumps({"status": "success", "data": {}}))
    auth = {key: str(secret_files[kind])} | ({"username": "ada"} if key == "password_file" else {})
    lane = {"name": "fuzz", "prometheus": url, "selector": 'job="fuzz"', "auth": auth}
    path = home / "secret.yaml"
    path.write_text(yaml.safe_dump({"lanes": [lane], "window": "5m"}))
    code, _, err = cockpit(command, "--config", str(path))  # never hangs, never grows
    usable = kind in ("utf16-bom", "utf8-bom")
    if not usable and kind not in ("missing",):
        assert code == 2 and f"lanes[0].auth.{key}" in err, (kind, err)
    else:
        assert code in (0, 1), (kind, err)

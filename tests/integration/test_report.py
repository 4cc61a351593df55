"""`cockpit report`, the real command, against real ledgers and a real Prometheus.

Expected values come from independent SQL on the Hermes-made fixtures and from the rates the
test wrote into Prometheus, never from the code under test.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.core.figures import lane_figures
from cockpit.core.model import Freshness, LaneTotals
from cockpit.core.snapshot import LaneSnapshot
from cockpit.runtime.report import markdown_receipt
from tests.support.cli import cockpit_here, run_cockpit
from tests.support.promharness import OpenMetricsWriter, PromServer, remote_write
from tests.support.repo import VLLM_FIXTURES, require_fixture

FIXTURE_NOW = 1794700800  # the fixtures' README: nothing starts after it


def sql_totals(path: Path, start: float, end: float) -> dict[str, int]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        row = db.execute(
            "SELECT COUNT(*), TOTAL(api_call_count), TOTAL(input_tokens), "
            "TOTAL(cache_read_tokens), TOTAL(cache_write_tokens), TOTAL(output_tokens) "
            "FROM sessions WHERE started_at > ? AND started_at <= ?",
            (start, end),
        ).fetchone()
    keys = ("sessions", "api_calls", "input", "cache_read", "cache_write", "output")
    return {key: int(value) for key, value in zip(keys, row, strict=True)}


def by_source_calls(path: Path, start: float, end: float) -> dict[str, int]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT source, TOTAL(api_call_count) FROM sessions "
            "WHERE started_at > ? AND started_at <= ? GROUP BY source",
            (start, end),
        ).fetchall()
    return {source: int(calls) for source, calls in rows}


@pytest.mark.parametrize("days", [7, 30, 90])
def test_json_ledger_report_matches_independent_sql(hermes_v22: Path, days: int) -> None:
    result = cockpit_here(
        "report", "--ledger", str(hermes_v22), "--window", f"{days}d",
        "--at", str(FIXTURE_NOW), "--format", "json", cwd=hermes_v22.parent, home=hermes_v22.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    ledger = json.loads(result.stdout)["ledger"]
    expected = sql_totals(hermes_v22, FIXTURE_NOW - days * 86400, FIXTURE_NOW)
    figures = ledger["figures"]
    prompt = expected["input"] + expected["cache_read"] + expected["cache_write"]
    assert figures["sessions"]["value"] == expected["sessions"]
    assert figures["api_calls"]["value"] == expected["api_calls"]
    assert figures["prompt_tokens"]["value"] == prompt
    assert figures["output_tokens"]["value"] == expected["output"]
    assert figures["prompt_output"]["value"] == pytest.approx(prompt / expected["output"])
    assert figures["fresh_output"]["value"] == pytest.approx(
        (expected["input"] + expected["cache_write"]) / expected["output"]
    )
    calls = by_source_calls(hermes_v22, FIXTURE_NOW - days * 86400, FIXTURE_NOW)
    assert {row["name"]: row["api_calls"] for row in ledger["by_source"]} == calls
    assert ledger["busiest_source"] == max(calls, key=lambda source: calls[source])
    units = [row["units"] for row in ledger["spend"]["rows"]]
    assert units[3] == pytest.approx(expected["output"] * 5)
    assert ledger["provenance"]["ledgers"][0]["schema_version"] == 22


def test_markdown_report_has_the_seed_tables_and_reproducible_sql(hermes_v22: Path) -> None:
    result = cockpit_here(
        "report", "--ledger", str(hermes_v22), "--window", "90d", "--at", str(FIXTURE_NOW),
        cwd=hermes_v22.parent, home=hermes_v22.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = result.stdout
    expected = sql_totals(hermes_v22, FIXTURE_NOW - 90 * 86400, FIXTURE_NOW)
    for row in ("| Sessions / API calls |", "| Prompt : output |", "| Mean per API call |",
                "### Per source", "### Per model (exact", "### Per profile",
                "| Cache read |", "Prompt-side share of spend"):  # fmt: skip
        assert row in text
    assert (
        f"| Sessions / API calls | {expected['sessions']:,} / {expected['api_calls']:,} |" in text
    )
    (query,) = re.findall(r"```sql\n(.*?);\n```", text, flags=re.S)
    with sqlite3.connect(f"file:{hermes_v22}?mode=ro", uri=True) as db:
        sessions, calls, *_ = db.execute(query).fetchone()
    assert (sessions, calls) == (expected["sessions"], expected["api_calls"])
    assert str(hermes_v22) in text and "schema 22" in text


def test_old_schema_report_says_what_is_missing(hermes_v11: Path) -> None:
    result = cockpit_here(
        "report", "--ledger", str(hermes_v11), "--window", "30d", "--at", str(FIXTURE_NOW),
        cwd=hermes_v11.parent, home=hermes_v11.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "### Per model (from sessions.model" in result.stdout
    assert "Missing `by_profile`" in result.stdout
    expected = sql_totals(hermes_v11, FIXTURE_NOW - 30 * 86400, FIXTURE_NOW)
    assert f"| Sessions / API calls | {expected['sessions']:,} / " in result.stdout


def test_a_bad_ledger_is_one_clear_line_and_exit_1(tmp_path: Path) -> None:
    not_sqlite = tmp_path / "state.db"
    not_sqlite.write_text("this is not a database\n" * 100)
    before = not_sqlite.read_bytes()
    result = run_cockpit("report", "--ledger", str(not_sqlite), cwd=tmp_path, home=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "not a SQLite database" in result.stderr
    assert not_sqlite.read_bytes() == before


# --- the lane ---------------------------------------------------------------------------------

RATES = {  # per second, constant, so increase over any window inside the data is rate × window
    "vllm:request_success_total": 2.0,
    "vllm:prompt_tokens_total": 40_000.0,
    "vllm:generation_tokens_total": 700.0,
    "vllm:prefix_cache_queries_total": 40_000.0,
    "vllm:prefix_cache_hits_total": 36_600.0,
    "vllm:request_queue_time_seconds_sum": 0.5,
    "vllm:request_queue_time_seconds_count": 2.0,
    "vllm:request_prefill_time_seconds_sum": 0.6,
    "vllm:request_prefill_time_seconds_count": 2.0,
    "vllm:request_decode_time_seconds_sum": 7.0,
    "vllm:request_decode_time_seconds_count": 2.0,
    "vllm:inter_token_latency_seconds_sum": 18.2,
    "vllm:inter_token_latency_seconds_count": 700.0,
}
START, END = 1_790_000_000, 1_790_000_000 + 3 * 3600
JOB = "report-lane"
"""The lane's job on the run's Prometheus: no other module writes it."""


def lane_history() -> OpenMetricsWriter:
    writer = OpenMetricsWriter()
    labels = {"job": JOB, "instance": "a:8000", "model_name": "m", "engine": "0"}
    for name, rate in RATES.items():
        family = re.sub(r"_(total|sum|count)$", "", name)
        kind = "counter" if name.endswith("_total") else "summary"
        samples = [(float(t), rate * (t - START)) for t in range(START, END + 1, 15)]
        writer.add(family, kind, name, labels, samples)
    return writer


@pytest.fixture(scope="module")
def prometheus(prometheus: PromServer) -> PromServer:
    """The run's Prometheus, holding the lane's three hours."""
    remote_write(prometheus, lane_history())
    return prometheus


def test_lane_report_from_a_real_prometheus(prometheus: PromServer, tmp_path: Path) -> None:
    at = START + 2 * 3600
    result = cockpit_here(
        "report", "--prometheus", prometheus.url, "--selector", f'job="{JOB}"',
        "--window", "1h", "--at", str(at), "--format", "json", cwd=tmp_path, home=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lane = json.loads(result.stdout)["lane"]
    f = {key: figure["value"] for key, figure in lane["figures"].items()}
    window = 3600
    assert f["requests"] == pytest.approx(RATES["vllm:request_success_total"] * window)
    assert f["prompt_generated"] == pytest.approx(40_000 / 700)
    assert f["prefix_cache_hit_rate"] == pytest.approx(36_600 / 40_000)
    assert f["prefill_computed"] == pytest.approx((40_000 - 36_600) * window)
    assert f["queue_mean"] == pytest.approx(0.25)
    assert f["decode_share"] == pytest.approx(7.0 / 7.6)
    assert f["itl_mean"] == pytest.approx(0.026)
    assert f["stream_tok_s"] == pytest.approx(1 / 0.026)
    assert lane["figures"]["kv_usage"]["value"] is None  # absent, so missing, never 0
    assert "not exposed" in lane["figures"]["kv_usage"]["reason"]
    assert lane["provenance"]["dialect"] == "vllm"
    assert "increase(" in lane["provenance"]["queries"]["requests"]

    markdown = cockpit_here(
        "report", "--prometheus", prometheus.url, "--selector", f'job="{JOB}"',
        "--window", "1h", "--at", str(at), cwd=tmp_path, home=tmp_path,
    )  # fmt: skip
    assert "| Prefix-cache hit rate | 91.5% |" in markdown.stdout
    assert "```promql" in markdown.stdout


def test_check_reports_each_source(prometheus: PromServer, hermes_v22: Path) -> None:
    ok = run_cockpit(
        "check", "--prometheus", prometheus.url, "--selector", f'job="{JOB}"',
        "--ledger", str(hermes_v22), cwd=hermes_v22.parent, home=hermes_v22.parent,
    )  # fmt: skip
    lines = ok.stdout.splitlines()
    # The lane's history ends in the past: reached, but no engine reports now.
    assert ok.returncode == 1, ok.stdout + ok.stderr
    stale = f"FAIL lane {JOB}: {prometheus.url}: no sample of the lane at the evaluation time"
    assert any(line.startswith(stale) for line in lines)
    assert any(line.startswith(f"ok   ledger {hermes_v22}: schema 22") for line in lines)
    down = run_cockpit(
        "check", "--prometheus", "http://127.0.0.1:9", "--ledger", str(hermes_v22),
        cwd=hermes_v22.parent, home=hermes_v22.parent,
    )  # fmt: skip
    assert down.returncode == 1
    assert any(
        line.startswith("FAIL lane lane: http://127.0.0.1:9: ") for line in down.stdout.splitlines()
    )
    assert "Traceback" not in down.stderr


# --- an engine's /metrics, scraped directly ---------------------------------------------------


ENGINE_UP_S = 3600.0
"""The fixtures are served as if scraped this long after their engine started, whatever today's
date: a 24h window then holds the engine's whole life, which the expected figures assume."""

STAMPED = re.compile(r"^(process_start_time_seconds|[^\s{#]+_created)(\{[^}]*\})? (\S+)$", re.M)


def as_scraped_at(text: str, now: float) -> str:
    """The exposition with its engine start and `_created` stamps moved ENGINE_UP_S before `now`
    (the counters' values unchanged)."""
    start = float(re.findall(r"^process_start_time_seconds (\S+)$", text, flags=re.M)[0])
    shift = now - ENGINE_UP_S - start
    return STAMPED.sub(lambda m: f"{m[1]}{m[2] or ''} {float(m[3]) + shift!r}", text)


class FixtureHandler(BaseHTTPRequestHandler):
    """GET /<fixture name>: that exposition, as scraped ENGINE_UP_S after its engine started."""

    def do_GET(self) -> None:
        path = VLLM_FIXTURES / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        body = as_scraped_at(path.read_text(encoding="utf-8"), time.time()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_fixtures_are_served_as_scraped_an_hour_after_their_engine_started() -> None:
    text = (VLLM_FIXTURES / "metrics_real_specdec.txt").read_text(encoding="utf-8")
    served = as_scraped_at(text, now=2e9)
    starts = [s.value for f in text_string_to_metric_families(served) for s in f.samples
              if s.name == "process_start_time_seconds"]  # fmt: skip
    assert starts == [2e9 - ENGINE_UP_S]
    created = [s.value for f in text_string_to_metric_families(served) for s in f.samples
               if s.name.endswith("_created")]  # fmt: skip
    assert created and all(2e9 - ENGINE_UP_S < c < 2e9 for c in created)
    assert fixture_counter("metrics_real_specdec.txt", "vllm:generation_tokens_total") == sum(
        s.value
        for f in text_string_to_metric_families(served)
        for s in f.samples
        if s.name == "vllm:generation_tokens_total"
    )


@pytest.fixture(scope="module")
def fixture_server() -> Any:
    """The real vLLM expositions over HTTP on a free loopback port, as if scraped an hour after
    their engine started (see `as_scraped_at`)."""
    require_fixture(VLLM_FIXTURES / "metrics_real_specdec.txt")
    server = ThreadingHTTPServer(("127.0.0.1", 0), FixtureHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def fixture_counter(name: str, metric: str) -> float:
    text = (VLLM_FIXTURES / name).read_text()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == metric
    )


def test_speculative_lane_report_measures_tokens_per_step(
    fixture_server: str, tmp_path: Path
) -> None:
    name = "metrics_real_specdec.txt"
    result = cockpit_here(
        "report", "--metrics-url", f"{fixture_server}/{name}", "--window", "24h",
        "--sample", "1s", "--format", "json", cwd=tmp_path, home=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)["lane"]["figures"]
    # Finished requests' tokens after their first, over the decode steps and decode time.
    decoded = fixture_counter(name, "vllm:request_generation_tokens_sum") - fixture_counter(
        name, "vllm:request_generation_tokens_count"
    )
    steps = fixture_counter(name, "vllm:inter_token_latency_seconds_count")
    decode_s = fixture_counter(name, "vllm:request_decode_time_seconds_sum")
    assert figures["tokens_per_step"]["value"] == pytest.approx(decoded / steps)
    assert figures["stream_tok_s"]["value"] == pytest.approx(decoded / decode_s)


def test_lane_report_rows_are_distinct_and_reasons_said_once(
    fixture_server: str, tmp_path: Path
) -> None:
    result = cockpit_here(
        "report", "--metrics-url", f"{fixture_server}/metrics_real.txt", "--window", "24h",
        "--sample", "1s", cwd=tmp_path, home=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| Requests with")]
    labels = [row.split(" | ")[0] for row in rows]
    assert len(labels) == 5 and len(set(labels)) == 5, rows
    assert any("prompt > 10,000 tokens" in row for row in rows)
    assert any("prompt > 100,000 tokens" in row for row in rows)
    for line in result.stdout.splitlines():
        if line.startswith("| "):
            cell = line.rstrip(" |").split(" | ")[-1]
            causes = [part.split(" (")[0] for part in cell.strip("—() ").split("; ")]
            assert len(causes) == len(set(causes)), line


def test_per_profile_table_survives_an_old_ledger(
    hermes_v22: Path, hermes_v11: Path, tmp_path: Path
) -> None:
    old = tmp_path / ".hermes" / "profiles" / "old" / "state.db"
    old.parent.mkdir(parents=True)
    shutil.copyfile(hermes_v11, old)
    result = cockpit_here(
        "report", "--ledger", str(hermes_v22), "--ledger", str(old), "--window", "90d",
        "--at", str(FIXTURE_NOW), cwd=tmp_path, home=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    section = result.stdout.split("### Per profile", 1)[1].split("\n## ", 1)[0]
    start = FIXTURE_NOW - 90 * 86400
    with sqlite3.connect(f"file:{hermes_v22}?mode=ro", uri=True) as db:
        new_profiles = dict(
            db.execute(
                "SELECT COALESCE(profile_name, 'default'), COUNT(*) FROM sessions "
                "WHERE started_at > ? AND started_at <= ? GROUP BY 1",
                (start, FIXTURE_NOW),
            ).fetchall()
        )
    expected = {**new_profiles, "old": sql_totals(old, start, FIXTURE_NOW)["sessions"]}
    shown = {
        cells[0]: int(cells[1].replace(",", ""))
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| Profile")
        for cells in [line.strip("| ").split(" | ")]
    }
    assert shown == expected
    assert "schema 11 has no profile_name" in section and "'old'" in section
    assert "Missing:" not in section


def test_a_stale_source_is_dated_in_utc_whatever_the_machines_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failed_at = datetime(2026, 11, 30, 12, 31, 6, tzinfo=UTC).timestamp()
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        said = Freshness("stale", since=failed_at, reason="connection refused").describe()
    finally:
        monkeypatch.undo()
        time.tzset()
    assert said == "stale since 12:31:06 UTC: connection refused"


def test_lane_report_shows_tails_beside_means_and_the_lane_now(
    fixture_server: str, tmp_path: Path
) -> None:
    result = cockpit_here(
        "report", "--metrics-url", f"{fixture_server}/metrics_real.txt", "--window", "24h",
        "--sample", "1s", cwd=tmp_path, home=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "| Latency | mean | p50 | p90 | p95 | p99 |" in lines
    rows = {line.split(" | ")[0]: line for line in lines if line.startswith("| ")}
    assert "—" not in rows["| Time to first token"] and " s |" in rows["| Time to first token"]
    # Every queue time of this engine lies in its first bucket (≤ 0.3 s): the receipt says
    # its percentiles are interpolated inside it, beside a mean of microseconds.
    assert "µs" in rows["| Queue time"]
    assert any(line.startswith("- Queue time p50") and "first bucket" in line for line in lines)
    assert rows["| Running requests (now)"] == "| Running requests (now) | 0 |"
    assert "| Requests/s (last minute)" in rows and "| Requests/s (window mean)" in rows


def test_a_stale_source_s_receipt_says_its_figures_are_the_last_good_read() -> None:
    totals = LaneTotals("lane", "vllm", 3600, 2e9)
    stale = Freshness("stale", since=2e9, reason="connection refused")
    lane = LaneSnapshot("lane", "1h", totals, lane_figures(totals), None, None, stale)
    note = "> **Source stale since 03:33:20 UTC: connection refused** — figures are the last"
    assert markdown_receipt(lane, None).splitlines()[2:4] == [f"{note} good read.", ""]

"""ScrapeSource on the real vLLM expositions and on a live prometheus_client exporter."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.exposition import MetricsHandler

from cockpit.config.schema import Config, LaneConfig
from cockpit.core.figures import lane_figures
from cockpit.core.model import SECOND_SCRAPE
from cockpit.core.model import SourceFailure as SourceError
from cockpit.runtime.feeds import build_lane_feeds, missing_causes
from cockpit.runtime.poller import SECOND_READ_S, LanePoller, close_all
from cockpit.sources.scrape import ScrapeSource
from tests.support.loopback import line_sum, serving_folder
from tests.support.repo import FIXTURES, VLLM_FIXTURES, require_fixture

LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})? (\S+)$")


def fixture_text(name: str) -> str:
    return require_fixture(VLLM_FIXTURES / name).read_text()


def newest_created(text: str) -> float:
    return max(
        float(m.group(3))
        for m in map(LINE.match, text.splitlines())
        if m and m.group(1).startswith("vllm:") and m.group(1).endswith("_created")
    )


def test_first_scrape_of_real_exposition_counts_since_engine_start() -> None:
    text = fixture_text("metrics_real.txt")
    at = newest_created(text) + 600
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(text, at)
    totals = source.totals("real", "", 3600, at)
    assert source.dialect == "vllm" and totals.dialect == "vllm"
    expected = {
        "prompt_tokens": line_sum(text, "vllm:prompt_tokens_total"),
        "prefix_cache_hits": line_sum(text, "vllm:prefix_cache_hits_total"),
        "prefix_cache_queries": line_sum(text, "vllm:prefix_cache_queries_total"),
        "prompt_computed": line_sum(
            text, "vllm:prompt_tokens_by_source_total", 'source="local_compute"'
        ),
        "requests": line_sum(text, "vllm:request_success_total"),
        "ttft_sum": line_sum(text, "vllm:time_to_first_token_seconds_sum"),
        "kv_computed_count": line_sum(text, "vllm:request_prefill_kv_computed_tokens_count"),
    }
    assert expected["prompt_tokens"] > 0 and expected["prompt_computed"] > 0
    for key, value in expected.items():
        assert totals.values[key] == pytest.approx(value), key
    assert totals.values["flops"] == 0.0  # registered at 0: a real zero, not missing
    assert totals.missing["spec_drafts"].startswith("not exposed by this engine")
    assert totals.coverage_note.startswith("since engine start")
    buckets = totals.histograms["prompt_len"]
    assert buckets[-1][0] == float("inf")
    assert buckets[-1][1] == line_sum(text, "vllm:request_prompt_tokens_count")
    assert [le for le, _ in buckets] == sorted(le for le, _ in buckets)
    assert totals.kv_capacity_tokens == 1048576


def test_only_wanted_samples_are_parsed_and_a_garbled_wanted_one_is_an_error() -> None:
    """Unused families (most of an exposition) aren't parsed; a figure's own lines still are."""
    text = fixture_text("metrics_real.txt")
    at = newest_created(text) + 600
    clean = ScrapeSource("http://127.0.0.1:1/metrics")
    clean.ingest(text, at)
    garbled_unused = text + 'vllm:request_params_n_bucket{le="1.0" 3 oops\n'
    tolerant = ScrapeSource("http://127.0.0.1:1/metrics")
    tolerant.ingest(garbled_unused, at)
    assert tolerant.totals("real", "", 3600, at).values == clean.totals("real", "", 3600, at).values
    garbled_used = text + 'vllm:prompt_tokens_total{engine="9" oops\n'
    with pytest.raises(SourceError, match="cannot parse the /metrics text"):
        ScrapeSource("http://127.0.0.1:1/metrics").ingest(garbled_used, at)


def test_an_exposition_without_engine_metrics_is_not_an_engine_yet() -> None:
    """Another exporter, or a server up before its engine: said so, and not backed off (the
    endpoint answered well), so the engine shows on the first scrape that has its names."""
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    at = 1_700_000_000.0
    with pytest.raises(SourceError, match=r"no vllm:.* sglang:.* metrics found") as raised:
        source.ingest(
            "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n", at
        )
    assert raised.value.engine_absent is True
    source.ingest(fixture_text("metrics_real.txt"), at + 5)
    assert source.dialect == "vllm"


def test_specdec_exposition_has_spec_counters() -> None:
    text = fixture_text("metrics_real_specdec.txt")
    at = newest_created(text) + 60
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(text, at)
    totals = source.totals("spec", '{model_name="tiny"}', 3600, at)
    for key, name in (
        ("spec_drafts", "vllm:spec_decode_num_drafts_total"),
        ("spec_draft_tokens", "vllm:spec_decode_num_draft_tokens_total"),
        ("spec_accepted", "vllm:spec_decode_num_accepted_tokens_total"),
    ):
        assert totals.values[key] == line_sum(text, name) > 0


def test_selector_filters_series() -> None:
    text = fixture_text("metrics_real.txt")
    at = newest_created(text) + 60
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(text, at)
    mine = source.totals("x", '{job="ignored",model_name="tiny"}', 3600, at)
    assert mine.values["prompt_tokens"] == line_sum(text, "vllm:prompt_tokens_total") > 0
    with pytest.raises(
        SourceError, match=re.escape('no series match {job="ignored",model_name="other"}')
    ):
        source.totals("x", '{job="ignored",model_name="other"}', 3600, at)
    early = source.totals("x", '{model_name="tiny"}', 3600, at - 7200)  # before any scrape
    assert early.missing["running"] == "no samples in window"  # matching series, no points


# --- the real exposition served over HTTP -------------------------------------------------


@pytest.fixture
def served_fixture(tmp_path: Path) -> Iterator[str]:
    """metrics_real.txt served by a real HTTP server on loopback; yields its URL."""
    (tmp_path / "metrics_real.txt").write_text(fixture_text("metrics_real.txt"))
    with serving_folder(tmp_path) as url:
        yield f"{url}/metrics_real.txt"


def model_names(text: str) -> set[str]:
    return set(re.findall(r'model_name="([^"]*)"', text))


@pytest.mark.parametrize("selector", ['model_name="nope"', '{model_name=~"no.*",engine="0"}'])
async def test_a_selector_matching_no_series_on_a_direct_scrape_is_said_so(
    served_fixture: str, selector: str
) -> None:
    assert "nope" not in model_names(fixture_text("metrics_real.txt"))
    source = ScrapeSource(served_fixture)
    try:
        await source.poll()
        with pytest.raises(SourceError) as mismatch:
            await source.read_lane("lane", None, selector, 3600)
    finally:
        await source.aclose()
    assert str(mismatch.value) == f"{served_fixture}: no series match {selector}"
    # as on Prometheus: the source answered well, so it is asked again without back-off
    assert mismatch.value.engine_absent is True


async def test_a_model_filter_matching_no_series_on_a_direct_scrape_is_said_so(
    served_fixture: str,
) -> None:
    from cockpit.config.schema import LaneConfig
    from cockpit.runtime.feeds import ScrapeLaneFeed

    text = fixture_text("metrics_real.txt")
    (served,) = model_names(text)
    feed = ScrapeLaneFeed(
        LaneConfig("lane", metrics_url=served_fixture), ScrapeSource(served_fixture)
    )
    try:
        feed.filter_model(served)
        totals = await feed.read(3600, None)
        assert totals.values["running"] == line_sum(text, "vllm:num_requests_running")
        feed.filter_model("nope")
        with pytest.raises(SourceError, match=re.escape('no series match {model_name="nope"}')):
            await feed.read(3600, None)
    finally:
        await feed.close()


def test_check_fails_on_a_direct_scrape_whose_selector_matches_nothing(
    served_fixture: str,
) -> None:
    import subprocess
    import sys

    def check(selector: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "cockpit", "check", "--metrics-url", served_fixture]
        return subprocess.run(
            [*command, "--selector", selector, "--sample", "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )

    wrong = check('model_name="nope"')
    assert wrong.returncode != 0, wrong.stdout
    assert 'no series match model_name="nope"' in wrong.stdout
    (served,) = model_names(fixture_text("metrics_real.txt"))
    right = check(f'model_name="{served}"')
    assert right.returncode == 0, right.stdout + right.stderr


def test_check_says_what_is_missing_by_cause_and_doubts_a_forced_dialect(
    served_fixture: str,
) -> None:
    import subprocess
    import sys

    def check(engine: str) -> str:
        command = [sys.executable, "-m", "cockpit", "check", "--metrics-url", served_fixture]
        done = subprocess.run(
            [*command, "--engine", engine, "--sample", "0"],  # one scrape
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    detected = check("auto")
    assert "missing: needs a second scrape ×" in detected and "nothing read as" not in detected
    forced = check("sglang")
    assert "nothing read as sglang: is that the engine? (engine: auto detects it)" in forced


def test_missing_causes_are_counted_once_each() -> None:
    missing = {
        "a": "needs a second scrape",
        "b": "not exposed by this engine (vllm:b)",
        "c": "needs a second scrape",
        "d": "not exposed by this engine (vllm:d)",
        "e": "needs a second scrape",
    }
    said = missing_causes(missing)
    assert said == "needs a second scrape ×3, not exposed by this engine ×2"


def test_without_created_needs_a_second_scrape() -> None:
    text = fixture_text("metrics_real.txt")
    bare = "\n".join(line for line in text.splitlines() if "_created" not in line) + "\n"
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(bare, 1000.0)
    first = source.totals("bare", "", 300, 1000.0)
    assert first.missing["prompt_tokens"] == "needs a second scrape"
    before = line_sum(bare, "vllm:prompt_tokens_total")
    later = bare.replace(
        f'vllm:prompt_tokens_total{{engine="0",model_name="tiny"}} {before}',
        f'vllm:prompt_tokens_total{{engine="0",model_name="tiny"}} {before + 321}',
    )
    assert later != bare
    source.ingest(later, 1005.0)
    second = source.totals("bare", "", 300, 1005.0)
    assert second.values["prompt_tokens"] == 321
    assert second.covered_s == 5.0 and second.coverage_note == "watched 5 s of 5m"


# --- a live exporter ----------------------------------------------------------------------


class Exporter:
    """A prometheus_client registry served on loopback; `restart()` swaps the process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._make()
        handler = MetricsHandler.factory(self.registry)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def _make(self) -> None:
        labels = ["model_name", "engine"]
        self.prompt = Counter("vllm:prompt_tokens", "p", labels, registry=self.registry)
        self.queries = Counter("vllm:prefix_cache_queries", "q", labels, registry=self.registry)
        self.running = Gauge("vllm:num_requests_running", "r", labels, registry=self.registry)
        self.usage = Gauge("vllm:kv_cache_usage_perc", "u", labels, registry=self.registry)
        self.lengths = Histogram(
            "vllm:request_prompt_tokens", "l", labels, buckets=(10, 100), registry=self.registry
        )

    def restart(self) -> None:
        for collector in (self.prompt, self.queries, self.running, self.usage, self.lengths):
            self.registry.unregister(collector)
        self._make()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    live = Exporter()
    yield live
    live.stop()


async def test_live_exporter_with_restarts(exporter: Exporter) -> None:
    source = ScrapeSource(exporter.url)
    mine = exporter.prompt.labels("m", "0")
    exporter.prompt.labels("other", "0").inc(1000)
    exporter.running.labels("m", "0").set(4)
    exporter.usage.labels("m", "0").set(0.5)
    await source.poll()
    first = await source.read_lane("live", None, '{model_name="m"}', 3600)
    assert first.values["prompt_tokens"] == 0.0  # born inside the window, nothing yet
    assert first.coverage_note.startswith("since engine start")

    mine.inc(100)
    exporter.lengths.labels("m", "0").observe(5)
    exporter.lengths.labels("m", "0").observe(50)
    exporter.running.labels("m", "0").set(8)
    await source.poll()
    exporter.restart()  # a drop: the new process starts again from 0
    exporter.prompt.labels("m", "0").inc(30)
    await source.poll()
    exporter.restart()  # no drop (500 > 30): only the new _created shows the restart
    exporter.prompt.labels("m", "0").inc(500)
    exporter.usage.labels("m", "0").set(0.9)
    exporter.running.labels("m", "0").set(6)
    await source.poll()
    totals = await source.read_lane("live", None, '{model_name="m"}', 3600)
    assert totals.values["prompt_tokens"] == 100 + 30 + 500
    # After the first restart the new gauges have no series until set: 3 scrapes carry them.
    assert totals.values["running"] == pytest.approx((4 + 8 + 6) / 3)
    assert totals.values["kv_usage"] == pytest.approx((0.5 + 0.5 + 0.9) / 3)
    assert dict(totals.histograms["prompt_len"]) == {10.0: 1.0, 100.0: 2.0, float("inf"): 2.0}
    assert totals.missing["prefix_cache_queries"].startswith("not exposed by this engine")
    assert source.http.requests == 4


async def test_unreachable_engine(tmp_path: Path) -> None:
    from cockpit.core.model import SourceFailure as SourceError
    from tests.support.promharness import free_port

    source = ScrapeSource(f"http://127.0.0.1:{free_port()}/metrics")
    with pytest.raises(SourceError, match="connection refused") as refused:
        await source.poll()
    await source.aclose()
    assert refused.value.engine_absent is True  # not up yet: asked every refresh, no back-off


async def test_an_engine_that_does_not_answer_in_time_is_not_taken_for_absent() -> None:
    """It listens but is stuck (or overloaded): that one gets the back-off."""
    with socket.create_server(("127.0.0.1", 0)) as listening:  # accepts, never answers
        port = listening.getsockname()[1]
        source = ScrapeSource(f"http://127.0.0.1:{port}/metrics", timeout=0.3)
        with pytest.raises(SourceError, match="timed out") as stuck:
            await source.poll()
        await source.aclose()
    assert stuck.value.engine_absent is False


def test_names_escaped_by_an_openmetrics_answer() -> None:
    # prometheus_client answers OpenMetrics requests with `vllm_` names (client_python #1177).
    text = fixture_text("metrics_real.txt").replace("vllm:", "vllm_")
    at = newest_created(fixture_text("metrics_real.txt")) + 60
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(text, at)
    totals = source.totals("esc", "", 3600, at)
    assert totals.dialect == "vllm"
    assert totals.values["prompt_tokens"] == line_sum(text, "vllm_prompt_tokens_total") > 0
    assert totals.kv_capacity_tokens == 1048576


def test_buffer_is_bounded_and_long_windows_are_partial() -> None:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.buffer.max_scrapes, source.buffer.max_age_s = 3, 3600
    for i in range(5):
        body = f'vllm:prompt_tokens_total{{engine="0"}} {100 * i}\nvllm:num_requests_running 1\n'
        source.ingest(body, 1000.0 + 10 * i)
    assert list(source.buffer.scrapes) == [1020.0, 1030.0, 1040.0]
    totals = source.totals("b", "", 3600, 1040.0)
    assert totals.values["prompt_tokens"] == 200  # 200 -> 400 over the three kept scrapes
    assert totals.covered_s == 20 and totals.coverage_note == "watched 20 s of 1h"
    source.ingest('vllm:prompt_tokens_total{engine="0"} 500\n', 1040.0 + 7200)
    assert list(source.buffer.scrapes) == [8240.0]  # older than max_age_s: dropped


async def test_a_keep_alive_engine_is_scraped_over_one_connection(exporter: Exporter) -> None:
    """Scrapes reuse one kept-alive connection, and ask for the classic text format (its
    Accept header, not the client's default, is sent)."""
    registry = exporter.registry
    connections: list[object] = []

    class KeepAlive(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # as vLLM's server: connections stay open

        def setup(self) -> None:
            connections.append(self.client_address)
            super().setup()

        def do_GET(self) -> None:
            classic = self.headers.get("Accept", "").startswith("text/plain")
            body = generate_latest(registry) if classic else b"asked for another format\n"
            self.send_response(200 if classic else 406)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    source = ScrapeSource(f"http://127.0.0.1:{server.server_address[1]}/metrics")
    try:
        exporter.prompt.labels("m", "0").inc(7)
        for _ in range(3):
            await source.poll()
        totals = await source.read_lane("live", None, '{model_name="m"}', 3600)
        assert source.http.requests == 3 and len(connections) == 1
        assert "prompt_tokens" in totals.values
        assert not source.escaped, "asked for the classic format: names keep their colon"
    finally:
        await source.aclose()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(45, "45 s"), (12 * 60, "12 min"), (803 * 60, "13.4 h"), (2.5 * 86400, "2.5 d")],
)
def test_an_engine_up_for_hours_says_hours(seconds: float, said: str) -> None:
    text = fixture_text("metrics_real.txt")
    # the engine's start: its counters' `_created`, made within a second of each other
    born = max(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:") and "_created{" in line
    )
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(text, born + seconds)
    totals = source.totals("lane", "", 30 * 86400, born + seconds)
    assert totals.coverage_note == f"since engine start ({said})"


def test_sglang_kv_capacity_is_the_lanes_own_model() -> None:
    """Two models on one /metrics: the capacity is the selected model's (one TP rank of it),
    as the Prometheus source's `max_total_num_tokens{selector}` reads it."""
    text = require_fixture(FIXTURES / "sglang" / "metrics_tp2.txt").read_text()
    other = 'model_name="other",engine_type="unified",pp_rank="0",moe_ep_rank="0"'
    text += "".join(
        f'sglang:max_total_num_tokens{{{other},tp_rank="{rank}"}} 30000.0\n' for rank in "01"
    )
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(text, 2e9)
    assert source.totals("q", '{model_name="qwen"}', 3600, 2e9).kv_capacity_tokens == 80000
    assert source.totals("o", '{model_name="other"}', 3600, 2e9).kv_capacity_tokens == 30000


def test_last_minute_rates_and_now_come_from_the_last_scrapes() -> None:
    """7 requests/s with an engine restart inside the last minute: the minute's rate is 7; the
    gauges now are the last scrape's, whatever the window's mean."""
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    requests, end = 0.0, 2e9
    for at in range(int(end) - 600, int(end) + 1, 10):
        requests = 70.0 if at == end - 30 else requests + 70  # restarted: 10 s of traffic
        running = 9.0 if at == end else 1.0
        source.ingest(
            f'vllm:request_success_total{{finished_reason="stop"}} {requests}\n'
            f"vllm:num_requests_running {running}\nvllm:kv_cache_usage_perc 0.25\n",
            at,
        )
    figures = lane_figures(source.totals("lane", "", 3600, end)).figures
    assert figures["requests_per_s_1m"].value == pytest.approx(7.0)
    assert figures["running_now"].value == 9.0
    assert figures["running"].value == pytest.approx((60 * 1 + 9) / 61)
    assert figures["kv_usage_now"].value == 0.25
    # Watched for 20 s only: the rate over what was watched, not a third of it.
    young = ScrapeSource("http://127.0.0.1:1/metrics")
    for at, count in ((end - 20, 0.0), (end - 10, 70.0), (end, 140.0)):
        young.ingest(f"vllm:request_success_total {count}\nvllm:num_requests_running 1\n", at)
    assert lane_figures(young.totals("lane", "", 3600, end))["requests_per_s_1m"].value == 7.0
    # A gauge the last scrape lacks has no value now, whatever the window held.
    young.ingest("vllm:request_success_total 210\n", end + 10)
    later = lane_figures(young.totals("lane", "", 3600, end + 10))
    assert later["running_now"].value is None and later["running"].value == 1.0
    assert later["running_now"].reason == "not in the last scrape"


def test_a_model_that_appears_in_a_later_scrape_is_listed_and_one_let_go_is_not() -> None:
    one = fixture_text("metrics_real.txt")
    (served,) = model_names(one)
    renamed = one.replace(f'model_name="{served}"', 'model_name="later"')
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(one, 1000.0)
    assert source.label_values("model_name") == [served]
    source.ingest(renamed, 1010.0)
    assert source.label_values("model_name") == sorted([served, "later"])
    source.totals("lane", "", 5.0, 1010.0)  # the longest window read: 5 s
    source.ingest(renamed, 1020.0)  # the first model's series, last seen 20 s ago, let go
    assert source.label_values("model_name") == ["later"]


@pytest.fixture
def served_without_births(tmp_path: Path) -> Iterator[str]:
    """metrics_real.txt without its `_created` samples (as with
    `PROMETHEUS_DISABLE_CREATED_SERIES`), served on loopback; yields its URL."""
    text = fixture_text("metrics_real.txt")
    lines = [line for line in text.splitlines() if "_created" not in line.split(" ", 1)[0]]
    assert len(lines) < len(text.splitlines()), "the fixture has _created samples to drop"
    (tmp_path / "metrics").write_text("\n".join(lines) + "\n")
    with serving_folder(tmp_path) as url:
        yield f"{url}/metrics"


@pytest.mark.parametrize(("refresh_s", "hurried_s"), [(5.0, SECOND_READ_S), (0.5, 0.5)])
async def test_a_lane_without_births_is_read_again_within_a_second_for_its_rates(
    served_without_births: str, refresh_s: float, hurried_s: float
) -> None:
    lane = LaneConfig("real", metrics_url=served_without_births, timeout_s=5.0)
    feeds = build_lane_feeds(Config(source="<test>", lanes=(lane,)))
    poller = LanePoller(feeds[0], refresh_s)
    try:
        first = await poller.cycle("1h")
        assert first.totals is not None
        assert first.totals.missing.get("requests") == SECOND_SCRAPE.reason
        assert poller.delay == hurried_s
        second = await poller.cycle("1h")
        assert second.totals is not None and "requests" in second.totals.values
        assert SECOND_SCRAPE.reason not in second.totals.missing.values()
        assert poller.delay == refresh_s
    finally:
        await close_all(feeds, None)

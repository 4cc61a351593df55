"""The scrape source's buffer: bad samples, engine restarts that add series, and its bounds.

Each test reads real vLLM expositions (tests/fixtures/vllm), changed only where the scenario
needs it, and checks the figures against the counters in the texts."""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cockpit.core.figures import lane_figures
from cockpit.core.model import SourceFailure
from cockpit.engines.specs import Gauge
from cockpit.sources.buffer import Buffer, Window
from cockpit.sources.scrape import ScrapeSource
from tests.support.loopback import serving_folder
from tests.support.repo import VLLM_FIXTURES, require_fixture

SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})? (\S+)$")
URL = "http://127.0.0.1:1/metrics"
PROMPT = 'vllm:prompt_tokens_total{engine="0",model_name="tiny"}'
RUNNING = 'vllm:num_requests_running{engine="0",model_name="tiny"}'


def fixture_text(name: str) -> str:
    return require_fixture(VLLM_FIXTURES / name).read_text()


def value_of(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{series} not in the text")


def with_value(text: str, series: str, value: str) -> str:
    """The exposition with one series' sample value replaced."""
    changed = re.sub(rf"^{re.escape(series)} \S+$", f"{series} {value}", text, flags=re.M)
    assert changed != text or value_of(text, series) == float(value)
    return changed


def born_at(text: str, when: float) -> str:
    """The exposition of an engine started at `when` (every `_created` set to it)."""
    return "\n".join(
        f"{line.rsplit(' ', 1)[0]} {when!r}" if "_created" in line.split(" ")[0] else line
        for line in text.splitlines()
    )


def total(text: str, name: str) -> float:
    found = (SAMPLE.match(line) for line in text.splitlines())
    return sum(float(m.group(3)) for m in found if m and m.group(1) == name)


# --- non-finite samples ---------------------------------------------------------------------


def test_one_nan_sample_does_not_poison_a_counter() -> None:
    """A NaN is left out and said; the counter's increase around it and after it is right."""
    bare = "\n".join(line for line in fixture_text("metrics_real.txt").splitlines()
                     if "_created" not in line)  # fmt: skip
    source = ScrapeSource(URL)
    for at, value in ((1000.0, "100"), (1005.0, "NaN"), (1010.0, "200"), (1015.0, "350")):
        source.ingest(with_value(bare, PROMPT, value), at)
    across = source.totals("l", "", 20, 1015.0)  # 995..1015: holds the NaN
    assert across.values["prompt_tokens"] == 250
    assert across.warnings == ("1 non-finite sample (NaN/Inf) left out: vllm:prompt_tokens_total",)
    after = source.totals("l", "", 6, 1015.0)  # 1009..1015: after it
    assert after.values["prompt_tokens"] == 150
    assert after.warnings == ()


def test_an_infinite_gauge_sample_is_left_out_of_the_mean() -> None:
    text = fixture_text("metrics_real.txt")
    source = ScrapeSource(URL)
    for at, value in ((1000.0, "4"), (1005.0, "+Inf"), (1010.0, "6")):
        source.ingest(with_value(text, RUNNING, value), at)
    totals = source.totals("l", "", 60, 1010.0)
    assert totals.values["running"] == 5
    assert "1 non-finite sample (NaN/Inf) left out: vllm:num_requests_running" in totals.warnings
    only_bad = source.totals("l", "", 1, 1005.0)
    assert only_bad.missing["running"] == "only non-finite samples (NaN/Inf) in window"


# --- coverage across an engine restart ------------------------------------------------------


def test_a_restart_that_adds_series_keeps_the_watched_coverage() -> None:
    """Watched since T0 an engine up for hours; it restarts with speculative decoding (more
    series). Totals hold the first engine's counts since T0 plus the new engine's since its
    start: the window covers T0..end, not the new engine's 10 s."""
    first = fixture_text("metrics_real.txt")
    t0 = 1_800_000_000.0
    old_engine = born_at(first, t0 - 7200)  # started before the 1 h window
    before = value_of(old_engine, PROMPT)
    source = ScrapeSource(URL)
    source.ingest(old_engine, t0)
    source.ingest(with_value(old_engine, PROMPT, repr(before + 600)), t0 + 60)
    restarted = born_at(fixture_text("metrics_real_specdec.txt"), t0 + 100)
    source.ingest(restarted, t0 + 110)
    totals = source.totals("l", "", 3600, t0 + 110)
    prompt = 600 + value_of(restarted, PROMPT)
    assert totals.values["prompt_tokens"] == pytest.approx(prompt)
    drafts = total(restarted, "vllm:spec_decode_num_drafts_total")
    assert totals.values["spec_drafts"] == drafts > 0  # counted since its engine's start
    assert totals.covered_s == 110
    assert totals.coverage_note == "watched 2 min of 1h"
    figures = lane_figures(totals)
    assert figures["prompt_tok_s"].value == pytest.approx(prompt / 110)


def test_an_engine_started_inside_the_window_counts_from_its_start() -> None:
    text = born_at(fixture_text("metrics_real_specdec.txt"), 1_800_000_000.0)
    source = ScrapeSource(URL)
    source.ingest(text, 1_800_000_000.0 + 300)
    totals = source.totals("l", "", 3600, 1_800_000_300.0)
    assert totals.covered_s == 300 and totals.coverage_note == "since engine start (5 min)"
    assert totals.values["prompt_tokens"] == total(text, "vllm:prompt_tokens_total")


# --- bounds -----------------------------------------------------------------------------------


def test_series_the_lane_does_not_select_are_not_kept() -> None:
    text = fixture_text("metrics_real.txt")
    other = text.replace('model_name="tiny"', 'model_name="other"')
    both = text + "\n".join(line for line in other.splitlines() if line.startswith("vllm:"))
    mine = ScrapeSource(URL, selector='{job="x",model_name="tiny"}')
    everything = ScrapeSource(URL)
    for source in (mine, everything):
        source.ingest(both, 1000.0)
    assert mine.buffer.size < everything.buffer.size * 0.6
    read = mine.totals("l", "", 60, 1000.0)
    assert read.values["running"] == total(text, "vllm:num_requests_running")
    with pytest.raises(SourceFailure, match="no series match"):
        mine.totals("l", 'model_name="other"', 60, 1000.0)


def test_series_that_stopped_appearing_are_let_go() -> None:
    """Label churn: a new series every scrape. Those no window read reaches any more go."""
    source = ScrapeSource(URL)
    base = 'vllm:num_requests_running{engine="0"} 1\n'
    for k in range(200):
        churn = f'vllm:prompt_tokens_total{{engine="0",request="{k}"}} {k}\n'
        source.ingest(base + churn, 1000.0 + 5 * k)
        source.totals("l", "", 60, 1000.0 + 5 * k)
    kept = source.buffer.series["vllm:prompt_tokens_total"]
    assert 10 <= len(kept) <= 14  # a 60 s window at one scrape per 5 s
    assert source.totals("l", "", 60, 1995.0).values["running"] == 1
    longer = source.totals("l", "", 3600, 1995.0)  # reaches before what was let go
    assert longer.covered_s is not None and longer.covered_s <= 65
    assert longer.coverage_note.startswith("watched")


def test_the_buffer_stays_within_its_size_bound() -> None:
    text = fixture_text("metrics_real.txt")
    bound = 200_000
    source = ScrapeSource(URL)
    source.buffer.max_bytes = bound
    for k in range(100):
        source.ingest(with_value(text, PROMPT, str(100 * k)), 1000.0 + 5 * k)
        assert source.buffer.size <= bound
    totals = source.totals("l", "", 3600, 1495.0)
    assert totals.coverage_note.startswith("watched") and totals.covered_s is not None
    assert totals.values["prompt_tokens"] == pytest.approx(100 * totals.covered_s / 5)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """The real exposition served by a real HTTP server on loopback; yields its URL."""
    (tmp_path / "metrics").write_text(fixture_text("metrics_real.txt"))
    with serving_folder(tmp_path) as url:
        yield f"{url}/metrics"


async def test_an_answer_over_the_size_cap_is_refused_with_its_reason(served: str) -> None:
    source = ScrapeSource(served)
    source.http.max_bytes = 10_000
    try:
        with pytest.raises(SourceFailure) as refused:
            await source.poll()
    finally:
        await source.aclose()
    assert str(refused.value) == (
        f"{served}: answer over 0.01 MB refused (a runaway query or label?)"
    )


def test_a_selected_label_value_with_quotes_and_backslashes_is_kept() -> None:
    text = fixture_text("metrics_real.txt").replace('model_name="tiny"', 'model_name="ti\\"n\\\\y"')
    source = ScrapeSource(URL, selector='{model_name="ti\\"n\\\\y"}')
    source.ingest(text, 1000.0)
    read = source.totals("l", "", 60, 1000.0)
    assert read.values["running"] == total(text, "vllm:num_requests_running")
    assert read.values["kv_usage"] == total(text, "vllm:kv_cache_usage_perc")


async def test_a_large_answer_is_read_whole(tmp_path: Path) -> None:
    """An engine serving many models (a 2 MB answer, parsed off the event loop)."""
    text = fixture_text("metrics_real.txt")
    others = "".join(
        f'vllm:num_requests_running{{engine="0",model_name="m{k}"}} 1\n' for k in range(40_000)
    )
    assert len(text + others) > 2_000_000
    (tmp_path / "metrics").write_text(text + others)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    source = ScrapeSource(url, selector='model_name="tiny"')
    try:
        totals = await source.read_lane("l", None, "", 60)
    finally:
        await source.aclose()
        server.shutdown()
        server.server_close()
    assert totals.values["running"] == total(text, "vllm:num_requests_running")
    everything = source.totals("l", "", 60, None)
    assert everything.values["running"] == totals.values["running"]  # the others aren't kept


def test_an_openmetrics_answer_with_exemplars_reads_as_the_classic_one() -> None:
    """`vllm_` names, `_created` inside the counter's family, an exemplar, `# EOF`."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
    from prometheus_client.openmetrics.exposition import generate_latest

    registry = CollectorRegistry()
    prompt = Counter("vllm:prompt_tokens", "p", ["model_name"], registry=registry)
    running = Gauge("vllm:num_requests_running", "r", ["model_name"], registry=registry)
    lengths = Histogram(
        "vllm:request_prompt_tokens", "l", ["model_name"], buckets=(10,), registry=registry
    )
    prompt.labels("m").inc(42)
    running.labels("m").set(3)
    lengths.labels("m").observe(3, exemplar={"trace_id": "abc"})
    lengths.labels("m").observe(30)
    text = generate_latest(registry).decode()
    assert "# {trace_id=" in text and "vllm_prompt_tokens_created" in text
    created = re.search(r"^vllm_prompt_tokens_created\{[^}]*\} (\S+)$", text, flags=re.M)
    assert created is not None
    at = float(created.group(1)) + 60  # a minute after the counters were made
    source = ScrapeSource(URL)
    source.ingest(text, at)
    totals = source.totals("l", "", 3600, at)
    assert totals.values["prompt_tokens"] == 42 and totals.values["running"] == 3
    assert dict(totals.histograms["prompt_len"]) == {10.0: 1.0, float("inf"): 2.0}


# --- the KV capacity ------------------------------------------------------------------------


def test_the_kv_capacity_is_the_last_seen_and_its_absence_is_said() -> None:
    """A scrape without cache_config_info (an engine restarting) keeps the last one seen; a
    lane that never showed one says that, not that the engine can't report it."""
    text = fixture_text("metrics_real.txt")
    without = "\n".join(line for line in text.splitlines() if "cache_config_info" not in line)
    source = ScrapeSource(URL)
    source.ingest(text, 1000.0)
    source.ingest(without, 1005.0)
    totals = source.totals("real", "", 3600, 1005.0)
    assert totals.kv_capacity_tokens == 1048576
    assert "kv_capacity_tokens" not in totals.missing
    never = ScrapeSource(URL)
    never.ingest(without, 1000.0)
    totals = never.totals("real", "", 3600, 1000.0)
    reason = "no vllm:cache_config_info sample in the window"
    assert totals.kv_capacity_tokens is None and totals.missing["kv_capacity_tokens"] == reason
    figures = lane_figures(totals)
    assert figures["kv_capacity_tokens"].reason == reason
    assert figures["kv_resident_tokens"].reason == reason


# --- a gauge's mean over the window ----------------------------------------------------------

WAITING_BY_REASON = "vllm:num_requests_waiting_by_reason"
"""vLLM V1's waiting requests by `reason` (vllm/v1/metrics/loggers.py): a gauge per reason."""


def gauge_over(scrapes: dict[float, dict[str, float]], spec: Gauge) -> object:
    """`spec` over a window holding every scrape: {time: {reason: value}}."""
    buffer = Buffer()
    for at, by_reason in scrapes.items():
        labels = {(("reason", reason),): (value, math.nan) for reason, value in by_reason.items()}
        buffer.add(at, {spec.metric: labels})
    return Window(buffer, [], min(scrapes), max(scrapes), ()).read(spec)


def test_gauge_by_label_is_each_series_mean_over_its_scrapes() -> None:
    scrapes = {10.0: {"capacity": 1.0, "deferred": 0.0}, 11.0: {"capacity": 2.0, "deferred": 3.0},
               12.0: {"capacity": 4.0, "deferred": 3.0}}  # fmt: skip
    found = gauge_over(scrapes, Gauge(WAITING_BY_REASON, "sum", by="reason"))
    assert found == {"capacity": (1.0 + 2.0 + 4.0) / 3, "deferred": (0.0 + 3.0 + 3.0) / 3}


def test_gauge_summed_across_series_then_averaged_over_scrapes() -> None:
    scrapes = {10.0: {"capacity": 1.0, "deferred": 3.0}, 11.0: {"capacity": 2.0, "deferred": 5.0}}
    found = gauge_over(scrapes, Gauge(WAITING_BY_REASON, "sum"))
    assert found == ((1.0 + 3.0) + (2.0 + 5.0)) / 2


def test_gauge_with_a_series_that_appears_later_averages_per_scrape() -> None:
    # `deferred` appears at the last scrape only: the scrapes' sums are 2, 4 and 6 + 10.
    scrapes = {10.0: {"capacity": 2.0}, 11.0: {"capacity": 4.0},
               12.0: {"capacity": 6.0, "deferred": 10.0}}  # fmt: skip
    assert gauge_over(scrapes, Gauge(WAITING_BY_REASON, "sum")) == (2.0 + 4.0 + 16.0) / 3
    by_reason = gauge_over(scrapes, Gauge(WAITING_BY_REASON, "sum", by="reason"))
    assert by_reason == {"capacity": (2.0 + 4.0 + 6.0) / 3, "deferred": 10.0}


def test_gauge_mean_of_one_series() -> None:
    scrapes = {10.0: {"": 0.5}, 11.0: {"": 0.25}, 12.0: {"": 0.125}}
    assert gauge_over(scrapes, Gauge("vllm:kv_cache_usage_perc", "avg")) == (0.5 + 0.25 + 0.125) / 3


def test_the_births_at_the_first_watched_scrape_are_worked_out_again_once_a_series_goes() -> None:
    """The `_created` of the series first seen at a scrape are remembered once a later scrape
    is in, until a series is let go: then they are read from the buffer again."""
    buffer = Buffer()
    a, b = (("model_name", "a"),), (("model_name", "b"),)
    buffer.add(100.0, {"x_total": {a: (1.0, 90.0), b: (2.0, 95.0)}})
    buffer.add(101.0, {"x_total": {a: (3.0, 90.0)}})  # b is not seen again
    counters = frozenset({"x_total"})
    assert sorted(buffer.births_at(100.0, 100.0, [], counters)) == [90.0, 95.0]
    buffer.longest_window_s = 0.5  # b, last seen at 100, is let go at the next scrape
    buffer.add(102.0, {"x_total": {a: (4.0, 90.0)}})
    assert b not in buffer.series["x_total"]
    assert buffer.births_at(100.0, 100.0, [], counters) == [90.0]

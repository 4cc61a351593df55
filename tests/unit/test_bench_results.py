"""A guidellm JSON report read into a card: the run's interval, the client's figures, and a
report of the wrong shape named with its file and field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from cockpit.cli.main import main
from cockpit.runtime.bench_results import read_result
from cockpit.runtime.cards import Card, CardError, CardStore
from tests.support.repo import FIXTURES, require_fixture

REPORT = FIXTURES / "guidellm" / "benchmarks.json"


def report() -> dict[str, Any]:
    return dict(json.loads(require_fixture(REPORT).read_text(encoding="utf-8")))


def read(data: dict[str, Any], benchmark: int = 0) -> Any:
    return read_result("g.json", json.dumps(data), benchmark)


def test_a_guidellm_run_gives_its_interval_and_figures() -> None:
    data = report()
    run = data["benchmarks"][0]
    result = read(data)
    assert result.tool == "guidellm"
    assert (result.start, result.end) == (run["start_time"], run["end_time"])
    assert result.end - result.start == pytest.approx(30.0)
    figures = result.figures
    assert figures["completed"] == ("requests", "Requests completed", 60.0, "count")
    assert figures["total_input_tokens"] == ("prompt_tokens", "Prompt tokens", 12000.0, "tokens")
    assert figures["total_output_tokens"][2] == pytest.approx(3840.0)
    assert figures["request_throughput"][2] == pytest.approx(2.0)
    assert figures["output_throughput"] == ("generation_tok_s", "Generated tok/s", 128.0, "tok/s")


def test_its_latencies_are_read_in_seconds_whatever_the_report_s_unit() -> None:
    metrics = report()["benchmarks"][0]["metrics"]
    figures = read(report()).figures
    ttft = metrics["time_to_first_token_ms"]["successful"]
    assert figures["mean_ttft_ms"] == ("ttft_mean", "TTFT mean", ttft["mean"] / 1000, "seconds")
    assert figures["median_ttft_ms"][2] == pytest.approx(ttft["median"] / 1000)
    assert figures["p99_ttft_ms"][2] == pytest.approx(ttft["percentiles"]["p99"] / 1000)
    assert figures["mean_tpot_ms"][2] == pytest.approx(0.012)
    assert figures["p99_itl_ms"][0] == "itl_p99"
    e2e = metrics["request_latency"]["successful"]
    assert figures["mean_e2el_ms"] == ("e2e_mean", "E2E mean", e2e["mean"], "seconds")
    assert figures["median_e2el_ms"][0] == "e2e_p50"


def test_benchmark_picks_the_report_s_other_run() -> None:
    data = report()
    result = read(data, 1)
    assert result.start == data["benchmarks"][1]["start_time"]
    assert result.figures["completed"][2] == 120.0
    with pytest.raises(CardError, match=r"g\.json: benchmarks\[2\]: missing \(the report holds 2"):
        read(data, 2)


def without(data: dict[str, Any], dotted: str) -> dict[str, Any]:
    changed = copy.deepcopy(data)
    *parents, last = dotted.split(".")
    node = changed["benchmarks"][0]
    for key in parents:
        node = node[key]
    del node[last]
    return changed


@pytest.mark.parametrize(
    "dotted",
    [
        "end_time",
        "metrics.request_totals.successful",
        "metrics.time_to_first_token_ms.successful.percentiles.p99",
        "metrics.request_latency",
        "metrics",
    ],
)
def test_a_missing_field_is_named_with_its_file(dotted: str) -> None:
    with pytest.raises(CardError) as raised:
        read(without(report(), dotted))
    assert str(raised.value) == f"g.json: benchmarks[0].{dotted}: missing"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("sixty", "expected a number, got 'sixty'"),
        (None, "expected a number, got None"),
        (True, "expected a number, got True"),
    ],
)
def test_a_bad_type_is_named_with_its_file(value: object, words: str) -> None:
    data = report()
    data["benchmarks"][0]["metrics"]["output_token_count"]["successful"]["total_sum"] = value
    field = "benchmarks[0].metrics.output_token_count.successful.total_sum"
    with pytest.raises(CardError) as raised:
        read(data)
    assert str(raised.value) == f"g.json: {field}: {words}"


def test_a_distribution_that_is_not_an_object_is_named() -> None:
    data = report()
    data["benchmarks"][0]["metrics"]["inter_token_latency_ms"] = [1, 2]
    with pytest.raises(CardError, match=r"inter_token_latency_ms: expected an object, got list"):
        read(data)


def test_an_empty_or_odd_benchmarks_list_is_refused() -> None:
    with pytest.raises(CardError, match=r"g\.json: benchmarks: empty"):
        read({**report(), "benchmarks": []})
    with pytest.raises(CardError, match=r"g\.json: benchmarks: expected a list, got dict"):
        read({"benchmarks": {}})
    with pytest.raises(CardError, match=r"g\.json: benchmarks\[0\]: expected an object, got str"):
        read({"benchmarks": ["run"]})


def test_a_run_ending_before_it_starts_is_refused() -> None:
    data = report()
    run = data["benchmarks"][0]
    run["end_time"] = run["start_time"] - 1
    with pytest.raises(CardError, match=r"benchmarks\[0\]: end_time .* is not after start_time"):
        read(data)


def test_card_import_reads_the_run_benchmark_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    store = CardStore(tmp_path / "lane-cockpit" / "cards.db")
    store.add(Card("BR3-A2", "lane-a", 100.0, 130.0))
    argv = ["card", "import", str(require_fixture(REPORT)), "--name", "BR3-A2"]
    assert main([*argv, "--benchmark", "1", "--format", "json"]) == 0
    client = dict(store.get("BR3-A2").client)
    assert client["tool"] == "guidellm"
    assert client["start"] == report()["benchmarks"][1]["start_time"]
    assert client["figures"]["completed"]["value"] == 120.0
    capsys.readouterr()
    assert main([*argv, "--benchmark", "7"]) == 2
    assert "benchmarks[7]: missing (the report holds 2)" in capsys.readouterr().err

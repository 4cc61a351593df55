"""Benchmark cards, the pure and file parts: the card store, the comparison's verdicts, the
benchmark client's result file."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from cockpit.core.compare import WITHIN_BUCKET, bucket_width, compare
from cockpit.runtime.bench_results import read_result
from cockpit.runtime.cards import Card, CardError, CardStore

# --- the store --------------------------------------------------------------------------------


def test_a_card_is_kept_stopped_and_removed(tmp_path: Path) -> None:
    store = CardStore(tmp_path / "cards.db")
    store.start(Card("BR3-A2", "lane-a", 100.0, note="rate 4", edges=(("text", 100.0),)))
    assert [card.name for card in store.running()] == ["BR3-A2"]
    stopped = store.stop("BR3-A2", 160.0, ("text 2", 160.0))
    assert stopped.end == 160.0 and stopped.edges == (("text", 100.0), ("text 2", 160.0))
    store.keep("BR3-A2", receipt={"lane": {"figures": {}}})
    kept = store.get("BR3-A2")
    assert (kept.lane, kept.start, kept.end, kept.note) == ("lane-a", 100.0, 160.0, "rate 4")
    assert kept.receipt == {"lane": {"figures": {}}} and not kept.running
    store.remove("BR3-A2")
    assert store.cards() == []


def test_the_store_is_in_wal_mode(tmp_path: Path) -> None:
    store = CardStore(tmp_path / "cards.db")
    store.start(Card("a", "lane", 1.0))
    mode = sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


@pytest.mark.parametrize(
    ("act", "words"),
    [
        (lambda s: s.start(Card("a", "lane", 5.0)), "exists already"),
        (lambda s: s.get("b"), "no card named 'b'"),
        (lambda s: s.stop("a", 1.0, None), "end is not after its start"),
        (lambda s: s.remove("zz"), "no card named 'zz'"),
        (lambda s: s.add(Card("c", "lane", 9.0, 3.0)), "end is not after its start"),
    ],
)
def test_bad_card_commands_say_why(tmp_path: Path, act: object, words: str) -> None:
    store = CardStore(tmp_path / "cards.db")
    store.start(Card("a", "lane", 5.0))
    with pytest.raises(CardError, match=words):
        act(store)  # type: ignore[operator]
    assert [card.name for card in store.cards()] == ["a"]


def test_stopping_twice_is_refused(tmp_path: Path) -> None:
    store = CardStore(tmp_path / "cards.db")
    store.start(Card("a", "lane", 5.0))
    store.stop("a", 6.0, None)
    with pytest.raises(CardError, match="stopped already"):
        store.stop("a", 7.0, None)


def test_a_corrupt_store_is_said_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "cards.db"
    path.write_bytes(b"not a database at all, just bytes" * 100)
    with pytest.raises(CardError, match=r"cards\.db"):
        CardStore(path).cards()


def test_an_unwritable_store_is_said(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CardError, match="card store"):
        CardStore(blocker / "cards.db").start(Card("a", "lane", 1.0))


def test_two_writers_at_once_both_land(tmp_path: Path) -> None:
    """Two cockpits marking at once: each mark is its own transaction, none is lost."""
    path = tmp_path / "cards.db"
    CardStore(path).cards()
    errors: list[BaseException] = []

    def mark(prefix: str) -> None:
        try:
            for k in range(40):
                CardStore(path).start(Card(f"{prefix}{k}", "lane", float(k)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=mark, args=(p,)) for p in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(CardStore(path).cards()) == 80


# --- comparing ----------------------------------------------------------------------------------


def figure(value: float | None, unit: str = "seconds", **more: object) -> dict[str, object]:
    return {"label": "x", "value": value, "unit": unit, "text": f"{value}", **more}


def test_bucket_width_is_the_bucket_the_value_falls_in() -> None:
    bounds = [0.1, 0.25, 0.5, 1.0]
    assert bucket_width(bounds, 0.05) == 0.1
    assert bucket_width(bounds, 0.3) == 0.25
    assert bucket_width(bounds, 0.25) == pytest.approx(0.15)
    assert bucket_width(bounds, 2.0) is None


def test_quantiles_closer_than_a_bucket_are_not_measurable() -> None:
    bounds = {"ttft": [0.1, 0.25, 0.5, 1.0, 2.5]}
    a = {"ttft_p90": figure(0.30), "ttft_p99": figure(0.40), "requests": figure(60, "count")}
    b = {"ttft_p90": figure(0.45), "ttft_p99": figure(2.0), "requests": figure(75, "count")}
    rows = {row.key: row for row in compare(a, b, bounds)}
    assert rows["ttft_p90"].verdict == WITHIN_BUCKET  # both in (0.25, 0.5]
    assert rows["ttft_p99"].verdict == "higher in B"
    assert rows["requests"].delta == 15 and rows["requests"].change == pytest.approx(0.25)
    assert rows["requests"].verdict == "higher in B"


def test_a_missing_side_says_why_and_has_no_delta() -> None:
    a = {"draft_acceptance": figure(None, "share", reason="no speculative decoding")}
    b = {"draft_acceptance": figure(0.7, "share")}
    (row,) = compare(a, b)
    assert row.delta is None and row.change is None
    assert row.verdict == "A missing: no speculative decoding"


def test_a_figure_only_one_card_has_is_listed() -> None:
    rows = compare({"a": figure(1.0)}, {"b": figure(2.0)})
    assert [(row.key, row.verdict) for row in rows] == [
        ("a", "B missing: not in its receipt"),
        ("b", "A missing: not in its receipt"),
    ]


# --- the client's result file -------------------------------------------------------------------

RESULT = {
    "date": "20261201-120030",
    "backend": "vllm",
    "duration": 30.0,
    "completed": 60,
    "failed": 0,
    "total_input_tokens": 12000,
    "total_output_tokens": 3840,
    "request_throughput": 2.0,
    "output_throughput": 128.0,
    "mean_ttft_ms": 41.5,
    "median_ttft_ms": 40.0,
    "p99_ttft_ms": 90.0,
    "mean_tpot_ms": 12.0,
    "mean_itl_ms": 11.5,
    "mean_e2el_ms": 800.0,
}


def test_a_vllm_bench_result_gives_its_interval_and_figures() -> None:
    result = read_result("r.json", json.dumps(RESULT))
    assert result.end - result.start == 30.0
    assert result.figures["completed"] == ("requests", "Requests completed", 60.0, "count")
    assert result.figures["median_ttft_ms"] == ("ttft_p50", "TTFT median", 0.040, "seconds")
    assert result.figures["p99_ttft_ms"][2] == pytest.approx(0.090)
    assert result.figures["mean_e2el_ms"][0] == "e2e_mean"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"duration": None}, "r.json: duration: expected a number, got None"),
        ({"completed": "sixty"}, "r.json: completed: expected a number"),
        ({"date": "yesterday"}, "r.json: date: expected YYYYMMDD-HHMMSS"),
        ({"duration": -3}, "r.json: duration: expected seconds > 0"),
        ({"mean_ttft_ms": float("nan")}, "r.json: mean_ttft_ms: expected a number"),
    ],
)
def test_a_bad_field_is_named_with_its_file(change: dict[str, object], words: str) -> None:
    with pytest.raises(CardError, match=words):
        read_result("r.json", json.dumps({**RESULT, **change}))


def test_a_missing_field_or_an_unknown_shape_is_named() -> None:
    with pytest.raises(CardError, match=r"r\.json: completed: missing"):
        read_result("r.json", json.dumps({k: v for k, v in RESULT.items() if k != "completed"}))
    with pytest.raises(CardError, match=r"r\.json: not JSON"):
        read_result("r.json", "{")
    with pytest.raises(CardError, match="a JSON object was expected"):
        read_result("r.json", "[1, 2]")

"""Cards on a Prometheus lane, through the real `cockpit card` commands on a real Prometheus
holding a known history: each card counts the counters' own deltas between the samples at its
edges (a restart inside the card counted from 0), which `increase()` only approximates, and
`compare` gives B − A per figure."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cli import COCKPIT
from tests.support.promharness import OpenMetricsWriter, PromServer, remote_write

STEP = 15
START = 1_790_000_000 - (1_790_000_000 % 3600) - 3 * 3600
END = START + 2 * 3600
CARD_A = (START + 1807.5, START + 2401.0)
"""Not on a sample: its counts start from the last sample before it."""
CARD_B = (START + 4500.0, START + 5700.0)
RESTART_AT = START + 5100
"""Engine 1 restarts inside card B: its counters start again from 0."""
JOB = "cards"
Labels = tuple[tuple[str, str], ...]


def history() -> dict[tuple[str, Labels], dict[float, float]]:
    """Two vLLM engines' counters and gauges every STEP seconds; engine 1 restarts once."""
    rng = random.Random(28)
    series: dict[tuple[str, Labels], dict[float, float]] = {}
    counts: dict[tuple[str, Labels], float] = {}

    def count(name: str, labels: dict[str, str], amount: float) -> None:
        key = (name, tuple(sorted(labels.items())))
        counts[key] = counts.get(key, 0.0) + amount
        series.setdefault(key, {})[t] = counts[key]

    for t in range(START, END + 1, STEP):
        for engine in ("0", "1"):
            labels = {"model_name": "m", "engine": engine}
            if engine == "1" and t == RESTART_AT:
                counts = {k: v for k, v in counts.items() if ("engine", "1") not in k[1]}
            requests = rng.randint(0, 6)
            count("vllm:request_success_total", {**labels, "finished_reason": "stop"}, requests)
            count("vllm:prompt_tokens_total", labels, requests * rng.randint(100, 900))
            count("vllm:generation_tokens_total", labels, requests * rng.randint(10, 200))
            count("vllm:prefix_cache_queries_total", labels, requests * 500)
            count("vllm:prefix_cache_hits_total", labels, requests * rng.randint(0, 500))
            for le in ("0.1", "0.5", "1.0", "+Inf"):
                within = sum(rng.random() < float(le) for _ in range(requests))
                count("vllm:time_to_first_token_seconds_bucket", {**labels, "le": le},
                      requests if le == "+Inf" else within)  # fmt: skip
            count("vllm:time_to_first_token_seconds_count", labels, requests)
            count("vllm:time_to_first_token_seconds_sum", labels, requests * 0.3)
            series.setdefault(("vllm:num_requests_running", tuple(labels.items())), {})[t] = float(
                t % 7
            )
            series.setdefault(("vllm:kv_cache_usage_perc", tuple(labels.items())), {})[t] = 0.5
    return series


SERIES = history()


def edge_delta(name: str, start: float, end: float) -> float:
    """The counter's own delta from each series' last sample at or before `start` to its last
    at or before `end`, a drop counted as a restart from 0."""
    total = 0.0
    for (found, _), samples in SERIES.items():
        if found != name:
            continue
        points = [(t, v) for t, v in sorted(samples.items()) if t <= end]
        first = max(i for i, (t, _) in enumerate(points) if t <= start)
        for (_, before), (_, after) in zip(points[first:], points[first + 1 :], strict=False):
            total += after - before if after >= before else after
    return total


@pytest.fixture(scope="module")
def prometheus(prometheus: PromServer) -> PromServer:
    """The run's Prometheus, holding the history under JOB."""
    writer = OpenMetricsWriter()
    for (name, labels), samples in SERIES.items():
        family = name.removesuffix("_total").rsplit("_bucket", 1)[0]
        writer.add(family, "unknown", name, {**dict(labels), "job": JOB}, list(samples.items()))
    remote_write(prometheus, writer)
    return prometheus


@pytest.fixture(scope="module")
def cards(prometheus: PromServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Cards A and B added from the history's past, in a store of their own."""
    home = tmp_path_factory.mktemp("cards-home")
    for name, (start, end) in (("A", CARD_A), ("B", CARD_B)):
        added = card(home, prometheus, "add", name, "--from", str(start), "--to", str(end))
        assert added.returncode == 0, added.stderr
    return home


def card(home: Path, server: PromServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(home), "HOME": str(home)}
    lane = ["--prometheus", server.url, "--selector", f'job="{JOB}"']
    return subprocess.run([COCKPIT, "card", *args, *lane], capture_output=True, text=True,
                          timeout=120, env=env)  # fmt: skip


def shown(home: Path, server: PromServer, name: str) -> dict[str, Any]:
    done = card(home, server, "show", name, "--format", "json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def increase(server: PromServer, name: str, start: float, end: float) -> float:
    query = f'sum(increase({name}{{job="{JOB}"}}[{round(end - start)}s]))'
    body = httpx.get(f"{server.url}/api/v1/query", params={"query": query, "time": end}).json()
    return float(body["data"]["result"][0]["value"][1])


@pytest.mark.parametrize(("name", "interval"), [("A", CARD_A), ("B", CARD_B)])
def test_a_card_counts_the_samples_own_deltas_at_its_edges(
    prometheus: PromServer, cards: Path, name: str, interval: tuple[float, float]
) -> None:
    figures = shown(cards, prometheus, name)["lane"]["figures"]
    start, end = interval
    for key, metric in (
        ("requests", "vllm:request_success_total"),
        ("prompt_tokens", "vllm:prompt_tokens_total"),
        ("generation_tokens", "vllm:generation_tokens_total"),
    ):
        exact = edge_delta(metric, start, end)
        assert exact > 0
        assert figures[key]["value"] == exact, key
        # increase() extrapolates to the edges: near the exact count, not it (one scrape's worth)
        approximate = increase(prometheus, metric, start, end)
        assert abs(approximate - exact) <= 2 * exact * STEP / (end - start) + 1
    assert figures["requests_per_s"]["value"] == pytest.approx(
        edge_delta("vllm:request_success_total", start, end) / (end - start)
    )


def test_the_receipt_names_its_samples_and_the_extrapolation(
    prometheus: PromServer, cards: Path
) -> None:
    data = shown(cards, prometheus, "A")
    assert data["card"]["name"] == "A" and data["card"]["lane"] == JOB
    assert data["card"]["duration_s"] == CARD_A[1] - CARD_A[0]
    edges = data["card"]["edges"]
    assert "last sample at or before" in edges and "counted from 0" in edges
    assert "sum(increase(vllm:request_success_total" in edges and "extrapolated" in edges


def test_compare_gives_b_minus_a_per_figure(prometheus: PromServer, cards: Path) -> None:
    done = card(cards, prometheus, "compare", "A", "B", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["figures"]
    a = edge_delta("vllm:request_success_total", *CARD_A)
    b = edge_delta("vllm:request_success_total", *CARD_B)
    assert (rows["requests"]["a"], rows["requests"]["b"]) == (a, b)
    assert rows["requests"]["delta"] == b - a
    assert rows["requests"]["change"] == pytest.approx((b - a) / a)
    text = card(cards, prometheus, "compare", "A", "B")
    assert text.returncode == 0 and "| Requests completed |" in text.stdout


def test_a_listed_card_shows_its_exact_requests(prometheus: PromServer, cards: Path) -> None:
    listed = card(cards, prometheus, "list", "--format", "json")
    assert [c["name"] for c in json.loads(listed.stdout)] == ["A", "B"]
    text = card(cards, prometheus, "list")
    requests = edge_delta("vllm:request_success_total", *CARD_A)
    assert f"| {requests:,.0f} |" in text.stdout


def test_show_again_evaluates_the_same_counts(prometheus: PromServer, cards: Path) -> None:
    again = card(cards, prometheus, "show", "B", "--again", "--format", "json")
    assert again.returncode == 0, again.stderr
    kept = shown(cards, prometheus, "B")["lane"]["figures"]
    assert json.loads(again.stdout)["lane"]["figures"]["requests"] == kept["requests"]


def test_the_window_report_splits_its_traffic_between_cards_and_the_rest(
    prometheus: PromServer, cards: Path
) -> None:
    """A window holding card A whole and card B in part: A counts as kept, B's overlap is
    read on its own, and cards plus the rest add up to the window."""
    env = {**os.environ, "XDG_DATA_HOME": str(cards), "HOME": str(cards)}
    at, window = CARD_B[0] + 600, CARD_B[0] + 600 - CARD_A[0] + 60
    done = subprocess.run(
        [COCKPIT, "report", "--prometheus", prometheus.url, "--selector", f'job="{JOB}"',
         "--at", str(at), "--window", f"{round(window)}s", "--format", "json"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    split = json.loads(done.stdout)["cards"]
    parts = {card["name"]: card for card in split["cards"]}
    assert parts["A"]["whole"] and not parts["B"]["whole"]
    assert parts["A"]["requests"] == edge_delta("vllm:request_success_total", *CARD_A)
    assert parts["B"]["requests"] == edge_delta("vllm:request_success_total", CARD_B[0], at)
    assert parts["B"]["overlap_s"] == pytest.approx(600)
    for key in ("requests", "prompt_tokens", "generation_tokens"):
        inside = parts["A"][key] + parts["B"][key]
        assert split["in_cards"][key] == inside
        assert split["in_cards"][key] + split["outside"][key] == pytest.approx(split["window"][key])
    text = subprocess.run(
        [COCKPIT, "report", "--prometheus", prometheus.url, "--selector", f'job="{JOB}"',
         "--at", str(at), "--window", f"{round(window)}s"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert "## Cards in the window" in text.stdout and "| B (overlap) |" in text.stdout


def test_two_cards_marked_on_a_live_lane_count_its_samples_deltas(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The simulated lane scraped every second by a real Prometheus: each card marked with
    `start` and `stop` counts what Prometheus's own samples at its edges say."""
    from cockpit.demo.lane import SimulatedLane, serve_metrics
    from tests.support.faultlane import shared_lane_prometheus, take_ports

    live = shared_lane_prometheus(tmp_path_factory.mktemp("prom-lane"))[1]
    lane = SimulatedLane(seed=3, warm_start=300.0)
    server, _ = serve_metrics(lane.registry, take_ports("cards-live")[0])
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path), "HOME": str(tmp_path)}
    flags = ["--prometheus", live.url, "--selector", 'job="cards-live"']

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([COCKPIT, "card", *args, *flags], capture_output=True,
                              text=True, timeout=120, env=env)  # fmt: skip

    def requests_at(at: float) -> float:
        query = 'sum(vllm:request_success_total{job="cards-live"})'
        reply = httpx.get(f"{live.url}/api/v1/query", params={"query": query, "time": at})
        return float(reply.json()["data"]["result"][0]["value"][1])

    def scraped_since(moment: float) -> None:
        for _ in range(100):
            query = 'timestamp(vllm:num_requests_running{job="cards-live"})'
            reply = httpx.get(f"{live.url}/api/v1/query", params={"query": query}).json()
            found = reply["data"]["result"]
            if found and float(found[0]["value"][1]) > moment:
                return
            time.sleep(0.2)
        raise AssertionError("Prometheus took no new scrape")

    try:
        scraped_since(0)
        for name, seconds in (("live-1", 20.0), ("live-2", 60.0)):
            started = run("start", name)
            assert started.returncode == 0, started.stderr
            lane.step(seconds)
            scraped_since(time.time())
            stopped = run("stop", "--format", "json")
            assert stopped.returncode == 0, stopped.stderr
            data = json.loads(stopped.stdout)
            start = datetime.fromisoformat(data["card"]["start"]).timestamp()
            end = datetime.fromisoformat(data["card"]["end"]).timestamp()
            exact = requests_at(end) - requests_at(start)
            assert exact > 0
            assert data["lane"]["figures"]["requests"]["value"] == exact
        compared = json.loads(run("compare", "live-1", "live-2", "--format", "json").stdout)
        row = compared["figures"]["requests"]
        assert row["delta"] == row["b"] - row["a"] and row["b"] > row["a"]
    finally:
        server.shutdown()

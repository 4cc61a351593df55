"""The embedded demo: a simulated vLLM lane and a simulated Hermes, read like the real ones."""

from __future__ import annotations

import json
import math
import socket
import sqlite3
import struct
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from cockpit.demo import (
    PRESETS,
    Demo,
    SimulatedHermes,
    SimulatedLane,
    demo_config,
    demo_config_data,
    demo_config_yaml,
)
from cockpit.demo.lane import serve_metrics
from cockpit.roofline.profiles import hardware_profiles, model_profiles
from tests.support.loopback import Scrape, get, samples
from tests.support.repo import require_binary

# Default bounds from the reference's table (vllm/v1/metrics/buckets.py), typed from the doc.
REFERENCE_BOUNDS = {
    "vllm:e2e_request_latency_seconds": [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40,
                                         50, 60, 120, 240, 480, 960, 1920, 7680],
    "vllm:time_to_first_token_seconds": [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25,
                                         0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640,
                                         2560],
    "vllm:inter_token_latency_seconds": [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                         0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80],
    "vllm:iteration_tokens_total": [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
                                    16384],
}  # fmt: skip
PHASE_HISTOGRAMS = (
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:time_to_first_token_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_prefill_kv_computed_tokens",
)
COUNTERS = (
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prompt_tokens_by_source_total",
    "vllm:prompt_tokens_cached_total",
    "vllm:request_success_total",
    "vllm:num_preemptions_total",
    "vllm:estimated_flops_per_gpu_total",
    "vllm:estimated_read_bytes_per_gpu_total",
    "vllm:estimated_write_bytes_per_gpu_total",
)
SPEC_COUNTERS = (
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
)
GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")


@pytest.fixture(params=sorted(PRESETS))
def served_lane(request: pytest.FixtureRequest) -> Iterator[SimulatedLane]:
    lane = SimulatedLane(request.param, seed=7, warm_start=120.0)
    lane.start()
    yield lane
    lane.stop()


# --- the lane's exposition --------------------------------------------------------------


def test_served_text_parses_with_vllm_names_labels_and_float_le(
    served_lane: SimulatedLane,
) -> None:
    text = get(served_lane.url).decode()
    scrape = Scrape(text)
    names = scrape.names()
    expected = set(COUNTERS) | set(GAUGES) | {"vllm:cache_config_info"}
    for hist in (
        *PHASE_HISTOGRAMS,
        "vllm:inter_token_latency_seconds",
        "vllm:iteration_tokens_total",
    ):
        expected |= {f"{hist}_bucket", f"{hist}_sum", f"{hist}_count"}
    assert expected <= names, expected - names
    spec = set(SPEC_COUNTERS)
    if served_lane.preset.spec_accept_by_pos:
        assert spec <= names
    else:
        assert not spec & names
    assert not any(n.endswith("_total_total") for n in names)
    assert "# TYPE vllm:prompt_tokens_total counter" in text
    assert "# TYPE vllm:iteration_tokens_total histogram" in text
    assert "# TYPE vllm:prompt_tokens_created gauge" in text

    for s in scrape.samples:
        if s.name == "vllm:cache_config_info":
            assert "model_name" not in s.labels and s.labels["engine"] == "0"
            continue
        if s.name.startswith("vllm:admission_rejections"):  # the frontend's, as in vLLM
            assert "engine" not in s.labels and s.labels["reason"].startswith("max_num_queued")
            continue
        assert s.labels.get("engine") == "0", s
        assert s.labels.get("model_name") == served_lane.preset.served_model, s
        if "le" in s.labels:
            le = s.labels["le"]
            assert le == "+Inf" or "." in le or "e" in le, le  # floats: le="1.0", never le="1"
            float(le)
    for name, bounds in REFERENCE_BOUNDS.items():
        finite = [le for le, _ in scrape.buckets(name) if math.isfinite(le)]
        assert finite == [float(b) for b in bounds], name
    prompt_bounds = [le for le, _ in scrape.buckets("vllm:request_prompt_tokens")]
    assert prompt_bounds[:6] == [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]
    assert prompt_bounds[-1] == math.inf
    assert prompt_bounds[-2] <= served_lane.preset.max_model_len
    sources = {
        s.labels["source"] for s in scrape.samples if s.name == "vllm:prompt_tokens_by_source_total"
    }
    assert sources == {"local_compute", "local_cache_hit", "external_kv_transfer"}
    info = next(s for s in scrape.samples if s.name == "vllm:cache_config_info")
    capacity = int(info.labels["kv_cache_size_tokens"])
    assert capacity == int(info.labels["num_gpu_blocks"]) * int(info.labels["block_size"])
    assert scrape.total("vllm:request_success_total") > 0  # warm start: figures from the first read


def test_created_series_are_written_unless_turned_off() -> None:
    with_created = SimulatedLane("h100-llama8b", warm_start=30.0)
    without = SimulatedLane("h100-llama8b", warm_start=30.0, created_series=False)
    created = {s.name for s in samples(with_created.render()) if s.name.endswith("_created")}
    assert {"vllm:prompt_tokens_created", "vllm:e2e_request_latency_seconds_created"} <= created
    plain = samples(without.render())
    assert not [s for s in plain if s.name.endswith("_created")]
    expected = [s for s in samples(with_created.render()) if not s.name.endswith("_created")]
    assert [(s.name, s.labels, s.value) for s in plain] == [
        (s.name, s.labels, s.value) for s in expected
    ]


def check_consistent(scrape: Scrape, spec: bool) -> None:
    prompt = scrape.total("vllm:prompt_tokens_total")
    computed = scrape.total("vllm:prompt_tokens_by_source_total", source="local_compute")
    assert prompt == scrape.total("vllm:prompt_tokens_by_source_total")
    assert scrape.total("vllm:prefix_cache_hits_total") <= scrape.total(
        "vllm:prefix_cache_queries_total"
    )
    assert scrape.total("vllm:prompt_tokens_cached_total") == scrape.total(
        "vllm:prompt_tokens_by_source_total", source="local_cache_hit"
    )
    requests = scrape.total("vllm:request_success_total")
    for hist in PHASE_HISTOGRAMS:
        assert scrape.total(f"{hist}_count") == requests, hist
        cumulative = [count for _, count in scrape.buckets(hist)]
        assert cumulative == sorted(cumulative) and cumulative[-1] == requests, hist
    assert scrape.total("vllm:request_prompt_tokens_sum") == prompt
    assert scrape.total("vllm:request_prefill_kv_computed_tokens_sum") == computed
    generated = scrape.total("vllm:generation_tokens_total")
    assert scrape.total("vllm:request_generation_tokens_sum") == generated
    assert scrape.total("vllm:iteration_tokens_total_sum") == pytest.approx(computed + generated)
    inference = scrape.total("vllm:request_inference_time_seconds_sum")
    assert inference == pytest.approx(
        scrape.total("vllm:request_prefill_time_seconds_sum")
        + scrape.total("vllm:request_decode_time_seconds_sum")
    )
    steps = scrape.total("vllm:inter_token_latency_seconds_count")
    if spec:
        drafts = scrape.total("vllm:spec_decode_num_drafts_total")
        accepted = scrape.total("vllm:spec_decode_num_accepted_tokens_total")
        # each request: one token from prefill, then per decode step 1 + accepted drafts
        assert generated == requests + drafts + accepted
        assert steps == drafts
        per_pos = [
            s.value
            for s in sorted(scrape.samples, key=lambda s: int(s.labels.get("position", -1)))
            if s.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        ]
        assert sum(per_pos) == accepted
        assert all(n <= drafts for n in per_pos)
        assert per_pos == sorted(per_pos, reverse=True)
    else:
        assert steps == generated - requests


def test_counters_grow_between_scrapes_and_stay_self_consistent(
    served_lane: SimulatedLane,
) -> None:
    spec = bool(served_lane.preset.spec_accept_by_pos)
    first = Scrape(get(served_lane.url).decode())
    served_lane.step(30.0)
    second = Scrape(get(served_lane.url).decode())
    for scrape in (first, second):
        check_consistent(scrape, spec)
    for name in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total"):
        assert second.total(name) > first.total(name), name
    before = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in first.samples}
    for s in second.samples:
        if s.name.endswith(("_total", "_sum", "_count", "_bucket")):
            assert s.value >= before[(s.name, tuple(sorted(s.labels.items())))], s


def test_counters_advance_in_real_time_without_help(served_lane: SimulatedLane) -> None:
    first = Scrape(get(served_lane.url).decode()).total("vllm:iteration_tokens_total_count")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.3)
        if Scrape(get(served_lane.url).decode()).total("vllm:iteration_tokens_total_count") > first:
            return
    pytest.fail("the lane's background stepping did not advance its counters in 5 s")


def _scrape_on(connection: socket.socket, path: str = "/metrics") -> bytes:
    """One GET on an open connection: the answer's head and body, read to its Content-Length."""
    connection.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    reader = connection.makefile("rb")
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = reader.readline()
        assert line, "the connection closed before an answer"
        head += line
    length = int(
        next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[
            1
        ]
    )
    return head + reader.read(length)


def test_connections_are_kept_alive_and_closed_when_the_engine_stops(
    capfd: pytest.CaptureFixture[str],
) -> None:
    lane = SimulatedLane("h100-llama8b", seed=3)
    lane.start()
    try:
        dropped = socket.create_connection(("127.0.0.1", lane.port), timeout=5)
        _scrape_on(dropped)  # then reset, as a client killed with its connection kept alive
        dropped.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        dropped.close()
        connection = socket.create_connection(("127.0.0.1", lane.port), timeout=5)
        with connection:
            first, second = _scrape_on(connection), _scrape_on(connection)
            assert first.startswith(b"HTTP/1.1 200") and b"vllm:num_requests_running" in first
            assert second.startswith(b"HTTP/1.1 200") and b"vllm:num_requests_running" in second
            assert _scrape_on(connection, "/other").startswith(b"HTTP/1.1 404")
            lane.stop()
            connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert connection.makefile("rb").read() == b"", "a stopped engine still answered"
    finally:
        lane.stop()
    assert capfd.readouterr() == ("", ""), "the engine wrote on the terminal it shares"


def test_answers_leave_without_waiting_on_the_clients_ack() -> None:
    """As uvicorn (vLLM's server), the engine's sockets send at once: TCP_NODELAY."""
    server, _ = serve_metrics(SimulatedLane("h100-llama8b", seed=3).registry)
    try:
        port = server.server_address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            assert _scrape_on(connection).startswith(b"HTTP/1.1 200")
            with server.lock:
                served = list(server.connections)
            assert served, "the engine kept no connection"
            assert all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in served)
    finally:
        server.shutdown()
        server.server_close()


def test_scrapes_write_nothing_to_stderr(
    served_lane: SimulatedLane, capfd: pytest.CaptureFixture[str]
) -> None:
    for _ in range(3):
        get(served_lane.url)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


@pytest.mark.parametrize(
    ("preset", "low", "high"), [("gb300-dsv4", 0.88, 0.95), ("h100-llama8b", 0.58, 0.72)]
)
@pytest.mark.parametrize("seed", [1, 2])
def test_hit_rate_of_each_preset_is_in_its_band(
    preset: str, low: float, high: float, seed: int
) -> None:
    scrape = Scrape(SimulatedLane(preset, seed=seed, warm_start=1800.0).render())
    rate = scrape.total("vllm:prefix_cache_hits_total") / scrape.total(
        "vllm:prefix_cache_queries_total"
    )
    assert low <= rate <= high


def share_at_most(scrape: Scrape, name: str, bound: float) -> float:
    cumulative = dict(scrape.buckets(name))
    return cumulative[bound] / cumulative[math.inf]


def test_big_lane_has_the_agent_era_shape() -> None:
    scrape = Scrape(SimulatedLane("gb300-dsv4", seed=3, warm_start=3600.0).render())
    prompt = "vllm:request_prompt_tokens"
    assert 0.42 <= share_at_most(scrape, prompt, 500) <= 0.58
    assert 0.09 <= 1 - share_at_most(scrape, prompt, 10_000) <= 0.19
    assert 0.03 <= 1 - share_at_most(scrape, prompt, 100_000) <= 0.09
    assert share_at_most(scrape, "vllm:request_generation_tokens", 500) >= 0.75

    def mean(hist: str) -> float:
        return scrape.total(f"{hist}_sum") / scrape.total(f"{hist}_count")

    assert 0.1 <= mean("vllm:request_queue_time_seconds") <= 0.4
    assert 0.1 <= mean("vllm:request_prefill_time_seconds") <= 0.45
    assert 2.0 <= mean("vllm:request_decode_time_seconds") <= 5.0
    assert 0.020 <= mean("vllm:inter_token_latency_seconds") <= 0.033
    drafts = scrape.total("vllm:spec_decode_num_drafts_total")
    accepted = scrape.total("vllm:spec_decode_num_accepted_tokens_total")
    assert 2.5 <= 1 + accepted / drafts <= 3.0
    assert 0.38 <= accepted / scrape.total("vllm:spec_decode_num_draft_tokens_total") <= 0.5
    assert scrape.total("vllm:prompt_tokens_total") > 20 * scrape.total(
        "vllm:generation_tokens_total"
    )
    assert scrape.total("vllm:estimated_flops_per_gpu_total") > 0


# --- the simulated Hermes ---------------------------------------------------------------

COUNTER_SUMS = (
    "SELECT COUNT(*), SUM(api_call_count), SUM(input_tokens), SUM(cache_read_tokens), "
    "SUM(cache_write_tokens), SUM(output_tokens) FROM sessions"
)


def read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)


def from_last_noon() -> Callable[[], float]:
    """Wall time shifted back to the last noon (UTC) it passed, then running on. The history a
    seed plans depends on the hour of the day it is planned at; from noon it is the same history
    whatever the hour the tests run."""
    now = time.time()
    noon = now - now % 86400 + 12 * 3600
    shift = now - (noon if noon <= now else noon - 86400)
    return lambda: time.time() - shift


@pytest.fixture
def hermes(tmp_path: Path) -> Iterator[SimulatedHermes]:
    writer = SimulatedHermes(
        tmp_path / "state.db", seed=5, history_sessions=60, interval=0.05, clock=from_last_noon()
    )
    writer.start()
    yield writer
    writer.close()


def test_ledger_has_hermes_schema_22(hermes: SimulatedHermes, hermes_v22: Path) -> None:
    ours, theirs = read_only(hermes.path), read_only(hermes_v22)
    listing = "SELECT type, name FROM sqlite_master ORDER BY type, name"
    assert ours.execute(listing).fetchall() == theirs.execute(listing).fetchall()
    for table in ("sessions", "session_model_usage", "messages"):
        pragma = f"PRAGMA table_info({table})"
        assert ours.execute(pragma).fetchall() == theirs.execute(pragma).fetchall(), table
    assert (
        ours.execute("SELECT version FROM schema_version").fetchall()
        == theirs.execute("SELECT version FROM schema_version").fetchall()
    )
    assert ours.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_ledger_opens_read_only_while_written_and_its_counters_grow(
    hermes: SimulatedHermes,
) -> None:
    reader = read_only(hermes.path)
    first = reader.execute(COUNTER_SUMS).fetchone()
    version = reader.execute("PRAGMA data_version").fetchone()[0]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = reader.execute(COUNTER_SUMS).fetchone()
        if now[1] > first[1]:
            break
    assert now[1] > first[1]  # api calls
    assert now[5] > first[5]  # output tokens
    assert all(b >= a for a, b in zip(first, now, strict=True))
    assert reader.execute("PRAGMA data_version").fetchone()[0] != version
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.execute("UPDATE sessions SET title = 'x'")


def test_history_written_session_by_session_leaves_the_rows_of_call_by_call(
    tmp_path: Path,
) -> None:
    def seeded(name: str, call_by_call: bool) -> dict[str, list[tuple[object, ...]]]:
        clock = lambda: 1_796_000_000.0  # noqa: E731
        writer = SimulatedHermes(tmp_path / name, seed=11, history_sessions=80, clock=clock)
        writer.seed_history(call_by_call=call_by_call)
        writer.close()
        db = read_only(tmp_path / name)
        return {
            table: db.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3, 4, 5, 6").fetchall()
            for table in ("sessions", "session_model_usage")
        }

    at_once, one_by_one = seeded("at_once.db", False), seeded("one_by_one.db", True)
    (calls,) = (
        read_only(tmp_path / "at_once.db")
        .execute("SELECT SUM(api_call_count) FROM sessions")
        .fetchone()
    )
    assert calls > 500, "sessions of many calls each"
    assert at_once == one_by_one


def test_history_has_the_agent_shape(hermes: SimulatedHermes) -> None:
    db = read_only(hermes.path)
    sessions, calls, fresh_input, cache_read, cache_write, output = db.execute(
        COUNTER_SUMS
    ).fetchone()
    assert sessions >= 60
    prompt = fresh_input + cache_read + cache_write
    assert 100_000 <= prompt / calls <= 220_000
    assert 500 <= output / calls <= 1_200
    assert 0.6 <= cache_read / prompt <= 0.95
    # Local engines (billing provider `custom`) report no cache reads; where it is reported,
    # nearly all of the prompt is read from the cache
    reported = db.execute(
        "SELECT SUM(cache_read_tokens), SUM(input_tokens + cache_read_tokens + cache_write_tokens)"
        " FROM sessions WHERE billing_provider != 'custom'"
    ).fetchone()
    assert 0.8 <= reported[0] / reported[1] <= 0.95
    sources = {r[0] for r in db.execute("SELECT DISTINCT source FROM sessions")}
    assert sources == {"cli", "tui", "desktop", "cron", "telegram", "subagent"}
    models = {r[0] for r in db.execute("SELECT DISTINCT model FROM sessions")}
    assert any(m.count("/") >= 2 for m in models)  # provider-prefixed
    orphans = db.execute(
        "SELECT COUNT(*) FROM sessions WHERE source = 'subagent' AND parent_session_id IS NULL"
    ).fetchone()[0]
    assert orphans == 0
    oldest, newest = db.execute("SELECT MIN(started_at), MAX(started_at) FROM sessions").fetchone()
    assert time.time() - oldest > 7 * 86400
    assert oldest > time.time() - 31 * 86400
    assert newest <= time.time()
    assert db.execute("SELECT COUNT(*) FROM sessions WHERE ended_at IS NULL").fetchone()[0] >= 1
    db.execute("BEGIN")  # one snapshot: a live call may commit between two reads
    main_calls = db.execute(
        "SELECT SUM(api_call_count) FROM session_model_usage WHERE task = ''"
    ).fetchone()[0]
    session_calls = db.execute("SELECT SUM(api_call_count) FROM sessions").fetchone()[0]
    db.execute("COMMIT")
    assert main_calls == session_calls
    assert db.execute(
        "SELECT COUNT(*) FROM session_model_usage WHERE task = 'title_generation'"
    ).fetchone()[0]


def test_writer_never_meets_busy_while_a_reader_polls(hermes: SimulatedHermes) -> None:
    stop = threading.Event()
    reads = 0
    failures: list[str] = []

    def poll() -> None:
        nonlocal reads
        conn = read_only(hermes.path)
        while not stop.is_set():
            try:
                conn.execute("PRAGMA data_version").fetchone()
                conn.execute(COUNTER_SUMS).fetchone()
                conn.execute(
                    "SELECT id, input_tokens FROM sessions WHERE ended_at IS NULL"
                ).fetchall()
                reads += 1
            except sqlite3.Error as exc:
                failures.append(str(exc))
        conn.close()

    start_writes = hermes.writes
    readers = [threading.Thread(target=poll) for _ in range(2)]
    for thread in readers:
        thread.start()
    started = time.monotonic()  # 2 s, or up to 15 s on a loaded machine for 10 writes
    while time.monotonic() - started < 2.0 or (
        hermes.writes - start_writes <= 10 and time.monotonic() - started < 15
    ):
        time.sleep(0.1)
    stop.set()
    for thread in readers:
        thread.join()
    assert failures == []
    assert reads > 100
    assert hermes.writes - start_writes > 10
    assert hermes.busy_errors == 0
    assert hermes.error == ""


# --- the whole demo ---------------------------------------------------------------------


def port_is_free(port: int) -> bool:
    """Nothing listens there and a server could bind it (as servers do, with SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_demo_serves_both_lanes_and_cleans_up_on_stop() -> None:
    demo = Demo(warm_start=60.0, history_sessions=20).start()
    folder = demo.folder
    assert folder is not None and folder.is_dir()
    assert demo.ledger_path.is_file()
    assert set(demo.lane_urls) == {"gb300-dsv4", "h100-llama8b"}
    ports = []
    for url in demo.lane_urls.values():
        parsed = urllib.parse.urlsplit(url)
        assert parsed.hostname == "127.0.0.1"
        ports.append(int(parsed.port or 0))
        assert Scrape(get(url).decode()).total("vllm:request_success_total") > 0
        assert not port_is_free(parsed.port or 0)
    demo.stop()
    assert not folder.exists()
    assert all(port_is_free(port) for port in ports)
    demo.stop()  # twice is harmless


def test_demo_config_names_each_lane_and_the_ledger() -> None:
    hardware, models = hardware_profiles(), model_profiles()
    with Demo(warm_start=10.0, history_sessions=10) as demo:
        assert yaml.safe_load(demo_config_yaml(demo)) == demo_config_data(demo)
        config = demo_config(demo, hardware, models)
        lanes = {lane.name: lane for lane in config.lanes}
        assert {n: (lane.hardware, lane.model) for n, lane in lanes.items()} == {
            "gb300-dsv4": (hardware["gb300"], models["deepseek-v3"]),
            "h100-llama8b": (hardware["h100"], models["llama-3.1-8b"]),
        }
        assert all(lane.engine == "vllm" and lane.prometheus is None for lane in lanes.values())
        assert {n: lane.metrics_url for n, lane in lanes.items()} == demo.lane_urls
        assert [ledger.path for ledger in config.ledgers] == [str(demo.ledger_path)]


@pytest.mark.slow
@pytest.mark.prometheus
def test_demo_with_prometheus_scrapes_the_lanes() -> None:
    require_binary("prometheus")
    with Demo(warm_start=30.0, history_sessions=10, with_prometheus=True) as demo:
        url = demo.prometheus_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        lanes = {
            lane.name: lane
            for lane in demo_config(demo, hardware_profiles(), model_profiles()).lanes
        }
        assert (lanes["gb300-dsv4"].prometheus, lanes["gb300-dsv4"].selector) == (
            url,
            'job="gb300-dsv4"',
        )
        assert lanes["h100-llama8b"].metrics_url is None
        promql = "sum by (job) (vllm:prompt_tokens_total) and on (job) up == 1"
        query = urllib.parse.quote(promql)
        deadline = time.monotonic() + 12
        jobs: dict[str, float] = {}
        while time.monotonic() < deadline and len(jobs) < 2:
            time.sleep(0.5)
            answer = json.loads(get(f"{url}/api/v1/query?query={query}"))
            jobs = {r["metric"]["job"]: float(r["value"][1]) for r in answer["data"]["result"]}
        assert set(jobs) == {"gb300-dsv4", "h100-llama8b"}
        assert all(value > 0 for value in jobs.values())
        folder = demo.folder
    assert folder is not None and not folder.exists()

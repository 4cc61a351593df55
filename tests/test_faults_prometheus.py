"""The cockpit against a real Prometheus that dies, slows down or answers garbage.

Everything goes through the user-facing layers: the app under Pilot on the real feeds built
from a Config, and the real `cockpit check` / `cockpit report` commands.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import ssl
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from faultlane import (
    JOB,
    LANE_HIT_RATE,
    LATE_JOB,
    MODELS,
    QUOTED,
    QUOTED_PREFIX,
    REFRESH_S,
    Exporter,
    QuietServer,
    cache_text,
    error_notices,
    hit_rate_row,
    lane_config,
    lane_reason,
    lane_state,
    running_app,
    screen_text,
    share_text,
    shared_lane_prometheus,
    start_exporter,
    status_text,
    take_late_port,
    wait_until,
)
from faultproxy import FaultProxy, http_answer, json_answer
from promharness import PromServer, free_port
from textual.pilot import Pilot

from cockpit.app import CockpitApp
from cockpit.sources.prometheus import PrometheusSource, SourceError
from cockpit.timeutil import clock
from cockpit.widgets import CacheGauge

pytestmark = pytest.mark.prometheus

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
MEASURED: dict[str, float] = {}
"""Recovery times, printed at the end of the module (`pytest -s` shows them)."""


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Exporter, PromServer]:
    return shared_lane_prometheus(tmp_path_factory.mktemp("prom-faults"))


@pytest.fixture(scope="module")
def exporter(shared: tuple[Exporter, PromServer]) -> Exporter:
    return shared[0]


@pytest.fixture(scope="module")
def prom(shared: tuple[Exporter, PromServer]) -> PromServer:
    return shared[1]


@pytest.fixture
def proxy(prom: PromServer) -> Iterator[FaultProxy]:
    with FaultProxy(prom.url) as proxy:
        yield proxy


@pytest.fixture(scope="module", autouse=True)
def report_measurements() -> Iterator[None]:
    yield
    for name, seconds in MEASURED.items():
        print(f"\nrecovery {name}: {seconds:.2f} s")


def fresh_with(app: Any, text: str) -> bool:
    return lane_state(app) == "ok" and text in hit_rate_row(app)


# --- Prometheus killed and back -----------------------------------------------------------


def restart(server: PromServer) -> PromServer:
    """The same Prometheus again: same port, same TSDB."""
    process = subprocess.Popen(
        server.process.args,
        stdout=subprocess.DEVNULL,
        stderr=server.log.open("ab"),
    )
    return PromServer(server.url, process, server.log)


def wait_ready(url: str, timeout: float = 20.0) -> float:
    """Until the API answers a query; the moment it did (perf_counter)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(f"{url}/api/v1/query", params={"query": "1"}, timeout=1)
            if answer.status_code == 200:
                return time.perf_counter()
        except httpx.HTTPError:
            pass
        time.sleep(0.01)
    raise AssertionError("prometheus did not come back")


@pytest.mark.slow
async def test_prometheus_killed_goes_stale_then_fresh_within_two_refreshes(
    prom: PromServer,
) -> None:
    """The shared Prometheus is killed and started again on its port and TSDB."""
    server = prom
    try:
        async with running_app(lane_config(server.url)) as (app, pilot):
            await wait_until(pilot, lambda: fresh_with(app, LANE_HIT_RATE))
            before = cache_text(app)
            source = app.lane_feeds[0].source  # type: ignore[attr-defined]

            killed_at = time.time()
            server.process.send_signal(signal.SIGKILL)
            server.process.wait(timeout=5)
            went_stale = await wait_until(pilot, lambda: lane_state(app) == "stale")
            assert went_stale <= REFRESH_S + 0.5, went_stale  # one refresh, plus a busy frame
            pane = app.query_one(CacheGauge)
            since = clock(app.lane_snapshot.freshness.since or 0)  # type: ignore[union-attr]
            assert since in (clock(killed_at), clock(killed_at + 1))
            assert pane.border_subtitle.startswith(f"lane stale since {since}")
            assert cache_text(app) == before  # the last good values stay, dimmed
            assert pane.has_class("-stale")
            assert "connection refused" in str(pane.tooltip)
            assert f"lane stale since {since}" in status_text(app)

            # Down long enough for the back-off to grow past two refreshes.
            requests_before = source.requests
            down_s = 3.0
            await pilot.pause(down_s)
            asked = source.requests - requests_before
            assert asked <= down_s / REFRESH_S + 2, f"{asked} requests in {down_s} s: busy loop"

            server.process = restart(server).process
            ready_at = await asyncio.to_thread(wait_ready, server.url)
            await wait_until(pilot, lambda: lane_state(app) == "ok", timeout=70)
            recovered = time.perf_counter() - ready_at
            MEASURED["prometheus killed, back"] = recovered
            # two refreshes, plus one scheduling slip on a busy 2-core machine
            assert recovered <= 2 * REFRESH_S + 0.25, f"fresh {recovered:.2f} s after the return"
            assert LANE_HIT_RATE in hit_rate_row(app)
            assert not pane.has_class("-stale")
            screen = screen_text(app)
            assert "Traceback" not in screen and "Error" not in screen
            assert error_notices(app) == []
    finally:
        if server.process.poll() is not None:  # left dead by a failure: back for the others
            server.process = restart(server).process
        await asyncio.to_thread(wait_ready, server.url)


# --- slow answers -------------------------------------------------------------------------


KEYS: tuple[tuple[str, Callable[[CockpitApp], object]], ...] = (
    ("t", lambda app: app.theme),
    ("question_mark", lambda app: type(app.screen).__name__),
    ("escape", lambda app: type(app.screen).__name__),
    ("p", lambda app: app.paused),
    ("p", lambda app: app.paused),
    ("w", lambda app: app.window),
)
"""Keys and the state each one changes."""


async def key_latencies(pilot: Pilot[None]) -> tuple[list[float], list[float]]:
    """Per key: seconds until its handler changed the state, and until the press was drawn."""
    app = pilot.app
    handled: list[float] = []
    drawn: list[float] = []
    for key, state in KEYS:
        before = state(app)  # type: ignore[arg-type]
        started = time.perf_counter()
        press = asyncio.ensure_future(pilot.press(key))
        while state(app) == before and not press.done():  # type: ignore[arg-type]
            await asyncio.sleep(0.001)
        handled.append(time.perf_counter() - started)
        await press
        drawn.append(time.perf_counter() - started)
        assert state(app) != before, key  # type: ignore[arg-type]
    return handled, drawn


@pytest.mark.slow
async def test_slow_answers_leave_keys_quick_and_reads_never_pile_up(proxy: FaultProxy) -> None:
    async with running_app(lane_config(proxy.url, timeout_s=1.5), size=(80, 24)) as (app, pilot):
        await wait_until(pilot, lambda: fresh_with(app, LANE_HIT_RATE))
        _, baseline = await key_latencies(pilot)
        await pilot.press("W")  # back to 5m
        await wait_until(pilot, lambda: fresh_with(app, LANE_HIT_RATE))
        proxy.mode, proxy.delay_s = "delay", 10.0
        await pilot.press("r")
        await pilot.pause(0.1)
        assert proxy.in_flight == 1  # a read hangs on the slow server
        handled, drawn = await key_latencies(pilot)
        assert statistics.median(handled) < 0.1, handled
        # one slow frame on a busy 2-core machine is no hang; the read takes 10 s
        assert max(handled) < 1.0, handled
        # drawn about as fast as with a quick server (a theme switch costs its own repaint)
        assert statistics.median(drawn) <= statistics.median(baseline) + 0.25, (drawn, baseline)
        assert app.window == "1h"

        proxy.reset()
        proxy.mode, proxy.delay_s = "delay", 10.0
        await pilot.pause(3.0)
        queries = proxy.requests_to("/api/v1/query")
        # 1.5 s timeout, then back-off 0.5 s, 1 s …: at most 2 reads in 3 s, one at a time
        assert 1 <= queries <= 2, queries
        assert proxy.most_in_flight == 1
        assert lane_state(app) == "stale"  # 1h was read before: kept, dimmed, never fresh
        assert all_rows_stale(app)
        assert "timed out after 1.5 s" in lane_reason(app)
        assert "timed out after 1.5 s" in str(app.query_one(CacheGauge).tooltip)

        proxy.mode = "pass"
        back = time.perf_counter()
        await wait_until(pilot, lambda: lane_state(app) == "ok", timeout=10)
        MEASURED["slow answers (1.5 s timeout), normal again"] = time.perf_counter() - back
        assert error_notices(app) == []


# --- garbage ------------------------------------------------------------------------------


def vector(samples: dict[str, str], warnings: list[str] | None = None) -> bytes:
    result = [{"metric": {"fig": fig}, "value": [time.time(), v]} for fig, v in samples.items()]
    body: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": result}}
    if warnings:
        body["warnings"] = warnings
    return json_answer(body)


FAILURES: dict[str, tuple[bytes | str, str]] = {
    "http 500": (http_answer(500, "boom"), "HTTP 500 Internal Server Error"),
    "503 retry-after": (
        http_answer(503, "busy", {"Retry-After": "2"}),
        "HTTP 503 Service Unavailable (retry after 2 s)",
    ),
    "html page": (
        http_answer(200, "<!doctype html><html><body>Sign in</body></html>",
                    {"Content-Type": "text/html"}),
        "answered an HTML page, not the Prometheus API",
    ),
    "invalid json": (http_answer(200, '{"status": "success", "da'), "answered invalid JSON"),
    "status error": (
        json_answer({"status": "error", "errorType": "execution",
                     "error": "query processing would load too many samples\nsecond line"}, 422),
        "execution: query processing would load too many samples",
    ),
    "connection cut": ("cut", "disconnected without sending a response"),
    "answer cut short": ("corrupt", "peer closed connection without sending complete message body"),
}  # fmt: skip
"""Case -> (canned answer to /api/v1/query, or a proxy mode; the reason the user reads)."""


def break_proxy(proxy: FaultProxy, fault: bytes | str) -> None:
    if isinstance(fault, bytes):
        proxy.canned["/api/v1/query"] = fault
    else:
        proxy.mode = fault  # type: ignore[assignment]


def row_values(app: Any) -> list[str]:
    """The value of every `label … value` row of every pane."""
    from cockpit.widgets.pane import Pane, Row

    return [
        line.value
        for pane in app.query(Pane)
        for line in (pane.view.lines if pane.view else ())
        if isinstance(line, Row)
    ]


def all_rows_stale(app: Any) -> bool:
    from cockpit.widgets.pane import Row

    rows = [line for line in app.query_one(CacheGauge).view.lines if isinstance(line, Row)]
    lane_rows = [row for row in rows if not row.label.startswith("Ledger")]
    return bool(lane_rows) and all(row.stale for row in lane_rows)


@pytest.mark.parametrize("case", sorted(FAILURES))
async def test_garbage_is_a_reason_never_a_number(proxy: FaultProxy, case: str) -> None:
    fault, reason = FAILURES[case]
    break_proxy(proxy, fault)
    async with running_app(lane_config(proxy.url)) as (app, pilot):
        pane = app.query_one(CacheGauge)
        # from the start: no figure, the reason on the pane
        await wait_until(pilot, lambda: lane_state(app) == "missing")
        assert reason in lane_reason(app)
        assert pane.border_subtitle.startswith("lane missing: ")
        assert reason[:20] in pane.border_subtitle
        assert "—" in hit_rate_row(app) and "%" not in hit_rate_row(app)

        proxy.reset()
        healed = time.perf_counter()
        await wait_until(pilot, lambda: fresh_with(app, LANE_HIT_RATE))
        MEASURED[f"{case}, then good"] = time.perf_counter() - healed
        before = cache_text(app)

        break_proxy(proxy, fault)
        await pilot.press("r")
        await wait_until(pilot, lambda: lane_state(app) == "stale")
        assert cache_text(app) == before and all_rows_stale(app)
        assert pane.border_subtitle.startswith("lane stale since ")
        assert reason in str(pane.tooltip)
        assert "\n" not in lane_reason(app)
        if case == "503 retry-after":  # the server's Retry-After is honoured
            asked = proxy.requests_to("/api/v1/query")
            await pilot.pause(1.5)
            assert proxy.requests_to("/api/v1/query") == asked
        screen = screen_text(app)
        assert "Traceback" not in screen
        assert error_notices(app) == []


FIGURE_FAULTS: dict[str, tuple[bytes, str]] = {
    "nan and inf": (
        vector({"prefix_cache_hits": "NaN", "prefix_cache_queries": "3000", "running": "-Inf"}),
        "not a number (NaN) in window",
    ),
    "empty vector": (vector({}), "no samples in window"),
    "some figures missing": (vector({"prefix_cache_queries": "3000"}), "no samples in window"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(FIGURE_FAULTS))
async def test_unusable_values_show_as_missing_with_why(proxy: FaultProxy, case: str) -> None:
    answer, reason = FIGURE_FAULTS[case]
    proxy.canned["/api/v1/query"] = answer
    async with running_app(lane_config(proxy.url)) as (app, pilot):
        await wait_until(pilot, lambda: app.lane_snapshot is not None)
        assert lane_state(app) == "ok"
        row = hit_rate_row(app)
        assert row.rstrip().endswith("—"), row
        for value in row_values(app):
            assert not re.search(r"nan|inf", value, re.IGNORECASE), value
        assert "Hit rate (engine)" in str(app.query_one(CacheGauge).tooltip)
        assert reason in str(app.query_one(CacheGauge).tooltip) or reason in str(
            app.lane_snapshot.figures  # type: ignore[union-attr]
        )


async def test_an_answer_with_no_usable_value_is_a_failure_not_blanks(proxy: FaultProxy) -> None:
    """Every value NaN, infinite or unreadable: the server is answering garbage; the lane keeps
    its last figures, stale, with the reason (not "ok" with every figure blank)."""
    async with running_app(lane_config(proxy.url)) as (app, pilot):
        await wait_until(pilot, lambda: fresh_with(app, LANE_HIT_RATE))
        before = cache_text(app)
        proxy.canned["/api/v1/query"] = vector(
            {"prefix_cache_hits": "NaN", "prefix_cache_queries": "+Inf", "running": "x"}
        )
        await pilot.press("r")
        await wait_until(pilot, lambda: lane_state(app) == "stale")
        assert "no usable value in the answer (" in lane_reason(app)
        assert cache_text(app) == before and all_rows_stale(app)


# --- transport failures -------------------------------------------------------------------


def self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


class _Anything(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_POST = do_GET


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An HTTPS server on loopback with a self-signed certificate."""
    require = pytest.importorskip("conftest").require_binary
    require("openssl")
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = QuietServer(("127.0.0.1", 0), _Anything)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


TLS_REASON = "TLS certificate not trusted (self-signed? set ca_file)"


@pytest.mark.parametrize("case", ["connection refused", "self-signed TLS"])
async def test_unreachable_servers_say_why_on_the_pane(case: str, tls_server: str) -> None:
    url = f"http://127.0.0.1:{free_port()}" if case == "connection refused" else tls_server
    reason = "connection refused" if case == "connection refused" else TLS_REASON
    async with running_app(lane_config(url)) as (app, pilot):
        await wait_until(pilot, lambda: lane_state(app) == "missing")
        assert lane_reason(app).endswith(reason)
        assert app.query_one(CacheGauge).border_subtitle.startswith("lane missing: ")
        assert "—" in hit_rate_row(app)
        await pilot.pause(1.2)  # probed once a refresh meanwhile, never faster
        assert app.lane_pollers[0].failures >= 1
        assert app.is_running and error_notices(app) == []


async def test_an_engine_that_comes_up_late_shows_at_the_next_refresh(prom: PromServer) -> None:
    """Prometheus already scrapes the lane's job, but the engine is still loading: only `up` and
    `scrape_*` exist. The lane is missing with that reason, asked again every refresh (not
    backed off), and shows as soon as the engine's own series arrive."""
    selector = f'job="{LATE_JOB}"'
    async with running_app(lane_config(prom.url, selector=selector)) as (app, pilot):
        await wait_until(pilot, lambda: lane_state(app) == "missing")
        assert "no vllm: or sglang: metrics found" in lane_reason(app)
        await pilot.pause(5 * REFRESH_S)  # a backed-off poller would wait 8 refreshes by now
        assert app.lane_pollers[0].delay == REFRESH_S
        # The same when the config names the engine: not taken for one that lacks every metric.
        source = PrometheusSource(prom.url)
        with pytest.raises(SourceError, match="no vllm: or sglang: metrics") as absent:
            await source.read_lane("late", "vllm", selector, 300.0)
        await source.aclose()
        assert absent.value.engine_absent is True
        exporter = start_exporter(take_late_port())
        try:
            up = time.perf_counter()
            await wait_until(pilot, lambda: lane_state(app) == "ok")
            MEASURED["engine up, lane shown"] = time.perf_counter() - up
        finally:
            exporter.stop()
        assert error_notices(app) == []


def write_config(path: Path, lanes: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"lanes": lanes, "window": "5m"}, sort_keys=False))
    return path


def run_cockpit(
    *args: str, prefix: tuple[str, ...] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, COCKPIT, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_cockpit_check_gives_each_failure_its_one_line_reason(
    prom: PromServer, tls_server: str, tmp_path: Path
) -> None:
    proxies = {case: FaultProxy(prom.url).start() for case in FAILURES}
    try:
        lanes: list[dict[str, Any]] = [
            {"name": "good", "prometheus": prom.url, "selector": f'job="{JOB}"'},
            {"name": "refused", "prometheus": f"http://127.0.0.1:{free_port()}"},
            {"name": "tls", "prometheus": tls_server},
        ]
        for index, (case, proxy) in enumerate(proxies.items()):
            break_proxy(proxy, FAILURES[case][0])
            lanes.append({"name": f"case{index}", "prometheus": proxy.url,
                          "selector": f'job="{JOB}"'})  # fmt: skip
        config = write_config(tmp_path / "config.yaml", lanes)
        result = run_cockpit("check", "--config", str(config))
    finally:
        for proxy in proxies.values():
            proxy.stop()
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stdout.splitlines()
    by_lane = {
        line.split()[2].rstrip(":"): line for line in lines if line.startswith(("ok", "FAIL"))
    }
    assert by_lane["good"].startswith("ok ")
    assert by_lane["refused"].startswith("FAIL") and by_lane["refused"].endswith(
        "connection refused"
    )
    assert by_lane["tls"].startswith("FAIL") and by_lane["tls"].endswith(TLS_REASON)
    for index, case in enumerate(proxies):
        line = by_lane[f"case{index}"]
        assert line.startswith("FAIL") and FAILURES[case][1] in line, (case, line)


UNKNOWN_HOST_SCRIPT = """
import asyncio, sys
sys.path[:0] = {paths!r}
from faultlane import lane_config, running_app, wait_until, lane_state, lane_reason, hit_rate_row
async def main():
    async with running_app(lane_config("http://nonexistent.invalid:9090")) as (app, pilot):
        await wait_until(pilot, lambda: lane_state(app) == "missing")
        print(lane_reason(app))
        print(app.query_one("#cache").border_subtitle)
        print(hit_rate_row(app))
asyncio.run(main())
"""


def test_unknown_host_fails_locally_with_a_reason(tmp_path: Path) -> None:
    """In a network namespace of its own: the failed lookup can't leave the machine."""
    pytest.importorskip("conftest").require_binary("unshare")
    isolated = ("unshare", "--net")
    if subprocess.run([*isolated, "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare --net is not permitted here")
    tests = str(Path(__file__).parent)
    script = UNKNOWN_HOST_SCRIPT.format(paths=[tests, str(Path(tests).parent)])
    shown = subprocess.run(
        [*isolated, sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    reason, subtitle, row = shown.stdout.splitlines()[-3:]
    assert reason == "http://nonexistent.invalid:9090: unknown host"
    assert subtitle.startswith(f"lane missing: {reason}")
    assert row.rstrip().endswith("—")

    config = write_config(
        tmp_path / "config.yaml", [{"name": "far", "prometheus": "http://nonexistent.invalid:9090"}]
    )
    result = run_cockpit("check", "--config", str(config), prefix=isolated)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stdout.splitlines()[-1] == (
        "FAIL lane far: http://nonexistent.invalid:9090: unknown host"
    )


async def test_a_warning_in_the_answer_is_said_on_the_pane_and_in_check(
    proxy: FaultProxy, tmp_path: Path
) -> None:
    warning = "partial response: store 10.0.0.7 unreachable"
    proxy.canned["/api/v1/query"] = vector(
        {"prefix_cache_hits": "300", "prefix_cache_queries": "400"}, [warning, "another"]
    )
    async with running_app(lane_config(proxy.url)) as (app, pilot):
        await wait_until(pilot, lambda: app.lane_snapshot is not None)
        assert lane_state(app) == "ok"
        assert share_text(300, 400) in hit_rate_row(app)  # the figures are what was answered
        note = f"server warning: {warning} (+1 more)"
        assert lane_reason(app) == note
        assert app.query_one(CacheGauge).border_subtitle.startswith(f"lane: {note}")
        assert note in str(app.query_one(CacheGauge).tooltip)
        assert "lane ok" in status_text(app) and "server warning" in status_text(app)
    config = write_config(
        tmp_path / "c.yaml", [{"name": "w", "prometheus": proxy.url, "selector": f'job="{JOB}"'}]
    )
    result = run_cockpit("check", "--config", str(config))
    assert result.returncode == 0
    assert f", {note}" in result.stdout.splitlines()[-1]


# --- label values typed in the UI -------------------------------------------------------


def model_rate(model: str) -> str:
    hits, queries, _ = MODELS[model]
    return share_text(hits, queries)


async def test_model_filters_with_quotes_backslashes_and_newlines_match_exactly(
    prom: PromServer,
) -> None:
    assert len({model_rate(m) for m in MODELS} | {LANE_HIT_RATE}) == len(MODELS) + 1
    async with running_app(lane_config(prom.url)) as (app, pilot):
        await wait_until(pilot, lambda: fresh_with(app, LANE_HIT_RATE))
        # typed: a quote and a backslash, through the `m` key's input
        await pilot.press("m")
        await pilot.pause()
        await pilot.press(*QUOTED_PREFIX)
        await pilot.press("enter")
        await wait_until(pilot, lambda: fresh_with(app, model_rate(QUOTED_PREFIX)))
        assert app.lane_feeds[0].model_filter == QUOTED_PREFIX
        # a newline can't be typed into a one-line input: applied as the input would
        for model in (QUOTED, "plain", QUOTED_PREFIX):
            app.filter_model(model)
            await wait_until(pilot, lambda m=model: fresh_with(app, model_rate(m)))  # type: ignore[misc]
            assert error_notices(app) == []
        app.filter_model("")
        await wait_until(pilot, lambda: fresh_with(app, LANE_HIT_RATE))
        app.filter_model('q"uote')  # a prefix of real values matches nothing
        await wait_until(pilot, lambda: app.lane_snapshot is not None)
        assert lane_state(app) == "missing"
        assert "no series match" in lane_reason(app)
        assert "—" in hit_rate_row(app)

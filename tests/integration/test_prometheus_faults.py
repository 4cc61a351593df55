"""Prometheus going wrong, from the source's read to the running cockpit.

PrometheusSource against servers that misbehave (a real HTTP server on loopback per case);
then the cockpit against a real Prometheus that dies, slows down or answers garbage, through
the user-facing layers: the app under Pilot on the real feeds built from a Config, and the real
`cockpit check` / `cockpit report` commands.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import signal
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.message import Message
from textual.pilot import Pilot

from cockpit.app.app import CockpitApp, LaneRead
from cockpit.core.timeutil import clock
from cockpit.sources.http import RETRY_AFTER_CAP_S, redact_url
from cockpit.sources.prometheus import PrometheusSource, SourceError
from cockpit.widgets import CacheGauge
from tests.support.fakeprom import Behaviour, serve_fake_prometheus
from tests.support.faultlane import (
    FAILURES,
    LANE_HIT_RATE,
    REFRESH_S,
    Exporter,
    break_proxy,
    cache_text,
    error_notices,
    fresh_with,
    hit_rate_row,
    lane_config,
    lane_reason,
    lane_state,
    running_app,
    screen_text,
    shared_lane_prometheus,
    status_text,
    vector,
    wait_until,
)
from tests.support.faultproxy import FaultProxy
from tests.support.promharness import PromServer, free_port

# --- the source against a misbehaving server ---------------------------------------------------


def _vector(samples: list[tuple[str, str]], warnings: list[str] | None = None) -> bytes:
    result = [{"metric": {"fig": fig}, "value": [1.0, value]} for fig, value in samples]
    body: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": result}}
    if warnings:
        body["warnings"] = warnings
    return json.dumps(body).encode()


@pytest.fixture
def fake() -> Iterator[tuple[str, type[Behaviour]]]:
    yield from serve_fake_prometheus()


async def _read(url: str, **options: Any) -> Any:
    source = PrometheusSource(url, timeout=options.pop("timeout", 2.0), **options)
    try:
        return await source.read_lane("l", "vllm", '{job="x"}', 300, 1_800_000_000)
    finally:
        await source.aclose()


async def test_connection_refused() -> None:
    with pytest.raises(SourceError, match="connection refused"):
        await _read(f"http://127.0.0.1:{free_port()}")


@pytest.mark.parametrize(
    "status, body, headers, expected, retry",
    [
        (500, b"boom", {}, "HTTP 500", None),
        (503, b"busy", {"Retry-After": "7"}, r"HTTP 503 .*retry after 7 s", 7.0),
        (
            200,
            b"<html><body>Sign in</body></html>",
            {"Content-Type": "text/html"},
            "HTML page",
            None,
        ),
        (200, b'{"status": "success", "data": ', {}, "invalid JSON", None),
        (
            400,
            json.dumps(
                {"status": "error", "errorType": "bad_data", "error": "parse error at char 5"}
            ).encode(),
            {},
            "bad_data: parse error at char 5",
            None,
        ),
        (
            200,
            json.dumps(
                {"status": "success", "data": {"resultType": "matrix", "result": []}}
            ).encode(),
            {},
            "not an instant vector",
            None,
        ),
    ],
)
async def test_bad_answers_give_one_line_reasons(
    fake: tuple[str, type[Behaviour]],
    status: int,
    body: bytes,
    headers: dict[str, str],
    expected: str,
    retry: float | None,
) -> None:
    url, behaviour = fake
    behaviour.status, behaviour.body, behaviour.headers = status, body, headers
    with pytest.raises(SourceError, match=expected) as caught:
        await _read(url)
    assert "\n" not in str(caught.value)
    assert caught.value.retry_after == retry


async def test_timeout(fake: tuple[str, type[Behaviour]]) -> None:
    url, behaviour = fake
    behaviour.body, behaviour.delay = _vector([]), 1.0
    with pytest.raises(SourceError, match=r"timed out after 0.2 s"):
        await _read(url, timeout=0.2)


async def test_a_server_trickling_its_answer_times_out_at_the_deadline(
    fake: tuple[str, type[Behaviour]],
) -> None:
    url, behaviour = fake
    behaviour.body, behaviour.trickle = _vector([("requests", "3")] * 20), 0.05
    with pytest.raises(SourceError, match=r"timed out after 0.5 s") as caught:
        await _read(url, timeout=0.5)
    assert not caught.value.unreachable  # a slow server gets the back-off, not the probe


@pytest.mark.parametrize("header", ["inf", "nan", "1e12", "-5", "99999999999999999999"])
async def test_retry_after_is_finite_and_capped(
    fake: tuple[str, type[Behaviour]], header: str
) -> None:
    url, behaviour = fake
    behaviour.status, behaviour.body, behaviour.headers = 503, b"busy", {"Retry-After": header}
    with pytest.raises(SourceError) as caught:
        await _read(url)
    wait = caught.value.retry_after
    assert wait is not None and 0 <= wait <= RETRY_AFTER_CAP_S


@pytest.mark.parametrize(
    "shape",
    [
        {"status": "success", "data": {"resultType": "vector", "result": [1, 2]}},
        {"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"metric": 3}]}},
    ],
)
async def test_an_answer_of_the_wrong_shape_says_so_in_words(
    fake: tuple[str, type[Behaviour]], shape: dict[str, Any]
) -> None:
    url, behaviour = fake
    behaviour.body = json.dumps(shape).encode()
    with pytest.raises(SourceError, match="unexpected shape"):
        await _read(url)


@pytest.mark.parametrize("channel", ["reason", "error", "warning"])
async def test_escape_sequences_from_a_server_never_reach_the_terminal(
    fake: tuple[str, type[Behaviour]], channel: str
) -> None:
    url, behaviour = fake
    hostile = "\x1b]52;c;cHduZWQ=\x07\x1b[2Jgone\x9b"
    if channel == "reason":
        behaviour.status, behaviour.body, behaviour.reason = 403, b"no", f"Forbidden {hostile}"
    elif channel == "error":
        error = {"status": "error", "errorType": hostile, "error": hostile}
        behaviour.status, behaviour.body = 422, json.dumps(error).encode()
    else:
        behaviour.body = _vector([("requests", "1")], [hostile])
    try:
        said = " ".join((await _read(url)).warnings)
    except SourceError as error:
        said = str(error)
    assert "␛]52;c;" in said and "␇" in said
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in said), said


async def test_nan_and_inf_are_missing_never_numbers(fake: tuple[str, type[Behaviour]]) -> None:
    url, behaviour = fake
    behaviour.body = _vector(
        [("requests", "NaN"), ("running", "+Inf"), ("prompt_tokens", "5")], ["partial answer"]
    )
    totals = await _read(url)
    assert "requests" not in totals.values and "NaN" in totals.missing["requests"]
    assert "running" not in totals.values and "infinite" in totals.missing["running"]
    assert totals.values["prompt_tokens"] == 5.0
    assert totals.warnings == ("server warning: partial answer",)
    assert totals.missing["generation_tokens"].startswith("not exposed by this engine")


async def test_empty_vector_means_no_samples(fake: tuple[str, type[Behaviour]]) -> None:
    url, behaviour = fake
    behaviour.body = _vector([])
    totals = await _read(url)
    assert not totals.values
    assert totals.missing["requests"] == "no samples in window"


async def test_secrets_never_in_messages(fake: tuple[str, type[Behaviour]]) -> None:
    url, behaviour = fake
    behaviour.status, behaviour.body = 500, b"boom"
    with_userinfo = url.replace("http://", "http://ada:s3cr3t-pw@")
    source = PrometheusSource(with_userinfo, bearer=None)
    assert "s3cr3t" not in repr(source) and "s3cr3t" not in source.url
    with pytest.raises(SourceError) as caught:
        await source.read_lane("l", "vllm", '{job="x"}', 300, 1_800_000_000)
    await source.aclose()
    assert "s3cr3t" not in str(caught.value)
    assert behaviour.seen_auth[-1].startswith("Basic ")
    with pytest.raises(SourceError) as caught:
        await _read(url, bearer="tok-XYZ-123")
    assert "tok-XYZ-123" not in str(caught.value)
    assert behaviour.seen_auth[-1] == "Bearer tok-XYZ-123"
    assert redact_url("https://u:p@h:9/x?q=1") == "https://h:9/x?q=1"


@pytest.mark.parametrize("channel", ["reason", "error", "warning", "body"])
async def test_a_server_echoing_the_credentials_never_gets_them_shown(
    fake: tuple[str, type[Behaviour]], channel: str
) -> None:
    """Every byte from a server is masked: the reason phrase, the API's error and warnings,
    the body, in every form the credential took on the wire."""
    url, behaviour = fake
    token, password = "tok-Echo-4471", "pw-Echo-9923"
    basic = base64.b64encode(f"ada:{password}".encode()).decode()
    for options, secrets in (
        ({"bearer": token}, [token]),
        ({"auth": ("ada", password)}, [basic, password]),
    ):
        echoed = " ".join(secrets)
        if channel == "reason":
            behaviour.status, behaviour.body, behaviour.reason = 403, b"no", f"Forbidden {echoed}"
        elif channel == "error":
            error = {"status": "error", "errorType": "auth", "error": f"refused {echoed}"}
            behaviour.status, behaviour.body = 403, json.dumps(error).encode()
        elif channel == "warning":
            behaviour.body = _vector([("requests", "1")], [f"odd header {echoed}"])
        else:
            behaviour.status, behaviour.body = 200, f"<html>{echoed}</html>".encode()
        try:
            said = repr(await _read(url, **options))
        except SourceError as error:
            said = str(error)
        assert channel == "body" or "***" in said, (channel, said)  # the echo was shown
        for secret in secrets:
            assert secret not in said, (channel, said)


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[str, type[Behaviour], Path]]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    for url, behaviour in serve_fake_prometheus(context):
        yield url, behaviour, cert


async def test_tls_self_signed_refused_then_trusted_with_ca_file(
    tls: tuple[str, type[Behaviour], Path],
) -> None:
    url, behaviour, cert = tls
    behaviour.body = _vector([("requests", "3")])
    with pytest.raises(SourceError, match="TLS certificate not trusted"):
        await _read(url)
    totals = await _read(url, verify=str(cert))
    assert totals.values["requests"] == 3.0


# --- the cockpit against a real Prometheus -----------------------------------------------------

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


class LaneReads:
    """The freshness of every lane read the app has handled, in order: time in refreshes.

    Counted as the app handles them, so a bound in refreshes holds however slowly a loaded
    machine runs the test."""

    def __init__(self, app: CockpitApp) -> None:
        self.states: list[str] = []
        app.message_signal.subscribe(app, self._handled, immediate=True)

    def _handled(self, message: Message) -> None:
        if isinstance(message, LaneRead):
            self.states.append(message.snapshot.freshness.state)

    def now(self, state: str) -> bool:
        """The last read handled is in `state`."""
        return self.states[-1:] == [state]

    @property
    def count(self) -> int:
        return len(self.states)

    def until(self, state: str, start: int) -> int:
        """The lane is in `state` now: how many reads, from the `start`-th one, it took to get
        there (that one included; 0 or less if it already was at the `start`-th)."""
        assert self.now(state), self.states[-3:]
        first = len(self.states) - 1
        while first > 0 and self.states[first - 1] == state:
            first -= 1
        return first - start + 1


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


@pytest.mark.prometheus
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
            reads = LaneReads(app)

            killed_at = time.time()
            server.process.send_signal(signal.SIGKILL)
            server.process.wait(timeout=5)
            at_kill = reads.count
            await wait_until(pilot, lambda: reads.now("stale") and lane_state(app) == "stale")
            # the read out at the kill may still have its answer; the next one can't
            assert reads.until("stale", at_kill) <= 2, reads.states[at_kill:]
            pane = app.query_one(CacheGauge)
            stale_since = app.lane_snapshot.freshness.since or 0  # type: ignore[union-attr]
            assert killed_at <= stale_since <= time.time()
            since = clock(stale_since)
            assert pane.border_subtitle.startswith(f"lane stale since {since}")
            assert cache_text(app) == before  # the last good values stay, dimmed
            assert pane.has_class("-stale")
            assert "connection refused" in str(pane.tooltip)
            assert f"lane stale since {since}" in status_text(app)

            # Down long enough for the back-off to grow past two refreshes.
            requests_before, started = source.requests, time.perf_counter()
            await pilot.pause(3.0)
            down_s = time.perf_counter() - started  # a loaded machine only makes it longer
            asked = source.requests - requests_before
            assert asked <= down_s / REFRESH_S + 2, f"{asked} requests in {down_s} s: busy loop"

            server.process = restart(server).process
            ready_at = await asyncio.to_thread(wait_ready, server.url)
            at_ready = reads.count
            await wait_until(pilot, lambda: reads.now("ok") and lane_state(app) == "ok", timeout=70)
            MEASURED["prometheus killed, back"] = time.perf_counter() - ready_at
            # the probe out at the return may still fail; the next one finds it and reads
            assert reads.until("ok", at_ready) <= 2, reads.states[at_ready:]
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
HANG_S = 600.0
"""A read that hangs for longer than any test runs."""
KEYS_BOUND_S = 60.0
"""Where a test of keys answered during a hang gives up: far inside the hang, far past the
second or so a loaded machine takes for them."""


async def press_keys(pilot: Pilot[None]) -> None:
    """Each of KEYS pressed, handled and drawn; each changes its state."""
    app = pilot.app
    for key, state in KEYS:
        before = state(app)  # type: ignore[arg-type]
        await pilot.press(key)
        assert state(app) != before, key  # type: ignore[arg-type]


@pytest.mark.prometheus
@pytest.mark.slow
async def test_keys_are_answered_and_drawn_while_a_read_hangs(proxy: FaultProxy) -> None:
    config = lane_config(proxy.url, timeout_s=HANG_S)
    async with running_app(config, size=(80, 24)) as (app, pilot):
        await wait_until(pilot, lambda: fresh_with(app, LANE_HIT_RATE))
        proxy.mode, proxy.delay_s = "delay", HANG_S
        await pilot.press("r")
        await wait_until(pilot, lambda: proxy.in_flight == 1)  # a read hangs on the slow server
        # A handler that waited for a read would hold its key until the hang ends.
        await asyncio.wait_for(press_keys(pilot), KEYS_BOUND_S)
        assert app.window == "1h"
        assert proxy.in_flight == 1 and app.lane_snapshot is None  # the 1h read still hangs


@pytest.mark.prometheus
@pytest.mark.slow
async def test_slow_answers_time_out_and_reads_never_pile_up(proxy: FaultProxy) -> None:
    async with running_app(lane_config(proxy.url, timeout_s=1.5), size=(80, 24)) as (app, pilot):
        await pilot.press("w")
        await wait_until(pilot, lambda: app.window == "1h" and fresh_with(app, LANE_HIT_RATE))
        reads = LaneReads(app)
        proxy.reset()
        proxy.mode, proxy.delay_s = "delay", 10.0
        await wait_until(pilot, lambda: reads.states.count("stale") >= 2)  # two reads timed out
        # one read at a time, one query each, and the next one backed off past a refresh
        assert proxy.most_in_flight == 1
        assert proxy.requests_to("/api/v1/query") <= reads.count + 1
        assert app.lane_pollers[0].delay > REFRESH_S
        assert lane_state(app) == "stale"  # 1h was read before: kept, dimmed, never fresh
        assert all_rows_stale(app)
        assert "timed out after 1.5 s" in lane_reason(app)
        assert "timed out after 1.5 s" in str(app.query_one(CacheGauge).tooltip)

        proxy.mode = "pass"
        back = time.perf_counter()
        await wait_until(pilot, lambda: lane_state(app) == "ok", timeout=20)
        MEASURED["slow answers (1.5 s timeout), normal again"] = time.perf_counter() - back
        assert error_notices(app) == []


# --- garbage ------------------------------------------------------------------------------


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


@pytest.mark.prometheus
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
            assert app.lane_pollers[0].delay >= 2.0
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


@pytest.mark.prometheus
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


@pytest.mark.prometheus
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

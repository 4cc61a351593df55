"""PrometheusSource against servers that misbehave: a real HTTP server on loopback per case."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cockpit.sources.http import RETRY_AFTER_CAP_S, redact_url
from cockpit.sources.prometheus import PrometheusSource, SourceError
from tests.support.promharness import free_port

NAMES = ["vllm:prompt_tokens_total", "vllm:request_success_total", "vllm:num_requests_running"]


class Behaviour:
    """What the fake server answers to /api/v1/query; the handler reads it."""

    status = 200
    body: bytes = b""
    headers: dict[str, str] = {}  # noqa: RUF012
    delay = 0.0
    reason: str | None = None
    """The HTTP reason phrase (None: the usual one)."""
    trickle = 0.0
    """Seconds between the body's bytes (0: all at once)."""
    seen_auth: list[str] = []  # noqa: RUF012


def _vector(samples: list[tuple[str, str]], warnings: list[str] | None = None) -> bytes:
    result = [{"metric": {"fig": fig}, "value": [1.0, value]} for fig, value in samples]
    body: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": result}}
    if warnings:
        body["warnings"] = warnings
    return json.dumps(body).encode()


class Handler(BaseHTTPRequestHandler):
    behaviour = Behaviour

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status, self.behaviour.reason)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self.behaviour.trickle:
            self.wfile.write(body)
            return
        for byte in body:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(self.behaviour.trickle)

    def do_GET(self) -> None:
        self.behaviour.seen_auth.append(self.headers.get("Authorization", ""))
        if self.path.startswith("/api/v1/label/__name__/values"):
            body = json.dumps({"status": "success", "data": NAMES}).encode()
            self._answer(200, body, {"Content-Type": "application/json"})
        else:
            self._answer(404, b"not found", {})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        time.sleep(self.behaviour.delay)
        self._answer(self.behaviour.status, self.behaviour.body, self.behaviour.headers)


def _serve(context: ssl.SSLContext | None = None) -> Iterator[tuple[str, type[Behaviour]]]:
    behaviour = type("B", (Behaviour,), {"seen_auth": [], "headers": {}})
    Behaviour.reason = None
    handler = type("H", (Handler,), {"behaviour": behaviour})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.block_on_close = False
    scheme = "http"
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"{scheme}://127.0.0.1:{server.server_address[1]}", behaviour
    server.shutdown()
    server.server_close()


@pytest.fixture
def fake() -> Iterator[tuple[str, type[Behaviour]]]:
    yield from _serve()


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
    for url, behaviour in _serve(context):
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

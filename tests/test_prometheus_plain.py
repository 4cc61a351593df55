"""The plain-http path: HTTP/1.1 framing, keep-alive reuse, and failures as one-line reasons.

A real asyncio server on loopback answers each request with the raw bytes a test chose, and
counts connections and requests, so reuse and retries are seen from the server's side.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest

from cockpit.sources.prometheus import (
    ConnectError,
    PlainHttp,
    PrometheusSource,
    ReadError,
    SourceError,
    environment_proxies,
    failure_reason,
    general_client_error,
)

Answer = Callable[[int], bytes | None]
"""Request number (from 0) -> raw answer, or None to close the connection unanswered."""


@dataclass
class RawServer:
    answer: Answer
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    url: str = ""
    close_after_answer: bool = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                raw = self.answer(len(self.requests) - 1)
                if raw is None:
                    break
                writer.write(raw)
                await writer.drain()
                if self.close_after_answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


Start = Callable[[Answer], Awaitable[RawServer]]


@pytest.fixture
async def serve() -> AsyncIterator[Start]:
    """Start RawServers on free loopback ports; all are closed after the test."""
    servers: list[asyncio.Server] = []

    async def start(answer: Answer) -> RawServer:
        raw = RawServer(answer)
        server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
        raw.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        servers.append(server)
        return raw

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def reply(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(body: bytes, size: int) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n\r\n"


VECTOR = json.dumps(
    {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {"fig": "x"}, "value": [1, "2"]}]},
    }
).encode()


async def test_one_connection_carries_every_request(serve: Start) -> None:
    raw = await serve(lambda n: reply(VECTOR))
    http = PlainHttp(raw.url, {"Authorization": "Bearer t0k"}, 5.0)
    for i in range(5):
        answer = await http.request("POST", "/api/v1/query", f"query=q{i}".encode())
        assert (answer.status, json.loads(answer.text)) == (200, json.loads(VECTOR))
    http.close()
    assert (raw.connections, len(raw.requests), http.connections) == (1, 5, 1)
    first = raw.requests[0].decode()
    assert first.startswith("POST /api/v1/query HTTP/1.1\r\n")
    assert "\r\nAuthorization: Bearer t0k\r\n" in first
    assert "\r\nContent-Type: application/x-www-form-urlencoded\r\n" in first
    assert first.endswith("\r\n\r\nquery=q0")


async def test_chunked_and_charset_answers_decode(serve: Start) -> None:
    accented = '{"status": "success", "data": {"résumé": "ç"}}'
    answers = [
        reply(chunked(VECTOR, 7), "Transfer-Encoding: chunked"),
        reply(chunked(VECTOR, len(VECTOR)), "Transfer-Encoding: chunked"),
        reply(accented.encode("latin-1"), "Content-Type: application/json; Charset=ISO-8859-1"),
        reply(accented.encode(), "Content-Type: application/json; charset=no-such-codec"),
    ]
    raw = await serve(lambda n: answers[n])
    http = PlainHttp(raw.url, {}, 5.0)
    texts = [(await http.request("GET", "/x?a=1")).text for _ in answers]
    http.close()
    assert texts == [VECTOR.decode()] * 2 + [accented] * 2
    assert raw.connections == 1  # chunked and sized answers both leave the connection usable
    assert all(b"accept-encoding" not in request.lower() for request in raw.requests)


async def test_an_answer_ended_by_closing_is_read_whole(serve: Start) -> None:
    raw = await serve(lambda n: b"HTTP/1.0 200 OK\r\nX-Any: 1\r\n\r\n" + VECTOR)
    raw.close_after_answer = True
    http = PlainHttp(raw.url, {}, 5.0)
    for _ in range(2):
        answer = await http.request("GET", "/x")
        assert (answer.status, answer.reason, answer.text) == (200, "OK", VECTOR.decode())
        assert answer.headers["x-any"] == "1"
    http.close()
    assert (raw.connections, http.connections) == (2, 2)  # such a connection is not reused


async def test_a_token_http_forbids_is_a_reason_without_the_token(serve: Start) -> None:
    raw = await serve(lambda n: reply(VECTOR))
    source = PrometheusSource(raw.url, bearer="s3cret-token\n")
    with pytest.raises(SourceError, match="request not sendable") as caught:
        await source.query("1", 0.0)
    await source.aclose()
    assert "s3cret" not in str(caught.value)
    assert raw.requests == []


async def test_connection_close_is_honoured(serve: Start) -> None:
    raw = await serve(lambda n: reply(VECTOR, "Connection: close"))
    raw.close_after_answer = True
    http = PlainHttp(raw.url, {}, 5.0)
    for _ in range(3):
        assert (await http.request("GET", "/x")).status == 200
    http.close()
    assert (raw.connections, len(raw.requests)) == (3, 3)


async def test_a_kept_connection_the_server_dropped_is_replaced_once(
    serve: Start,
) -> None:
    raw = await serve(lambda n: reply(VECTOR))
    raw.close_after_answer = True  # without saying so: the kept connection is dead next time
    http = PlainHttp(raw.url, {}, 5.0)
    for _ in range(3):
        assert (await http.request("GET", "/x")).status == 200
    http.close()
    assert (len(raw.requests), raw.connections) == (3, 3)


async def test_a_request_a_kept_connection_drops_unanswered_is_sent_again(
    serve: Start,
) -> None:
    answers = [reply(VECTOR), None, reply(VECTOR)]  # the server closes as request 2 arrives
    raw = await serve(lambda n: answers[n])
    http = PlainHttp(raw.url, {}, 5.0)
    for _ in range(2):
        assert (await http.request("POST", "/q", b"query=1")).text == VECTOR.decode()
    http.close()
    assert (len(raw.requests), raw.connections, http.connections) == (3, 2, 2)
    assert raw.requests[1] == raw.requests[2]


async def test_answers_cut_short_are_reasons(serve: Start) -> None:
    whole = reply(VECTOR)
    answers = [None, whole[: len(whole) - 10], b"garbage\r\n\r\n"]
    raw = await serve(lambda n: answers[n])
    raw.close_after_answer = True
    source = PrometheusSource(raw.url)
    reasons = []
    for _ in answers:
        with pytest.raises(SourceError) as caught:
            await source.query("1", 0.0)
        reasons.append(str(caught.value))
    await source.aclose()
    assert "disconnected without sending a response" in reasons[0]
    assert "peer closed connection without sending complete message body" in reasons[1]
    assert f"received {len(VECTOR) - 10} bytes, expected {len(VECTOR)}" in reasons[1]
    assert "illegal status line" in reasons[2]
    assert all("\n" not in reason for reason in reasons)
    assert len(raw.requests) == 3  # a fresh connection that fails is not retried


async def test_refused_and_timed_out() -> None:
    http = PlainHttp("http://127.0.0.1:1", {}, 1.0)
    with pytest.raises(ConnectError):
        await http.request("GET", "/x")
    source = PrometheusSource("http://127.0.0.1:1")
    with pytest.raises(SourceError, match="connection refused") as caught:
        await source.query("1", 0.0)
    assert caught.value.unreachable
    await source.aclose()

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers
        writer.close()

    slow = await asyncio.start_server(hang, "127.0.0.1", 0)
    source = PrometheusSource(f"http://127.0.0.1:{slow.sockets[0].getsockname()[1]}", timeout=0.3)
    with pytest.raises(SourceError, match=r"timed out after 0.3 s") as caught:
        await source.query("1", 0.0)
    assert not caught.value.unreachable
    await source.aclose()
    slow.close()
    await slow.wait_closed()


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"HTTP_PROXY": "http://upper:1"},
        {"http_proxy": "http://lower:1", "HTTP_PROXY": "http://upper:1"},
        {"HTTP_PROXY": "http://upper:1", "http_proxy": ""},
        {"HTTP_PROXY": "http://cgi:1", "REQUEST_METHOD": "GET"},
        {"http_proxy": "http://lower:1", "REQUEST_METHOD": "GET"},
        {"ALL_PROXY": "socks5://all:1", "no_proxy": "localhost"},
    ],
)
def test_proxies_are_read_as_urllib_reads_them(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import urllib.request

    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name == "REQUEST_METHOD":
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert environment_proxies() == urllib.request.getproxies_environment()


@pytest.mark.parametrize(
    ("error", "reason", "unreachable"),
    [
        (httpx.ConnectTimeout("connect"), "timed out after 5 s", True),
        (httpx.ReadTimeout("read"), "timed out after 5 s", False),
        (httpx.PoolTimeout("pool"), "timed out after 5 s", False),
        (httpx.ConnectError("[Errno 111] Connection refused"), "connection refused", True),
        (httpx.RemoteProtocolError("peer closed"), "RemoteProtocolError: peer closed", True),
        (httpx.DecodingError("bad gzip"), "DecodingError: bad gzip", False),
    ],
)
def test_the_general_clients_errors_read_as_before(
    error: httpx.HTTPError, reason: str, unreachable: bool
) -> None:
    """httpx's errors give the reasons and reachability they gave when caught directly."""
    said, gone = failure_reason("http://p:9090", general_client_error(error), 5.0)
    assert said == f"http://p:9090: {reason}"
    assert gone is unreachable


def test_only_the_errors_own_words_are_scrubbed() -> None:
    error = ReadError("token sekret9090 leaked")
    said, _ = failure_reason("http://p:9090", error, 5.0, lambda text: text.replace("9090", "***"))
    assert said == "http://p:9090: ReadError: token sekret*** leaked"

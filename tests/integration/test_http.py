"""The HTTP layer: keep-alive, decoding, proxies, deadlines, and failures as one-line reasons.

A real asyncio server on loopback answers each request with the raw bytes a test chose, and
counts connections and requests, so reuse is seen from the server's side.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

import pytest

from cockpit.sources.http import (
    RETRY_AFTER_CAP_S,
    HttpClient,
    SourceError,
    form_encoded,
    mask,
    retry_after,
    secret_forms,
    transport_reason,
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
    http = HttpClient(raw.url, bearer="t0k")
    for i in range(5):
        answer = await http.post_form("/api/v1/query", {"query": f"q{i}"})
        assert (answer.status, json.loads(answer.text)) == (200, json.loads(VECTOR))
    await http.aclose()
    assert (raw.connections, len(raw.requests), http.requests) == (1, 5, 5)
    first = raw.requests[0].decode().lower()
    assert first.startswith("post /api/v1/query http/1.1\r\n")
    assert "\r\nauthorization: bearer t0k\r\n" in first
    assert "\r\ncontent-type: application/x-www-form-urlencoded\r\n" in first
    assert first.endswith("\r\n\r\nquery=q0")


async def test_a_query_sent_in_parts_is_the_query_whole_and_its_stable_part_encoded_once(
    serve: Start,
) -> None:
    raw = await serve(lambda n: reply(VECTOR))
    http = HttpClient(raw.url)
    stable = 'sum(rate(vllm:x{job="a b", le="+Inf"}[5m])) & 100% ü' * 50
    sent = []
    for at in ("1.5", "2.5"):
        tail = f"vector({at}) @ {at}"
        before = form_encoded.cache_info()
        await http.post_form("/api/v1/query", {"query": (stable, " or ", tail), "time": at})
        after = form_encoded.cache_info()
        sent.append(raw.requests[-1].decode().partition("\r\n\r\n")[2])
        assert sent[-1] == urlencode({"query": f"{stable} or {tail}", "time": at})
    await http.aclose()
    assert after.hits - before.hits >= 3  # the second time: the names, the stable part, " or "
    assert sent[0] != sent[1]


async def test_chunked_and_charset_answers_decode(serve: Start) -> None:
    accented = '{"status": "success", "data": {"résumé": "ç"}}'
    answers = [
        reply(chunked(VECTOR, 7), "Transfer-Encoding: chunked"),
        reply(chunked(VECTOR, len(VECTOR)), "Transfer-Encoding: chunked"),
        reply(accented.encode("latin-1"), "Content-Type: application/json; Charset=ISO-8859-1"),
        reply(accented.encode(), "Content-Type: application/json; charset=no-such-codec"),
    ]
    raw = await serve(lambda n: answers[n])
    http = HttpClient(raw.url)
    texts = [(await http.get("/x", {"a": "1"})).text for _ in answers]
    await http.aclose()
    assert texts == [VECTOR.decode()] * 2 + [accented] * 2
    assert raw.connections == 1  # chunked and sized answers both leave the connection usable


async def test_connection_close_is_honoured(serve: Start) -> None:
    raw = await serve(lambda n: reply(VECTOR, "Connection: close"))
    raw.close_after_answer = True
    http = HttpClient(raw.url)
    for _ in range(3):
        assert (await http.get("/x")).status == 200
    await http.aclose()
    assert (raw.connections, len(raw.requests)) == (3, 3)


async def test_a_token_http_forbids_is_a_reason_without_the_token(serve: Start) -> None:
    raw = await serve(lambda n: reply(VECTOR))
    http = HttpClient(raw.url, bearer="s3cret-token\n")
    with pytest.raises(SourceError, match="request not sendable") as caught:
        await http.get("/api/v1/query", {"query": "1"})
    await http.aclose()
    assert "s3cret" not in str(caught.value)
    assert raw.requests == []


async def test_answers_cut_short_are_one_line_reasons(serve: Start) -> None:
    whole = reply(VECTOR)
    answers = [None, whole[: len(whole) - 10], b"garbage\r\n\r\n"]
    raw = await serve(lambda n: answers[n])
    raw.close_after_answer = True
    http = HttpClient(raw.url)
    reasons = []
    for _ in answers:
        with pytest.raises(SourceError) as caught:
            await http.get("/x")
        reasons.append(str(caught.value))
    await http.aclose()
    assert "disconnected without sending a response" in reasons[0]
    assert f"received {len(VECTOR) - 10} bytes, expected {len(VECTOR)}" in reasons[1]
    assert reasons[2].startswith(f"{raw.url}: RemoteProtocolError")
    assert all("\n" not in reason for reason in reasons)


async def test_refused_hung_and_trickling_servers() -> None:
    http = HttpClient("http://127.0.0.1:1")
    with pytest.raises(SourceError, match="connection refused") as caught:
        await http.get("/x")
    assert caught.value.unreachable and caught.value.connect_failed
    await http.aclose()

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers
        writer.close()

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(1000):  # each byte well within a read timeout: only a deadline ends it
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(0.02)

    for handler in (hang, trickle):
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        http = HttpClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", timeout=0.3)
        with pytest.raises(SourceError, match=r"timed out after 0.3 s") as caught:
            await http.get("/x")
        assert not caught.value.unreachable  # it answers, slowly: the back-off, not the probe
        await http.aclose()
        server.close()


async def test_a_proxy_named_in_the_environment_carries_the_requests(
    serve: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await serve(lambda n: reply(VECTOR))
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    http = HttpClient("http://prometheus.invalid:9090")
    assert (await http.get("/api/v1/query", {"query": "1"})).text == VECTOR.decode()
    await http.aclose()
    target = proxy.requests[0].split(b"\r\n")[0]
    assert target == b"GET http://prometheus.invalid:9090/api/v1/query?query=1 HTTP/1.1"


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("7", 7.0), ("0", 0.0), ("-3", 0.0), ("inf", RETRY_AFTER_CAP_S), ("nan", RETRY_AFTER_CAP_S),
     ("1e12", RETRY_AFTER_CAP_S), ("Wed, 21 Oct 2015 07:28:00 GMT", None), ("", None)],
)  # fmt: skip
def test_retry_after_is_finite_and_capped(header: str, seconds: float | None) -> None:
    assert retry_after({"retry-after": header} if header else {}) == seconds


def test_every_form_a_credential_takes_is_masked() -> None:
    secrets = secret_forms("tok/en+1", ("ada", "pa ss"))
    text = "tok/en+1 tok%2Fen%2B1 YWRhOnBhIHNz pa ss pa%20ss"
    assert mask(text, secrets) == "*** *** *** *** ***"


async def test_an_answer_over_the_size_cap_is_refused_with_a_reason(serve: Start) -> None:
    raw = await serve(lambda n: reply(chunked(b"x" * 5000, 100), "Transfer-Encoding: chunked"))
    http = HttpClient(raw.url, max_bytes=4096)
    with pytest.raises(SourceError, match=r"answer over 0.004096 MB refused"):
        await http.get("/metrics")
    http.max_bytes = 5000
    assert len((await http.get("/metrics")).text) == 5000
    await http.aclose()


def test_a_host_whose_every_address_refuses_says_connection_refused() -> None:
    """`localhost` as ::1 and 127.0.0.1, both closed: anyio raises one OSError from a group of
    the attempts' errors (anyio/_core/_sockets.py); the reason is theirs when they agree."""
    refused = [ConnectionRefusedError(111, "refused ::1"), ConnectionRefusedError(111, "127")]
    mixed = [ConnectionRefusedError(111, "refused"), TimeoutError("timed out")]
    for attempts, said in ((refused, "connection refused"), (mixed, "OSError: All connection")):
        try:
            try:
                raise ExceptionGroup("multiple connection attempts failed", attempts)
            except ExceptionGroup as group:
                raise OSError("All connection attempts failed") from group
        except OSError as error:
            assert transport_reason(error).startswith(said)

"""A small HTTP-aware TCP proxy on loopback that can delay, cut, corrupt or replace answers.

It runs its own asyncio loop in a thread, so a test (sync or async, the app under Pilot
included) drives it by setting attributes. Each request is read whole, counted, then:

- `pass`: forwarded upstream on a fresh connection (`Connection: close`), answer piped back;
- `delay`: the same after `delay_s` (a client that gives up meanwhile ends the request);
- `cut`: the connection is closed with no answer;
- `corrupt`: the upstream answer is cut off `corrupt_after` bytes into its body.

`canned` maps a path prefix to a raw HTTP answer sent instead of forwarding (`http_answer`
builds one); it wins over the mode. With `authorization` set, a request without exactly that
`Authorization` header gets a 401 whose error text quotes the header it got back, as careless
servers do. One request per connection, always.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

Mode = Literal["pass", "delay", "cut", "corrupt"]


def http_answer(status: int, body: bytes | str, headers: Mapping[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection."""
    data = body.encode() if isinstance(body, str) else body
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 500: "Internal Server Error",
              503: "Service Unavailable"}.get(status, "Status")  # fmt: skip
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(data)}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def json_answer(payload: Any, status: int = 200) -> bytes:
    return http_answer(status, json.dumps(payload), {"Content-Type": "application/json"})


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FaultProxy:
    """Listens on 127.0.0.1:<free port> and forwards to `upstream` (a base URL)."""

    upstream: str
    mode: Mode = "pass"
    delay_s: float = 0.0
    corrupt_after: int = 10
    canned: dict[str, bytes] = field(default_factory=dict)
    authorization: str | None = None
    seen: list[Seen] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.Server | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        future.result(timeout=5)
        return self

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self._loop is None:
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._server.wait_closed(), 1)
            # Connections still open (a client's keep-alive), and any accepted while the first
            # ones ended, end here, not when collected.
            while handlers := asyncio.all_tasks() - {asyncio.current_task()}:
                for handler in handlers:
                    handler.cancel()
                await asyncio.gather(*handlers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
            if not self._thread.is_alive():
                self._loop.close()
        self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Back to a plain pass-through, counters cleared."""
        self.mode, self.delay_s, self.canned = "pass", 0.0, {}
        with self._lock:
            self.seen = []
            self.most_in_flight = self.in_flight

    def requests_to(self, prefix: str) -> int:
        return sum(1 for seen in list(self.seen) if seen.path.startswith(prefix))

    # --- one connection ---------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await _read_request(reader)
            if request is None:
                return
            with self._lock:
                self.seen.append(request[0])
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                await self._answer(request[0], request[1], reader, writer)
            finally:
                with self._lock:
                    self.in_flight -= 1
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()  # no await here: a handler closed with its loop ends without one

    async def _answer(
        self,
        seen: Seen,
        raw: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        presented = seen.headers.get("authorization", "")
        if self.authorization is not None and presented != self.authorization:
            error = {"status": "error", "errorType": "unauthorized",
                     "error": f"bad credentials: {presented!r} (try again)"}  # fmt: skip
            writer.write(json_answer(error, 401))
            await writer.drain()
            return
        for prefix, answer in list(self.canned.items()):
            if seen.path.startswith(prefix):
                writer.write(answer)
                await writer.drain()
                return
        mode = self.mode
        if mode == "cut":
            return
        if mode == "delay" and not await _wait_unless_gone(reader, self.delay_s):
            return
        await self._forward(raw, writer, self.corrupt_after if mode == "corrupt" else None)

    async def _forward(self, raw: bytes, writer: asyncio.StreamWriter, limit: int | None) -> None:
        parts = urlsplit(self.upstream)
        try:
            up_reader, up_writer = await asyncio.open_connection(
                parts.hostname or "127.0.0.1", parts.port or 80
            )
        except OSError:
            return  # upstream down: the client sees the connection close unanswered
        try:
            up_writer.write(raw)
            await up_writer.drain()
            if limit is not None:
                head = await up_reader.readuntil(b"\r\n\r\n")
                body = await up_reader.read(limit)
                writer.write(head + body)
                await writer.drain()
                return
            while chunk := await up_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            up_writer.close()  # no await here either (see `_handle`)


async def _wait_unless_gone(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Sleep `seconds`; False as soon as the client closes its end."""
    gone = asyncio.ensure_future(reader.read(1))
    try:
        done, _ = await asyncio.wait({gone}, timeout=seconds)
    finally:
        gone.cancel()
    return not done


async def _read_request(reader: asyncio.StreamReader) -> tuple[Seen, bytes] | None:
    """One request, and its bytes rewritten to close the upstream connection after it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = [*lines[0].split(" ", 2), "", ""][:3]
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(length) if length else b""
    kept = [line for line in lines[1:] if line and not line.lower().startswith("connection:")]
    raw = "\r\n".join([lines[0], *kept, "Connection: close", "", ""]).encode("latin-1") + body
    return Seen(method, path, headers, body), raw

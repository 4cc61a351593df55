"""A fake Prometheus on loopback whose answers a test scripts: status, body, headers, delay,
reason phrase, a trickled body; it notes the Authorization headers it was sent."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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


class QuietServer(ThreadingHTTPServer):
    """A client that hangs up (a Prometheus killed mid-scrape, a refused handshake, a read
    timed out) is the point of these tests, not news: no traceback on stderr."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


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


def serve_fake_prometheus(
    context: ssl.SSLContext | None = None,
) -> Iterator[tuple[str, type[Behaviour]]]:
    """The server's URL (https with `context`) and its behaviour class, then it stops."""
    behaviour = type("B", (Behaviour,), {"seen_auth": [], "headers": {}})
    Behaviour.reason = None
    handler = type("H", (Handler,), {"behaviour": behaviour})
    server = QuietServer(("127.0.0.1", 0), handler)
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

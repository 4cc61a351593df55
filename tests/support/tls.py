"""HTTPS on loopback: a self-signed certificate, a server that holds it, the reason said."""

from __future__ import annotations

import contextlib
import ssl
import subprocess
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.support.loopback import serving
from tests.support.repo import require_binary

TLS_REASON = "TLS certificate not trusted (self-signed? set ca_file)"


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by openssl in `folder`."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


class AnswerAnything(BaseHTTPRequestHandler):
    """Any GET or POST: 200 and `{}`."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_POST = do_GET


@contextlib.contextmanager
def serving_tls(folder: Path, handler: type[BaseHTTPRequestHandler]) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on loopback with a self-signed certificate: its URL and the cert."""
    require_binary("openssl")
    cert, key = self_signed(folder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with serving(handler, context) as url:
        yield url, cert

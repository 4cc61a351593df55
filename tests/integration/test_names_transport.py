"""Transport failures that say which: a certificate expired (when), not valid yet (from
when), for other names (which); a redirect (where to, or a loop); a server that hangs up on
huge credentials. Real TLS servers on loopback with certificates made by `openssl`."""

from __future__ import annotations

import socketserver
import ssl
import subprocess
import threading
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from cockpit.sources.http import HttpClient, SourceError
from tests.support import loopback
from tests.support.repo import require_binary
from tests.support.tls import AnswerAnything

CA_CONFIG = """[ca]
default_ca = test_ca
[test_ca]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
"""


def certificate(folder: Path, start: str, end: str, names: str) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA, for a ca_file) valid from `start` to `end`
    (`YYYYMMDDHHMMSSZ`) for `names` (`IP:127.0.0.1`, `DNS:example.test`)."""
    require_binary("openssl")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.txt").write_text("")
    (folder / "serial").write_text("01\n")
    (folder / "ca.cnf").write_text(CA_CONFIG)
    (folder / "ext.cnf").write_text(f"subjectAltName={names}\nbasicConstraints=critical,CA:TRUE\n")
    key, cert = folder / "key.pem", folder / "cert.pem"

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=30, cwd=folder)

    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", "csr.pem",
            "-subj", "/CN=cockpit-test")  # fmt: skip
    openssl("ca", "-batch", "-config", "ca.cnf", "-selfsign", "-keyfile", str(key), "-in",
            "csr.pem", "-out", str(cert), "-startdate", start, "-enddate", end, "-extfile",
            "ext.cnf", "-notext")  # fmt: skip
    return cert, key


def serving(
    handler: type[BaseHTTPRequestHandler], tls: tuple[Path, Path] | None = None
) -> AbstractContextManager[str]:
    context = None
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
    return loopback.serving(handler, context)


async def reason_of(url: str, **options: Any) -> str:
    client = HttpClient(url, timeout=5.0, **options)
    try:
        with pytest.raises(SourceError) as caught:
            await client.get("/api/v1/query", {"query": "1"})
    finally:
        await client.aclose()
    return str(caught.value)


@pytest.mark.parametrize(
    ("start", "end", "names", "reason"),
    [
        ("20200101000000Z", "20200201000000Z", "IP:127.0.0.1",
         "TLS certificate expired on 2020-02-01 00:00 UTC"),
        ("20990101000000Z", "20991231000000Z", "IP:127.0.0.1",
         "TLS certificate not valid yet: valid from 2099-01-01 00:00 UTC"),
        ("20200101000000Z", "20991231000000Z", "DNS:prom.example.test,DNS:prom2.example.test",
         "TLS certificate is for prom.example.test, prom2.example.test, not 127.0.0.1"),
    ],
    ids=["expired", "not-yet-valid", "wrong-host"],
)  # fmt: skip
async def test_a_certificate_trusted_by_ca_file_but_refused_says_why(
    tmp_path: Path, start: str, end: str, names: str, reason: str
) -> None:
    cert, key = certificate(tmp_path, start, end, names)
    with serving(AnswerAnything, (cert, key)) as url:
        said = await reason_of(url, verify=str(cert))
    assert said == f"{url}: {reason}"


class _Redirect(BaseHTTPRequestHandler):
    target = ""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(301)
        self.send_header("Location", self.target or self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()


async def test_a_redirect_says_where_to_and_a_loop_says_so() -> None:
    class ToHttps(_Redirect):
        target = "https://prom.example.test/api/v1/query?query=1"

    with serving(ToHttps) as url:
        said = await reason_of(url, bearer="tok-Redirect-9")
    assert said == (f"{url}: HTTP 301 redirects to https://prom.example.test/api/v1/query?"
                    "query=1: configure that URL instead")  # fmt: skip
    with serving(_Redirect) as url:
        said = await reason_of(url)
    assert said == f"{url}: HTTP 301 redirects to itself (a redirect loop)"


class _HangsUpOnBigHeaders(socketserver.BaseRequestHandler):
    """As a server with a header limit does: read some of the request, then close."""

    def handle(self) -> None:
        self.request.recv(65536)


async def test_a_server_hanging_up_on_huge_credentials_says_how_big_they_are() -> None:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _HangsUpOnBigHeaders)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    password = "p" * 1_100_000
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        said = await reason_of(url, basic=("ada", password))
    finally:
        server.shutdown()
        server.server_close()
    assert said.startswith(f"{url}: the server hung up on a request with 1,4"), said
    assert "KiB of headers (the credentials)" in said and password[:8] not in said

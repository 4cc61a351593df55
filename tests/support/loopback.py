"""Serving and reading pages on loopback, and the samples of a `/metrics` text."""

from __future__ import annotations

import functools
import re
import ssl
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from socketserver import BaseRequestHandler

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.support.fakeprom import QuietServer


@contextmanager
def serving(
    handler: Callable[..., BaseRequestHandler], context: ssl.SSLContext | None = None
) -> Iterator[str]:
    """A real HTTP server (HTTPS with `context`) on loopback answering with `handler`, quiet
    about clients that hang up; yields its base URL."""
    server = QuietServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield f"{'https' if context else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def serving_folder(folder: Path) -> AbstractContextManager[str]:
    """The files of `folder` served on loopback (`serving`)."""
    return serving(functools.partial(SimpleHTTPRequestHandler, directory=str(folder)))


def get(url: str) -> bytes:
    """GET on loopback, ignoring any proxy from the environment."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=5) as response:
        body: bytes = response.read()
        return body


def samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


class Scrape:
    """Sums of samples by name and label filter, like `sum(x{...})`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = samples(text)

    def names(self) -> set[str]:
        return {s.name for s in self.samples}

    def total(self, name: str, **labels: str) -> float:
        found = [
            s.value
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]
        assert found, f"no sample {name}{labels}"
        return sum(found)

    def buckets(self, name: str) -> list[tuple[float, float]]:
        return sorted(
            (float(s.labels["le"]), s.value) for s in self.samples if s.name == f"{name}_bucket"
        )


LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})? (\S+)$")


def line_sum(text: str, name: str, must_contain: str = "") -> float:
    """Sum of a sample's values over every label set, read straight from the text."""
    total = 0.0
    for line in text.splitlines():
        match = LINE.match(line)
        if match and match.group(1) == name and must_contain in (match.group(2) or ""):
            total += float(match.group(3))
    return total

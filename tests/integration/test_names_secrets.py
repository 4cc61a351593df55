"""Secret files: special files refused without reading them, a size cap, BOM-aware decoding,
one line and exit 2 at config load; a rotated token file read again, against a real local
HTTP server that takes only the token the file holds now."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from cockpit.config.schema import Auth, Config, LaneConfig
from cockpit.runtime.feeds import AuthCredentials, build_lane_feeds
from cockpit.sources.http import SourceError
from cockpit.sources.secret_file import MAX_SECRET_BYTES, SecretFileError, read_secret_file
from tests.support.cli import COCKPIT
from tests.support.fakeprom import QuietServer

TOKEN = "tok-Rot8-first"
NEW_TOKEN = "tok-Rot8-second"


def test_special_files_are_refused_without_being_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in (
        (Path("/dev/zero"), "a character device"),
        (fifo, "a FIFO (named pipe)"),
        (tmp_path, "a directory"),
    ):
        with pytest.raises(SecretFileError) as caught:
            read_secret_file(path)  # would hang on the FIFO, grow without end on /dev/zero
        assert str(caught.value) == f"{path} is {kind}, not a regular file"


def test_a_secret_file_over_the_cap_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "token"
    big.write_bytes(b"a" * (MAX_SECRET_BYTES + 1))
    with pytest.raises(SecretFileError, match=r"is larger than 1 MiB, the cap"):
        read_secret_file(big)
    big.write_bytes(b"a" * MAX_SECRET_BYTES)
    assert read_secret_file(big) == "a" * MAX_SECRET_BYTES


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be"])
def test_a_token_saved_with_a_byte_order_mark_reads_as_its_text(
    tmp_path: Path, encoding: str
) -> None:
    path = tmp_path / "token"
    bom = {"utf-16-le": "\ufeff", "utf-16-be": "\ufeff"}.get(encoding, "")
    path.write_bytes(f"{bom}{TOKEN}\r\n".encode(encoding))  # PowerShell: UTF-16 LE, BOM, CRLF
    assert read_secret_file(path) == TOKEN


def test_utf16_without_a_mark_and_latin1_say_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(TOKEN.encode("utf-16-le"))
    with pytest.raises(SecretFileError, match=r"UTF-16 without a byte-order mark\?"):
        read_secret_file(path)
    path.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(SecretFileError, match=r"not UTF-8 text .*save it as UTF-8"):
        read_secret_file(path)


def test_read_secret_turns_a_bad_file_into_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"^auth: /dev/zero is a character device"):
        AuthCredentials(Auth("bearer", secret_file="/dev/zero")).secret()


def write_config(folder: Path, secret_file: Path) -> Path:
    lane = {
        "name": "guarded",
        "prometheus": "http://127.0.0.1:9",
        "selector": 'job="x"',
        "auth": {"bearer_file": str(secret_file)},
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({"lanes": [lane]}, sort_keys=False))
    return path


@pytest.mark.parametrize("command", ["check", "report"])
@pytest.mark.parametrize("special", ["zero", "fifo", "utf16-no-bom"])
def test_a_bad_secret_file_is_one_line_and_exit_2_naming_file_and_key(
    tmp_path: Path, command: str, special: str
) -> None:
    secret = tmp_path / "token"
    if special == "zero":
        secret = Path("/dev/zero")
    elif special == "fifo":
        os.mkfifo(secret)
    else:
        secret.write_bytes("tök".encode("utf-16-le"))  # no byte-order mark
    config = write_config(tmp_path, secret)
    done = subprocess.run(
        [COCKPIT, command, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{config}:" in lines[0] and "lanes[0].auth.bearer_file" in lines[0], lines[0]
    assert str(secret) in lines[0]


# --- a rotated token ---------------------------------------------------------------------------


class _TokenServer(BaseHTTPRequestHandler):
    """A Prometheus query API that answers only the bearer token in `server.accepted`."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        assert isinstance(self.server, TokenServer)
        accepted = f"Bearer {self.server.accepted}"
        self.server.seen.append(self.headers.get("Authorization", ""))
        if self.headers.get("Authorization") != accepted:
            body, status = b'{"status":"error","errorType":"unauthorized","error":"no"}', 401
        else:
            label_values = self.path.startswith("/api/v1/label/")
            data = [] if label_values else {"resultType": "vector", "result": []}
            answer = {"status": "success", "data": data}
            body, status = json.dumps(answer).encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET


class TokenServer(QuietServer):
    accepted = ""
    seen: list[str]


@contextlib.contextmanager
def token_server(accepted: str) -> Iterator[TokenServer]:
    server = TokenServer(("127.0.0.1", 0), _TokenServer)
    server.daemon_threads = True
    server.accepted, server.seen = accepted, []
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def projected_token(folder: Path, generation: str, token: str) -> None:
    """Kubernetes' layout: `token` -> `..data/token`, `..data` -> a generation's folder, the
    `..data` link replaced atomically (a rename) when the token rotates."""
    (folder / generation).mkdir()
    (folder / generation / "token").write_text(token)
    (folder / "..data_tmp").symlink_to(generation)
    (folder / "..data_tmp").replace(folder / "..data")
    if not (folder / "token").is_symlink():
        (folder / "token").symlink_to("..data/token")


async def test_a_rotated_token_file_is_read_again_without_a_restart(tmp_path: Path) -> None:
    projected_token(tmp_path, "..2024_01", TOKEN)
    with token_server(TOKEN) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        auth = Auth("bearer", secret_file=str(tmp_path / "token"))
        lane = LaneConfig("guarded", prometheus=url, selector='job="x"', auth=auth)
        (feed,) = build_lane_feeds(Config(source="<test>", lanes=(lane,), window="5m"))
        try:
            assert await feed.probe()
            projected_token(tmp_path, "..2024_02", NEW_TOKEN)
            server.accepted = NEW_TOKEN  # the old token is no longer taken
            assert await feed.probe()
            assert await feed.probe()
        finally:
            await feed.close()
        seen = server.seen
        assert f"Bearer {NEW_TOKEN}" in seen
        after = seen[seen.index(f"Bearer {NEW_TOKEN}") :]
        assert set(after) == {f"Bearer {NEW_TOKEN}"}, "the old token was sent after the swap"


async def test_after_a_401_the_file_is_read_again_even_if_it_looks_unchanged(
    tmp_path: Path,
) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    stamp = token.stat()
    with token_server(NEW_TOKEN) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        auth = Auth("bearer", secret_file=str(token))
        lane = LaneConfig("guarded", prometheus=url, selector='job="x"', auth=auth)
        (feed,) = build_lane_feeds(Config(source="<test>", lanes=(lane,), window="5m"))
        try:
            assert not await feed.probe()  # a 401
            token.write_text(NEW_TOKEN.replace("second", "secone"))  # same size, same inode
            os.utime(token, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # and the same mtime
            server.accepted = NEW_TOKEN.replace("second", "secone")
            assert await feed.probe()
        finally:
            await feed.close()

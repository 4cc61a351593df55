"""`--config` naming what is not a small UTF-8 text file: special files are refused without a
blocking read, a huge one at its cap, a mis-encoded one with what is wrong; one line, exit 2."""

from __future__ import annotations

import codecs
import os
import resource
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import COCKPIT

CONFIG = "window: 5m\nledgers:\n  - path: {ledger}\n"


def _bounded_memory() -> None:
    """A config read into memory whole would grow without end: 1 GiB ends it at once."""
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def check(config: Path | str, cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [COCKPIT, "check", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=20,
            cwd=cwd,
            env={**os.environ, "HOME": str(cwd)},
            preexec_fn=_bounded_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"check --config {config} is still reading it after 20 s")


def assert_refused(done: subprocess.CompletedProcess[str], config: Path | str, what: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [f"cockpit: {config}: cannot read the config file: {what}"]


SPECIAL = {
    "/dev/zero": "is a character device, not a regular file",
    "/dev/urandom": "is a character device, not a regular file",
    "/dev/null": "is a character device, not a regular file",
}


@pytest.mark.parametrize("device", sorted(SPECIAL))
def test_a_device_is_refused(tmp_path: Path, device: str) -> None:
    if not Path(device).exists():
        pytest.skip(f"{device} is not on this machine")
    assert_refused(check(device, tmp_path), device, SPECIAL[device])


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    assert_refused(check(fifo, tmp_path), fifo, "is a FIFO (named pipe), not a regular file")


def test_a_symlink_to_a_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    link = tmp_path / "config.yaml"
    link.symlink_to(tmp_path / "fifo")
    assert_refused(check(link, tmp_path), link, "is a FIFO (named pipe), not a regular file")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    assert_refused(check(tmp_path, tmp_path), tmp_path, "is a directory, not a regular file")


def test_a_file_over_the_cap_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("# " + "x" * (1 << 20) + "\nwindow: 5m\n")
    assert_refused(check(config, tmp_path), config, "is larger than 1 MiB, the cap for this file")


def test_a_file_under_the_cap_is_read(tmp_path: Path, hermes_v22: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("# " + "x" * 900_000 + "\n" + CONFIG.format(ledger=hermes_v22))
    done = check(config, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"config: {config}: ok (0 lanes, 1 ledger)")


@pytest.mark.parametrize(
    "encoding, bom",
    [("utf-8", codecs.BOM_UTF8), ("utf-16-le", codecs.BOM_UTF16_LE),
     ("utf-16-be", codecs.BOM_UTF16_BE)],
)  # fmt: skip
def test_a_byte_order_mark_is_honoured(
    tmp_path: Path, hermes_v22: Path, encoding: str, bom: bytes
) -> None:
    """What Windows tools save (PowerShell's `>` writes UTF-16 with its byte-order mark)."""
    config = tmp_path / "config.yaml"
    config.write_bytes(bom + CONFIG.format(ledger=hermes_v22).encode(encoding))
    done = check(config, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"config: {config}: ok (0 lanes, 1 ledger)")


def test_latin_1_bytes_are_named(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes("window: 5m # café\n".encode("latin-1"))
    what = "is not UTF-8 text (byte 0xe9 at offset 16): save it as UTF-8"
    assert_refused(check(config, tmp_path), config, what)


def test_utf_16_without_a_byte_order_mark_is_named(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes("window: 5m\n".encode("utf-16-le"))
    what = "holds NUL bytes: not a text file (UTF-16 without a byte-order mark?)"
    assert_refused(check(config, tmp_path), config, what)


def test_a_broken_utf_16_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(codecs.BOM_UTF16_LE + "window: 5m\n".encode("utf-16-le") + b"\x00\xd8")
    assert_refused(check(config, tmp_path), config, "starts as UTF-16 but is not UTF-16 text")

"""A receipt is written whole or not at all: a disk that fills part-way leaves no file, not a
0-byte or a truncated one, and no temporary file either."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.runtime.receipts import write_new_file

HEADING, ROW, ROWS = "# lane-cockpit receipt\n", "| a | b |\n", 20_000
RECEIPT = HEADING + ROW * ROWS  # 200 KB


def _write_capped(folder: Path, cap: int) -> subprocess.CompletedProcess[str]:
    """write_new_file in a process whose files may not grow past `cap` bytes (RLIMIT_FSIZE: a
    write past it fails with EFBIG, as one fails with ENOSPC on a full disk)."""
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from cockpit.runtime.receipts import write_new_file\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({cap}, {cap}))\n"
        "try:\n"
        f"    text = {HEADING!r} + {ROW!r} * {ROWS}\n"
        "    print(write_new_file(Path(sys.argv[1]) / 'receipt.md', text))\n"
        "except OSError as exc:\n"
        "    print('failed', exc.errno)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(folder)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("cap", [0, 8192])
def test_a_write_past_the_file_size_limit_leaves_nothing(tmp_path: Path, cap: int) -> None:
    done = _write_capped(tmp_path, cap)
    assert done.stdout.split() == ["failed", str(errno.EFBIG)], done.stderr
    assert sorted(tmp_path.iterdir()) == []


def test_under_the_limit_the_receipt_is_whole(tmp_path: Path) -> None:
    done = _write_capped(tmp_path, 1 << 20)
    assert done.stdout.strip() == str(tmp_path / "receipt.md"), done.stderr
    assert [path.name for path in tmp_path.iterdir()] == ["receipt.md"]
    assert (tmp_path / "receipt.md").read_text() == RECEIPT


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB tmpfs (needs the right to mount, which root in a container may lack)."""
    mount, umount = shutil.which("mount"), shutil.which("umount")
    folder = tmp_path / "disk"
    folder.mkdir()
    if mount is None or umount is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run([umount, str(folder)], check=True)


def test_a_full_disk_leaves_no_receipt(small_disk: Path) -> None:
    with pytest.raises(OSError) as raised:
        write_new_file(small_disk / "receipt.md", RECEIPT)
    assert raised.value.errno == errno.ENOSPC
    assert sorted(small_disk.iterdir()) == []
    written = write_new_file(small_disk / "receipt.md", "# small\n")  # room for that one
    assert written.read_text() == "# small\n"
    assert write_new_file(small_disk / "receipt.md", "# again\n").name == "receipt-2.md"
    assert sorted(path.name for path in small_disk.iterdir()) == ["receipt-2.md", "receipt.md"]

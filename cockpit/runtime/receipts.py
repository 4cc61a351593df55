"""The receipts `e` exports (the lane's or the overview's): their folder, their file name, and
a write that never replaces one."""

from __future__ import annotations

import errno
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from platformdirs import user_data_dir

from cockpit.core.ledger_figures import Prices
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.core.text import visible
from cockpit.runtime.poller import FleetSnapshot

if TYPE_CHECKING:
    from cockpit.core.fleet import FleetRow


def receipts_folder(configured: str | None) -> Path:
    """Where `e` writes: the config's `export_dir` (`~` expanded), else the platform's data
    folder (`~/.local/share/lane-cockpit/receipts` on Linux), never the current directory."""
    if configured:
        return Path(configured).expanduser().absolute()
    return Path(user_data_dir("lane-cockpit")) / "receipts"


def receipt_name(lane: str, window: str, moment: float) -> str:
    """`cockpit-receipt-<lane>-<window>-<UTC stamp>.md`, safe as a file name."""
    safe_lane = re.sub(r"[^A-Za-z0-9_.-]+", "_", lane) or "lane"
    stamp = datetime.fromtimestamp(moment, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"cockpit-receipt-{safe_lane}-{window}-{stamp}.md"


def write_new_file(target: Path, text: str) -> Path:
    """Writes `text` to `target`, or to `name-2.md`, `name-3.md`… if it exists (two exports of
    one replayed moment, or of one second): an export never replaces another. Written whole
    or not at all (a full disk leaves no part of a file). The path used; OSError."""
    if target.parent == receipts_folder(None):  # ours to make; a folder the config names exists
        target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
    try:
        with part.open("xb") as out:
            out.write(text.encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
        path, number = target, 1
        while True:
            try:
                _link_new(part, path)
                return path
            except FileExistsError:
                number += 1
                path = target.with_stem(f"{target.stem}-{number}")
    finally:
        part.unlink(missing_ok=True)


def _link_new(part: Path, path: Path) -> None:
    """`part` also named `path`, FileExistsError if taken: a hard link never replaces a file, as a
    rename would. Without hard links, a rename after a look (two exports at once may meet)."""
    try:
        os.link(part, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if path.exists():
            raise FileExistsError(errno.EEXIST, "exists", str(path)) from None
        part.rename(path)


def write_receipt(
    lane: LaneSnapshot | None, ledger: LedgerSnapshot | None, prices: Prices, target: Path
) -> Path:
    """The markdown receipt of these snapshots, written to `target` (or beside it); OSError."""
    from cockpit.runtime.report import markdown_receipt

    return write_new_file(target, markdown_receipt(lane, ledger, prices))


def write_fleet_receipt(snapshot: FleetSnapshot, rows: Sequence[FleetRow], target: Path) -> Path:
    """The overview's markdown receipt (`fleet_report`, its rows in the screen's order, a
    stale view said so), written to `target` (or beside it); OSError."""
    from cockpit.runtime.fleet_report import fleet_markdown

    assert snapshot.view is not None
    heading, _, rest = fleet_markdown(replace(snapshot.view, rows=tuple(rows))).partition("\n")
    if snapshot.freshness.state != "ok":
        said = visible(snapshot.freshness.describe())
        rest = f"\n> **Fleet {said}**: the rows are its last good read.\n{rest}"
    return write_new_file(target, f"{heading}\n{rest}")

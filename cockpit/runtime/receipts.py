"""The receipt the cockpit exports (`e`): its folder, its file name, and a write that never
replaces one."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from platformdirs import user_data_dir

from cockpit.core.ledger_figures import Prices
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot


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
    one replayed moment, or of one second): an export never replaces another. The path used."""
    if target.parent == receipts_folder(None):  # ours to make; a folder the config names exists
        target.parent.mkdir(parents=True, exist_ok=True)
    path, number = target, 1
    while True:
        try:
            with path.open("x", encoding="utf-8") as out:
                out.write(text)
            return path
        except FileExistsError:
            number += 1
            path = target.with_stem(f"{target.stem}-{number}")


def write_receipt(
    lane: LaneSnapshot | None, ledger: LedgerSnapshot | None, prices: Prices, target: Path
) -> Path:
    """The markdown receipt of these snapshots, written to `target` (or beside it); OSError."""
    from cockpit.runtime.report import markdown_receipt

    return write_new_file(target, markdown_receipt(lane, ledger, prices))

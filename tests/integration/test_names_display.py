"""Names as the user sees them: lookalikes (zero-width, combining joiner) look different, a
bidi override never reaches the screen or a receipt raw, a long lane name is cut in the
overview's Lane column, the Age and Req/s columns read one way on every row."""

from __future__ import annotations

import sqlite3
import unicodedata
from pathlib import Path

from cockpit.core.fleet import FLEET_COLUMNS, FleetRow, format_cell
from cockpit.core.health import Thresholds
from cockpit.core.model import frozen_map
from cockpit.core.text import visible
from cockpit.runtime.report import markdown_receipt
from cockpit.widgets.fleet import LANE_CELLS, FleetOrder, table_view
from cockpit.widgets.fleet_table import column_widths
from tests.support.faultlane import running_app, screen_text, wait_until
from tests.support.ledger_writer import GOOD, ledger_config, make_ledger
from tests.support.snapshots import ledger_snapshot_of

LOOKALIKES = ("lane-0007", "lane-0007\u200b", "lane-0007\u034f", "lane-0007\u2060")
HOSTILE = "cli\u202egnp.exe\u2066x\u2069\u200d\ufeff"
COLUMNS = {column.key: column for column in FLEET_COLUMNS}


def raw_invisibles(text: str) -> list[str]:
    """The format and bidi characters (and U+034F) left in `text`."""
    return [f"U+{ord(c):04X}" for c in text if unicodedata.category(c) == "Cf" or ord(c) == 0x034F]


def test_lookalike_names_look_different() -> None:
    shown = [visible(name) for name in LOOKALIKES]
    assert len(set(shown)) == len(LOOKALIKES)
    assert shown[1] == "lane-0007<U+200B>" and shown[2] == "lane-0007<U+034F>"
    assert all(not raw_invisibles(text) for text in shown)


def test_bidi_controls_and_tags_are_escaped_accents_are_kept() -> None:
    assert visible(HOSTILE) == "cli<U+202E>gnp.exe<U+2066>x<U+2069><U+200D><U+FEFF>"
    assert visible("a\u2028b\U000e0041") == "a<U+2028>b<U+E0041>"
    assert visible("cafe\u0301 Zürich 東京") == "cafe\u0301 Zürich 東京"
    assert visible("plain ascii") == "plain ascii"
    assert visible("esc\x1b[2J") == "esc␛[2J"


def test_the_overview_shows_lookalike_lanes_apart() -> None:
    rows = [FleetRow(name, True, frozen_map({})) for name in LOOKALIKES]
    view = table_view(rows, FleetOrder(), Thresholds(), stale=False)
    cells = [texts[0] for texts in view.texts]
    assert len(set(cells)) == len(LOOKALIKES) and not raw_invisibles("".join(cells))
    assert view.keys == LOOKALIKES  # the lane opens by its real name


def test_a_long_lane_name_is_cut_to_the_column_and_kept_whole_as_the_key() -> None:
    long_name = "job-" + "x" * 496
    rows = [FleetRow(long_name, True, frozen_map({})), FleetRow("short", True, frozen_map({}))]
    view = table_view(rows, FleetOrder(), Thresholds(), stale=False)
    cut = view.texts[0][0]
    assert len(cut) == LANE_CELLS and cut.endswith("…") and cut.startswith("job-xxx")
    assert view.texts[1][0] == "short"
    assert column_widths(view)[0] == LANE_CELLS
    assert view.keys[0] == long_name


def test_age_reads_now_for_a_lane_sampled_this_refresh() -> None:
    age = COLUMNS["age"]
    assert format_cell(FleetRow("a", True, frozen_map({"age": 0.0})), age) == "now"
    assert format_cell(FleetRow("a", True, frozen_map({"age": 0.4})), age) == "now"
    assert format_cell(FleetRow("a", True, frozen_map({"age": 14.6})), age) == "15 s"


def test_req_per_s_has_one_format_down_the_column() -> None:
    rate = COLUMNS["requests_per_s"]
    texts = [
        format_cell(FleetRow("a", True, frozen_map({"requests_per_s": value})), rate)
        for value in (1.2, 1.44, 12.5, 0.04)
    ]
    assert texts == ["1.20", "1.44", "12.50", "0.04"]


def hostile_ledger(folder: Path) -> Path:
    path = make_ledger(folder / "state.db", GOOD, wal=False)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE sessions SET source = ?, model = ?", (HOSTILE, "qwen\u200b3"))
    return path


async def test_a_bidi_override_in_a_ledger_name_never_reaches_a_receipt_raw(
    tmp_path: Path,
) -> None:
    snapshot = await ledger_snapshot_of(hostile_ledger(tmp_path))
    receipt = markdown_receipt(None, snapshot)
    assert "cli<U+202E>gnp.exe" in receipt
    assert raw_invisibles(receipt) == []


async def test_a_bidi_override_in_a_ledger_name_never_reaches_the_screen_raw(
    tmp_path: Path,
) -> None:
    config = ledger_config(hostile_ledger(tmp_path))
    async with running_app(config) as (app, pilot):
        await wait_until(pilot, lambda: "<U+202E>" in screen_text(app))
        assert raw_invisibles(screen_text(app)) == []

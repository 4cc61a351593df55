"""A token column missing from the ledger (`input_tokens` renamed): every figure that reads it
is missing with the reason, on the panes and in the receipt, never 0 or a sum short of it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cockpit.core.snapshot import LedgerSnapshot
from cockpit.runtime.report import markdown_receipt
from cockpit.widgets.ratios import ratios_view
from cockpit.widgets.spend import spend_view
from tests.support.ledger_writer import GOOD, make_ledger
from tests.support.snapshots import ledger_snapshot_of, rows

REASON = "schema 22 has no sessions.input_tokens"
READS_INPUT = (
    "prompt_tokens", "input_tokens", "cache_read_share", "fresh_prefill_tokens",
    "prompt_output", "fresh_output", "mean_prompt_per_call", "spend_units",
    "prompt_side_share", "prompt_side_share_uncached",
)  # fmt: skip
READS_OTHERS = ("cache_read_tokens", "cache_write_tokens", "output_tokens", "api_calls")


async def renamed_input_ledger(folder: Path) -> LedgerSnapshot:
    path = make_ledger(folder / "state.db", GOOD, wal=False)
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE sessions RENAME COLUMN input_tokens TO input_tokens_v2")
    return await ledger_snapshot_of(path)


async def test_each_figure_reading_the_missing_column_is_missing_with_its_reason(
    tmp_path: Path,
) -> None:
    snapshot = await renamed_input_ledger(tmp_path)
    assert snapshot.figures is not None and snapshot.totals is not None
    assert snapshot.totals.missing["input"].endswith(REASON)
    for key in READS_INPUT:
        figure = snapshot.figures[key]
        assert figure.value is None and REASON in figure.reason, (key, figure)
    for key in READS_OTHERS:  # what the ledger does hold stays
        assert snapshot.figures[key].value is not None, key
    read = sum(session[1] for session in GOOD)
    assert snapshot.figures["cache_read_tokens"].value == read
    (cli,) = snapshot.figures.by_source
    assert cli.prompt_output is None and cli.cache_read_share is None


async def test_the_spend_and_ratio_panes_say_why_instead_of_zero(tmp_path: Path) -> None:
    snapshot = await renamed_input_ledger(tmp_path)
    spend = rows(spend_view(snapshot))
    fresh = spend["█ Input (fresh)"]
    assert fresh.value == "—" and REASON in fresh.reason, fresh
    assert spend["▒ Cache read"].value == "—"  # a share of an unknown total
    assert spend["Prompt side, as cached"].value == "—"
    ratios = rows(ratios_view(None, snapshot))
    share = next(row for label, row in ratios.items() if "Cache-read share" in label)
    assert share.value == "—" and REASON in share.reason


async def test_the_receipt_says_the_bucket_is_missing_not_zero(tmp_path: Path) -> None:
    snapshot = await renamed_input_ledger(tmp_path)
    receipt = markdown_receipt(None, snapshot)
    fresh = next(line for line in receipt.splitlines() if line.startswith("| Input (fresh)"))
    assert f"{REASON})" in fresh and "| — (" in fresh and "0.0%" not in fresh, fresh
    prompt = next(line for line in receipt.splitlines() if "Prompt tokens (input" in line)
    assert prompt.endswith("| — |") and REASON in receipt, prompt

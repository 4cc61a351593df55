"""Big scans grouped by integer codes of a sample's values stay exact when the sample misses."""

from __future__ import annotations

import random
from dataclasses import astuple
from pathlib import Path

import pytest
from ledger_writer import HermesLikeWriter, Usage, recount

import cockpit.sources.ledger as ledger_module
from cockpit.sources.ledger import LedgerTailer

NOW = 1794700800.0
DAY = 86400.0
SOURCES = ("cli", "tui", "cron", "telegram", "it's quoted")
MODELS = ("openrouter/qwen/qwen3-coder", "gpt-5.4", None, "odd'model")
PROFILES = (None, "work", "")


def write_sessions(path: Path, seed: int, count: int) -> None:
    """Closed sessions spread over 100 days, every source, profile and model mixed."""
    writer = HermesLikeWriter(path)
    rng = random.Random(seed)
    try:
        for serial in range(count):
            started = NOW - rng.uniform(0, 100 * DAY)
            model = rng.choice(MODELS)
            sid = f"c{seed}-{serial}"
            writer.start_session(sid, rng.choice(SOURCES), model, started, rng.choice(PROFILES))
            for _ in range(rng.randrange(0, 3)):
                usage = Usage(rng.randrange(900), rng.randrange(9000), 0, rng.randrange(300), 5)
                writer.record_call(sid, model or "gpt-5.4", usage)
            if rng.random() < 0.9:
                writer.end_session(sid, started + 60)
    finally:
        writer.close()


@pytest.mark.parametrize(("sample_last", "sample_spread"), [(1, 1), (3, 2), (20_000, 2_000)])
async def test_scan_by_codes_equals_a_recount(
    hermes_v22: Path, monkeypatch: pytest.MonkeyPatch, sample_last: int, sample_spread: int
) -> None:
    """A tiny sample leaves most values uncoded: the text-key rescan must still sum them."""
    monkeypatch.setattr(ledger_module, "_SAMPLE_LAST", sample_last)
    monkeypatch.setattr(ledger_module, "_SAMPLE_SPREAD", sample_spread)
    write_sessions(hermes_v22, seed=sample_last, count=120)
    for window in (7 * DAY, 90 * DAY):
        tailer = LedgerTailer(hermes_v22, profile="p", scan_rows=0)
        try:
            totals = await tailer.refresh(window, NOW)
            expected = recount(hermes_v22, NOW - window, NOW, profile="p")
            assert astuple(totals.total) == expected.total
            assert {k: astuple(v) for k, v in totals.by_source.items()} == expected.by_source
            assert {k: astuple(v) for k, v in totals.by_profile.items()} == expected.by_profile
            assert totals.model_basis == "sessions.model"  # usage still being read
            by_model = {k: astuple(v) for k, v in totals.by_model.items()}
            assert by_model == expected.by_model_sessions
            rescanned = any("IS NULL GROUP BY k" in query for query in totals.queries)
            assert rescanned == (sample_last < 20_000)
        finally:
            await tailer.close()

"""The Models pane draws the per-model table and the LoRA adapters; adapter names from the
engine (tests/fixtures/vllm/metrics_two_models.txt) are plain text, control bytes visible."""

from __future__ import annotations

from cockpit.core.figures import lane_figures
from cockpit.core.model import FRESH, Freshness
from cockpit.core.snapshot import LaneSnapshot
from cockpit.sources.scrape import ScrapeSource
from cockpit.widgets.models import models_view
from cockpit.widgets.pane import Cells
from tests.support.repo import VLLM_FIXTURES, require_fixture

AT = 1_795_992_250.0


def _snapshot(freshness: Freshness = FRESH) -> LaneSnapshot:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    text = require_fixture(VLLM_FIXTURES / "metrics_two_models.txt").read_text(encoding="utf-8")
    source.ingest(text, AT)
    totals = source.totals("lane", "", 3600.0, AT)
    return LaneSnapshot("lane", "1h", totals, lane_figures(totals), None, None, freshness)


def _drawn(snapshot: LaneSnapshot, width: int = 100) -> list[str]:
    return [line.content(width).plain for line in models_view(snapshot).lines]


def test_a_row_per_model_under_the_columns() -> None:
    lines = models_view(_snapshot()).lines
    cells = [line for line in lines if isinstance(line, Cells)]
    assert [c.label for c in cells] == ["model", "tiny", "tiny-sql-lora"]
    assert cells[0].values == ("req/s", "prompt/s", "gen/s", "hit rate", "TTFT p95", "share")
    assert cells[1].values[-1] == "66.7%" and cells[2].values[-1] == "33.3%"


def test_hostile_adapter_names_are_plain_text_with_control_bytes_shown() -> None:
    drawn = "\n".join(_drawn(_snapshot(), width=200))
    assert "tiny-sql-lora, ␛]0;owned␇evil␛[2J" in drawn
    assert "[bold red]markup[/], <U+202E>esrever" in drawn  # markup stays text
    assert not any(ord(char) < 0x20 and char != "\n" for char in drawn)
    assert "\u202e" not in drawn


def test_a_stale_lane_dims_its_rows() -> None:
    stale = _snapshot(Freshness("stale", since=AT, reason="timed out"))
    rows = [line for line in models_view(stale).lines if isinstance(line, Cells)][1:]
    assert rows and all(row.stale for row in rows)

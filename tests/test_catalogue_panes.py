"""The figures of the catalogue where a user looks for them: each on the pane it belongs to,
said as what it is."""

from __future__ import annotations

from cockpit.core.catalogue import FIGURES
from cockpit.widgets.pane import Row
from cockpit.widgets.prefill import prefill_view
from tests.test_widgets import lane_snapshot, rows


def test_prompt_generated_is_on_a_lane_pane_without_a_ledger() -> None:
    row = rows(prefill_view(lane_snapshot()))["Prompt : generated"]
    assert isinstance(row, Row) and row.figure is not None
    assert (row.figure.key, row.value) == ("prompt_generated", "50.0 : 1")
    assert FIGURES["prompt_generated"].pane == "prefill"

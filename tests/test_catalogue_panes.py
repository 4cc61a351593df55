"""The figures of the catalogue where a user looks for them: each on the pane it belongs to,
said as what it is."""

from __future__ import annotations

from cockpit.core.catalogue import FIGURES
from cockpit.widgets.pane import Note, Row, Spark
from cockpit.widgets.prefill import prefill_view
from cockpit.widgets.trends import trends_view
from tests.test_widgets import lane_snapshot, rows


def test_prompt_generated_is_on_a_lane_pane_without_a_ledger() -> None:
    row = rows(prefill_view(lane_snapshot()))["Prompt : generated"]
    assert isinstance(row, Row) and row.figure is not None
    assert (row.figure.key, row.value) == ("prompt_generated", "50.0 : 1")
    assert FIGURES["prompt_generated"].pane == "prefill"


def test_a_gauge_trend_says_it_is_the_mean_per_step_not_the_value_now() -> None:
    lines = trends_view(lane_snapshot()).lines
    sparks = {line.label: line for line in lines if isinstance(line, Spark)}
    assert {"Running avg", "Waiting avg", "KV use avg"} <= set(sparks)
    notes = [line.text for line in lines if isinstance(line, Note)]
    assert notes == ["avg: the mean per step, not now"]

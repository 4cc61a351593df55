"""The figures of the catalogue where a user looks for them: each on the pane it belongs to,
said as what it is."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cockpit.app.screens import _rows
from cockpit.core.catalogue import FIGURES, definition, tail_keys
from cockpit.core.figures import format_figure, lane_figures
from cockpit.core.model import frozen_map
from cockpit.core.slo import Slo
from cockpit.runtime.report import lane_markdown
from cockpit.widgets.pane import Cells, Note, Row, Spark
from cockpit.widgets.prefill import prefill_view
from cockpit.widgets.tails import TailsPane, tails_view
from cockpit.widgets.trends import trends_view
from tests.support.feeds import lane_totals
from tests.support.snapshots import lane_snapshot, rows


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


def test_the_tails_have_a_tpot_row_from_the_engines_per_request_histogram() -> None:
    lane = lane_snapshot()
    assert lane.figures is not None
    figures = lane.figures.figures
    tpot = figures["tpot_p95"]
    # The 950th of 1,000 requests lies 100/140 into the (0.025 s, 0.05 s] bucket.
    assert tpot.value == pytest.approx(0.025 + 0.025 * 100 / 140)
    assert figures["tpot_mean"].value == pytest.approx(0.021)
    cells = {line.label: line.values for line in tails_view(lane).lines if isinstance(line, Cells)}
    assert cells["TPOT"] == tuple(
        format_figure(figures[key]) for key in ("tpot_mean", *tail_keys("tpot"))
    )
    assert "time per output token" in definition("tpot_mean")


def test_a_quantile_inside_the_first_bucket_reads_as_its_bound_on_the_pane() -> None:
    """600 of 1,000 queue times lie in the first bucket (0 to 10 ms): p50 is only `< 10 ms`."""
    lane = lane_snapshot()
    assert lane.figures is not None and lane.totals is not None
    p50 = lane.figures["queue_p50"]
    assert p50.value == pytest.approx(0.01 * 500 / 600) and p50.below == 0.01
    full = {c.label: c.values for c in tails_view(lane).lines if isinstance(c, Cells)}
    compact = {c.label: c.values for c in tails_view(lane, compact=True).lines
               if isinstance(c, Cells)}  # fmt: skip
    assert full["Queue"][1] == "< 10.0 ms" and compact["Queue"][1] == "<0.01s"
    assert full["Queue"][2] == format_figure(lane.figures["queue_p90"])  # past the first bucket
    receipt = "\n".join(lane_markdown(lane.figures, lane.totals, "1h"))
    assert "| Queue time | 50.0 ms | 8.3 ms |" in receipt  # the receipt keeps its wording
    assert "Queue time p50: within the engine's first bucket (≤ 0.01 s)" in receipt


def test_a_figures_text_is_stable_when_its_data_is() -> None:
    """A p90 of 0.375 worked out twice, a float's noise apart, reads the same both times."""
    noisy = (0.37499999999999994, 0.375, 0.37500000000000006)
    texts = set()
    for value in noisy:
        totals = replace(lane_totals(), quantiles=frozen_map({"ttft_p90": (value, False)}))
        figure = lane_figures(totals)["ttft_p90"]
        assert figure.value == value  # the value as worked out; its text rounds it once
        texts.add(format_figure(figure))
    assert texts == {"0.38 s"}


def test_the_tails_show_the_targets_met_only_where_the_lane_sets_them() -> None:
    plain = tails_view(lane_snapshot())
    assert not [line for line in plain.lines if isinstance(line, Row)]
    totals = lane_totals()
    figures = lane_figures(totals, slo=Slo(ttft_s=0.5, itl_s=0.04, e2e_s=120.0))
    lane = replace(lane_snapshot(), totals=totals, figures=figures)
    shown = {line.label: line for line in tails_view(lane).lines if isinstance(line, Row)}
    assert list(shown) == [
        "TTFT ≤ 0.5 s: SLO attainment", "ITL ≤ 0.04 s: SLO attainment",
        "E2E ≤ 120 s: SLO attainment",
        "TTFT ≤ 0.5 s: goodput (req/s)",
    ]  # fmt: skip
    assert shown["TTFT ≤ 0.5 s: SLO attainment"].value == "78.0%"  # at a bound: exact
    assert shown["ITL ≤ 0.04 s: SLO attainment"].value == "≈ 85.5%"  # between 25 and 50 ms
    assert shown["E2E ≤ 120 s: SLO attainment"].value == "> 98.5%"  # past the 60 s bucket
    assert shown["TTFT ≤ 0.5 s: goodput (req/s)"].value == format_figure(
        figures["ttft_goodput_req_s"]
    )
    details = [row.figure.key for row in _rows(TailsPane(), lane) if row.figure is not None]
    assert details[-4:] == [
        "ttft_slo_attainment", "itl_slo_attainment", "e2e_slo_attainment", "ttft_goodput_req_s",
    ]  # fmt: skip

"""The GPU line of the vital strip: a cell per GPU when they fit, the GPUs together when not,
nothing without a GPU source, a failed read in words."""

from __future__ import annotations

from dataclasses import replace

from cockpit.core.figures import lane_figures
from cockpit.core.gpu import GpuTotals
from cockpit.core.health import Thresholds, check
from cockpit.core.model import FRESH, Freshness
from cockpit.core.snapshot import LaneSnapshot
from cockpit.widgets.vitals import gpu_line, lane_gpu_view
from tests.support.feeds import EVAL_AT, H100, LLAMA_8B, gpu_totals, lane_totals


def snapshot(gpu: GpuTotals | None) -> LaneSnapshot:
    totals = lane_totals(gpu=gpu)
    return LaneSnapshot("lane-a", "1h", totals, lane_figures(totals), H100, LLAMA_8B)


def line(gpu: GpuTotals | None, width: int, freshness: Freshness = FRESH) -> list[str]:
    lane = replace(snapshot(gpu), freshness=freshness)
    view = lane_gpu_view(lane, check(lane, Thresholds()))
    return [content.plain for content in gpu_line(view, width)]


def test_a_cell_per_gpu_when_they_fit() -> None:
    (text,) = line(gpu_totals(2), 120)
    assert text == "GPU 0 87.0% 71.5/80 GiB 612 W 71 °C │ GPU 1 77.0% 79.5/80 GiB 572 W 74 °C"


def test_the_gpus_together_when_a_cell_each_does_not_fit() -> None:
    (text,) = line(gpu_totals(8), 120)
    assert text.startswith("GPUs 8 │ util 52.0% │ mem 604/637 GiB")
    assert text.endswith("power 3.776 kW │ hottest 92 °C")


def test_one_line_cut_at_the_width() -> None:
    (text,) = line(gpu_totals(8), 40)
    assert len(text) == 40 and text.endswith("…")


def test_no_gpu_source_no_line() -> None:
    assert line(None, 120) == []


def test_a_failed_read_says_why() -> None:
    (text,) = line(gpu_totals(failed="connection refused (127.0.0.1:9400)"), 120)
    assert text == "GPU: connection refused (127.0.0.1:9400)"


def test_the_gpu_rules_reach_the_health_line() -> None:
    rules = [finding.rule for finding in check(snapshot(gpu_totals(2)), Thresholds())]
    assert "gpu_memory_full" in rules and "gpu_throttled" in rules


def test_a_lane_that_is_down_shows_no_gpu_line() -> None:
    assert line(gpu_totals(2), 120, Freshness("stale", since=EVAL_AT)) == []


def test_a_gpu_health_finding_colours_its_item() -> None:
    lane = snapshot(gpu_totals(2))
    tones = {
        label: tone for label, _, tone in lane_gpu_view(lane, check(lane, Thresholds())).together
    }
    assert tones == {"GPUs": "plain", "util": "plain", "mem": "warn", "power": "warn",
                     "hottest": "plain"}  # fmt: skip

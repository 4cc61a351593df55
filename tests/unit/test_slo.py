"""SLO attainment and goodput: the share of a histogram's observations within a target (exact at
a bucket bound, interpolated as `histogram_quantile` between bounds), the figures, the health
rule that reads them, the config and the ad-hoc flags that set the targets."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path

import pytest

from cockpit.cli.main import build_parser
from cockpit.cli.options import effective_config
from cockpit.config.schema import ConfigError
from cockpit.core.catalogue import SLO_KEYS, slo_keys
from cockpit.core.figures import format_figure, lane_figures
from cockpit.core.health import Finding, Thresholds, check, rule_lines
from cockpit.core.model import FRESH, Bucket, frozen_map
from cockpit.core.quantiles import histogram_quantile
from cockpit.core.slo import Slo, attainment
from cockpit.core.snapshot import LaneSnapshot
from cockpit.runtime.report import lane_markdown
from tests.support.feeds import LATENCY_BUCKETS, lane_totals

INF = math.inf
TTFT: tuple[Bucket, ...] = LATENCY_BUCKETS["ttft"]
"""1,000 requests: 300 ≤ 0.1 s, 550 ≤ 0.25 s, 780 ≤ 0.5 s, ... 998 ≤ 10 s."""


def test_at_a_bucket_bound_the_share_is_the_bound_s_count_over_the_total() -> None:
    found = attainment(0.5, TTFT)
    assert found is not None
    assert (found.met, found.total, found.share) == (780.0, 1000.0, 0.78)
    assert found.note == "" and not found.lower_bound


def test_between_bounds_it_is_interpolated_within_the_bucket() -> None:
    found = attainment(0.4, TTFT)
    assert found is not None
    # 550 at 0.25 s, 780 at 0.5 s: 0.4 s is 60 % of the way, 550 + 0.6 × 230
    assert found.met == pytest.approx(688.0)
    assert found.note == "interpolated between the engine's buckets 0.25 s and 0.5 s"
    # the inverse of histogram_quantile: the quantile at that share is the target again
    quantile = histogram_quantile(found.share, TTFT)
    assert quantile is not None and quantile[0] == pytest.approx(0.4)


def test_below_the_first_bucket_it_is_interpolated_from_zero() -> None:
    found = attainment(0.025, TTFT)
    assert found is not None
    assert found.met == pytest.approx(75.0)  # a quarter of the first bucket's 300
    assert found.note == "interpolated within the engine's first bucket (≤ 0.1 s)"


def test_past_the_largest_finite_bound_the_share_is_a_lower_bound() -> None:
    found = attainment(30.0, TTFT)
    assert found is not None
    assert (found.met, found.lower_bound) == (998.0, True)
    assert "past the engine's largest bucket (10 s)" in found.note
    # nothing lies past the largest bound: then every request met the target, exactly
    within: tuple[Bucket, ...] = ((1.0, 4.0), (2.0, 10.0), (INF, 10.0))
    assert attainment(30.0, within) == (10.0, 10.0, "", False)


def test_unsorted_and_non_monotonic_buckets_are_read_as_prometheus_reads_them() -> None:
    shuffled: tuple[Bucket, ...] = ((INF, 10.0), (2.0, 6.0), (1.0, 8.0))
    found = attainment(2.0, shuffled)
    assert found is not None and found.met == 8.0  # made monotonic: le=2 holds le=1's 8


@pytest.mark.parametrize(
    "buckets",
    [(), ((1.0, 3.0),), ((1.0, 0.0), (INF, 0.0)), ((INF, 5.0),)],
    ids=["empty", "no +Inf", "no requests", "no finite bound"],
)
def test_no_share_without_observations_or_buckets(buckets: tuple[Bucket, ...]) -> None:
    assert attainment(0.5, buckets) is None


def test_the_figures_from_the_lane_s_targets() -> None:
    totals = lane_totals()
    slo = Slo(ttft_s=0.5, itl_s=0.04, e2e_s=120.0)
    f = lane_figures(totals, slo=slo).figures
    assert f["ttft_slo_attainment"].value == 0.78 and f["ttft_slo_attainment"].reason == ""
    assert f["ttft_slo_attainment"].label == "TTFT ≤ 0.5 s: SLO attainment"
    itl = f["itl_slo_attainment"]  # 300,000 at 25 ms, 370,000 at 50 ms, of 400,000 tokens
    assert itl.value == pytest.approx((300_000 + 70_000 * 0.6) / 400_000)
    assert "between the engine's buckets 0.025 s and 0.05 s" in itl.reason
    e2e = f["e2e_slo_attainment"]
    assert (e2e.value, e2e.above, format_figure(e2e)) == (0.985, True, "> 98.5%")
    goodput = f["ttft_goodput_req_s"]
    assert goodput.value == pytest.approx(780 / 3600)
    assert slo_keys(f) == SLO_KEYS


def test_goodput_is_over_the_seconds_the_window_has_data() -> None:
    totals = replace(lane_totals(), covered_s=600.0)
    goodput = lane_figures(totals, slo=Slo(ttft_s=0.25)).figures["ttft_goodput_req_s"]
    assert goodput.value == pytest.approx(550 / 600)


def test_without_a_target_or_a_histogram_each_is_missing_with_its_reason() -> None:
    totals = lane_totals()
    f = lane_figures(totals).figures
    assert all(f[key].missing for key in SLO_KEYS) and slo_keys(f) == ()
    assert f["ttft_slo_attainment"].reason == "no SLO set (slo.ttft_s, --slo-ttft)"
    gone = replace(
        totals,
        histograms=frozen_map({k: v for k, v in totals.histograms.items() if k != "itl"}),
        missing=frozen_map({"itl": "not exposed by this engine (vllm:itl)"}),
    )
    f = lane_figures(gone, slo=Slo(itl_s=0.05)).figures
    assert f["itl_slo_attainment"].reason == "not exposed by this engine (vllm:itl)"
    assert slo_keys(f) == ("itl_slo_attainment",)


def test_the_receipt_has_its_table_only_when_a_target_is_set() -> None:
    totals = lane_totals()
    plain = "\n".join(lane_markdown(lane_figures(totals), totals, "1h"))
    assert "targets met" not in plain and "SLO" not in plain
    figures = lane_figures(totals, slo=Slo(ttft_s=0.4))
    text = "\n".join(lane_markdown(figures, totals, "1h"))
    assert "### Latency targets met (1h)" in text
    assert "| TTFT ≤ 0.4 s: SLO attainment | 68.8% (interpolated between the engine's " in text
    assert "| TTFT ≤ 0.4 s: goodput (req/s) | 0.191 (interpolated" in text


def snapshot_with(slo: Slo) -> LaneSnapshot:
    totals = lane_totals()
    return LaneSnapshot("lane-a", "1h", totals, lane_figures(totals, slo=slo), None, None, FRESH)


def ttft_findings(slo: Slo, thresholds: Thresholds) -> list[Finding]:
    return [f for f in check(snapshot_with(slo), thresholds) if f.rule == "ttft_slo"]


def test_with_a_ttft_target_the_ttft_rule_reads_the_attainment() -> None:
    # p99 of TTFT is about 7.6 s: over a p99 SLO of 2.5 s
    (p99,) = ttft_findings(Slo(), Thresholds(ttft_p99_slo=2.5))
    assert p99.figure_key == "ttft_p99"
    (finding,) = ttft_findings(Slo(ttft_s=2.5), Thresholds(ttft_p99_slo=2.5))
    assert finding.figure_key == "ttft_slo_attainment" and finding.severity == "bad"
    assert finding.text == "TTFT SLO attainment: 97.0% (alert at < 99%)"
    assert ttft_findings(Slo(ttft_s=10.0), Thresholds()) == []  # 99.8 % met it


def test_the_help_lists_the_attainment_rule_where_a_lane_sets_a_ttft_target() -> None:
    assert rule_lines(Thresholds(), ttft_target=True)[:-1] == rule_lines(Thresholds())
    said = "TTFT SLO attainment: ttft_slo_attainment < 99% (a lane with slo.ttft_s)"
    assert rule_lines(Thresholds(), ttft_target=True)[-1] == said


def test_the_ad_hoc_flags_set_the_lane_s_targets(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("")
    lane = "--config", str(tmp_path / "c.yaml"), "--metrics-url", "http://127.0.0.1:9/metrics"

    def args(*argv: str) -> argparse.Namespace:
        return build_parser().parse_args(["report", *argv])

    (adhoc,) = effective_config(args(*lane, "--slo-ttft", "0.5", "--slo-e2e", "30")).lanes
    assert adhoc.slo == Slo(ttft_s=0.5, e2e_s=30.0)
    (plain,) = effective_config(args(*lane)).lanes
    assert plain.slo == Slo()
    with pytest.raises(ConfigError) as caught:
        effective_config(args(*lane, "--slo-itl", "-1"))
    assert str(caught.value).startswith("<command line>: --slo-itl: expected a positive number")

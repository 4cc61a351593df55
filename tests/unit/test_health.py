"""The health line: each rule fires at its threshold and not below, says its figure and
threshold, and stays quiet when its figure is missing (except the lane being down)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cockpit.config.schema import parse_config
from cockpit.core.figures import LaneFigures
from cockpit.core.health import Thresholds, check, rule_lines
from cockpit.core.model import (
    FRESH,
    FailureCause,
    Figure,
    Freshness,
    Unit,
    frozen_map,
    make_figure,
)
from cockpit.core.snapshot import LaneSnapshot

EVAL_AT = 1_790_000_000.0
"""2026-09-21 14:13:20 UTC."""
SLO = Thresholds(ttft_p99_slo=2.5)


def lane(*figures: Figure, freshness: Freshness = FRESH) -> LaneSnapshot:
    by_key = frozen_map({figure.key: figure for figure in figures})
    return LaneSnapshot("lane-a", "1h", None, LaneFigures(by_key), None, None, freshness)


def figure(key: str, value: float | None, unit: Unit = "share") -> Figure:
    return make_figure(key, key, value, unit, why="no requests in the window")


# key, unit, value that fires, value just short of it, rule, the threshold as said
RULES = [
    ("kv_usage_now", "share", 0.9, 0.8999, "kv_full", "≥ 90%"),
    ("kv_usage", "share", 0.95, 0.89, "kv_full", "≥ 90%"),
    ("preemptions", "count", 1.0, 0.0, "preempting", "> 0"),
    ("prefix_cache_hit_rate", "share", 0.6999, 0.7, "cache_misses", "< 70%"),
    ("finished_failed_share", "share", 0.0101, 0.01, "failing", "> 1%"),
    ("ttft_p99", "seconds", 2.51, 2.5, "ttft_slo", "> 2.5 s"),
    ("offload_alloc_failures", "count", 1.0, 0.0, "offload_failing", "> 0"),
    ("nixl_failed_transfers", "count", 1.0, 0.0, "transfer_failing", "> 0"),
    ("nixl_failed_notifications", "count", 1.0, 0.0, "notify_failing", "> 0"),
    ("nixl_expired_reqs", "count", 1.0, 0.0, "kv_expiring", "> 0"),
]


@pytest.mark.parametrize(("key", "unit", "fires", "short", "rule", "said"), RULES)
def test_each_rule_fires_at_its_threshold_and_not_short_of_it(
    key: str, unit: Unit, fires: float, short: float, rule: str, said: str
) -> None:
    (finding,) = check(lane(figure(key, fires, unit)), SLO)
    assert (finding.rule, finding.figure_key) == (rule, key)
    assert said in finding.text
    assert check(lane(figure(key, short, unit)), SLO) == ()


@pytest.mark.parametrize(("key", "unit", "fires", "short", "rule", "said"), RULES)
def test_a_missing_figure_is_no_alarm(
    key: str, unit: Unit, fires: float, short: float, rule: str, said: str
) -> None:
    assert check(lane(figure(key, None, unit)), SLO) == ()


def test_kv_use_now_is_read_before_the_window_mean() -> None:
    snapshot = lane(figure("kv_usage_now", 0.5), figure("kv_usage", 0.95))
    assert check(snapshot, Thresholds()) == ()
    (finding,) = check(lane(figure("kv_usage_now", 0.93), figure("kv_usage", 0.5)), Thresholds())
    assert finding.text == "KV cache in use now: 93.0% (alert at ≥ 90%)"
    (mean,) = check(lane(figure("kv_usage_now", None), figure("kv_usage", 0.95)), Thresholds())
    assert mean.figure_key == "kv_usage" and "now" not in mean.text


def test_a_lower_bound_is_over_the_slo_only_when_the_bound_is() -> None:
    past = replace(figure("ttft_p99", 2.0, "seconds"), above=True)
    assert check(lane(past), SLO) == ()
    at_slo = replace(figure("ttft_p99", 2.5, "seconds"), above=True)
    (finding,) = check(lane(at_slo), SLO)
    assert finding.severity == "bad" and "2.5 s" in finding.text


def test_no_slo_no_ttft_rule() -> None:
    assert check(lane(figure("ttft_p99", 600.0, "seconds")), Thresholds()) == ()


def test_every_rule_at_once_in_rule_order() -> None:
    snapshot = lane(
        figure("kv_usage_now", 1.0),
        figure("preemptions", 40.0, "count"),
        figure("prefix_cache_hit_rate", 0.1),
        figure("finished_failed_share", 0.5),
        figure("ttft_p99", 9.0, "seconds"),
    )
    findings = check(snapshot, SLO)
    assert [f.rule for f in findings] == [
        "kv_full", "preempting", "cache_misses", "failing", "ttft_slo",
    ]  # fmt: skip
    assert [f.severity for f in findings] == ["warn", "warn", "warn", "bad", "bad"]
    assert findings[1].text == "preemptions in the window: 40 (alert at > 0)"


def test_engine_down_says_since_when_and_why_and_nothing_else() -> None:
    stale = Freshness("stale", since=EVAL_AT, reason="up == 0 for job=lane-a", cause="engine")
    snapshot = lane(figure("kv_usage_now", 1.0), freshness=stale)
    (finding,) = check(snapshot, Thresholds())
    assert (finding.rule, finding.severity) == ("engine_down", "bad")
    assert finding.text == "engine DOWN since 14:13:20 UTC: up == 0 for job=lane-a"
    never = lane(freshness=Freshness("missing", reason="no series match", cause="engine"))
    assert [f.text for f in check(never, Thresholds())] == ["engine DOWN: no series match"]


@pytest.mark.parametrize(
    ("cause", "said"), [("source", "source unreachable"), ("", "source failing")]
)
def test_a_source_down_is_not_called_the_engine(cause: FailureCause, said: str) -> None:
    """Prometheus (or the ledger) not answering, or answering with errors, is no news of the
    engine: the on-call engineer must look at the source."""
    reason = "http://127.0.0.1:9: connection refused"
    down = Freshness("missing", since=EVAL_AT, reason=reason, cause=cause)
    (finding,) = check(lane(figure("kv_usage_now", 1.0), freshness=down), Thresholds())
    assert (finding.rule, finding.severity) == ("source_down", "bad")
    assert finding.text == f"{said} since 14:13:20 UTC: {reason}"
    assert "engine" not in finding.text


def test_nothing_read_yet_is_no_finding() -> None:
    assert check(None, Thresholds()) == ()
    assert check(lane(), SLO) == ()
    no_figures = LaneSnapshot("lane-a", "1h", None, None, None, None)
    assert check(no_figures, SLO) == ()


def test_queue_building_after_the_configured_refreshes() -> None:
    waiting = figure("waiting_now", 7.0, "number")
    building = replace(lane(waiting), waiting_streak=3)
    (finding,) = check(building, Thresholds())
    assert (finding.rule, finding.figure_key) == ("queue_building", "waiting_now")
    assert finding.text == "queue building: 7 waiting for 3 refreshes in a row (alert at ≥ 3)"
    assert check(replace(building, waiting_streak=2), Thresholds()) == ()
    assert check(building, Thresholds(queue_refreshes=4)) == ()


def test_the_help_lists_every_rule_with_its_figure_and_threshold() -> None:
    lines = rule_lines(SLO)
    assert lines[1] == "queue building: waiting_now > 0 for ≥ 3 refreshes in a row"
    for key, _, _, _, _, said in RULES:
        assert any(key in line and said in line for line in lines), (key, lines)
    assert len(lines) == 14  # with the three GPU rules and the four KV connector ones
    off = rule_lines(Thresholds())[-1]
    assert off == "TTFT p99: ttft_p99 > the SLO (off: set health.ttft_p99_slo)"


def test_thresholds_from_the_config_move_the_rules() -> None:
    config = parse_config("health:\n  kv_usage: 0.95\n  failed_share: 0\n", "c.yaml")
    assert check(lane(figure("kv_usage_now", 0.93)), config.health) == ()
    (finding,) = check(lane(figure("finished_failed_share", 0.001)), config.health)
    assert finding.text == "aborted or erred share of finished: 0.1% (alert at > 0%)"
    assert "≥ 95%" in rule_lines(config.health)[2]

"""The fleet's pure parts: columns, the one query, reading rows, discovery, sorting, filtering,
the receipt and the config's `discover:`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from cockpit.cli.main import effective_config, main, parse_args
from cockpit.config.schema import ConfigError, Discover, LaneConfig, parse_config
from cockpit.core.figures import format_value, lane_figures
from cockpit.core.fleet import (
    AGE,
    FIGURE_COLUMNS,
    FLEET_COLUMNS,
    HISTORY_POINTS,
    NEWEST,
    TTFT_ABOVE,
    TTFT_P95,
    Discovery,
    FleetRow,
    FleetView,
    filter_rows,
    fleet_plan,
    format_cell,
    index_answer,
    lane_config,
    lane_row,
    sort_rows,
)
from cockpit.core.model import LaneTotals, frozen_map
from cockpit.core.promql import TARGETS, TARGETS_UP
from cockpit.core.quantiles import histogram_quantile
from cockpit.engines.dialects import lane_specs, missing_reason
from cockpit.runtime.fleet_report import fleet_json, fleet_markdown

END = 1_790_000_000.0
WINDOW_S = 3600.0


def sample(fig: str, lane: str, value: float, label: str = "job", **extra: str) -> dict[str, Any]:
    return {"metric": {label: lane, "fig": fig, **extra}, "value": [END, repr(value)]}


def answer(dialect: str, lanes: dict[str, dict[str, Any]], label: str = "job") -> list[Any]:
    """What a server answers to the plan: raw key -> value per lane; for the TTFT buckets, the
    server's p95 (Prometheus's algorithm, as `quantiles` has it) and whether it is past them."""
    plan = fleet_plan(label, "", WINDOW_S)
    result: list[Any] = []
    for lane, raw in lanes.items():
        for key, value in raw.items():
            if key == "ttft":
                p95, above = histogram_quantile(0.95, value) or (math.nan, False)
                result.append(sample(plan.figs[dialect][TTFT_P95], lane, p95, label))
                if above:
                    result.append(sample(plan.figs[dialect][TTFT_ABOVE], lane, 1.0, label))
                continue
            fig = plan.figs[dialect].get(key) or plan.state[key]
            result.append(sample(fig, lane, value, label))
    return result


TTFT = ((0.1, 10.0), (0.5, 60.0), (1.0, 90.0), (math.inf, 100.0))
VLLM = {
    "running_now": 12.0, "waiting_now": 3.0, "kv_usage_now": 0.42, "requests": 7200.0,
    "generation_tokens": 720_000.0, "prefix_cache_queries": 9e6, "prefix_cache_hits": 6e6,
    "kv_computed_sum": 3e6, "kv_computed_count": 7100.0, "ttft": TTFT, "itl_sum": 70.0,
    "itl_count": 7000.0, "prefill_sum": 30.0, "decode_sum": 90.0,
    NEWEST: END - 4, "start": END - 7200,
}  # fmt: skip
SGLANG = {
    "running_now": 5.0, "waiting_now": 0.0, "kv_usage_now": 0.8, "requests": 360.0,
    "generation_tokens": 36_000.0, "prefix_cache_queries": 1e6, "prefix_cache_hits": 2.5e5,
    "prompt_computed": 7.5e5, "ttft": ((0.1, 0.0), (0.5, 1.0), (math.inf, 40.0)),
    "itl_sum": 30.0, "itl_count": 36_000.0, "spec_drafts": 12_000.0, "spec_accepted": 18_000.0,
    "prefill_sum": 10.0, NEWEST: END - 9, "start": END - 900,
}  # fmt: skip
"""SGLang: no fresh-prefill histogram (computed / requests), speculation (the step is per
token × tokens per step), TTFT past its largest bucket, data for the last 15 minutes only."""


def totals(dialect: str, raw: dict[str, Any], covered: float | None) -> LaneTotals:
    return LaneTotals(
        "a", dialect, WINDOW_S, END,
        values=frozen_map({k: v for k, v in raw.items() if isinstance(v, float)}),
        histograms=frozen_map({k: v for k, v in raw.items() if isinstance(v, tuple)}),
        missing=frozen_map({k: why for k, spec in lane_specs(dialect).items()
                            if (why := missing_reason(spec, None))}),
        covered_s=covered,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("dialect", "raw", "covered"), [("vllm", VLLM, None), ("sglang", SGLANG, 900.0)]
)
def test_a_row_holds_the_lane_panes_figures(
    dialect: str, raw: dict[str, Any], covered: float | None
) -> None:
    plan = fleet_plan("job", "", WINDOW_S)
    row = lane_row(plan, index_answer(answer(dialect, {"a": raw}), "job")["a"], "a", dialect, END)
    figures = lane_figures(totals(dialect, raw, covered))
    for key in FIGURE_COLUMNS:
        assert row.values[key] == figures.value(key), key
        assert (key in row.above) == figures[key].above, key
        if figures[key].missing:
            assert row.reasons[key] == figures[key].reason, key
    assert row.values[AGE] == END - raw[NEWEST]
    assert row.up and not row.gone and row.dialect == dialect


def test_columns_are_lane_figures_with_their_units() -> None:
    figures = lane_figures(LaneTotals("a", "vllm", WINDOW_S, END))
    for column in FLEET_COLUMNS:
        if column.key in FIGURE_COLUMNS:
            assert figures[column.key].unit == column.unit, column.key
    assert [c.key for c in FLEET_COLUMNS][:2] == ["lane", "up"]
    assert FLEET_COLUMNS[-1].key == "trend"


def test_one_query_for_every_lane_and_both_engines() -> None:
    plan = fleet_plan("service", 'namespace="llm"', WINDOW_S)
    assert plan is fleet_plan("service", 'namespace="llm"', WINDOW_S)  # built once
    assert "sum by (service) (increase(vllm:generation_tokens_total" in plan.query
    assert "sum by (service) (increase(sglang:generation_tokens_total" in plan.query
    assert "sum by (le, service) (increase(vllm:time_to_first_token_seconds_bucket" in plan.query
    assert "job" not in plan.query
    assert plan.query.count('{namespace="llm"') > 40  # every selector narrowed
    # vLLM and its legacy names share what they read alike: asked once.
    assert plan.figs["vllm"]["requests"] == plan.figs["vllm-legacy"]["requests"]
    assert plan.figs["vllm"]["kv_usage_now"] != plan.figs["vllm-legacy"]["kv_usage_now"]
    assert plan.query.count("vllm:request_success_total") == 1
    assert "decode_sum" in plan.unavailable["sglang"]


def test_series_without_the_label_are_left_out() -> None:
    found = index_answer(
        [sample("f", "a", 1.0), {"metric": {"fig": "f"}, "value": [0, "2"]}], "job"
    )
    assert list(found) == ["a"] and list(found["a"]) == ["f"]


def _read(
    discovery: Discovery, lanes: dict[str, dict[str, Any]], end: float = END
) -> list[FleetRow]:
    return discovery.rows(fleet_plan("job", "", WINDOW_S), answer("vllm", lanes), end)


def test_lanes_appear_vanish_as_gone_and_keep_a_history() -> None:
    discovery = Discovery()
    first = _read(discovery, {"a": VLLM, "b": VLLM})
    assert [(r.lane, r.up, r.gone) for r in first] == [("a", True, False), ("b", True, False)]
    down = {**{k: v for k, v in VLLM.items() if k != NEWEST}, TARGETS: 3.0, TARGETS_UP: 0.0}
    second = _read(discovery, {"b": down, "c": VLLM}, END + 5)
    states = [(r.lane, r.up, r.gone, r.down_reason) for r in second]
    assert states == [
        ("a", False, True, "the server has no live series of it"),
        ("b", False, False, "its 3 scrape target(s) are down (up == 0)"),
        ("c", True, False, ""),
    ]
    assert all(value is None for value in second[0].values.values())
    assert second[0].history("running_now") == (12.0, None)
    assert second[2].history("running_now") == (12.0,)
    for i in range(HISTORY_POINTS):
        rows = _read(discovery, {"c": {**VLLM, "running_now": float(i)}})
    assert rows[-1].history("running_now") == tuple(float(i) for i in range(HISTORY_POINTS))


def test_a_lane_gone_for_its_whole_trend_is_let_go() -> None:
    discovery = Discovery()
    _read(discovery, {"a": VLLM, "b": VLLM})
    for _ in range(HISTORY_POINTS):
        rows = _read(discovery, {"b": VLLM})
    assert [(r.lane, r.gone) for r in rows] == [("a", True), ("b", False)]
    assert set(rows[0].history("running_now")) == {None}
    rows = _read(discovery, {"b": VLLM})
    assert [r.lane for r in rows] == ["b"]
    rows = _read(discovery, {"a": VLLM, "b": VLLM})
    assert [(r.lane, r.gone) for r in rows] == [("a", False), ("b", False)]


def test_a_lane_with_targets_but_no_engine_series_is_not_a_lane() -> None:
    rows = _read(Discovery(), {"node-exporter": {TARGETS: 1.0, TARGETS_UP: 1.0}, "a": VLLM})
    assert [row.lane for row in rows] == ["a"]


def row(lane: str, up: bool | None = True, gone: bool = False, **values: float | None) -> FleetRow:
    return FleetRow(lane, up, frozen_map(values), gone)


def test_sort_numbers_either_way_missing_last() -> None:
    rows = [row("b", waiting_now=2), row("a", waiting_now=None), row("c", waiting_now=1),
            row("d", waiting_now=2)]  # fmt: skip
    assert [r.lane for r in sort_rows(rows, "waiting_now")] == ["c", "b", "d", "a"]
    assert [r.lane for r in sort_rows(rows, "waiting_now", reverse=True)] == ["b", "d", "c", "a"]
    assert [r.lane for r in sort_rows(rows, "lane", reverse=True)] == ["d", "c", "b", "a"]


def test_sort_by_state_puts_trouble_first() -> None:
    rows = [row("up"), row("gone", False, True), row("down", False), row("never", None)]
    assert [r.lane for r in sort_rows(rows, "up")] == ["gone", "down", "up", "never"]


def test_sort_by_trend_is_by_its_column_now() -> None:
    a = FleetRow("a", True, frozen_map({"waiting_now": 9.0, "running_now": 1.0}))
    b = FleetRow("b", True, frozen_map({"waiting_now": 1.0, "running_now": 5.0}))
    assert [r.lane for r in sort_rows([a, b], "trend", trend_key="running_now")] == ["a", "b"]
    assert [r.lane for r in sort_rows([a, b], "trend", trend_key="waiting_now")] == ["b", "a"]


def test_filter_by_typed_text() -> None:
    rows = [row("Lane-A"), row("lane-b"), row("batch")]
    assert [r.lane for r in filter_rows(rows, "LANE")] == ["Lane-A", "lane-b"]
    assert [r.lane for r in filter_rows(rows, "  ")] == ["Lane-A", "lane-b", "batch"]
    assert filter_rows(rows, "x") == []


def test_cells_read_as_the_lane_panes_do() -> None:
    columns = {c.key: c for c in FLEET_COLUMNS}
    lane = FleetRow("a", True, frozen_map({"ttft_p95": 2.5, "kv_usage_now": 0.5}),
                    above=frozenset({"ttft_p95"}))  # fmt: skip
    assert format_cell(lane, columns["ttft_p95"]) == "> " + format_value(2.5, "seconds")
    assert format_cell(lane, columns["kv_usage_now"]) == "50.0%"
    assert format_cell(lane, columns["waiting_now"]) == "—"
    assert format_cell(row("x", False, True), columns["up"]) == "gone"
    assert format_cell(row("x", False), columns["up"]) == "down"
    assert format_cell(lane, columns["trend"]) == ""


def test_receipt_lists_every_row_and_the_servers_warnings() -> None:
    rows = tuple(_read(Discovery(), {"a": VLLM, "b|x\n": VLLM}))
    view = FleetView(rows, WINDOW_S, END, ("server warning: store eu-1 timed out",), "http://p",
                     query="q")  # fmt: skip
    text = fleet_markdown(view)
    assert text.startswith("# Fleet — 2 lanes (2 up)\n")
    assert "> **server warning: store eu-1 timed out**" in text
    assert "| b\\|x␊ | up |" in text  # a name can't split the table or break the line
    data = fleet_json(view)
    assert [lane["lane"] for lane in data["lanes"]] == ["a", "b|x\n"]
    assert data["lanes"][0]["values"]["running_now"] == 12.0
    assert data["warnings"] == ["server warning: store eu-1 timed out"]


def test_a_discovered_lane_opens_as_a_normal_lane() -> None:
    server = LaneConfig("", prometheus="http://thanos:9090", selector='namespace="llm"',
                        tenant="team-a")  # fmt: skip
    discover = Discover("job", server)
    lane = lane_config(discover, 'odd"name')
    assert lane.name == 'odd"name' and lane.tenant == "team-a"
    assert lane.selector == 'namespace="llm",job="odd\\"name"'


def test_config_discover() -> None:
    text = (
        "discover:\n  prometheus: http://thanos:9090\n  match: 'namespace=\"llm\"'\n"
        "  tenant: team-a\n  timeout: 20\n"
    )
    config = parse_config(text, "c.yaml")
    assert config.discover == Discover(
        "job", LaneConfig("", prometheus="http://thanos:9090", selector='namespace="llm"',
                          tenant="team-a", timeout_s=20.0),
    )  # fmt: skip
    assert config.lanes == ()
    with pytest.raises(ConfigError, match="discover needs prometheus"):
        parse_config("discover:\n  label: job\n", "c.yaml")
    with pytest.raises(ConfigError, match="expected a label name"):
        parse_config("discover:\n  prometheus: http://p\n  label: 'a-b'\n", "c.yaml")
    with pytest.raises(ConfigError, match="metrics_url"):
        parse_config("discover:\n  prometheus: http://p\n  metrics_url: http://e\n", "c.yaml")


def test_command_line_discovery(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "none.yaml"
    empty.write_text("")
    args = parse_args(["--prometheus", "http://thanos:9090", "--lanes-by", "job",
                       "--selector", 'namespace="llm"', "--config", str(empty)])  # fmt: skip
    config = effective_config(args)
    assert config.lanes == ()
    assert config.discover == Discover(
        "job", LaneConfig("", prometheus="http://thanos:9090", selector='namespace="llm"')
    )
    assert main(["report", "--fleet", "--lanes-by", "job", "--config", str(empty)]) == 2
    assert "--lanes-by: finds lanes on a server: give --prometheus URL" in capsys.readouterr().err
    assert (
        main(
            [
                "report",
                "--fleet",
                "--prometheus",
                "http://p",
                "--lanes-by",
                "a-b",
                "--config",
                str(empty),
            ]
        )
        == 2
    )
    assert "expected a label name such as job, got 'a-b'" in capsys.readouterr().err


def test_a_targets_host_is_its_instance_without_the_port() -> None:
    from cockpit.core.fleet import host_of

    cases = {"node-1:8000": "node-1", "10.0.0.5:9400": "10.0.0.5", "[::1]:8000": "::1",
             "node-1": "node-1", "::1": "::1", "node-1:metrics": "node-1:metrics"}  # fmt: skip
    assert {instance: host_of(instance) for instance in cases} == cases


def test_the_fleet_asks_an_slo_histogram_s_buckets_only_when_its_target_is_set() -> None:
    from cockpit.core.fleet import BUCKETS, fleet_plan

    plain, with_slo = fleet_plan("job", "", 3600.0), fleet_plan("job", "", 3600.0, ("ttft",))
    assert not any(BUCKETS in key for figs in plain.figs.values() for key in figs)
    assert all(BUCKETS + "ttft" in with_slo.figs[name] for name in ("vllm", "sglang"))
    assert len(with_slo.query) > len(plain.query)

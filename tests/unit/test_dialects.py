"""Pure tests of the dialect tables, PromQL rendering, escaping and selector parsing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.core import promql
from cockpit.core.model import LANE_COUNTERS, LANE_GAUGES, LANE_HISTOGRAMS, MODEL_KEYS
from cockpit.engines import detect, dialects, engine, engines
from cockpit.engines.decode_pace import NO_SPECULATION, decode_pace
from cockpit.engines.vllm import capacity_from_info
from tests.support.repo import VLLM_FIXTURES, require_fixture

ALL_KEYS = set(LANE_COUNTERS + LANE_GAUGES + LANE_HISTOGRAMS)
DIALECTS = tuple(known.name for known in engines())


def detect_dialect(metric_names: set[str]) -> str:
    return detect(metric_names).name


def fixture_names(name: str) -> set[str]:
    text = require_fixture(VLLM_FIXTURES / name).read_text()
    return {
        re.split(r"[{ ]", line, maxsplit=1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_raw_key_has_a_spec(dialect: str) -> None:
    specs = dialects.lane_specs(dialect)
    assert set(specs) == ALL_KEYS
    expressions = promql.lane_expressions(dialect, '{job="x"}', "7d")
    unavailable = {k for k, s in specs.items() if isinstance(s, dialects.Unavailable)}
    stated = not isinstance(engine(dialect).capacity, dialects.Unavailable)
    assert set(expressions) == (ALL_KEYS - unavailable) | (
        {promql.KV_CAPACITY} if stated else set()
    )


def test_vllm_expressions_follow_the_reference() -> None:
    exprs = promql.lane_expressions("vllm", '{job="lane-a"}', "7d")
    assert exprs["prompt_tokens"] == 'sum(increase(vllm:prompt_tokens_total{job="lane-a"}[7d]))'
    assert exprs["prompt_computed"] == (
        'sum(increase(vllm:prompt_tokens_by_source_total{job="lane-a",source="local_compute"}[7d]))'
    )
    assert exprs["prompt_len"] == (
        'sum by (le) (increase(vllm:request_prompt_tokens_bucket{job="lane-a"}[7d]))'
    )
    usage = 'vllm:kv_cache_usage_perc{job="lane-a"}'
    assert exprs["kv_usage"] == f"(avg_over_time(avg({usage})[7d:302s]) or avg({usage}))"
    running = 'vllm:num_requests_running{job="lane-a"}'
    assert exprs["running"] == f"(avg_over_time(sum({running})[7d:302s]) or sum({running}))"
    pinned = promql.spec_expression(dialects.Counter("x_total"), "", "3h", at=1e9)
    assert pinned == "sum(increase(x_total{}[3h] @ 1000000000.000))"
    assert "le=" not in " ".join(exprs.values())


def test_legacy_and_sglang_names() -> None:
    legacy = promql.lane_expressions("vllm-legacy", "", "1h")
    assert "vllm:gpu_prefix_cache_hits_total{}" in legacy["prefix_cache_hits"]
    assert "vllm:gpu_cache_usage_perc" in legacy["kv_usage"]
    assert "vllm:time_per_output_token_seconds_sum" in legacy["itl_sum"]
    sglang = promql.lane_expressions("sglang", '{job="s"}', "1h")
    assert "sglang:cached_tokens_total" in sglang["prefix_cache_hits"]
    assert "sglang:prompt_tokens_total" in sglang["prefix_cache_queries"]
    assert " - " in sglang["prompt_computed"]
    assert 'stage="prefill_forward"' in sglang["prefill_sum"]
    assert "sglang:queue_time_seconds_sum" in sglang["queue_sum"]
    assert "decode_sum" not in sglang


def test_capacity_expression_drops_model_name() -> None:
    expr = promql.capacity_expression("vllm", '{job="a",model_name="m"}')
    assert expr == 'vllm:cache_config_info{job="a"}'


def test_combined_query_labels_each_expression() -> None:
    query = promql.combined_query({"a": "sum(x)", "b": "sum(y)"})
    assert query == (
        'label_replace(sum(x), "fig", "a", "", "") or label_replace(sum(y), "fig", "b", "", "")'
    )


def test_detect_dialect() -> None:
    assert detect_dialect(fixture_names("metrics_real.txt")) == "vllm"
    assert detect_dialect(fixture_names("metrics_real_specdec.txt")) == "vllm"
    assert detect_dialect({"vllm:gpu_cache_usage_perc", "vllm:prompt_tokens_total"}) == (
        "vllm-legacy"
    )
    assert detect_dialect({"sglang:num_running_reqs", "up"}) == "sglang"
    with pytest.raises(dialects.DialectError):
        detect_dialect({"up", "process_cpu_seconds_total"})
    with pytest.raises(dialects.DialectError):
        dialects.lane_specs("tgi")


def test_missing_reasons() -> None:
    spec = dialects.lane_specs("vllm")["spec_drafts"]
    names = fixture_names("metrics_real.txt")
    assert dialects.missing_reason(spec, names) == (
        "not exposed by this engine (vllm:spec_decode_num_drafts_total)"
    )
    assert dialects.missing_reason(spec, fixture_names("metrics_real_specdec.txt")) is None
    assert dialects.missing_reason(dialects.lane_specs("vllm")["prompt_len"], names) is None
    assert "SGLang" in (
        dialects.missing_reason(dialects.lane_specs("sglang")["decode_sum"], None) or ""
    )


def test_escape_label_value() -> None:
    assert promql.escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert promql.selector_with('{job="x"}', model_name='q"') == '{job="x",model_name="q\\""}'
    assert promql.selector_with("", model_name="m") == '{model_name="m"}'
    assert promql.selector_with('job="x",') == '{job="x"}'


@given(st.text())
def test_escaped_values_parse_back(value: str) -> None:
    selector = promql.selector_with('{job="x"}', model_name=value)
    matchers = promql.parse_selector(selector)
    assert matchers[-1] == promql.Matcher("model_name", "=", value)


def test_parse_selector_operators() -> None:
    matchers = promql.parse_selector('{a="1", b!="2",c=~"x|y.*", d!~"z"}')
    assert [(m.name, m.op, m.value) for m in matchers] == [
        ("a", "=", "1"),
        ("b", "!=", "2"),
        ("c", "=~", "x|y.*"),
        ("d", "!~", "z"),
    ]
    labels = {"a": "1", "b": "3", "c": "yes", "d": "zz"}
    assert all(m.matches(labels) for m in matchers)
    assert not matchers[2].matches({"c": "ax"})  # anchored like PromQL
    assert matchers[3].matches({"d": "zz"}) and not matchers[3].matches({"d": "z"})
    assert promql.parse_selector("") == ()
    with pytest.raises(ValueError, match="cannot read selector"):
        promql.parse_selector("{a=1}")


def test_capacity_from_info() -> None:
    assert capacity_from_info({"kv_cache_size_tokens": "1048576"}) == 1048576
    info = {"kv_cache_size_tokens": "None", "num_gpu_blocks": "100", "block_size": "16"}
    assert capacity_from_info(info) == 1600
    assert capacity_from_info({"num_gpu_blocks": "None", "block_size": "16"}) is None


def test_buckets_sorted_with_inf_last() -> None:
    pairs = [(dialects.parse_le(le), float(i)) for i, le in enumerate(["+Inf", "1000.0", "5.0"])]
    assert dialects.sorted_buckets(pairs) == ((5.0, 2.0), (1000.0, 1.0), (float("inf"), 0.0))


def test_subquery_step() -> None:
    assert promql.subquery_step(3600) == 15
    assert promql.subquery_step(7 * 86400) == 302
    expr = promql.data_start_expression("vllm", '{job="a"}', 3600)
    metric = 'vllm:num_requests_running{job="a"}'
    assert expr == (
        f"(min(min_over_time(({metric} * 0 + time())[1h:15s])) or min(timestamp({metric})))"
    )


def test_scrape_interval_from_samples_and_none_when_they_start_after_the_end() -> None:
    def answer(value: float) -> promql.Samples:
        return [{"metric": {}, "value": [0, str(value)]}]

    # 21 samples over the 300 s before `end`: one every 15 s
    assert promql.scrape_interval(answer(21), answer(700.0), 1000.0, 300) == 15
    # data that starts a millisecond after `end` (an engine's clock a little fast) has no interval
    assert promql.scrape_interval(answer(5), answer(1000.001), 1000.0, 300) is None


def test_lane_plan_is_built_once_and_asks_only_exposed_keys() -> None:
    names = frozenset(fixture_names("metrics_real.txt") - {"vllm:prompt_tokens_total"})
    promql.lane_plan.cache_clear()
    plan = promql.lane_plan("vllm", '{job="a"}', 3600.0, names, False)
    assert promql.lane_plan("vllm", '{job="a"}', 3600.0, names, False) is plan
    assert promql.lane_plan.cache_info().misses == 1
    assert plan.missing["prompt_tokens"] == "not exposed by this engine (vllm:prompt_tokens_total)"
    assert "prompt_tokens" not in plan.exprs and "prompt_tokens" not in plan.specs
    assert plan.exprs["requests"] == 'sum(increase(vllm:request_success_total{job="a"}[1h]))'
    labelled = re.findall(r'"fig", "([^"]+)"', plan.query)
    assert labelled == [*plan.exprs, *plan.extra]
    first, *seen = plan.extra
    per_model = {f"model:{key}" for key in MODEL_KEYS if key != "prompt_tokens"}
    le_seen = {f"{h}_le_seen" for h in LANE_HISTOGRAMS}
    assert first == "kv_capacity" and set(seen) == {*le_seen, *per_model, "lora"}
    assert plan.extra["lora"] == 'topk(1, vllm:lora_requests_info{job="a"})'
    assert plan.extra["model:requests"] == (
        'sum by (model_name) (increase(vllm:request_success_total{job="a"}[1h]))'
    )
    assert set(plan.exprs) | set(plan.missing) == ALL_KEYS
    with_start = promql.lane_plan("vllm", '{job="a"}', 3600.0, names, True)
    assert re.findall(r'"fig", "([^"]+)"', with_start.query)[-2:] == ["data_start", "scrapes"]
    assert promql.lane_plan("vllm", '{job="a"}', 1800.0, names, False).exprs["requests"] == (
        'sum(increase(vllm:request_success_total{job="a"}[30m]))'
    )
    assert promql.lane_plan.cache_info().misses == 3


# --- decode pace ---------------------------------------------------------------------------


def test_vllm_tokens_per_step_counts_every_decode_step() -> None:
    # 10 requests, 100 decode steps carrying 180 tokens after the first ones, 40 of the steps
    # drafted (accepting 80): 1.8 tokens a step, not 1 + 80/40 = 3.
    values = {
        "generation_tokens": 190.0, "ttft_count": 10.0, "itl_count": 100.0, "itl_sum": 4.0,
        "spec_drafts": 40.0, "spec_accepted": 80.0,
    }  # fmt: skip
    for dialect in ("vllm", "vllm-legacy"):
        pace = decode_pace(dialect, values.get)
        assert pace.tokens_per_step.value == pytest.approx(180 / 100)
        assert pace.step_s.value == pytest.approx(4.0 / 100)
        assert pace.stream_tok_s.value == pytest.approx(180 / 4.0)


def test_vllm_tokens_per_step_never_goes_below_nothing() -> None:
    # increase() extrapolates each counter to the window's edges on its own: first tokens can
    # come out a little above all tokens in a quiet window.
    values = {
        "generation_tokens": 9.8, "ttft_count": 10.0, "itl_count": 3.0, "itl_sum": 0.1,
        "spec_drafts": 1.0, "spec_accepted": 1.0,
    }  # fmt: skip
    pace = decode_pace("vllm", values.get)
    assert pace.tokens_per_step.value is None and pace.stream_tok_s.value is None


def test_vllm_without_speculation_is_one_token_a_step() -> None:
    pace = decode_pace("vllm", {"itl_count": 50.0, "itl_sum": 2.0}.get)
    assert pace.tokens_per_step.value == 1.0
    assert pace.tokens_per_step.note == NO_SPECULATION
    assert pace.stream_tok_s.value == pytest.approx(25.0)
    idle = decode_pace("vllm", {"itl_count": 0.0, "itl_sum": 0.0}.get)
    assert idle.tokens_per_step.value is None and idle.stream_tok_s.value is None


def test_sglang_itl_counts_tokens_not_steps() -> None:
    # SGLang: each output adds its interval once to the sum and its token count to the count.
    outputs = [(0.030, 3)] * 20 + [(0.010, 1)] * 10  # (interval, tokens) per verify step
    seconds = sum(interval for interval, _ in outputs)
    tokens = float(sum(n for _, n in outputs))
    values = {
        "itl_sum": seconds, "itl_count": tokens,
        "spec_drafts": float(len(outputs)), "spec_accepted": tokens - len(outputs),
    }  # fmt: skip
    pace = decode_pace("sglang", values.get)
    assert pace.stream_tok_s.value == pytest.approx(tokens / seconds)
    assert pace.tokens_per_step.value == pytest.approx(tokens / len(outputs))
    assert pace.step_s.value == pytest.approx(seconds / len(outputs))
    plain = decode_pace("sglang", {"itl_sum": 1.0, "itl_count": 40.0}.get)
    assert plain.tokens_per_step.value == 1.0 and plain.stream_tok_s.value == pytest.approx(40.0)
    with pytest.raises(dialects.DialectError):
        decode_pace("tgi", values.get)


# --- labels kept, fallbacks, one TP rank ----------------------------------------


def test_a_grouped_key_keeps_its_label_in_the_query_and_the_answer() -> None:
    exprs = promql.lane_expressions("vllm", '{job="a"}', "1h")
    assert exprs["finished"] == (
        'sum by (finished_reason) (increase(vllm:request_success_total{job="a"}[1h]))'
    )
    assert exprs["spec_accepted_by_pos"].startswith("sum by (position) (increase(")
    waiting = 'sum by (reason) (vllm:num_requests_waiting_by_reason{job="a"})'
    assert exprs["waiting_by_reason"] == f"(avg_over_time({waiting}[1h:15s]) or {waiting})"
    answer = [
        {"metric": {"fig": "finished", "finished_reason": reason}, "value": [0, str(count)]}
        for reason, count in (("stop", 3), ("abort", 1))
    ]
    assert promql.read_key(answer, "finished") == {"stop": 3.0, "abort": 1.0}


def test_vllm_before_0_10_2_times_its_step_by_time_per_output_token() -> None:
    itl = {n for n in fixture_names("metrics_real.txt") if "inter_token_latency" in n}
    older = {f"vllm:time_per_output_token_seconds_{part}" for part in ("sum", "count", "bucket")}
    names = frozenset(fixture_names("metrics_real.txt") - itl | older)
    assert detect_dialect(names) == "vllm"
    plan = promql.lane_plan("vllm", '{job="a"}', 3600, names, False)
    assert "itl_sum" not in plan.missing and "itl_count" not in plan.missing
    assert "vllm:time_per_output_token_seconds_sum" in plan.exprs["itl_sum"]
    neither = promql.lane_plan("vllm", '{job="a"}', 3600, names - older, False)
    assert neither.missing["itl_sum"] == (
        "not exposed by this engine (vllm:inter_token_latency_seconds_sum, "
        "vllm:time_per_output_token_seconds_sum)"
    )


def test_sglang_specs_follow_its_source() -> None:
    exprs = promql.lane_expressions("sglang", '{job="s"}', "1h")

    def total(metric: str) -> str:
        return f'sum(increase({metric}{{job="s"}}[1h]))'

    assert "sglang:num_retracted_requests_total" in exprs["preemptions"]
    generated, verify = (
        total("sglang:generation_tokens_total"),
        total("sglang:spec_verify_calls_total"),
    )
    requests = total("sglang:num_requests_total")
    assert exprs["spec_accepted"] == f"(({generated} - {verify}) - {requests})"
    streaming = 'sglang:time_to_first_token_seconds_sum{job="s",is_streaming="true"}'
    unlabelled = 'sglang:time_to_first_token_seconds_sum{job="s",is_streaming=""}'
    assert exprs["ttft_sum"].index(streaming) < exprs["ttft_sum"].index(unlabelled)
    assert " or " in exprs["ttft_sum"] and 'is_streaming="true"' in exprs["e2e_sum"]
    running = 'max without (tp_rank) (sglang:num_running_reqs{job="s"})'
    assert exprs["running"].startswith(f"(avg_over_time(sum({running})[1h:15s])")
    usage = exprs["kv_usage"]
    assert usage.index("sglang:full_token_usage") < usage.index("sglang:token_usage{")
    assert "sglang:prefill_effective_tokens_total" in exprs["prefix_cache_hits"]
    assert "max without (tp_rank)" in exprs[promql.KV_CAPACITY]

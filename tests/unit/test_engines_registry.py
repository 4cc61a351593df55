"""The engine registry: adapters found in the package, listed and detected by priority, looked
up by id; an adapter's table must cover every raw key; the per-token pace without speculation."""

from __future__ import annotations

import pytest

from cockpit import engines
from cockpit.core.model import LANE_COUNTERS, LANE_GAUGES, LANE_HISTOGRAMS
from cockpit.engines.base import NO_SPECULATION, PER_TOKEN, DialectError, lane_table
from cockpit.engines.specs import Counter, lacking

WINDOW_KEYS = {*LANE_COUNTERS, *LANE_GAUGES, *LANE_HISTOGRAMS} - {
    key for key in (*LANE_COUNTERS, *LANE_GAUGES) if key.endswith(("_now", "_1m"))
}


def test_every_module_of_the_package_that_states_an_engine_is_listed_by_priority() -> None:
    listed = engines.engines()
    assert {"vllm", "vllm-legacy", "sglang"} <= {e.name for e in listed}
    priorities = [e.priority for e in listed]
    assert priorities == sorted(priorities) and len(set(priorities)) == len(priorities)
    assert engines.default() is listed[0] and engines.engine("sglang").prefix == "sglang:"
    assert engines.find("tgi") is None
    with pytest.raises(DialectError, match="unknown engine dialect 'tgi'"):
        engines.engine("tgi")


def test_detection_takes_the_engine_of_highest_priority_whose_names_are_there() -> None:
    old = {"vllm:gpu_cache_usage_perc", "vllm:prompt_tokens_total"}
    assert engines.detect(old).name == "vllm-legacy"
    assert engines.detect(old | {"vllm:kv_cache_usage_perc"}).name == "vllm"
    assert engines.detect({"vllm_gpu_cache_usage_perc", "vllm_x"}).name == "vllm-legacy"
    mixed = {"vllm:kv_cache_usage_perc", "sglang:num_running_reqs"}
    assert engines.detect(mixed) is engines.engine("sglang")  # of higher priority than vLLM's
    with pytest.raises(DialectError, match=r"no vllm:.* sglang:.* metrics found"):
        engines.detect({"up", "process_cpu_seconds_total"})


def test_an_engine_table_must_state_every_raw_key() -> None:
    table = {**lacking("none here", *WINDOW_KEYS), "requests": Counter("x_total")}
    assert set(lane_table(table)) == {*LANE_COUNTERS, *LANE_GAUGES, *LANE_HISTOGRAMS}
    assert lane_table(table)["requests_1m"] != table["requests"]  # over the last minute
    del table["ttft"]
    with pytest.raises(DialectError, match=r"lack \[.ttft.\]"):
        lane_table(table)


def test_a_per_token_pace_with_no_verify_call_is_one_token_a_step() -> None:
    # An engine that exports its speculation counters at 0 when it does not speculate.
    values = {"itl_sum": 2.0, "itl_count": 100.0, "spec_drafts": 0.0, "spec_accepted": 0.0}
    pace = PER_TOKEN.read(values.get)
    assert pace.tokens_per_step.value == 1.0 and pace.tokens_per_step.note == NO_SPECULATION
    assert pace.step_s.value == pytest.approx(0.02)
    assert pace.stream_tok_s.value == pytest.approx(50.0)

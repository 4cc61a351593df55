"""Where the prompt tokens came from: the split into computed locally / local cache hit /
external KV transfer adds up to the prompt tokens counter, and the cached tokens by tier, read
the same through a real Prometheus and by direct scrape; SGLang's `cache_source="total"` is
never a tier; engines without the series say why. The host tier's KV tokens are measured where
the engine exposes them, else configured, and the figure says which."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.core.catalogue import CONFIGURED_HOST, MEASURED_HOST
from cockpit.core.compare import compare
from cockpit.core.figures import LaneFigures, lane_figures
from cockpit.core.model import LaneTotals
from cockpit.core.snapshot import LaneSnapshot
from cockpit.engines.vllm import HOST_TIER_PINNED
from cockpit.runtime.report import json_receipt, lane_markdown
from cockpit.sources.prometheus import PrometheusSource
from tests.support.promharness import PromServer, instant, remote_write
from tests.support.replayed import END, SCRAPES, WINDOW, history, scraped
from tests.support.repo import FIXTURES, require_fixture

EXPOSITIONS = {
    "sources-vllm-real": "vllm/metrics_real.txt",
    "sources-vllm-tiers": "vllm/metrics_cache_tiers.txt",
    "sources-sglang-tiers": "sglang/metrics_cache_tiers.txt",
}
VLLM_JOBS = ("sources-vllm-real", "sources-vllm-tiers")
IN_WINDOW = 6 / (SCRAPES - 1)
"""The history grows each counter linearly over 8 steps; the 90 s window holds the last 6."""
SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
TIERS = ("device", "host", "p2p", "disk", "external_unspecified")


def without_created(text: str) -> str:
    return re.sub(r"^\S+_created(\{[^}]*\})? \S+\n", "", text, flags=re.M)


def counted(text: str, name: str, label: str = "") -> dict[str, float]:
    """The exposition's own sums of a counter (by a label), read with prometheus_client."""
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                key = sample.labels.get(label, "") if label else ""
                sums[key] = sums.get(key, 0.0) + sample.value
    return sums


def promql(server: PromServer, query: str) -> dict[str, float]:
    """Prometheus's own answer at the window's end, by the result's single label (if any)."""
    return {next(iter(labels.values()), ""): value for labels, value in instant(server, query, END)}


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    read = {job: require_fixture(FIXTURES / path).read_text() for job, path in EXPOSITIONS.items()}
    return {job: without_created(text) for job, text in read.items()}


@pytest.fixture(scope="module")
def server(texts: dict[str, str], prometheus: PromServer) -> PromServer:
    remote_write(prometheus, history(texts))
    return prometheus


async def through_prometheus(server: PromServer, job: str) -> LaneTotals:
    source = PrometheusSource(server.url)
    try:
        return await source.read_lane("lane", None, f'{{job="{job}"}}', WINDOW, END)
    finally:
        await source.aclose()


def split(figures: LaneFigures, prefix: str, names: tuple[str, ...]) -> dict[str, float | None]:
    return {name: figures.value(f"{prefix}_{name}") for name in names}


@pytest.mark.parametrize("job", VLLM_JOBS)
async def test_the_prompt_split_adds_up_to_the_prompt_tokens_counter(
    server: PromServer, texts: dict[str, str], job: str
) -> None:
    prompt = promql(server, f'sum(increase(vllm:prompt_tokens_total{{job="{job}"}}[90s]))')[""]
    direct = lane_figures(scraped(texts[job]))
    via = lane_figures(await through_prometheus(server, job))
    # By hand: the exposition's prompt counter, of which the window holds 6 of 8 steps.
    by_hand = counted(texts[job], "vllm:prompt_tokens_total")[""] * IN_WINDOW
    assert prompt == pytest.approx(by_hand)
    for figures, expected in ((via, prompt), (direct, by_hand)):
        tokens = split(figures, "prompt_from", SOURCES)
        assert sum(v or 0.0 for v in tokens.values()) == pytest.approx(expected)
        assert None not in tokens.values()
        shares = split(figures, "prompt_from_share", SOURCES)
        for name in SOURCES:
            assert shares[name] == pytest.approx((tokens[name] or 0.0) / expected)
    computed = counted(texts[job], "vllm:prompt_tokens_by_source_total", "source")
    assert direct.value("prompt_from_local_compute") == pytest.approx(
        computed["local_compute"] * IN_WINDOW
    )


async def test_the_cached_tokens_by_tier_as_vllms_source_defines_them(
    server: PromServer, texts: dict[str, str]
) -> None:
    job = "sources-vllm-tiers"
    tiers = f'vllm:prompt_tokens_cached_by_source_total{{job="{job}"}}'
    by_tier = promql(server, f"sum by (source) (increase({tiers}[90s]))")
    cached = promql(server, f'sum(increase(vllm:prompt_tokens_cached_total{{job="{job}"}}[90s]))')
    via = lane_figures(await through_prometheus(server, job))
    direct = lane_figures(scraped(texts[job]))
    assert split(via, "cached", TIERS) == pytest.approx(by_tier)
    assert split(direct, "cached", TIERS) == pytest.approx(by_tier)
    # The tiers add up to the cached tokens (local hits + external transfers): 70,000 × 6/8.
    assert sum(by_tier.values()) == pytest.approx(cached[""]) == pytest.approx(70_000 * IN_WINDOW)
    assert via.value("cached_share_host") == pytest.approx(12_000 / 70_000)
    assert via.value("cached_share_p2p") == 0.0
    assert via.value("prompt_from_share_external_kv_transfer") == pytest.approx(20_000 / 100_000)


async def test_sglangs_total_cache_source_is_never_added_to_the_tiers(
    server: PromServer, texts: dict[str, str]
) -> None:
    job = "sources-sglang-tiers"
    text = texts[job]
    via = lane_figures(await through_prometheus(server, job))
    direct = lane_figures(scraped(text))
    sources = counted(text, "sglang:cached_tokens_total", "cache_source")
    total = sources.pop("total")
    for figures in (via, direct):
        tiers = {
            k.removeprefix("cached_"): f.value
            for k, f in figures.figures.items()
            if k.startswith("cached_") and not k.startswith("cached_share_")
        }
        assert tiers == pytest.approx({k: v * IN_WINDOW for k, v in sources.items()})
        assert "total" not in tiers and "cached_share_total" not in figures.figures
        assert sum(v or 0.0 for v in tiers.values()) == pytest.approx(total * IN_WINDOW)
        assert figures.value("cached_share_storage_mooncake") == pytest.approx(5_000 / 60_000)
        # Without the scheduler's counters the hits are the `total` series alone, not twice.
        assert figures.value("prefix_cache_hit_rate") == pytest.approx(total / 100_000)
        assert figures.value("prefill_computed") == pytest.approx((100_000 - total) * IN_WINDOW)
        assert figures["prompt_from_local_compute"].reason == (
            "SGLang splits only its cached tokens by source"
        )


def receipt_figures(totals: LaneTotals) -> dict[str, dict[str, object]]:
    """The lane's figures as its JSON receipt (and so a card) carries them."""
    lane = LaneSnapshot("lane", "90s", totals, lane_figures(totals), None, None)
    figures: dict[str, dict[str, object]] = json_receipt(lane, None)["lane"]["figures"]
    return figures


async def test_the_split_reaches_the_receipts_and_the_card_comparison(
    server: PromServer,
) -> None:
    totals = await through_prometheus(server, "sources-vllm-tiers")
    receipt = "\n".join(lane_markdown(lane_figures(totals), totals, "90s"))
    # 20,000 external of 100,000 prompt tokens, 6/8 of them in the window.
    assert "| Prompt tokens, external KV transfer | 15,000 |" in receipt
    assert "| Cached share, tier host | 17.1% |" in receipt  # 12,000 of 70,000
    tiers = receipt_figures(totals)
    assert tiers["prompt_from_share_local_compute"]["value"] == pytest.approx(0.3)
    real = receipt_figures(await through_prometheus(server, "sources-vllm-real"))
    rows = {row.key: row for row in compare(tiers, real)}
    assert rows["prompt_from_share_local_compute"].b == pytest.approx(12_156 / 60_284)
    assert rows["cached_host"].a == pytest.approx(12_000 * IN_WINDOW) and rows["cached_host"].b == 0


def legacy(text: str) -> str:
    """vLLM before 0.12 as far as these series go: the `gpu_` names, no prompt split by source
    or cached tokens by tier."""
    renamed = text.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    renamed = renamed.replace("vllm:prefix_cache_", "vllm:gpu_prefix_cache_")
    return "".join(line for line in renamed.splitlines(True) if "_by_source" not in line)


def test_engines_without_the_split_say_why_on_each_member() -> None:
    llamacpp = lane_figures(scraped(require_fixture(FIXTURES / "llamacpp/metrics.txt").read_text()))
    why = "llama.cpp does not split its prompt tokens by cache tier"
    for key in ("prompt_from_local_compute", "prompt_from_share_external_kv_transfer",
                "cached_host", "cached_share_disk"):  # fmt: skip
        assert llamacpp[key].missing and llamacpp[key].reason == why
    old = scraped(
        legacy(without_created(require_fixture(FIXTURES / EXPOSITIONS[VLLM_JOBS[0]]).read_text()))
    )
    assert old.dialect == "vllm-legacy"
    figures = lane_figures(old)
    assert figures["prompt_from_local_cache_hit"].reason == (
        "not exposed by this engine (vllm:prompt_tokens_by_source_total)"
    )
    assert figures["cached_share_device"].reason == (
        "not exposed by this engine (vllm:prompt_tokens_cached_by_source_total)"
    )
    assert figures.value("prefix_cache_hits") == pytest.approx(48_128 * IN_WINDOW)


# --- the host tier's KV tokens ------------------------------------------------------------


async def test_the_host_tier_is_measured_where_the_engine_exposes_it(server: PromServer) -> None:
    job = "sources-sglang-tiers"
    used = f'sglang:hicache_host_used_tokens{{job="{job}"}}'
    host = promql(server, f"sum(max without (tp_rank) (avg_over_time({used}[90s])))")[""]
    assert host == 250_000  # both TP ranks export the pool: one counts
    totals = await through_prometheus(server, job)
    for configured in (0.0, 1e6):  # a configured size gives way to the engine's own gauge
        figures = lane_figures(totals, host_kv_tokens=configured)
        assert figures.value("host_kv_resident_tokens") == host
        assert figures["host_kv_resident_tokens"].reason == MEASURED_HOST
        # GPU: token_usage 0.5 of max_total_num_tokens 80,000; the host pool beside it.
        assert figures.value("kv_resident_tokens") == 0.5 * 80_000 + host
        assert figures["kv_resident_tokens"].reason == MEASURED_HOST


async def test_without_a_host_gauge_the_configured_tier_is_added_and_said_so(
    server: PromServer,
) -> None:
    totals = await through_prometheus(server, "sources-vllm-tiers")
    gpu = (0.5 + 0.25) / 2 * (2 * 1_000 * 16)  # mean KV use × the two engines' blocks × 16
    configured = lane_figures(totals, host_kv_tokens=4.4e6)
    assert configured.value("host_kv_resident_tokens") == 4.4e6
    assert configured["host_kv_resident_tokens"].reason == CONFIGURED_HOST
    assert configured.value("kv_resident_tokens") == pytest.approx(gpu + 4.4e6)
    assert configured["kv_resident_tokens"].reason == CONFIGURED_HOST
    bare = lane_figures(totals)
    assert bare.value("kv_resident_tokens") == pytest.approx(gpu)
    assert bare["host_kv_resident_tokens"].reason == HOST_TIER_PINNED

"""The per-model table and the LoRA adapters from a fixture exposition with two `model_name`
values (tests/fixtures/vllm/metrics_two_models.txt, shaped as vLLM's loggers.py writes them),
read by direct scrape; receipts and card compare carrying them."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from cockpit.core.compare import WITHIN_BUCKET, compare
from cockpit.core.figures import lane_figures
from cockpit.core.model import LaneTotals
from cockpit.core.models import model_rows, with_models
from cockpit.core.snapshot import LaneSnapshot
from cockpit.runtime.card_receipts import compared_figures
from cockpit.runtime.report import json_receipt, markdown_receipt
from cockpit.sources.scrape import ScrapeSource
from tests.support.repo import VLLM_FIXTURES, require_fixture

FIXTURE = "metrics_two_models.txt"
AT = 1_795_992_250.0
"""The scrape's time: after every series' `_created`, so the one scrape counts since then."""
WINDOW = 3600.0
MODELS = ("tiny", "tiny-sql-lora")


def _text() -> str:
    return require_fixture(VLLM_FIXTURES / FIXTURE).read_text(encoding="utf-8")


def _scraped() -> LaneTotals:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(_text(), AT)
    return source.totals("lane", "", WINDOW, AT)


def _sums(name: str) -> dict[str, float]:
    """The fixture's own counts of `name` per model, read with a regex, not the parser."""
    found: dict[str, float] = defaultdict(float)
    pattern = re.compile(rf'^{re.escape(name)}\{{[^}}]*model_name="([^"]+)"[^}}]*\}} (\S+)$')
    for line in _text().splitlines():
        if match := pattern.match(line):
            found[match[1]] += float(match[2])
    return dict(found)


def test_two_models_read_by_direct_scrape_add_up_to_the_lane() -> None:
    totals = _scraped()
    rows = {row.model: row.figures for row in model_rows(totals)}
    assert tuple(rows) == MODELS
    lane = lane_figures(totals).figures
    requests = _sums("vllm:request_success_total")
    prompt, generated = _sums("vllm:prompt_tokens_total"), _sums("vllm:generation_tokens_total")
    hits, queries = _sums("vllm:prefix_cache_hits_total"), _sums("vllm:prefix_cache_queries_total")
    covered = totals.covered_s or WINDOW  # since the engine's start (its `_created`)
    for model, figures in rows.items():
        assert figures["requests_per_s"].value == pytest.approx(requests[model] / covered)
        assert figures["prompt_tok_s"].value == pytest.approx(prompt[model] / covered)
        assert figures["generation_tok_s"].value == pytest.approx(generated[model] / covered)
        assert figures["prefix_cache_hit_rate"].value == pytest.approx(hits[model] / queries[model])
        share = (prompt[model] + generated[model]) / (
            sum(prompt.values()) + sum(generated.values())
        )
        assert figures["token_share"].value == pytest.approx(share)
        assert figures["ttft_p95"].value is not None
    for key in ("requests_per_s", "prompt_tok_s", "generation_tok_s"):
        assert sum(rows[m][key].value or 0 for m in MODELS) == pytest.approx(lane[key].value)
    weighted = sum((rows[m]["prefix_cache_hit_rate"].value or 0) * queries[m] for m in MODELS)
    lane_rate = lane["prefix_cache_hit_rate"].value
    assert weighted / sum(queries.values()) == pytest.approx(lane_rate)


def test_the_lora_adapters_are_the_latest_label_set_with_names_kept_as_data() -> None:
    lora = _scraped().lora
    assert lora is not None
    assert lora.stated_at == 1_795_992_241.0  # the later of the two label sets
    assert lora.running == ("tiny-sql-lora", "\x1b]0;owned\x07evil\x1b[2J")
    assert lora.waiting == ("[bold red]markup[/]", "\u202eesrever")
    assert lora.max_lora == 2.0


def test_the_model_filter_reads_one_row() -> None:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(_text(), AT)
    totals = source.totals("lane", '{model_name="tiny-sql-lora"}', WINDOW, AT)
    (row,) = model_rows(totals)
    assert row.model == "tiny-sql-lora" and row.figures["token_share"].value == 1.0


def test_an_engine_without_a_model_label_says_why() -> None:
    totals = with_models(LaneTotals("lane", "llamacpp", WINDOW, AT), {}, {}, None)
    assert model_rows(totals) == ()
    assert totals.missing["models"].startswith("llama.cpp labels no series by model")
    assert "llama.cpp" in totals.missing["lora"]


def _snapshot(totals: LaneTotals) -> LaneSnapshot:
    return LaneSnapshot("lane", "1h", totals, lane_figures(totals), None, None)


def test_receipts_carry_the_table_and_show_hostile_names_as_symbols() -> None:
    snapshot = _snapshot(_scraped())
    markdown = markdown_receipt(snapshot, None)
    assert "### Models (1h" in markdown
    assert "| tiny-sql-lora | " in markdown
    assert "\x1b" not in markdown and "\x07" not in markdown and "\u202e" not in markdown
    assert "␛]0;owned␇evil␛[2J" in markdown and "<U+202E>esrever" in markdown
    data = json.loads(json.dumps(json_receipt(snapshot, None)))
    rows = {row["model"]: row["figures"] for row in data["lane"]["models"]}
    assert set(rows) == set(MODELS)
    assert data["lane"]["lora"]["waiting"] == ["[bold red]markup[/]", "\u202eesrever"]


def test_card_compare_sets_each_model_s_figures_side_by_side() -> None:
    a = {"lane": json_receipt(_snapshot(_scraped()), None)["lane"]}
    figures = compared_figures(a)
    assert figures["requests_per_s@tiny"]["label"] == "Requests/s (window mean) (tiny)"
    shifted = json.loads(json.dumps(a))
    p95 = shifted["lane"]["models"][1]["figures"]["ttft_p95"]
    p95["value"] += 0.01  # inside the same TTFT bucket
    rows = {
        row.key: row for row in compare(figures, compared_figures(shifted), {"ttft": [0.5, 1.0]})
    }
    assert rows["ttft_p95@tiny-sql-lora"].verdict == WITHIN_BUCKET
    assert rows["requests_per_s@tiny"].verdict == "same"
    assert rows["ttft_p95"].verdict == WITHIN_BUCKET  # the lane's own, unchanged, beside them

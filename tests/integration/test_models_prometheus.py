"""Two models on one lane: the per-model table against a real Prometheus and a direct scrape.

The series are shaped as vLLM's `PrometheusStatLogger` (vllm/v1/metrics/loggers.py) exposes
them when one engine serves a base model and a LoRA adapter under `--served-model-name`
(`model_name` and `engine` labels on every series; `vllm:lora_requests_info` with neither):
counters named `…_total`, the TTFT histogram's `_bucket{le}`, `_sum`, `_count`. Each model's
rows must add up to the lane's own figures (requests and tokens as sums, the hit rate as the
token-weighted combination, hits over queries), and each row must be Prometheus's own answer
to `sum by (model_name)` of the same series.

Samples sit every 15 s with one at each window edge, so `increase()` extrapolates nothing and
a direct scrape (no extrapolation) reads the same numbers.
"""

from __future__ import annotations

import math
import random

import pytest

from cockpit.core.catalogue import LANE_TOKENS
from cockpit.core.figures import lane_figures
from cockpit.core.model import MODEL_KEYS, LaneTotals
from cockpit.core.models import model_rows
from cockpit.sources.prometheus import PrometheusSource
from cockpit.sources.scrape import ScrapeSource
from tests.support.promharness import OpenMetricsWriter, PromServer, instant, remote_write

pytestmark = pytest.mark.prometheus

STEP = 15
END = 1_790_000_000 - (1_790_000_000 % 3600)
START = END - 2 * 3600
WINDOW = 3600
JOB = "models-lane"
MODELS = ("llama-base", "llama-sql-lora")
TTFT = "vllm:time_to_first_token_seconds"
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
"""vLLM's default TTFT buckets (vllm/v1/metrics/buckets.py)."""
LORA_TIMES = (END - 1800.0, END - 60.0)
"""When the engine stated each adapter set: the later one is the one now."""

Labels = tuple[tuple[str, str], ...]
Series = dict[tuple[str, Labels], dict[float, float]]


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


def build() -> Series:
    """Both models' counters and TTFT histogram at every step from START to END; each model
    its own traffic (the adapter's prompts longer, its cache hits rarer)."""
    rng, series, counts = random.Random(4), Series(), dict[tuple[str, Labels], float]()

    def count(name: str, labels: dict[str, str], amount: float, t: float) -> None:
        key = (name, tuple(sorted(labels.items())))
        counts[key] = counts.get(key, 0.0) + amount
        series.setdefault(key, {})[t] = counts[key]

    for t in map(float, range(START, END + 1, STEP)):
        for k, model in enumerate(MODELS):
            labels = {"engine": "0", "model_name": model}
            requests = rng.randint(0, 4 + 3 * k)
            prompt = sum(rng.randint(200, 900 * (k + 1)) for _ in range(requests))
            queries = prompt
            hits = round(queries * rng.uniform(0.5, 0.9 - 0.3 * k))
            count("vllm:request_success_total", {**labels, "finished_reason": "stop"}, requests, t)
            count("vllm:prompt_tokens_total", labels, prompt, t)
            count("vllm:generation_tokens_total", labels, requests * rng.randint(20, 60), t)
            count("vllm:prefix_cache_queries_total", labels, queries, t)
            count("vllm:prefix_cache_hits_total", labels, hits, t)
            seen = [rng.lognormvariate(-1.0 + k, 1.0) for _ in range(requests)]
            for bound in (*TTFT_BOUNDS, math.inf):
                within = sum(1 for x in seen if x <= bound)
                count(f"{TTFT}_bucket", {**labels, "le": _le(bound)}, within, t)
            count(f"{TTFT}_count", labels, len(seen), t)
            count(f"{TTFT}_sum", labels, sum(seen), t)
            running = ("vllm:num_requests_running", tuple(sorted(labels.items())))
            series.setdefault(running, {})[t] = float(rng.randint(0, 3))
    return series


SERIES = build()
LORA_SERIES: tuple[tuple[dict[str, str], float], ...] = (
    ({"max_lora": "4", "running_lora_adapters": "old-adapter", "waiting_lora_adapters": ""},
     LORA_TIMES[0]),
    ({"max_lora": "4", "running_lora_adapters": "llama-sql-lora,chat-lora",
      "waiting_lora_adapters": "summarise-lora"}, LORA_TIMES[1]),
)  # fmt: skip
"""Two label sets of `vllm:lora_requests_info`, as the engine keeps both exposed."""


def _lora_samples(at: float) -> list[tuple[dict[str, str], float]]:
    return [(labels, stated) for labels, stated in LORA_SERIES if stated <= at]


@pytest.fixture(scope="module")
def prometheus(prometheus: PromServer) -> PromServer:
    writer = OpenMetricsWriter()
    for (name, labels), samples in SERIES.items():
        family = name.removesuffix("_total").rsplit("_bucket", 1)[0]
        writer.add(family, "unknown", name, {**dict(labels), "job": JOB}, list(samples.items()))
    for labels, stated in LORA_SERIES:
        times = [float(t) for t in range(START, END + 1, STEP) if t >= stated]
        writer.add("vllm:lora_requests_info", "gauge", "vllm:lora_requests_info",
                   {**labels, "job": JOB}, [(t, stated) for t in times])  # fmt: skip
    remote_write(prometheus, writer)
    return prometheus


def promql(server: PromServer, query: str) -> dict[str, float]:
    """Prometheus's own answer, by `model_name` ('' for a sample without it)."""
    return {labels.get("model_name", ""): value for labels, value in instant(server, query, END)}


async def read_prometheus(server: PromServer) -> LaneTotals:
    source = PrometheusSource(server.url)
    try:
        totals = await source.read_lane(JOB, None, f'{{job="{JOB}"}}', WINDOW, END)
        assert source.requests <= 3  # names, the one query, the trend: no query per model
        return totals
    finally:
        await source.aclose()


def _labels_text(labels: Labels | dict[str, str]) -> str:
    pairs = labels.items() if isinstance(labels, dict) else labels
    return ",".join(f'{k}="{v}"' for k, v in pairs)


def read_scrape() -> LaneTotals:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for at in map(float, range(END - WINDOW - STEP, END + 1, STEP)):
        lines = [
            f"{name}{{{_labels_text(labels)}}} {samples[at]!r}"
            for (name, labels), samples in SERIES.items()
        ]
        lines += [
            f"vllm:lora_requests_info{{{_labels_text(labels)}}} {stated!r}"
            for labels, stated in _lora_samples(at)
        ]
        source.ingest("\n".join(lines) + "\n", at)
    return source.totals(JOB, "", WINDOW, END)


def _increase(name: str) -> str:
    return f'sum by (model_name) (increase({name}{{job="{JOB}"}}[1h]))'


async def test_each_row_is_prometheus_s_sum_by_model_and_the_rows_add_up(
    prometheus: PromServer,
) -> None:
    requests = promql(prometheus, _increase("vllm:request_success_total"))
    prompt = promql(prometheus, _increase("vllm:prompt_tokens_total"))
    generated = promql(prometheus, _increase("vllm:generation_tokens_total"))
    hits = promql(prometheus, _increase("vllm:prefix_cache_hits_total"))
    queries = promql(prometheus, _increase("vllm:prefix_cache_queries_total"))
    buckets = f'sum by (le, model_name) (increase({TTFT}_bucket{{job="{JOB}"}}[1h]))'
    p95 = promql(prometheus, f"histogram_quantile(0.95, {buckets})")
    assert set(requests) == set(MODELS)
    lane_tokens = sum(prompt.values()) + sum(generated.values())
    for totals in (await read_prometheus(prometheus), read_scrape()):
        rows = {row.model: row.figures for row in model_rows(totals)}
        assert set(rows) == set(MODELS), totals.server
        lane = lane_figures(totals).figures
        for model, figures in rows.items():
            value = {key: figure.value for key, figure in figures.items()}.__getitem__
            assert value("requests_per_s") == pytest.approx(requests[model] / WINDOW, rel=1e-9)
            assert value("prompt_tok_s") == pytest.approx(prompt[model] / WINDOW, rel=1e-9)
            assert value("generation_tok_s") == pytest.approx(generated[model] / WINDOW, rel=1e-9)
            assert value("prefix_cache_hit_rate") == pytest.approx(hits[model] / queries[model])
            assert value("ttft_p95") == pytest.approx(p95[model], rel=1e-9), totals.server
            own = prompt[model] + generated[model]
            assert value("token_share") == pytest.approx(own / lane_tokens, rel=1e-9)
        # The rows add up to the lane: sums of requests and tokens, shares to one, and the
        # hit rate as the rows' rates weighted by their queried tokens.
        for key in ("requests_per_s", "prompt_tok_s", "generation_tok_s"):
            total = sum(rows[m][key].value or 0.0 for m in MODELS)
            assert total == pytest.approx(lane[key].value, rel=1e-9), key
        assert sum(rows[m]["token_share"].value or 0.0 for m in MODELS) == pytest.approx(1.0)
        weighted = sum((rows[m]["prefix_cache_hit_rate"].value or 0.0) * queries[m] for m in MODELS)
        lane_rate = lane["prefix_cache_hit_rate"].value
        assert weighted / sum(queries.values()) == pytest.approx(lane_rate, rel=1e-9)
        assert rows[MODELS[0]]["prefix_cache_hit_rate"].value != pytest.approx(lane_rate)


async def test_the_lora_adapters_are_the_latest_stated_set(prometheus: PromServer) -> None:
    for totals in (await read_prometheus(prometheus), read_scrape()):
        lora = totals.lora
        assert lora is not None, totals.server
        assert lora.running == ("llama-sql-lora", "chat-lora")
        assert lora.waiting == ("summarise-lora",)
        assert lora.max_lora == 4.0
        assert lora.stated_at == LORA_TIMES[1]


async def test_the_model_filter_leaves_one_row(prometheus: PromServer) -> None:
    source = PrometheusSource(prometheus.url)
    try:
        selector = f'{{job="{JOB}",model_name="{MODELS[1]}"}}'
        totals = await source.read_lane(JOB, None, selector, WINDOW, END)
    finally:
        await source.aclose()
    rows = model_rows(totals)
    assert [row.model for row in rows] == [MODELS[1]]
    assert rows[0].figures["token_share"].value == pytest.approx(1.0)
    assert totals.lora is not None  # the adapters have no model label: still the lane's


async def test_each_model_s_queries_answer_for_that_model_alone(prometheus: PromServer) -> None:
    """The queries the details show for a model, run as they are, give that model's sample
    only, with the numbers of its row; on a direct scrape they name its series."""
    totals = await read_prometheus(prometheus)
    rows = {row.model: row.figures for row in model_rows(totals)}
    raw = {"requests": "vllm:request_success_total", "prompt_tokens": "vllm:prompt_tokens_total",
           "generation_tokens": "vllm:generation_tokens_total"}  # fmt: skip
    for model, figures in rows.items():
        own = totals.models[model].queries
        for key, name in raw.items():
            grouped = promql(prometheus, _increase(name))
            assert promql(prometheus, own[key]) == pytest.approx({model: grouped[model]}), key
        assert promql(prometheus, figures["requests_per_s"].query) == pytest.approx(
            {model: (figures["requests_per_s"].value or 0) * WINDOW}
        )
        p95 = promql(prometheus, figures["ttft_p95"].query)
        assert p95 == pytest.approx({model: figures["ttft_p95"].value})
        lane = promql(prometheus, own[LANE_TOKENS])  # the whole lane's tokens, no model
        assert list(lane) == [""]
        assert lane[""] * (figures["token_share"].value or 0) == pytest.approx(
            promql(prometheus, own["prompt_tokens"])[model]
            + promql(prometheus, own["generation_tokens"])[model]
        )
    scraped = read_scrape()
    for model in MODELS:
        said = scraped.models[model].queries
        assert said["requests"] == (
            f'{scraped.queries["requests"]}, the series with model_name="{model}"'
        )
        assert all(f'model_name="{model}"' in said[key] for key in MODEL_KEYS)

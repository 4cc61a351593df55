"""The models a lane serves (a `LaneTotals` per model, each row the catalogue's figures over
it) and its LoRA adapters. Pure: no I/O."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from cockpit import engines
from cockpit.core import gpu_series, promql
from cockpit.core.catalogue import LANE_TOKENS, SCRAPED, evaluate
from cockpit.core.model import (
    MODEL_KEYS,
    Bucket,
    Figure,
    LaneTotals,
    LoraAdapters,
    Missing,
    frozen_map,
)
from cockpit.engines.specs import Unavailable

MODEL_FIGURES: tuple[str, ...] = (
    "requests_per_s", "prompt_tok_s", "generation_tok_s", "prefix_cache_hit_rate", "ttft_p95",
    "token_share",
)  # fmt: skip
"""The per-model table's columns, catalogue figures."""
MODEL_TITLES: Mapping[str, str] = frozen_map(
    dict(zip(MODEL_FIGURES, ("req/s", "prompt/s", "gen/s", "hit rate", "TTFT p95", "share"),
             strict=True))
)  # fmt: skip
"""Each column's short heading (the figure's label is in the details and receipts)."""
NO_MODELS_SEEN = "no series carries a model label in the window"
NO_LORA_SEEN = "no LoRA adapter series (vLLM states them only with --enable-lora)"

Read = float | tuple[Bucket, ...] | Missing
"""A raw key's read for one model: a number, buckets, or why none."""
_QUOTED_OR_SELECTOR = re.compile(r'"(?:[^"\\]|\\.)*"|\{(\s*\})?')
"""A PromQL string (left as it is) or the opening of a selector (empty: with its close)."""


@dataclass(frozen=True, slots=True)
class ModelRow:
    """One model of the lane: its name (outside text) and its figures, by key."""

    model: str
    figures: Mapping[str, Figure]


def answer_reads(
    found: Mapping[str, list[dict[str, Any]]], dialect: str
) -> dict[str, dict[str, Read]]:
    """Model -> raw key -> read, from a lane's answer split by `fig` (`promql.MODEL` keys)."""
    label = engines.engine(dialect).model_label
    if not isinstance(label, str):
        return {}
    by_model: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for key in MODEL_KEYS:
        for sample in found.get(promql.MODEL + key, ()):
            name = str(sample.get("metric", {}).get(label, ""))
            by_model.setdefault(name, {}).setdefault(key, []).append(sample)
    reads: dict[str, dict[str, Read]] = {}
    for name, samples in by_model.items():
        got = {key: promql.read_key(samples.get(key), key) for key in MODEL_KEYS}
        reads[name] = {key: read for key, read in got.items() if not isinstance(read, dict)}
    return reads


def with_models(
    lane: LaneTotals,
    reads: Mapping[str, Mapping[str, Read]],
    queries: Mapping[str, str],
    lora: LoraAdapters | None,
) -> LaneTotals:
    """The lane's totals with a `LaneTotals` per model (`reads`: model -> raw key -> read;
    `queries`: raw key -> where the models' were read, each model's said with its matcher) and
    its LoRA adapters; why not, in `missing`."""
    tokens = [lane.values.get(key) for key in ("prompt_tokens", "generation_tokens")]
    lane_tokens = None if None in tokens else sum(t for t in tokens if t is not None)
    engine = engines.engine(lane.dialect)
    label, adapters = engine.model_label, engine.lora
    models = {
        name: _model_totals(lane, read, _model_queries(lane, queries, label, name), lane_tokens)
        for name, read in reads.items()
    }
    missing = dict(lane.missing)
    if not models:
        missing["models"] = (isinstance(label, Unavailable) and label.reason) or NO_MODELS_SEEN
    if lora is None:
        missing["lora"] = (isinstance(adapters, Unavailable) and adapters.reason) or NO_LORA_SEEN
    return replace(lane, models=frozen_map(models), lora=lora, missing=frozen_map(missing))


def _model_query(query: str, label: str, name: str) -> str:
    """Where one model's raw key was read: the lane's `sum by` query with the model's matcher
    in each selector (it answers that model's sample alone), or a scrape's series with it."""
    matcher = f'{label}="{promql.escape_label_value(name)}"'
    if query.startswith(SCRAPED):
        return f"{query}, the series with {matcher}"

    def inserted(found: re.Match[str]) -> str:
        if found[0].startswith('"'):
            return found[0]
        return f"{{{matcher}}}" if found[1] else f"{{{matcher},"

    return _QUOTED_OR_SELECTOR.sub(inserted, query)


def _model_queries(
    lane: LaneTotals, queries: Mapping[str, str], label: str | Unavailable, name: str
) -> dict[str, str]:
    """A model's raw key -> its query; its lane's tokens -> the lane's own queries, added."""
    own = {
        key: _model_query(query, label, name) if isinstance(label, str) else query
        for key, query in queries.items()
    }
    tokens = [lane.queries.get(key) for key in ("prompt_tokens", "generation_tokens")]
    if all(tokens):
        own[LANE_TOKENS] = " + ".join(f"({query})" for query in tokens if query)
    return own


def _model_totals(
    lane: LaneTotals, reads: Mapping[str, Read], queries: Mapping[str, str], tokens: float | None
) -> LaneTotals:
    values = {key: read for key, read in reads.items() if isinstance(read, float)}
    missing = {key: read.reason for key, read in reads.items() if isinstance(read, Missing)}
    missing.update((key, promql.NO_SAMPLES) for key in MODEL_KEYS if key not in reads)
    if tokens is None:
        missing[LANE_TOKENS] = lane.missing.get("prompt_tokens", promql.NO_SAMPLES)
    else:
        values[LANE_TOKENS] = tokens
    return LaneTotals(
        lane=lane.lane,
        dialect=lane.dialect,
        window_s=lane.window_s,
        end=lane.end,
        values=frozen_map(values),
        missing=frozen_map(missing),
        histograms=frozen_map({k: r for k, r in reads.items() if isinstance(r, tuple)}),
        queries=frozen_map(queries),
        covered_s=lane.covered_s,
        server=lane.server,
        selector=lane.selector,
    )


def model_rows(totals: LaneTotals) -> tuple[ModelRow, ...]:
    """A row per model of the lane, by name, each `MODEL_FIGURES` the catalogue's evaluator
    over that model's totals."""
    return tuple(
        ModelRow(name, frozen_map(evaluate(model, MODEL_FIGURES)))
        for name, model in sorted(totals.models.items())
    )


def lora_adapters(series: Iterable[tuple[Mapping[str, str], float]]) -> LoraAdapters | None:
    """The adapters of the LoRA info series with the latest value (the engine keeps each label
    set it stated; the newest is now), None without one."""
    latest = max(series, key=lambda pair: pair[1], default=None)
    if latest is None:
        return None
    labels, stated = latest
    return LoraAdapters(
        _names(labels.get("running_lora_adapters", "")),
        _names(labels.get("waiting_lora_adapters", "")),
        _count(labels.get("max_lora")),
        stated,
    )


def lora_from_answer(samples: list[dict[str, Any]] | None) -> LoraAdapters | None:
    """`lora_adapters` of a `promql.LORA` answer."""
    return lora_adapters(gpu_series.values_from_samples({"": samples or []}).get("", []))


def _names(joined: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in joined.split(",") if name.strip())


def _count(text: str | None) -> float | None:
    try:
        number = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return number if math.isfinite(number) else None

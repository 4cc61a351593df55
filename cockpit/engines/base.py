"""What an engine adapter is: one object per engine family, its metrics stated as specs, and
how fast a stream decodes from its inter-token (ITL) histogram: vLLM observes one ITL per request
per engine step (however many tokens it carried), SGLang one per token.

Pure: no I/O. Each module of this package beside this one states an engine (`vllm`, `sglang`,
...); `cockpit.engines` finds them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from functools import cached_property

from cockpit.core.model import (
    LANE_COUNTERS,
    LANE_GAUGES,
    LANE_HISTOGRAMS,
    LANE_LAST_MINUTE,
    LANE_NOW,
    divide,
    frozen_map,
)
from cockpit.engines.specs import (
    Capacity,
    Combined,
    Counter,
    Either,
    Gauge,
    LastMinute,
    Now,
    Spec,
    Unavailable,
    escape_name,
    escaped_spec,
)

NO_MODEL_LABEL = Unavailable("the engine labels no series by model")
NO_LORA = Unavailable("the engine states no LoRA adapters")
RAW_KEYS = frozenset((*LANE_COUNTERS, *LANE_GAUGES, *LANE_HISTOGRAMS))

Values = Callable[[str], float | None]
"""Raw lane key -> its window value (None when absent), e.g. `LaneTotals.values.get`."""

NO_SPECULATION = "no speculative decoding: 1 token per step"
_ITL = ("itl_sum", "itl_count")


@dataclass(frozen=True, slots=True)
class Derived:
    """A value worked out from raw keys; when it is None, their missing reasons say why."""

    value: float | None
    inputs: tuple[str, ...]
    empty: str = "no data in window"
    """Why it is None when every input is there (a zero denominator)."""
    note: str = ""
    """How it was found, shown beside a value."""


@dataclass(frozen=True, slots=True)
class DecodePace:
    """A stream's decode over the window: tokens per engine step, the step, tokens per second."""

    tokens_per_step: Derived
    step_s: Derived
    stream_tok_s: Derived


def _itl_per_step(v: Values) -> DecodePace:
    """vLLM. Under speculative decoding `1 + accepted/drafts` counts only the steps that drafted
    (an n-gram proposer drafts only on a match), so tokens per step is measured: tokens after
    each request's first (generated - TTFT count) over decode steps (ITL count)."""
    no_steps = "no decode steps in window"
    step = Derived(divide(v("itl_sum"), v("itl_count")), _ITL, no_steps)
    if v("spec_drafts") is None:
        one = None if step.value is None else 1.0
        return DecodePace(
            Derived(one, _ITL, no_steps, NO_SPECULATION),
            step,
            Derived(divide(one, step.value), _ITL, no_steps),
        )
    first = v("ttft_count")
    generated = v("generation_tokens")
    decoded = None if generated is None or first is None else generated - first
    if decoded is not None and decoded <= 0:  # window extrapolation can dip below zero
        decoded = None
    counts = ("generation_tokens", "ttft_count")
    return DecodePace(
        Derived(
            divide(decoded, v("itl_count")), (*counts, "itl_count"), no_steps,
            "tokens after each first token / decode steps",
        ),
        step,
        Derived(divide(decoded, v("itl_sum")), (*counts, "itl_sum"), no_steps),
    )  # fmt: skip


def _itl_per_token(v: Values) -> DecodePace:
    """SGLang: the ITL mean is time per token; a step is that times tokens per step, from the
    verify calls (each a decode step under speculation): 1 + accepted / verify calls. No verify
    call while tokens were decoded (a counter that is there at 0) is no speculation."""
    no_tokens = "no decode tokens in window"
    per_token = divide(v("itl_sum"), v("itl_count"))
    stream = Derived(divide(v("itl_count"), v("itl_sum")), _ITL, no_tokens)
    if not v("spec_drafts"):
        tokens = Derived(None if per_token is None else 1.0, _ITL, no_tokens, NO_SPECULATION)
    else:
        accepted = divide(v("spec_accepted"), v("spec_drafts"))
        tokens = Derived(
            None if accepted is None else 1.0 + accepted,
            ("spec_accepted", "spec_drafts"),
            "no verify steps in window",
        )
    step = None if per_token is None or tokens.value is None else per_token * tokens.value
    return DecodePace(tokens, Derived(step, (*_ITL, *tokens.inputs), no_tokens), stream)


@dataclass(frozen=True, slots=True)
class PaceReading:
    """How an engine's ITL histogram counts, and the raw keys its step reads."""

    read: Callable[[Values], DecodePace]
    step_inputs: tuple[str, ...]


PER_STEP = PaceReading(_itl_per_step, _ITL)
PER_TOKEN = PaceReading(_itl_per_token, (*_ITL, "spec_accepted", "spec_drafts"))


class DialectError(ValueError):
    """An unknown engine, or metric names that belong to no known engine."""


@dataclass(frozen=True, eq=False)
class Engine:
    """An engine family: how to tell its lanes, and what each raw lane key reads there."""

    name: str
    """Its id: the config's `engine:`, the dialect a lane's totals and receipts carry."""
    prefix: str
    """How its metric names start (`vllm:`)."""
    priority: int
    """Of the engines whose names a lane exposes, the one of highest priority is detected;
    engines are listed lowest first."""
    specs: Mapping[str, Spec]
    """Every raw lane key -> its spec (`lane_table`)."""
    presence: str
    """A gauge every lane of it exposes: whether the lane is live, when its data starts."""
    capacity: Capacity
    pace: PaceReading
    notes: Mapping[str, str] = field(default_factory=frozen_map)
    """Figure key -> how this engine's value was found, said beside the value."""
    requires: Set[str] = frozenset()
    """Detected only when one of these names is exposed too..."""
    lacks: Set[str] = frozenset()
    """...and none of these."""
    model_label: str | Unavailable = NO_MODEL_LABEL
    """The label its series name their served model by (the per-model table's rows)."""
    lora: str | Unavailable = NO_LORA
    """Its LoRA info gauge: the adapters running and waiting as comma-joined labels, the
    value the time they were stated."""

    def detects(self, names: Set[str]) -> bool:
        """Whether these metric names (colons kept) are this engine's."""
        if not any(name.startswith(self.prefix) for name in names):
            return False
        return (not self.requires or bool(names & self.requires)) and not names & self.lacks

    def lane_specs(self, escaped: bool = False) -> Mapping[str, Spec]:
        """The specs; `escaped`: with names as an OpenMetrics scrape stored them (`:` as `_`)."""
        return self._escaped if escaped else self.specs

    @cached_property
    def _escaped(self) -> Mapping[str, Spec]:
        return frozen_map({key: escaped_spec(spec) for key, spec in self.specs.items()})

    def presence_metric(self, escaped: bool = False) -> str:
        return escape_name(self.presence) if escaped else self.presence

    def capacity_spec(self, escaped: bool = False) -> Capacity:
        """`capacity`, with its name escaped as `lane_specs` has them."""
        return escaped_spec(self.capacity) if escaped else self.capacity

    def lora_metric(self, escaped: bool = False) -> str | None:
        """`lora`'s name (as `lane_specs` has them), None where the engine has none."""
        if isinstance(self.lora, Unavailable):
            return None
        return escape_name(self.lora) if escaped else self.lora


def lane_table(specs: Mapping[str, Spec]) -> Mapping[str, Spec]:
    """An engine's specs for the window keys, with the keys read fresh at every refresh added:
    the gauges now, the throughput counters over the last minute. Every raw key must be there."""
    table = dict(specs)
    for key in LANE_NOW:
        gauge = table[key.removesuffix("_now")]
        table[key] = Now(gauge) if isinstance(gauge, Gauge | Either) else gauge
    for key in LANE_LAST_MINUTE:
        counter = table[key.removesuffix("_1m")]
        table[key] = LastMinute(counter) if isinstance(counter, Counter | Combined) else counter
    if table.keys() != RAW_KEYS:
        missing, extra = sorted(RAW_KEYS - table.keys()), sorted(table.keys() - RAW_KEYS)
        raise DialectError(f"an engine's specs lack {missing} or name unknown keys {extra}")
    return frozen_map(table)

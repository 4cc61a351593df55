"""What an engine adapter is: one object per engine family, its metrics stated as specs.

Pure: no I/O. Each module of this package beside this one states an engine (`vllm`, `sglang`,
...); `cockpit.engines` finds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field, replace
from functools import cached_property

from cockpit.core.model import (
    LANE_COUNTERS,
    LANE_GAUGES,
    LANE_HISTOGRAMS,
    LANE_LAST_MINUTE,
    LANE_NOW,
    frozen_map,
)
from cockpit.engines.pace import DecodePace, PaceReading, Values
from cockpit.engines.specs import (
    Capacity,
    Combined,
    Counter,
    Either,
    Gauge,
    Info,
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
        """The specs; `escaped`: with the names as stored after an OpenMetrics scrape turned
        `:` into `_`."""
        return self._escaped if escaped else self.specs

    @cached_property
    def _escaped(self) -> Mapping[str, Spec]:
        return frozen_map({key: escaped_spec(spec) for key, spec in self.specs.items()})

    def presence_metric(self, escaped: bool = False) -> str:
        return escape_name(self.presence) if escaped else self.presence

    def capacity_spec(self, escaped: bool = False) -> Capacity:
        """`capacity`, with its name escaped as `lane_specs` has them."""
        if escaped and isinstance(self.capacity, Gauge | Info):
            return replace(self.capacity, metric=escape_name(self.capacity.metric))
        return self.capacity

    def lora_metric(self, escaped: bool = False) -> str | None:
        """`lora`'s name (as `lane_specs` has them), None where the engine has none."""
        if isinstance(self.lora, Unavailable):
            return None
        return escape_name(self.lora) if escaped else self.lora

    def decode_pace(self, values: Values) -> DecodePace:
        """Tokens per step, the step and tok/s per stream, as its ITL histogram counts."""
        return self.pace.read(values)


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

"""Frozen values that travel from the sources through the figure catalogue to the panes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from cockpit.core.timeutil import clock

if TYPE_CHECKING:
    from cockpit.core.gpu import GpuTotals

FailureCause = Literal["", "source", "engine"]


@dataclass(frozen=True, slots=True)
class Freshness:
    """How current a source's figures are: `ok`, `stale since HH:MM:SS UTC`, `missing: why`."""

    state: Literal["ok", "stale", "missing"]
    since: float | None = None
    reason: str = ""
    cause: FailureCause = ""
    """`engine`: the source answers without the engine; `source`: no answer at all; "": it errs."""

    def describe(self) -> str:
        head: str = self.state
        if self.state == "stale" and self.since is not None:
            head += f" since {clock(self.since)} UTC"
        if not self.reason:
            return head
        return f"{head}, {self.reason}" if self.state == "ok" else f"{head}: {self.reason}"


FRESH = Freshness("ok")


@dataclass(frozen=True, slots=True)
class Missing:
    """A value a source could not give, and why (never shown as 0)."""

    reason: str


SECOND_SCRAPE = Missing("needs a second scrape")
"""A rate or mean of a scraped lane whose series carry no birth (`_created`): one scrape holds
no interval to divide by."""


class SourceFailure(Exception):
    """The failure every source raises: `str()` is one line for the user, free of secrets;
    the poller reads the fields to decide when to ask again."""

    def __init__(
        self,
        reason: str,
        retry_after: float | None = None,
        *,
        unreachable: bool = False,
        engine_absent: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after  # `Retry-After`
        # No answer at all (refused, TLS, an unopenable ledger): a cheap probe tells when it
        # is back; a slow or erring server gets the back-off instead.
        self.unreachable = unreachable
        # The source answers without the lane's engine: asked every refresh, no back-off.
        self.engine_absent = engine_absent


Unit = Literal[
    "count", "number", "tokens", "ratio", "share", "seconds", "tok/s", "flop/s", "bytes/s",
    "units", "bytes", "usd", "watts", "joules", "celsius",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Figure:
    """One number on screen or in a receipt; `value` None is missing, `reason` says why."""

    key: str
    label: str
    value: float | None
    unit: Unit
    reason: str = ""
    query: str = ""
    above: bool = False
    """`value` is a lower bound (a quantile past the largest finite bucket reads `> 60 s`)."""
    doubtful: bool = False
    """Read from data that needed mending (`reason` says how): no health rule fires on it."""
    below: float | None = None
    """An upper bound, all `value` is known to be (a quantile inside the first bucket)."""

    @property
    def missing(self) -> bool:
        return self.value is None


def make_figure(
    key: str,
    label: str,
    value: float | None,
    unit: Unit,
    why: str = "",
    query: str | None = "",
    note: str = "",
    above: bool = False,
    doubtful: bool = False,
    below: float | None = None,
) -> Figure:
    """A figure, missing with `why` when `value` is None or not finite; `note` beside a value."""
    if value is None:
        return Figure(key, label, None, unit, why, query or "")
    if not math.isfinite(value):
        return Figure(key, label, None, unit, f"not a finite number ({value})", query or "")
    return Figure(key, label, value, unit, note, query or "", above, doubtful, below)


K = TypeVar("K")
V = TypeVar("V")


def frozen_map(items: Mapping[K, V] | None = None) -> Mapping[K, V]:
    """A read-only copy, so snapshots can't be changed after they are made."""
    return MappingProxyType(dict(items or {}))


def divide(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator; None when either is missing or the denominator is zero."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


# --- the agent ledger -------------------------------------------------------------------

NANO_USD = 1_000_000_000
"""TokenCounts' costs are whole billionths of a dollar."""


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """Sums of the Hermes `sessions` counters over a set of sessions."""

    sessions: int = 0
    api_calls: int = 0
    input: int = 0
    """Uncached input only, as Hermes records it."""
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    """Includes reasoning."""
    reasoning: int = 0
    cost_actual: int = 0
    """USD billionths, of rows with an actual cost."""
    cost_estimated: int = 0
    """USD billionths, Hermes's estimate for the other rows (0 without a price)."""

    def __add__(self, other: TokenCounts) -> TokenCounts:
        return TokenCounts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def __sub__(self, other: TokenCounts) -> TokenCounts:
        return TokenCounts(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    @property
    def fresh_prefill(self) -> int:
        return self.input + self.cache_write

    @property
    def cost_usd(self) -> float:
        """The actual cost where recorded, else the estimate."""
        return (self.cost_actual + self.cost_estimated) / NANO_USD


@dataclass(frozen=True, slots=True)
class LedgerInfo:
    """One ledger file as it was read; `profile` is its Hermes profile (`default`)."""

    path: str
    profile: str
    schema_version: int | None
    journal_mode: str = ""
    also_named: tuple[str, ...] = ()
    """Other names of this same file (a symlink, its profile name): read once."""


@dataclass(frozen=True, slots=True)
class LedgerTotals:
    """What the ledger figures need, over sessions started in (end - window, end]."""

    window_s: float
    end: float
    total: TokenCounts
    by_source: Mapping[str, TokenCounts] = field(default_factory=frozen_map)
    by_model: Mapping[str, TokenCounts] = field(default_factory=frozen_map)
    """Main-loop usage per `provider/model` (the model alone without a provider)."""
    model_basis: Literal["session_model_usage", "sessions.model"] = "sessions.model"
    """`session_model_usage` is exact; `sessions.model` credits a session to its first model."""
    by_profile: Mapping[str, TokenCounts] = field(default_factory=frozen_map)
    by_ledger: Mapping[str, TokenCounts] = field(default_factory=frozen_map)
    """By ledger path."""
    side_calls: TokenCounts | None = None
    """Auxiliary calls (title generation, ...) found only in `session_model_usage`."""
    missing: Mapping[str, str] = field(default_factory=frozen_map)
    """What an older schema lacks, e.g. `{"reasoning": "schema 11 has no ..."}`."""
    ledgers: tuple[LedgerInfo, ...] = ()
    queries: tuple[str, ...] = ()
    """The SQL behind these totals."""
    first_started_at: float | None = None
    skipped: Mapping[str, int] = field(default_factory=frozen_map)
    """Unreadable rows left out of the sums: `"sessions: <why>"` -> rows."""
    narrowed_to: tuple[str, ...] | None = None
    """The models `ledger_figures.narrow` kept; None: the whole ledger."""


# --- the lane ---------------------------------------------------------------------------

Bucket = tuple[float, float]
"""(upper bound `le`, cumulative count); the last bound is `inf`."""

LANE_NOW: tuple[str, ...] = ("running_now", "waiting_now", "kv_usage_now", "waiting_by_reason_now")
"""Gauges read at the evaluation time (a direct scrape: its last scrape), not over W."""
LANE_LAST_MINUTE: tuple[str, ...] = ("requests_1m", "prompt_tokens_1m", "generation_tokens_1m")
"""Counters' increase over the minute before the evaluation time, not over W."""
LAST_MINUTE_S = 60.0
_SUM_COUNT = "kv_computed prompt_len gen_len queue prefill decode ttft itl tpot e2e step_tokens"

KV_TRANSFER_COUNTERS: tuple[str, ...] = (
    "offload_load_bytes", "offload_load_time", "offload_store_bytes", "offload_store_time",
    "offload_alloc_failures", "offload_stores_skipped",
    "nixl_xfer_sum", "nixl_xfer_count", "nixl_bytes_sum",
    "nixl_failed_transfers", "nixl_failed_notifications", "nixl_expired_reqs",
)  # fmt: skip
"""What a KV connector counts: offload to and from the host tier, transfers between engines."""

LANE_COUNTERS: tuple[str, ...] = (
    "requests", "prompt_tokens", "generation_tokens",
    "prefix_cache_queries", "prefix_cache_hits", "prompt_computed",
    *(f"{histogram}_{part}" for histogram in _SUM_COUNT.split() for part in ("sum", "count")),
    "spec_drafts", "spec_draft_tokens", "spec_accepted", "spec_accepted_by_pos",
    "preemptions", "flops", "read_bytes", "write_bytes",
    "finished", "admission_rejections", "cached_by_source", "prompt_by_source",
    "external_cache_queries", "external_cache_hits",
    *KV_TRANSFER_COUNTERS,
    *LANE_LAST_MINUTE,
)  # fmt: skip
"""Raw lane keys that are `sum(increase(...[W]))` of a counter or a histogram's _sum/_count."""

LANE_GAUGES: tuple[str, ...] = (
    *("running", "waiting", "waiting_by_reason", "kv_usage", "sleep_state", "spec_draft_len"),
    *("offload_cpu_usage", *LANE_NOW, "host_kv_used"),
)
"""Raw lane keys that are gauges averaged over W (`host_kv_used`: the host KV tier's tokens)."""

LANE_GROUPED: tuple[str, ...] = (
    "finished", "admission_rejections", "cached_by_source", "prompt_by_source",
    "spec_accepted_by_pos", "waiting_by_reason", "sleep_state", "waiting_by_reason_now",
)  # fmt: skip
"""Keys of the above that keep one label: label value -> value (`LaneTotals.groups`)."""

LANE_HISTOGRAMS: tuple[str, ...] = ("prompt_len", "gen_len", "e2e", "ttft", "itl", "tpot", "queue")
"""Bucket vectors (cumulative increase per `le`): the length distributions, the latencies."""

MODEL_KEYS: tuple[str, ...] = (
    "requests", "prompt_tokens", "generation_tokens", "prefix_cache_queries",
    "prefix_cache_hits", "ttft",
)  # fmt: skip
"""The raw keys read once per model the lane serves (`LaneTotals.models`)."""


@dataclass(frozen=True, slots=True)
class LoraAdapters:
    """The LoRA adapters an engine stated last (names are outside text)."""

    running: tuple[str, ...]
    waiting: tuple[str, ...]
    max_lora: float | None
    stated_at: float
    """When the engine stated them (the gauge's value, epoch seconds)."""


@dataclass(frozen=True, slots=True)
class Trend:
    """A lane's figures at a fixed step, oldest point first: point `i` covers (t - step, t] for
    t = `end - (n - 1 - i) * step`; None is a gap, never a zero."""

    step_s: float
    end: float
    """The time of the last point (a multiple of `step_s`)."""
    series: Mapping[str, tuple[float | None, ...]] = field(default_factory=frozen_map)
    """Trend key (`catalogue.TREND_KEYS`) -> points, all of one length."""
    rates_over_s: float | None = None
    """The longer range counters are read over when a step holds too few scrapes."""

    def times(self) -> tuple[float, ...]:
        """Each point's time, oldest first."""
        count = max((len(points) for points in self.series.values()), default=0)
        return tuple(self.end - (count - 1 - i) * self.step_s for i in range(count))


@dataclass(frozen=True, slots=True)
class LaneTotals:
    """One lane's raw window totals, as one refresh read them."""

    lane: str
    dialect: str
    window_s: float
    end: float
    values: Mapping[str, float] = field(default_factory=frozen_map)
    """Raw key (LANE_COUNTERS, LANE_GAUGES) -> value."""
    missing: Mapping[str, str] = field(default_factory=frozen_map)
    """Raw key -> why it is absent."""
    histograms: Mapping[str, tuple[Bucket, ...]] = field(default_factory=frozen_map)
    bucket_notes: Mapping[str, str] = field(default_factory=frozen_map)
    """Histogram key -> what was wrong with its buckets and how they were read."""
    groups: Mapping[str, Mapping[str, float]] = field(default_factory=frozen_map)
    """Raw key (LANE_GROUPED) -> label value -> value, e.g. `finished` -> {"stop": 12}."""
    queries: Mapping[str, str] = field(default_factory=frozen_map)
    """Raw key -> the PromQL expression (or scrape description) it came from."""
    kv_capacity_tokens: float | None = None
    covered_s: float | None = None
    """Seconds of the window that have data, when fewer than the window."""
    coverage_note: str = ""
    """A partial window in words: `since start (12 min)`."""
    server: str = ""
    """Where it was read (URL without credentials)."""
    selector: str = ""
    warnings: tuple[str, ...] = ()
    eval_seconds: float | None = None
    """Server-side evaluation time, when the server reports query stats."""
    trend: Trend | None = None
    scrape_interval_s: float | None = None
    quantiles: Mapping[str, tuple[float, bool]] = field(default_factory=frozen_map)
    """Tail figures the server worked out: key -> (value, past the largest finite bucket)."""
    riders: Mapping[str, list[dict[str, Any]]] = field(default_factory=frozen_map)
    """Samples of the expressions asked in the lane's query beside its own (its GPUs'), by key."""
    gpu: GpuTotals | None = None
    models: Mapping[str, LaneTotals] = field(default_factory=frozen_map)
    """Model name -> its `MODEL_KEYS` totals (`missing["models"]` says why there are none)."""
    lora: LoraAdapters | None = None
    """The engine's LoRA adapters now (`missing["lora"]` says why there are none)."""

    def get(self, key: str) -> float | None:
        return self.values.get(key)

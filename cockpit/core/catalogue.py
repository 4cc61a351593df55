"""Every lane figure, declared once as data: key, label, unit, the raw totals it reads, its
formula, definition, pane and receipt section. One evaluator (`evaluate`) runs the formulas over
`LaneTotals` (a window's, a fleet row's, a trend step's); a figure made per label value is a
`Family`. A figure whose inputs are absent is missing with their reasons, never zero. Pure."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, TypeVar, cast

from cockpit.core.model import LAST_MINUTE_S, Bucket, Figure, LaneTotals, Unit, divide, make_figure
from cockpit.core.quantiles import Envelope, envelope_of, quantile
from cockpit.core.slo import NO_SLO, Slo, attained
from cockpit.engines.decode_pace import DecodePace, Derived, decode_pace
from cockpit.engines.dialects import DialectError, figure_notes

PaneName = Literal[
    "", "vitals", "cache", "prefill", "phases", "tails", "ratios", "roofline", "offload"
]  # fmt: skip
Section = Literal["", "volume", "timing", "tails", "slo", "now", "engine", "offload"]
"""A receipt's table ('': the JSON receipt only)."""
NO_DATA = "no data in window"
NO_REQUESTS = "no requests in window"
SCRAPED = "scrape "
"""How a direct scrape's description of a series begins (any other query is PromQL)."""
LANE_TOKENS = "lane_tokens"
"""A model's totals' raw key: the prompt and generated tokens of its whole lane."""

T = TypeVar("T")
_CAUSE_AND_DETAIL = re.compile(r"^(?P<cause>.+) \((?P<detail>[^()]*)\)$")


def split_reason(reason: str) -> tuple[str, str]:
    """`not exposed by this engine (vllm:a)` -> (`not exposed by this engine`, `vllm:a`)."""
    match = _CAUSE_AND_DETAIL.match(reason)
    return (match["cause"], match["detail"]) if match else (reason, "")


def merge_reasons(reasons: Iterable[str]) -> str:
    """Reasons joined with `; `, each cause once with its details: `x (vllm:a, vllm:b)`."""
    causes: dict[str, list[str]] = {}
    for reason in reasons:
        cause, detail = split_reason(reason)
        details = causes.setdefault(cause, [])
        if detail and detail not in details:
            details.append(detail)
    return "; ".join(f"{c} ({', '.join(d)})" if d else c for c, d in causes.items())


# --- the declarations -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Inputs:
    """What a formula reads: the raw totals, the configured host KV tier and latency targets."""

    totals: LaneTotals
    host_kv_tokens: float = 0.0
    slo: Slo = NO_SLO
    shared: dict[str, object] = field(default_factory=dict)
    """What several formulas read, worked out once per evaluation (`once`)."""

    def once(self, key: str, work: Callable[[], T]) -> T:
        if key not in self.shared:
            self.shared[key] = work()
        return cast(T, self.shared[key])

    def envelope(self, histogram: str) -> Envelope | None:
        buckets = self.totals.histograms.get(histogram)
        return None if buckets is None else self.once(histogram, lambda: envelope_of(buckets))

    def v(self, key: str) -> float | None:
        return self.totals.values.get(key)

    @property
    def window(self) -> float:
        return self.totals.covered_s or self.totals.window_s

    def mean(self, histogram: str, per_request: float | None = None) -> float | None:
        """A histogram's `_sum / _count`, else `per_request` / requests."""
        value = divide(self.v(f"{histogram}_sum"), self.v(f"{histogram}_count"))
        return divide(per_request, self.v("requests")) if value is None else value

    def unread(self, histogram: str) -> str:
        """Why a histogram gives no quantile (nor an attainment)."""
        buckets = self.totals.histograms.get(histogram)
        if buckets is None:
            return self.totals.missing.get(histogram, NO_REQUESTS)
        if not buckets or buckets[-1][1] == 0:
            return NO_REQUESTS
        if not math.isinf(buckets[-1][0]):
            return "the histogram has no +Inf bucket"
        return "the histogram has fewer than two buckets"

    def why(self, keys: Iterable[str], empty: str = NO_DATA) -> str:
        gone = self.totals.missing
        return merge_reasons(gone[key] for key in keys if gone.get(key)) or empty


@dataclass(frozen=True, slots=True)
class Reading:
    """A formula's answer when a number alone doesn't say it all."""

    value: float | None
    why: tuple[str, ...] | None = None
    """The raw keys whose reasons say why it is missing (None: the figure's)."""
    empty: str = ""
    """Why it is missing when those are all there ('': the figure's)."""
    reason: str = ""
    """Why it is missing, said outright."""
    note: str = ""
    query: str | None = None
    label: str = ""
    """The label, when the data decides it (the bucket bound a length share used)."""
    above: bool = False
    below: float | None = None
    doubtful: bool = False


Formula = Callable[[Inputs], float | Reading | None]


class Band(NamedTuple):
    """A figure's health: bad below `low`, good above `high`, fair between."""

    low: float
    high: float


@dataclass(frozen=True, slots=True)
class Spec:
    """One figure."""

    key: str
    label: str
    unit: Unit
    reads: tuple[str, ...]
    """The raw totals it is worked out from (the details show their queries)."""
    formula: Formula
    definition: str
    pane: PaneName = ""
    section: Section = ""
    query: str = ""
    """The raw key whose query is the figure's own ('': none)."""
    why: tuple[str, ...] | None = None
    """The raw keys whose reasons say why it is missing (None: `reads`)."""
    empty: str = NO_DATA
    """Why it is missing when every input is there."""


@dataclass(frozen=True, slots=True)
class Family:
    """A figure per label value of a grouped raw key, `<prefix>_<value>`: the known values
    always (missing with the reason when the engine says nothing), others as the engine names
    them. `label` and `definition` hold `{}` for the value."""

    prefix: str
    group: str
    label: str
    unit: Unit
    known: tuple[str, ...]
    definition: str
    pane: PaneName = ""
    section: Section = ""
    value: Callable[[Inputs, float], float | None] = lambda _, number: number
    empty: Callable[[Inputs], str] = lambda _: NO_DATA
    """Why a member is missing when the group is there."""
    words: Mapping[str, str] = field(default_factory=dict)
    """How the label says a label value ('': as the engine names it)."""

    def names(self, totals: LaneTotals) -> list[str]:
        group = totals.groups.get(self.group)
        if group is None:
            return list(self.known)
        extra = sorted(set(group) - set(self.known) - set(SUM_LABELS), key=_natural)
        return [*(name for name in self.known if name in group), *extra]

    def label_of(self, name: str) -> str:
        return self.label.format(self.words.get(name, name) or "(unlabelled)")


SUM_LABELS = ("total",)
"""Label values that are the sum of the others (SGLang's `cache_source="total"`): never a member,
never added to them."""


def members(totals: LaneTotals, group: str) -> dict[str, float]:
    """A grouped raw key's values, without the ones that sum the others."""
    found = totals.groups.get(group, {})
    return {name: value for name, value in found.items() if name not in SUM_LABELS}


def _share_of(group: str) -> Callable[[Inputs, float], float | None]:
    """A member's share of its group's sum."""
    return lambda i, number: divide(number, sum(members(i.totals, group).values()))


def _natural(name: str) -> tuple[int, str]:
    """Draft positions in number order (`2` before `10`)."""
    return (len(name), name) if name.isdigit() else (1 << 30, name)


def _raw(key: str, label: str, unit: Unit, definition: str, pane: PaneName = "",
         section: Section = "") -> Spec:  # fmt: skip
    """A raw total as it was read."""
    return Spec(key, label, unit, (key,), lambda i: i.v(key), definition, pane, section, key)


def _ratio(key: str, label: str, unit: Unit, of: str, per: str, definition: str,
           pane: PaneName = "", section: Section = "", query: str = "") -> Spec:  # fmt: skip
    return Spec(key, label, unit, (of, per), lambda i: divide(i.v(of), i.v(per)), definition,
                pane, section, query)  # fmt: skip


def _mean(key: str, label: str, unit: Unit, histogram: str, definition: str,
          pane: PaneName = "", section: Section = "timing") -> Spec:  # fmt: skip
    """A histogram's mean; its reasons are its `_sum`'s."""
    reads = (f"{histogram}_sum", f"{histogram}_count")
    return Spec(key, label, unit, reads, lambda i: i.mean(histogram), definition, pane, section,
                reads[0], reads[:1])  # fmt: skip


def _rate(key: str, label: str, unit: Unit, of: str, definition: str, query: bool = True,
          over: float | None = None, pane: PaneName = "vitals",
          section: Section = "now") -> Spec:  # fmt: skip
    """`of` per second of the window (or of `over` seconds)."""
    formula: Formula = lambda i: divide(i.v(of), over or i.window)  # noqa: E731
    return Spec(key, label, unit, (of,), formula, definition, pane, section, of if query else "")


# --- formulas beyond a ratio or a mean --------------------------------------------------


def _computed(i: Inputs) -> float | None:
    """Prompt tokens computed: the engine's counter, else queries − hits."""
    computed, queries, hits = (i.v(key) for key in _FRESH)
    if computed is None and queries is not None and hits:
        return queries - hits
    return computed


def _prefill_computed(i: Inputs) -> Reading:
    fallback = i.v("prompt_computed") is None and _computed(i) is not None
    return Reading(_computed(i), query="queries − hits" if fallback else None)


MEASURED_HOST = "host tier measured (host_kv_used)"
CONFIGURED_HOST = "host tier as configured (host_kv_tokens), not measured"


def _host_kv(i: Inputs) -> Reading:
    """The host tier's tokens: the engine's gauge where it has one, else the configured size."""
    measured = i.v("host_kv_used")
    if measured is not None:
        return Reading(measured, note=MEASURED_HOST)
    if i.host_kv_tokens:
        return Reading(i.host_kv_tokens, note=CONFIGURED_HOST, query="host_kv_tokens (config)")
    return Reading(None)


def _kv_resident(i: Inputs) -> Reading:
    usage, capacity, host = i.v("kv_usage"), i.totals.kv_capacity_tokens, _host_kv(i)
    gpu = None if usage is None or capacity is None else usage * capacity
    if gpu is None or host.value is None:
        return Reading(gpu, why=("kv_usage", "kv_capacity_tokens"))
    return Reading(gpu + host.value, note=host.note)


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _decode_mean(i: Inputs) -> Reading:
    """Without a decode histogram (SGLang): e2e mean − TTFT mean, over the same requests."""
    e2e, ttft = i.mean("e2e"), i.mean("ttft")
    if "decode_sum" in i.totals.missing and e2e is not None and ttft is not None:
        return Reading(e2e - ttft, note="derived: end-to-end mean − TTFT mean", query="")
    return Reading(i.mean("decode"))


def _paced(part: Callable[[DecodePace], Derived]) -> Formula:
    """A part of the dialect's own reading of its ITL histogram (per step in vLLM, per token
    in SGLang)."""

    def formula(i: Inputs) -> Reading:
        try:
            found = part(decode_pace(i.totals.dialect, i.v))
        except DialectError as error:
            found = Derived(None, (), str(error))
        return Reading(found.value, found.inputs, found.empty, note=found.note)

    return formula


def _draft_acceptance(i: Inputs) -> Reading:
    """Accepted / drafted tokens; where only verify steps are counted (SGLang), the drafted are
    an estimate: each step drafts the configured draft tokens less the one it verifies."""
    if i.v("spec_draft_tokens") is not None or i.v("spec_draft_len") is None:
        return Reading(divide(i.v("spec_accepted"), i.v("spec_draft_tokens")))
    steps, length = i.v("spec_drafts"), i.v("spec_draft_len") or 0.0
    drafted = None if steps is None else steps * max(length - 1, 0.0)
    why = ("spec_accepted", "spec_drafts", "spec_draft_len")
    note = "estimate: verify steps × (spec_num_draft_tokens − 1)"
    return Reading(divide(i.v("spec_accepted"), drafted), why, note=note)


def _measured(i: Inputs, counted: float | None) -> float | None:
    """Per second of the window, from the engine's MFU counters, only while FLOPs move."""
    flops = i.v("flops")
    return divide(counted, i.window) if flops is not None and flops > 0 else None  # NaN: no


def _failed_share(i: Inputs) -> Reading:
    finished = i.totals.groups.get("finished")
    if not finished:
        return Reading(None)
    failed = sum(finished.get(reason, 0.0) for reason in FAILED)
    return Reading(divide(failed, sum(finished.values())), empty="no requests finished in window")


def _rejections(i: Inputs) -> Reading:
    group = i.totals.groups.get("admission_rejections")
    if group is None:
        return Reading(None)
    split = ", ".join(f"{name} {count:,.0f}" for name, count in group.items())
    return Reading(sum(group.values()), note=split)


# --- length shares ----------------------------------------------------------------------

LENGTH_THRESHOLDS: Mapping[str, tuple[str, float, bool]] = {
    "prompt_share_short": ("prompt_len", 500, False),
    "prompt_share_long": ("prompt_len", 10_000, True),
    "prompt_share_huge": ("prompt_len", 100_000, True),
    "gen_share_short": ("gen_len", 500, False),
    "gen_share_medium": ("gen_len", 5_000, False),
}
"""figure -> (histogram, threshold, above?); the nearest bound the server has is used."""


def bucket_share(
    buckets: tuple[Bucket, ...], threshold: float, above: bool
) -> tuple[float | None, float | None]:
    """Share of observations ≤ (or >) the largest bucket bound ≤ threshold, and that bound.
    Bounds come from the server (`le` values), so a lane with custom buckets is read honestly:
    the bound actually used is returned for the label."""
    total = buckets[-1][1] if buckets and math.isinf(buckets[-1][0]) else None
    bounds = [(le, count) for le, count in buckets if le <= threshold]
    if not total or not bounds:
        return None, None
    bound, below = bounds[-1]
    share = below / total
    return (1 - share if above else share), bound


def _length_label(noun: str, bound: float, above: bool) -> str:
    return f"Requests with {noun} {'>' if above else '≤'} {bound:,.0f} tokens"


def _length_shares(totals: LaneTotals) -> dict[str, Reading]:
    """Every share of requests past (or within) a threshold. Between bounds, the nearest bound
    below the threshold is used and named in the label; two thresholds at the same bound give
    one figure, not the same twice. Past the largest finite bound a share is exact only when no
    request lies beyond that bound (0 % above, 100 % within); otherwise the buckets can't tell."""
    shares: dict[str, Reading] = {}
    used: set[tuple[str, float, bool]] = set()
    for key, (histogram, threshold, above) in LENGTH_THRESHOLDS.items():
        buckets = totals.histograms.get(histogram, ())
        noun = "prompt" if histogram == "prompt_len" else "generation"
        finite = [(le, count) for le, count in buckets if math.isfinite(le)]
        total = buckets[-1][1] if buckets and math.isinf(buckets[-1][0]) else None
        share, bound = bucket_share(buckets, threshold, above)
        largest, within = finite[-1] if finite else (0.0, 0.0)
        if not finite or not total:
            found = Reading(None, reason=totals.missing.get(histogram, NO_REQUESTS))
        elif threshold > largest and within < total:
            found = Reading(None, reason=f"the engine's largest {noun} bucket is {largest:,.0f}")
        elif threshold > largest:
            note = f"no {noun} above {largest:,.0f} tokens, the engine's largest {noun} bucket"
            found, bound = Reading(0.0 if above else 1.0, note=note), None
        elif share is None or bound is None:
            smallest = finite[0][0]
            found = Reading(None, reason=f"the engine's smallest {noun} bucket is {smallest:,.0f}")
        elif (histogram, bound, above) in used:
            why = f"the engine has no {noun} bucket between {bound:,.0f} and {threshold:,.0f}"
            found = Reading(None, reason=why)
        else:
            found = Reading(share, label=_length_label(noun, bound, above))
        if bound is not None:
            used.add((histogram, bound, above))
        shares[key] = found
    return shares


def _share(key: str) -> Formula:
    return lambda i: i.once("length_shares", lambda: _length_shares(i.totals))[key]


def _length_specs() -> Iterator[Spec]:
    for key, (histogram, threshold, above) in LENGTH_THRESHOLDS.items():
        noun = "prompt" if histogram == "prompt_len" else "generation"
        what = f"{noun} {'>' if above else '≤'} {threshold:,.0f} tokens"
        yield Spec(key, _length_label(noun, threshold, above), "share", (histogram,), _share(key),
                   f"Share of requests with a {what} (the nearest bound of `{histogram}`).",
                   "prefill" if noun == "prompt" else "", "volume", histogram)  # fmt: skip


# --- tails ------------------------------------------------------------------------------


class Latency(NamedTuple):
    """A latency the tails show: its raw `histogram` key (percentile figures are
    `<histogram>_p<percentile>`) beside the figure of its `mean`, what it times (`label`, as
    figures and receipts name it), and the tails pane's `row` (`short` where there is no room)."""

    histogram: str
    mean: str
    label: str
    row: str
    short: str


LATENCIES: tuple[Latency, ...] = (
    Latency("ttft", "ttft_mean", "Time to first token", "TTFT", "TTFT"),
    Latency("itl", "itl_hist_mean", "Inter-token latency", "Inter-token", "ITL"),
    Latency("tpot", "tpot_mean", "Time per output token", "TPOT", "TPOT"),
    Latency("e2e", "e2e_mean", "End-to-end latency", "End-to-end", "E2E"),
    Latency("queue", "queue_mean", "Queue time", "Queue", "Queue"),
)
"""In the order a user asks. The ITL histogram counts per engine step in vLLM, per token in
SGLang: its own mean (`itl_hist_mean`), not the step (`itl_mean`), sits beside its tails.
TPOT is each request's own mean time per token after its first, one observation a request."""
PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)


def tail_keys(histogram: str) -> tuple[str, ...]:
    return tuple(f"{histogram}_p{p}" for p in PERCENTILES)


def _tail(histogram: str, percentile: int) -> Formula:
    """Prometheus's own `histogram_quantile` over the window's bucket increases (or the server's
    answer, `LaneTotals.quantiles`): a direct scrape and a Prometheus read the same number. Past
    the largest finite bucket it is that bound, flagged as a lower bound (`> 60 s`)."""
    key, q = f"{histogram}_p{percentile}", percentile / 100

    def formula(i: Inputs) -> Reading:
        buckets, source = i.totals.histograms.get(histogram), i.totals.queries.get(histogram, "")
        query = f"histogram_quantile({q}, {source})" if source else ""
        if source.startswith(SCRAPED):
            query = f"p{percentile} of {source}"
        ready = i.envelope(histogram)
        found = i.totals.quantiles.get(key)
        if found is None and ready is not None:
            found = quantile(q, ready)
        if found is None:
            return Reading(None, reason=i.unread(histogram), query=query)
        value, above = found
        mended = i.totals.bucket_notes.get(histogram, "")
        first = ready[0][0] if ready else min((le for le, _ in buckets or ()), default=math.nan)
        if value <= first and not above:  # interpolated from 0 across the whole first bucket
            note = _joined(mended, f"within the engine's first bucket (≤ {first:g} s)")
            return Reading(value, note=note, query=query, below=first, doubtful=bool(mended))
        note = _joined(mended, "past the engine's largest bucket" if above else "")
        return Reading(value, note=note, query=query, above=above, doubtful=bool(mended))

    return formula


def _joined(*notes: str) -> str:
    return "; ".join(note for note in notes if note)


def _tail_specs() -> Iterator[Spec]:
    for latency in LATENCIES:
        for p in PERCENTILES:
            yield Spec(f"{latency.histogram}_p{p}", f"{latency.label} p{p}", "seconds",
                       (latency.histogram,), _tail(latency.histogram, p),
                       f"{p}th percentile of the {latency.label.lower()} over the window, from "
                       f"the engine's `{latency.histogram}` histogram as Prometheus's "
                       "histogram_quantile reads it (`> x`: past the largest finite bucket).",
                       "tails", "tails")  # fmt: skip


# --- SLO attainment ---------------------------------------------------------------------

NO_SLO_SET = "no SLO set"
"""How an attainment figure whose target isn't set begins its reason."""
SLO_TARGETS: Mapping[str, tuple[str, str]] = {
    "ttft": ("TTFT", "requests"),
    "itl": ("ITL", "tokens"),
    "e2e": ("E2E", "requests"),
}
"""histogram -> how the figure names it, what its observations are."""
SLO_KEYS = (*(f"{histogram}_slo_attainment" for histogram in SLO_TARGETS), "ttft_goodput_req_s")


def _attained(histogram: str, per_second: bool = False) -> Formula:
    """The share of the window's observations that met the target (or, `per_second`, the
    number that met it per second of the window)."""
    name = SLO_TARGETS[histogram][0]

    def formula(i: Inputs) -> Reading:
        target = i.slo.target(histogram)
        if target is None:
            flag = f"--slo-{histogram}"
            return Reading(None, reason=f"{NO_SLO_SET} (slo.{histogram}_s, {flag})")
        found = attained(target, i.envelope(histogram))
        label = f"{name} ≤ {target:g} s: {'goodput (req/s)' if per_second else 'SLO attainment'}"
        if found is None:
            return Reading(None, reason=i.unread(histogram), label=label)
        value = divide(found.met, i.window) if per_second else found.share
        mended = i.totals.bucket_notes.get(histogram, "")
        return Reading(value, note=_joined(mended, found.note), label=label,
                       above=found.lower_bound, doubtful=bool(mended))  # fmt: skip

    return formula


def slo_keys(figures: Mapping[str, Figure]) -> tuple[str, ...]:
    """The SLO figures whose target is set (the only ones a pane or a receipt shows)."""
    return tuple(
        key
        for key in SLO_KEYS
        if (figure := figures.get(key)) is not None and not figure.reason.startswith(NO_SLO_SET)
    )


def _slo_specs() -> Iterator[Spec]:
    for histogram, (name, counted) in SLO_TARGETS.items():
        yield Spec(f"{histogram}_slo_attainment", f"{name} SLO attainment", "share",
                   (histogram,), _attained(histogram),
                   f"Share of the window's {counted} whose {name} met the lane's target "
                   f"(`slo.{histogram}_s`), from the engine's `{histogram}` histogram: exact at a "
                   "bucket bound, else interpolated inside the bucket as histogram_quantile "
                   "does (`> x`: past the largest finite bucket, a lower bound).", "tails", "slo",
                   histogram)  # fmt: skip
    yield Spec("ttft_goodput_req_s", "TTFT goodput (req/s)", "number", ("ttft",),
               _attained("ttft", per_second=True),
               "Requests per second of the window whose TTFT met the lane's target "
               "(`slo.ttft_s`): the requests that met it / the window's seconds.", "tails", "slo",
               "ttft")  # fmt: skip


# --- the catalogue ----------------------------------------------------------------------

FINISH_REASONS = ("stop", "length", "abort", "error")
FAILED = ("abort", "error")
WAIT_REASONS = ("capacity", "deferred")
CACHE_TIERS = ("device", "host", "p2p", "disk", "external_unspecified")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
SOURCE_WORDS = {"local_compute": "computed locally", "local_cache_hit": "local cache hit",
                "external_kv_transfer": "external KV transfer",
                "external_unspecified": "external, unspecified"}  # fmt: skip
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")
HIT_RATE_BAND = Band(0.70, 0.90)
"""Below 70 % the lane is doing its prompts twice (the config's `health.hit_rate` by default)."""
_FRESH = ("prompt_computed", "prefix_cache_queries", "prefix_cache_hits")
_PACE = ("itl_sum", "itl_count", "spec_drafts", "spec_accepted", "generation_tokens", "ttft_count")
_PROMPT = ("prompt_len_sum", "prompt_len_count", "prompt_tokens", "requests")


def _offload_way(way: str, words: str) -> tuple[Spec, ...]:
    """An offload tier's loads (or stores): bytes/s, time per second and bandwidth."""
    noun = f"offload_{way}"
    return (
        _rate(f"{noun}_bytes_s", f"Offload {way}s (bytes/s)", "bytes/s", f"{noun}_bytes",
              f"Bytes of KV {words} per second of the window.", pane="offload", section="offload"),
        _rate(f"{noun}_time_s", f"Offload {way} time (s per s)", "number", f"{noun}_time",
              f"Seconds spent on KV {way}s per second of the window (above 1: transfers "
              "overlap).", pane="offload", section="offload"),
        _ratio(f"{noun}_bandwidth", f"Offload {way} bandwidth", "bytes/s", f"{noun}_bytes",
               f"{noun}_time", f"Bytes of KV {words} per second spent on {way}s: {way} bytes / "
               f"{way} time.", "offload", "offload"),
    )  # fmt: skip


NIXL_FAILURES = (
    ("nixl_failed_transfers", "NIXL failed transfers", "NIXL KV transfers that failed."),
    ("nixl_failed_notifications", "NIXL failed notifications",
     "NIXL notifications (a transfer's completion told to its peer) that failed to send."),
    ("nixl_expired_reqs", "NIXL requests whose KV expired",
     "Requests whose KV blocks expired before their peer read them (counted where they were "
     "prefilled)."),
)  # fmt: skip


def _mean_prompt(i: Inputs) -> float | None:
    return i.mean("prompt_len", i.v("prompt_tokens"))


def _prefill_rate(i: Inputs) -> float | None:
    return divide(_computed(i), i.v("prefill_sum"))


CATALOGUE: tuple[Spec | Family, ...] = (
    # The seed's section-2 table, in its order.
    _raw("requests", "Requests completed", "count",
         "Requests the engine finished in the window.", section="volume"),
    _raw("prompt_tokens", "Prompt tokens", "tokens",
         "Prompt tokens the engine received in the window.", section="volume"),
    _raw("generation_tokens", "Generated tokens", "tokens",
         "Tokens the engine generated in the window.", section="volume"),
    _ratio("prompt_generated", "Prompt : generated", "ratio", "prompt_tokens", "generation_tokens",
           "Prompt tokens per generated token.", "prefill", "volume"),
    _raw("prefix_cache_hits", "Prefix-cache hits (tokens)", "tokens",
         "Prompt tokens found in the prefix cache.", "cache", "volume"),
    _raw("prefix_cache_queries", "Prefix-cache queries (tokens)", "tokens",
         "Prompt tokens looked up in the prefix cache.", "cache", "volume"),
    _ratio("prefix_cache_hit_rate", "Prefix-cache hit rate", "share", "prefix_cache_hits",
           "prefix_cache_queries", "Share of looked-up prompt tokens found in the prefix cache: "
           "hits / queries (red < 70 %, green > 90 %).", "cache", "volume"),
    Spec("prefill_computed", "Prefill actually computed", "tokens", _FRESH, _prefill_computed,
         "Prompt tokens actually computed: the engine's count, else queries − hits.", "cache",
         "volume", "prompt_computed", _FRESH[:2]),
    Spec("computed_generated", "Computed prefill : generated", "ratio",
         (*_FRESH, "generation_tokens"),
         lambda i: divide(_computed(i), i.v("generation_tokens")),
         "Computed prefill tokens per generated token.", "prefill", "volume",
         why=("prompt_computed", "generation_tokens")),
    Spec("mean_prompt", "Mean prompt per request", "tokens", _PROMPT, _mean_prompt,
         "Mean prompt length per request: `prompt_len_sum` / `prompt_len_count`.", "prefill",
         "volume", why=_PROMPT[:1]),
    Spec("mean_fresh_prefill", "Mean fresh prefill per request", "tokens",
         ("kv_computed_sum", "kv_computed_count", *_FRESH, "requests"),
         lambda i: i.mean("kv_computed", _computed(i)),
         "Mean prompt tokens computed (not cached) per request: `kv_computed_sum` / "
         "`kv_computed_count`, else computed prefill / requests.", "prefill", "volume",
         why=("kv_computed_sum",)),
    Spec("mean_generated", "Mean generated per request", "tokens",
         ("gen_len_sum", "gen_len_count", "generation_tokens", "requests"),
         lambda i: i.mean("gen_len", i.v("generation_tokens")),
         "Mean tokens generated per request.", "prefill", "volume", why=("gen_len_sum",)),
    *_length_specs(),
    _raw("kv_usage", "KV cache usage (mean)", "share",
         "Share of the GPU's KV cache in use, averaged over the window.", section="volume"),
    Spec("kv_resident_tokens", "KV tokens resident (GPU + host tier)", "tokens",
         ("kv_usage", "kv_capacity_tokens", "host_kv_used"), _kv_resident,
         "Tokens held in the KV cache: KV usage × capacity, plus the host tier's tokens (the "
         "engine's gauge where it has one, else the configured `host_kv_tokens`).",
         "prefill", "volume"),
    Spec("host_kv_resident_tokens", "KV tokens resident, host tier", "tokens", ("host_kv_used",),
         _host_kv, "Tokens the host (CPU) KV tier holds: the engine's gauge where it has one, "
         "else the configured `host_kv_tokens`.", section="volume", query="host_kv_used"),
    # The seed's section-3 table (and what the lane adds), in its order.
    _mean("queue_mean", "Queue (mean)", "seconds", "queue",
          "Mean time a request waited in the queue.", "phases"),
    _mean("prefill_mean", "Prefill (mean)", "seconds", "prefill",
          "Mean time computing a request's prompt.", "phases"),
    Spec("decode_mean", "Decode (mean)", "seconds",
         ("decode_sum", "decode_count", "e2e_sum", "e2e_count", "ttft_sum", "ttft_count"),
         _decode_mean, "Mean time generating a request's tokens (without a decode histogram: "
         "end-to-end mean − TTFT mean).", "phases", "timing", "decode_sum", ("decode_sum",)),
    _mean("ttft_mean", "Time to first token (mean)", "seconds", "ttft",
          "Mean time to first token.", "prefill"),
    Spec("decode_share", "Decode share of inference time", "share", ("prefill_sum", "decode_sum"),
         lambda i: divide(i.v("decode_sum"), _sum(i.v("prefill_sum"), i.v("decode_sum"))),
         "Share of inference time spent decoding: decode / (prefill + decode).", "phases",
         "timing"),
    Spec("itl_mean", "Inter-token step (mean)", "seconds", _PACE, _paced(lambda p: p.step_s),
         "Mean time between two steps that emit a request's tokens (inter-token latency).",
         "phases", "timing", "itl_sum"),
    Spec("tokens_per_step", "Tokens per step", "number", _PACE,
         _paced(lambda p: p.tokens_per_step), "Tokens a request gets per decode step (above 1 "
         "with speculative decoding): tokens after the first / `itl_count`.", "phases", "timing"),
    Spec("draft_acceptance", "Draft acceptance", "share",
         ("spec_accepted", "spec_draft_tokens", "spec_drafts", "spec_draft_len"), _draft_acceptance,
         "Share of drafted tokens the target model accepted.", "phases", "timing",
         why=("spec_accepted", "spec_draft_tokens")),
    Spec("stream_tok_s", "Decode tok/s per stream", "tok/s", _PACE,
         _paced(lambda p: p.stream_tok_s),
         "Tokens per second one request sees while decoding: tokens after the first / decode "
         "time.", "phases", "timing"),
    Spec("effective_prefill_rate", "Effective prefill rate", "tok/s", (*_FRESH, "prefill_sum"),
         _prefill_rate, "Prompt tokens computed per second of prefill.", "prefill", "timing",
         why=("prompt_computed", "prefill_sum")),
    Spec("cache_off_prefill", "Prefill per request with the cache off", "seconds",
         (*_PROMPT, *_FRESH, "prefill_sum"), lambda i: divide(_mean_prompt(i), _prefill_rate(i)),
         "Prefill time per request if nothing were cached: mean prompt / effective prefill "
         "rate (what the cache saves).", "prefill", "timing", why=("prefill_sum",)),
    _raw("running", "Running requests (mean)", "number",
         "Requests being served, averaged over the window.", "phases", "timing"),
    _raw("waiting", "Waiting requests (mean)", "number",
         "Requests waiting to be scheduled, averaged over the window.", section="timing"),
    _raw("preemptions", "Preemptions", "count",
         "Requests the engine preempted (evicted to make room).", "vitals", "timing"),
    Spec("measured_flops", "Measured FLOP/s per GPU (engine estimate)", "flop/s", ("flops",),
         lambda i: _measured(i, i.v("flops")), "FLOP/s per GPU as the engine estimates them.",
         "roofline", "timing",
         empty="MFU counters exposed but not moving in the window"),
    # Bytes count only while FLOPs move: their reasons name the FLOP counter too.
    Spec("measured_bytes", "Measured bytes/s per GPU (engine estimate)", "bytes/s",
         ("read_bytes", "write_bytes", "flops"),
         lambda i: _measured(i, _sum(i.v("read_bytes"), i.v("write_bytes")) or None),
         "Bytes/s per GPU the engine estimates it moved (read + written).", "roofline", "timing",
         empty="MFU counters exposed but not moving in the window"),
    Spec("kv_capacity_tokens", "KV capacity (GPU)", "tokens", ("kv_capacity_tokens",),
         lambda i: i.totals.kv_capacity_tokens,
         "Tokens the GPU's KV cache holds, from the engine's cache config."),
    # The tails, each beside its histogram's mean.
    *_tail_specs(),
    Spec("itl_hist_mean", "Inter-token latency (histogram mean)", "seconds",
         ("itl_sum", "itl_count"), lambda i: i.mean("itl"),
         "Mean of the engine's inter-token histogram, the one its percentiles come from. vLLM "
         "observes it once per engine step (it is the step); SGLang once per token (under "
         "speculative decoding, a fraction of the step).", "tails", "tails",
         "itl_sum", empty=NO_REQUESTS),
    _mean("tpot_mean", "Time per output token (mean)", "seconds", "tpot",
          "Mean over requests of each one's time per output token after its first (decode "
          "time / (generated − 1), 0 for a 1-token request): what benchmark clients call "
          "TPOT.", "tails", "tails"),
    *_slo_specs(),
    # What a KV connector moves, and the counters of what went wrong (each with its health rule).
    *_offload_way("load", "loaded from the host tier to the GPU"),
    *_offload_way("store", "stored from the GPU to the host tier"),
    _raw("offload_cpu_usage", "Offload CPU cache in use (mean)", "share",
         "Share of the offload tier's CPU cache in use (held by transfers in flight), averaged "
         "over the window.", "offload", "offload"),
    _raw("offload_alloc_failures", "Offload allocation failures", "count",
         "Stores to the offload tier that found no room in the window.", "offload", "offload"),
    _raw("offload_stores_skipped", "Offload stores skipped", "count",
         "Blocks not stored to the offload tier in the window (seen too few times to keep).",
         "offload", "offload"),
    _mean("nixl_xfer_mean", "NIXL transfer time (mean)", "seconds", "nixl_xfer",
          "Mean time of one NIXL KV transfer between engines.", "offload", "offload"),
    _rate("nixl_bytes_s", "NIXL transferred (bytes/s)", "bytes/s", "nixl_bytes_sum",
          "Bytes of KV NIXL transferred between engines per second of the window.",
          pane="offload", section="offload"),
    *(_raw(key, label, "count", definition, "offload", "offload")
      for key, label, definition in NIXL_FAILURES),
    # Now and the last minute, beside the window: the vital signs.
    _raw("running_now", "Running requests (now)", "number",
         "Requests being served at the evaluation time.", "vitals", "now"),
    _raw("waiting_now", "Waiting requests (now)", "number",
         "Requests waiting to be scheduled at the evaluation time.", "vitals", "now"),
    _raw("kv_usage_now", "KV cache usage (now)", "share",
         "Share of the GPU's KV cache in use at the evaluation time.", "vitals", "now"),
    _rate("requests_per_s", "Requests/s (window mean)", "number", "requests",
          "Requests finished per second over the window."),
    _rate("requests_per_s_1m", "Requests/s (last minute)", "number", "requests_1m",
          "Requests finished per second over the last minute.", over=LAST_MINUTE_S),
    _rate("prompt_tok_s", "Prompt tok/s (window mean)", "tok/s", "prompt_tokens",
          "Prompt tokens per second over the window.", query=False),
    _rate("prompt_tok_s_1m", "Prompt tok/s (last minute)", "tok/s", "prompt_tokens_1m",
          "Prompt tokens per second over the last minute.", over=LAST_MINUTE_S),
    _rate("generation_tok_s", "Generated tok/s (window mean)", "tok/s", "generation_tokens",
          "Generated tokens per second over the window.", query=False),
    _rate("generation_tok_s_1m", "Generated tok/s (last minute)", "tok/s", "generation_tokens_1m",
          "Generated tokens per second over the last minute.", over=LAST_MINUTE_S),
    Family("waiting_now", "waiting_by_reason_now", "Waiting, {} (now)", "number", WAIT_REASONS,
           "Requests waiting at the evaluation time because of {}.", "vitals", "now"),
    # What else the engine says.
    _mean("e2e_mean", "End-to-end latency (mean)", "seconds", "e2e",
          "Mean time from a request's arrival to its last token.", "tails", "engine"),
    _mean("batch_tokens_per_step", "Tokens per engine step (whole batch, mean)", "number",
          "step_tokens", "Tokens the whole batch computes per engine step.", section="engine"),
    Family("finished", "finished", "Finished: {}", "count", FINISH_REASONS,
           "Requests that finished with reason {} in the window.", "vitals", "engine"),
    Spec("finished_failed_share", "Finished aborted or in error", "share", ("finished",),
         _failed_share, "Share of finished requests that were aborted or ended in error.",
         "vitals", "engine", "finished"),
    Spec("admission_rejections", "Admission rejections (queue limits)", "count",
         ("admission_rejections",), _rejections, "Requests refused by the engine's queue limits.",
         "vitals", "engine", "admission_rejections"),
    Family("waiting", "waiting_by_reason", "Waiting, {} (mean)", "number", WAIT_REASONS,
           "Requests waiting because of {}, averaged over the window.", section="engine"),
    Family("prompt_from", "prompt_by_source", "Prompt tokens, {}", "tokens", PROMPT_SOURCES,
           "Prompt tokens by source ({}) in the window; the sources add up to the prompt "
           "tokens.", "cache", "engine", words=SOURCE_WORDS),
    Family("prompt_from_share", "prompt_by_source", "Prompt share, {}", "share", PROMPT_SOURCES,
           "Share of the window's prompt tokens by source ({}): its tokens / the sources' sum.",
           "cache", "engine", _share_of("prompt_by_source"), lambda _: "no prompt tokens in window",
           SOURCE_WORDS),
    Family("cached", "cached_by_source", "Prompt tokens cached, tier {}", "tokens", CACHE_TIERS,
           "Prompt tokens served from the {} cache tier.", "cache", "engine",
           words=SOURCE_WORDS),
    Family("cached_share", "cached_by_source", "Cached share, tier {}", "share", CACHE_TIERS,
           "Share of the window's cached prompt tokens served from the {} tier: its tokens / "
           "the tiers' sum (never an engine's own total).", "cache", "engine",
           _share_of("cached_by_source"), lambda _: "no cached prompt tokens in window",
           SOURCE_WORDS),
    _ratio("external_cache_hit_rate", "External prefix-cache hit rate (KV connector)", "share",
           "external_cache_hits", "external_cache_queries", "Share of prompt tokens found in an "
           "external KV cache (connector).", section="engine", query="external_cache_hits"),
    Family("draft_acceptance_pos", "spec_accepted_by_pos", "Draft acceptance at position {}",
           "share", (), "Share of drafts accepted at draft position {}: accepted there / drafts.",
           "phases", "engine", lambda i, accepted: divide(accepted, i.v("spec_drafts")),
           lambda i: "no drafts in window" if i.v("spec_drafts") is not None
           else i.why(("spec_drafts",))),
    Family("sleep", "sleep_state", "Engine {} (share of window)", "share", SLEEP_STATES,
           "Share of the window the engine spent {}.", section="engine"),
)  # fmt: skip
"""Every lane figure, in the receipt's order."""

PER_MODEL: tuple[Spec, ...] = (
    Spec("token_share", "Share of the lane's tokens", "share",
         ("prompt_tokens", "generation_tokens", LANE_TOKENS),
         lambda i: divide(_sum(i.v("prompt_tokens"), i.v("generation_tokens")), i.v(LANE_TOKENS)),
         "A model's prompt and generated tokens over its whole lane's, in the window."),
)  # fmt: skip
"""Figures of a model within its lane only (the per-model table): asked by key, never part
of the lane's own figures."""

FIGURES: Mapping[str, Spec] = {s.key: s for s in (*CATALOGUE, *PER_MODEL) if isinstance(s, Spec)}
_FAMILIES = sorted((f for f in CATALOGUE if isinstance(f, Family)), key=lambda f: -len(f.prefix))


def _entry(key: str) -> tuple[Spec | Family, str] | None:
    """The figure's declaration (and, for a family's member, its label value)."""
    if key in FIGURES:
        return FIGURES[key], ""
    family = next((f for f in _FAMILIES if key.startswith(f.prefix + "_")), None)
    return None if family is None else (family, key.removeprefix(family.prefix + "_"))


def definition(key: str) -> str:
    """The figure's meaning in a line ('' for a key the catalogue doesn't have)."""
    found = _entry(key)
    if found is None:
        return ""
    entry, name = found
    return entry.definition.format(
        entry.words.get(name, name) if isinstance(entry, Family) else name
    )


def reads(key: str) -> tuple[str, ...]:
    """The raw totals the figure is worked out from."""
    found = _entry(key)
    if found is None:
        return ()
    return (found[0].group,) if isinstance(found[0], Family) else found[0].reads


def section_of(key: str) -> Section:
    found = _entry(key)
    return found[0].section if found else ""


def pane_keys(pane: PaneName, totals: LaneTotals | None = None) -> tuple[str, ...]:
    """A pane's figures in catalogue order (a family's members as `totals` has them)."""
    keys: list[str] = []
    for entry in (e for e in CATALOGUE if e.pane == pane):
        if isinstance(entry, Spec):
            keys.append(entry.key)
        elif totals is not None:
            keys += [f"{entry.prefix}_{name}" for name in entry.names(totals)]
    return tuple(keys)


# --- the evaluator ----------------------------------------------------------------------


def evaluate(
    totals: LaneTotals,
    keys: Iterable[str] | None = None,
    host_kv_tokens: float = 0.0,
    slo: Slo = NO_SLO,
) -> dict[str, Figure]:
    """The catalogue over `totals`: every figure in catalogue order (a family's members as the
    engine names them), or only the figures `keys`. Each said with its engine's note."""
    inputs, notes = Inputs(totals, host_kv_tokens, slo), figure_notes(totals.dialect)
    entries = CATALOGUE if keys is None else [FIGURES[key] for key in keys]
    found: dict[str, Figure] = {}
    for entry in entries:
        if isinstance(entry, Family):
            found.update((figure.key, figure) for figure in _members(entry, inputs, notes))
        else:
            found[entry.key] = _figure(entry, inputs, notes)
    return found


def _figure(spec: Spec, inputs: Inputs, notes: Mapping[str, str]) -> Figure:
    got = spec.formula(inputs)
    if not isinstance(got, Reading):
        if got is not None:  # a number alone: the figure says it as is
            query = inputs.totals.queries.get(spec.query, "")
            return make_figure(
                spec.key, spec.label, got, spec.unit, "", query, notes.get(spec.key, "")
            )
        got = Reading(None)
    query = inputs.totals.queries.get(spec.query, "") if got.query is None else got.query
    why = ""
    if got.value is None:
        keys = next(k for k in (got.why, spec.why, spec.reads) if k is not None)
        why = got.reason or inputs.why(keys, got.empty or spec.empty)
    return make_figure(spec.key, got.label or spec.label, got.value, spec.unit, why, query,
                       got.note or notes.get(spec.key, ""), got.above, got.doubtful,
                       got.below)  # fmt: skip


def _members(family: Family, inputs: Inputs, notes: Mapping[str, str]) -> list[Figure]:
    """A family's figures, each said with its engine's note."""
    group = inputs.totals.groups.get(family.group)
    query = inputs.totals.queries.get(family.group, "")
    if group is None:
        reason = inputs.totals.missing.get(family.group, NO_DATA)
        return [Figure(f"{family.prefix}_{name}", family.label_of(name), None, family.unit,
                       reason, query) for name in family.known]  # fmt: skip
    empty = family.empty(inputs)
    return [
        make_figure(key := f"{family.prefix}_{name}", family.label_of(name),
                    family.value(inputs, group[name]), family.unit, empty, query,
                    notes.get(key, ""))
        for name in family.names(inputs.totals)
    ]  # fmt: skip


# --- trends -----------------------------------------------------------------------------


class TrendSeries(NamedTuple):
    """A trend series: its key in `Trend.series`, the figure it follows step by step, its
    label, its full scale (None: its largest point), what it follows, and whether it is a
    gauge's mean per step (the vital strip shows the gauge now)."""

    key: str
    figure: str
    label: str
    top: float | None
    definition: str
    mean: bool = False


MEAN_PER_STEP = "avg: the mean per step, not now"
"""What the trends say of their gauges' points."""


TRENDS: tuple[TrendSeries, ...] = (
    TrendSeries("hit_rate", "prefix_cache_hit_rate", "Hit rate", 1.0,
                "Prefix-cache hit rate within each step: hits / queries of the step."),
    TrendSeries("ttft_p95", "ttft_p95", "TTFT p95", None,
                "95th percentile of the time to first token within each step (its histogram)."),
    TrendSeries("itl_step", "itl_mean", "Step (ITL)", None,
                "The inter-token step within each step, worked out as the window's."),
    TrendSeries("generation_tok_s", "generation_tok_s", "Gen tok/s", None,
                "Generated tokens per second within each step."),
    TrendSeries("running", "running", "Running avg", None,
                "Requests being served, averaged within each step.", mean=True),
    TrendSeries("waiting", "waiting", "Waiting avg", None,
                "Requests waiting to be scheduled, averaged within each step.", mean=True),
    TrendSeries("kv_usage", "kv_usage", "KV use avg", 1.0,
                "Share of the GPU's KV cache in use, averaged within each step.", mean=True),
)  # fmt: skip
"""What a lane's trend follows across the window, in the trends pane's order (counters as
increases within each step, so a counter reset does not spike)."""
TREND_KEYS: tuple[str, ...] = tuple(series.key for series in TRENDS)

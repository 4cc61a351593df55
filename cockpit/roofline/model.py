"""The mini roofline: what it knows about a GPU and a model, and pure arithmetic on them. No I/O.

- A token at position `t` (it attends to `t` earlier tokens) costs
  `2·P_active + 4·L·w·t` FLOPs: two per active weight, plus the attention matmuls
  Q·Kᵀ and A·V at `2·w·t` each per layer, `w` the attention width (the hidden size d for
  Llama-style models). Summed over a fresh prompt of N tokens this is the seed's
  `2·P·N + 2·L·d·N²`; for one decode token at context C it is `2·P + 4·L·d·C`.
- Every weight is resident; a pass over T tokens reads once the weights its tokens use: all of
  them for a dense model. For a MoE with its expert counts, the shared part (attention,
  embeddings, dense layers, shared experts) plus the routed experts the tokens touch: T tokens
  each choosing k of E touch `E·(1 − (1 − k/E)^T)` on average when tokens route independently
  and uniformly, an estimate that is an upper bound when routing is skewed or tokens route
  alike, and never more than all E. Without expert counts, `min(P, T·P_active)` (no overlap
  between tokens' experts) is the upper bound used.
- A decode step at batch B and context C also rereads each sequence's KV cache: `B·C·k`.
- Activations, KV writes and kernel overheads are left out, as in the seed: the roof is a
  ceiling, not a prediction.
- Time on the roof is `max(FLOPs / peak, bytes / bandwidth)`. A GPU has a dense tensor peak per
  number format (BF16, FP8) and a model is held to the peak of the format its matmuls run in;
  where the GPU lists none for it (an A100 has no FP8 tensor cores) the model computes in the
  GPU's own format, as weight-only kernels do.
- N GPUs in one tensor-parallel group are one ideal roof: peaks, bandwidth and memory summed,
  weights and KV split evenly over them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

DTYPES = ("bf16", "fp8")
"""Number formats a profile can give a peak for, in the order they are listed."""
ROOF_SLACK = 0.005
"""How far above its roof a point may sit and still show as 100 %: rounding, not a fault."""


@dataclass(frozen=True, slots=True)
class Hardware:
    """One accelerator's roofs (or a tensor-parallel group's, see `scaled`)."""

    id: str
    name: str
    peak_flops: float
    """Dense tensor FLOP/s in `dtype`."""
    bandwidth: float
    """Memory bandwidth, bytes/s."""
    memory_bytes: float
    """Memory of all `devices` together, bytes."""
    dtype: str = "bf16"
    other_peaks: tuple[tuple[str, float], ...] = ()
    """Dense peaks in other number formats: (dtype, FLOP/s)."""
    devices: int = 1

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the memory slope meets the compute roof."""
        return self.peak_flops / self.bandwidth

    @property
    def memory_per_device(self) -> float:
        return self.memory_bytes / self.devices

    def attainable(self, intensity: float) -> float:
        """The roof at an intensity: min(peak, intensity · bandwidth), FLOP/s."""
        return min(self.peak_flops, intensity * self.bandwidth)

    def peak_for(self, dtype: str) -> float | None:
        """The dense peak in a number format; None when the profile lists none."""
        return self.peak_flops if dtype == self.dtype else dict(self.other_peaks).get(dtype)

    def for_dtype(self, dtype: str) -> Hardware:
        """These roofs with the peak of `dtype`; unchanged when no peak is listed for it."""
        peak = self.peak_for(dtype)
        if peak is None or dtype == self.dtype:
            return self
        others = ((self.dtype, self.peak_flops), *(p for p in self.other_peaks if p[0] != dtype))
        return replace(self, peak_flops=peak, dtype=dtype, other_peaks=others)

    def scaled(self, devices: int) -> Hardware:
        """`devices` of these as one ideal tensor-parallel group (roofs and memory summed)."""
        if devices < 1:
            raise ValueError("devices must be at least 1")
        if devices == 1:
            return self
        return replace(
            self,
            id=f"{self.id}x{devices}",
            name=f"{devices}× {self.name}",
            peak_flops=self.peak_flops * devices,
            bandwidth=self.bandwidth * devices,
            memory_bytes=self.memory_bytes * devices,
            other_peaks=tuple((dtype, peak * devices) for dtype, peak in self.other_peaks),
            devices=self.devices * devices,
        )


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What the roofline needs to know about a model."""

    id: str
    name: str
    params: float
    """Total parameters P: all of them are resident."""
    active_params: float
    """Parameters used per token (== params for dense models)."""
    bytes_per_param: float
    layers: int
    hidden: int
    kv_bytes_per_token: float
    attention_width: int | None = None
    """Width of the attention matmuls (heads · head_dim); None means `hidden`."""
    compute_dtype: str = "bf16"
    """The number format its matmuls run in: the peak it is held to."""
    experts: int | None = None
    """Routed experts per MoE layer (E); None for dense models or unknown."""
    experts_per_token: int | None = None
    """Routed experts each token chooses per MoE layer (k)."""

    @property
    def weight_bytes(self) -> float:
        """All the weights, bytes: what is resident."""
        return self.params * self.bytes_per_param

    @property
    def attention_dim(self) -> int:
        return self.attention_width if self.attention_width is not None else self.hidden

    @property
    def is_moe(self) -> bool:
        return self.active_params < self.params

    @property
    def has_expert_counts(self) -> bool:
        return self.is_moe and self.experts is not None and self.experts_per_token is not None

    @property
    def expert_params(self) -> float:
        """One routed expert's parameters summed over the MoE layers: (P − P_active)/(E − k)."""
        if self.experts is None or self.experts_per_token is None:
            return 0.0
        return (self.params - self.active_params) / (self.experts - self.experts_per_token)

    @property
    def shared_params(self) -> float:
        """Parameters every token uses: P_active − k · expert_params."""
        return self.active_params - (self.experts_per_token or 0) * self.expert_params

    def experts_touched(self, tokens: float) -> float:
        """Expected distinct routed experts per layer that `tokens` tokens touch."""
        if self.experts is None or self.experts_per_token is None:
            return 0.0
        untouched: float = (1.0 - self.experts_per_token / self.experts) ** max(tokens, 0.0)
        return self.experts * (1.0 - untouched)

    def weight_bytes_read(self, tokens: float) -> float:
        """Weight bytes one pass over `tokens` tokens reads."""
        if self.has_expert_counts:
            read = self.shared_params + self.expert_params * self.experts_touched(tokens)
        else:
            read = min(self.params, max(tokens, 0.0) * self.active_params)
        return self.bytes_per_param * read

    def attention_flops_per_token(self, position: float) -> float:
        """Attention FLOPs of one token that attends to `position` earlier tokens."""
        return 4.0 * self.layers * self.attention_dim * position

    def kv_bytes(self, tokens: float) -> float:
        """KV cache bytes of a context of `tokens` tokens."""
        return tokens * self.kv_bytes_per_token


def roof_for(hw: Hardware, model: ModelProfile) -> Hardware:
    """The roofs `model` is held to on `hw`: the peak of its compute number format."""
    return hw.for_dtype(model.compute_dtype)


@dataclass(frozen=True, slots=True)
class RoofPoint:
    """Work done in some time, placed under the roofs `hw`."""

    flops: float
    bytes_moved: float
    seconds: float
    hw: Hardware

    @property
    def intensity(self) -> float:
        """FLOP per byte moved."""
        return self.flops / self.bytes_moved if self.bytes_moved > 0 else float("inf")

    @property
    def bound(self) -> Literal["memory", "compute"]:
        return "memory" if self.intensity < self.hw.ridge else "compute"

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.seconds

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.bytes_moved / self.seconds

    @property
    def roof_fraction(self) -> float:
        """Achieved over attainable FLOP/s: 1.0 on the roof."""
        return self.achieved_flops_per_s / self.hw.attainable(self.intensity)

    @property
    def pct_of_roof(self) -> float:
        return 100.0 * self.roof_fraction

    @property
    def above_roof(self) -> bool:
        """Faster than the roof allows: a profile (or the engine's counters) must be wrong."""
        return self.roof_fraction > 1.0 + ROOF_SLACK


@dataclass(frozen=True, slots=True)
class PrefillPoint(RoofPoint):
    """One prefill pass of `tokens` tokens."""

    tokens: float
    attention_flops: float

    @property
    def attention_share(self) -> float:
        """Attention's share of the pass's FLOPs."""
        return self.attention_flops / self.flops if self.flops > 0 else 0.0


@dataclass(frozen=True, slots=True)
class DecodePoint(RoofPoint):
    """One decode step of `batch` sequences at context `context`."""

    batch: float
    context: float
    tokens_per_step: float
    weight_bytes: float
    kv_bytes: float

    @property
    def tokens_per_s(self) -> float:
        """Tokens the whole batch emits per second."""
        return self.batch * self.tokens_per_step / self.seconds

    @property
    def tokens_per_s_per_stream(self) -> float:
        return self.tokens_per_step / self.seconds

    @property
    def kv_share(self) -> float:
        """KV bytes as a share of the step's bytes."""
        return self.kv_bytes / self.bytes_moved

    @property
    def kv_over_weights(self) -> float:
        """KV bytes relative to the weight bytes (the seed's "13 % more bytes")."""
        return self.kv_bytes / self.weight_bytes


@dataclass(frozen=True, slots=True)
class MeasuredPoint(RoofPoint):
    """What the counters say the lane did per second (`seconds` is 1)."""

    flops_ratio: float | None
    """Measured over modelled FLOP/s (1.0 = the model agrees); None with no model point."""
    bytes_ratio: float | None


@dataclass(frozen=True, slots=True)
class GpuPoint(RoofPoint):
    """Where the GPUs' own activity counters place the lane, per second (`seconds` is 1):
    DRAM activity × the peak bandwidth moved, tensor activity × the peak FLOP/s done."""

    dram_active: float
    tensor_active: float


GPU_POINT_LEGEND = (
    "G measured by the GPU: DRAM activity × peak bandwidth, tensor activity × peak FLOP/s; "
    "an upper bound of the bytes and FLOPs moved (the ratios count busy cycles, not bytes "
    "or FLOPs)"
)


def gpu_point(
    hw: Hardware, model: ModelProfile, dram_active: float | None, tensor_active: float | None
) -> tuple[GpuPoint | None, str]:
    """The measured point G under the roof of the model's number format, or why there is none."""
    if dram_active is None or tensor_active is None:
        return None, "no DRAM and tensor activity (dcgm-exporter's profiling fields give them)"
    if dram_active <= 0 or tensor_active <= 0:
        return None, "the GPUs' memory interface or tensor pipes were idle"
    hw = roof_for(hw, model)
    flops, moved = tensor_active * hw.peak_flops, dram_active * hw.bandwidth
    return GpuPoint(flops, moved, 1.0, hw, dram_active, tensor_active), ""


def _timed(hw: Hardware, flops: float, bytes_moved: float, seconds: float | None) -> float:
    """`seconds` when timed, else the time on the roof: arithmetic or memory, the longer."""
    return max(flops / hw.peak_flops, bytes_moved / hw.bandwidth) if seconds is None else seconds


def prefill_pass(
    hw: Hardware,
    model: ModelProfile,
    tokens: float,
    *,
    prefix: float = 0.0,
    seconds: float | None = None,
) -> PrefillPoint:
    """Prefill of `tokens` new tokens after `prefix` cached ones; on the roof unless timed."""
    if tokens <= 0:
        raise ValueError("a prefill pass needs at least one token")
    return _prefill_point(roof_for(hw, model), model, tokens, prefix + tokens / 2.0, seconds)


def _prefill_point(
    hw: Hardware, model: ModelProfile, tokens: float, mean_position: float, seconds: float | None
) -> PrefillPoint:
    """A pass whose tokens sit at `mean_position` on average (attention is linear in it)."""
    attention = tokens * model.attention_flops_per_token(mean_position)
    flops = tokens * 2.0 * model.active_params + attention
    moved = model.weight_bytes_read(tokens)
    seconds = _timed(hw, flops, moved, seconds)
    return PrefillPoint(flops, moved, seconds, hw, tokens=tokens, attention_flops=attention)


def decode_step(
    hw: Hardware,
    model: ModelProfile,
    batch: float,
    context: float,
    *,
    tokens_per_step: float = 1.0,
    seconds: float | None = None,
) -> DecodePoint:
    """One decode step at batch B, context C; on the roof unless timed.
    With speculative decoding each sequence keeps `tokens_per_step` tokens per step; the
    FLOPs count those, the weights and each KV cache are read once per step."""
    if batch <= 0:
        raise ValueError("a decode step needs a batch of at least one sequence")
    hw = roof_for(hw, model)
    tokens = batch * tokens_per_step
    flops = tokens * (2.0 * model.active_params + model.attention_flops_per_token(context))
    weights, kv = model.weight_bytes_read(tokens), batch * model.kv_bytes(context)
    seconds = _timed(hw, flops, weights + kv, seconds)
    return DecodePoint(
        flops, weights + kv, seconds, hw, batch, context, tokens_per_step, weights, kv
    )


@dataclass(frozen=True, slots=True)
class LaneLoad:
    """The lane figures the operating points need; None where a figure is missing."""

    effective_prefill_rate: float | None = None
    """Prefill tokens computed per second of prefill time."""
    mean_prompt: float | None = None
    mean_fresh_prefill: float | None = None
    """Prompt tokens per request not served from the prefix cache."""
    mean_generated: float | None = None
    running: float | None = None
    """Mean running requests (the decode batch)."""
    itl_s: float | None = None
    """Mean inter-token step, seconds."""
    tokens_per_step: float | None = None
    """Tokens per decode step (> 1 with speculative decoding)."""
    measured_flops_per_s: float | None = None
    measured_bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class OperatingPoints:
    """Where the lane sits under the roof; a point is None with a reason when inputs lack."""

    prefill: PrefillPoint | None
    decode: DecodePoint | None
    decode_ceiling_tokens_per_s: float | None
    """The roof's tokens per second at the lane's batch and context."""
    measured: MeasuredPoint | None
    prefill_reason: str = ""
    decode_reason: str = ""
    measured_reason: str = ""
    gpu: GpuPoint | None = None
    """G: what the GPUs' activity counters measured."""
    gpu_reason: str = "no GPU source (a lane's gpu: in the config)"

    @property
    def above_roof(self) -> bool:
        """Whether any of the lane's points sits above its roof."""
        points = (self.prefill, self.decode, self.measured)
        return any(point is not None and point.above_roof for point in points)


@dataclass(frozen=True, slots=True)
class RooflineView:
    """Everything the roofline pane draws: the roofs and, when known, the lane's points.
    `hw` is held to the model's compute number format on construction, so the roof drawn is
    the one the points were placed under."""

    hw: Hardware
    model: ModelProfile
    points: OperatingPoints | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "hw", roof_for(self.hw, self.model))


def _missing(value: float | None, what: str, idle: str) -> str:
    """Why a figure can't be used: absent, or zero because nothing happened."""
    return f"{what} missing" if value is None else idle


def _operating_prefill(
    load: LaneLoad, hw: Hardware, model: ModelProfile, chunk_tokens: int | None
) -> tuple[PrefillPoint | None, str]:
    """Prefill as the lane runs it: passes of the chunk (or the fresh prefill) at its rate.
    The computed tokens of a request sit between its cached prefix and its end, so their
    mean position is `prompt − fresh / 2`; attention FLOPs are linear in it, so one
    representative pass at that position has the lane's mean FLOPs per token."""
    rate = load.effective_prefill_rate
    if rate is None or rate <= 0:
        return None, _missing(rate, "effective prefill rate", "no prefill in the window")
    fresh = load.mean_fresh_prefill
    tokens = float(chunk_tokens) if chunk_tokens else fresh
    if tokens is None:
        return None, "no chunk size and no mean fresh prefill per request"
    if tokens <= 0:
        return None, "no fresh prefill: every prompt token came from the cache"
    prompt = load.mean_prompt
    if prompt is None:
        mean_position = tokens / 2.0
    else:
        mean_position = prompt / 2.0 if fresh is None else max(prompt - fresh / 2.0, 0.0)
    return _prefill_point(hw, model, tokens, mean_position, seconds=tokens / rate), ""


def _operating_decode(
    load: LaneLoad, hw: Hardware, model: ModelProfile
) -> tuple[DecodePoint | None, float | None, str]:
    """(lane's step, the roof's tokens/s at the same batch and context, reason)."""
    itl, running, prompt = load.itl_s, load.running, load.mean_prompt
    if itl is None or itl <= 0:
        return None, None, _missing(itl, "inter-token step", "no decode steps in the window")
    if running is None or running <= 0:
        return None, None, _missing(running, "running requests", "no requests running")
    if prompt is None or prompt <= 0:
        return None, None, _missing(prompt, "mean prompt length", "no prompts in the window")
    if load.mean_generated is None:
        return None, None, "mean generated length missing"
    # A step runs whole sequences: a mean below 1 includes idle time, not fractional batches.
    batch = max(running, 1.0)
    context = prompt + max(load.mean_generated, 0.0) / 2.0
    tokens_per_step = max(load.tokens_per_step or 1.0, 1.0)
    lane = decode_step(hw, model, batch, context, tokens_per_step=tokens_per_step, seconds=itl)
    roof = decode_step(hw, model, batch, context, tokens_per_step=tokens_per_step)
    return lane, roof.tokens_per_s, ""


def _ratio(measured: float, modelled: float) -> float | None:
    return measured / modelled if modelled > 0 else None


def _operating_measured(
    load: LaneLoad, hw: Hardware, prefill: PrefillPoint | None, decode: DecodePoint | None
) -> tuple[MeasuredPoint | None, str]:
    """The counters' point, compared with prefill + decode as modelled (they run side by side
    under chunked prefill, so their FLOP/s add)."""
    flops = load.measured_flops_per_s
    if flops is None or flops <= 0:
        return None, _missing(flops, "measured FLOP/s", "measured counters are not moving")
    moved = load.measured_bytes_per_s
    if moved is None or moved <= 0:
        return None, _missing(moved, "measured bytes/s", "measured byte counters are not moving")
    modelled = [p for p in (prefill, decode) if p is not None]
    flops_ratio = _ratio(flops, sum(p.achieved_flops_per_s for p in modelled))
    bytes_ratio = _ratio(moved, sum(p.achieved_bytes_per_s for p in modelled))
    return MeasuredPoint(flops, moved, 1.0, hw, flops_ratio, bytes_ratio), ""


def operating_points(
    load: LaneLoad, hw: Hardware, model: ModelProfile, chunk_tokens: int | None = None
) -> OperatingPoints:
    """The lane's prefill, decode and measured points under this hardware's roof."""
    hw = roof_for(hw, model)
    prefill, prefill_reason = _operating_prefill(load, hw, model, chunk_tokens)
    decode, ceiling, decode_reason = _operating_decode(load, hw, model)
    measured, measured_reason = _operating_measured(load, hw, prefill, decode)
    why = (prefill_reason, decode_reason, measured_reason)
    return OperatingPoints(prefill, decode, ceiling, measured, *why)

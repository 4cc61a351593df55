"""What the roofline knows about a GPU and a model, and what follows from it. No I/O.

- A GPU has a dense tensor peak per number format (BF16, FP8): a model is held to the peak
  of the format its matmuls run in. Where the GPU lists no peak for that format (an A100
  has no FP8 tensor cores) the model computes in the GPU's own format, as weight-only
  kernels do.
- N GPUs in one tensor-parallel group are one ideal roof: peaks, bandwidth and memory
  summed, weights and KV split evenly over them.
- Every weight is resident; a pass reads only the weights its tokens use. For a dense
  model that is all of them. For a MoE with its expert counts, the weights read are the
  shared part (attention, embeddings, dense layers, shared experts) plus the routed experts
  the tokens touch: T tokens each choosing k of E experts touch `E·(1 − (1 − k/E)^T)` on
  average when tokens route independently and uniformly, an estimate that is an upper
  bound when routing is skewed or tokens route alike (fewer distinct experts), and never
  more than all E. Without expert counts, `min(P, T·P_active)` (no overlap between
  tokens' experts) is the upper bound used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

DTYPES = ("bf16", "fp8")
"""Number formats a profile can give a peak for, in the order they are listed."""


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
    """The number format `peak_flops` is for."""
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
        if dtype == self.dtype:
            return self.peak_flops
        return dict(self.other_peaks).get(dtype)

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
        """Expected distinct routed experts per layer that `tokens` tokens touch (uniform,
        independent routing): E·(1 − (1 − k/E)^T)."""
        if self.experts is None or self.experts_per_token is None:
            return 0.0
        untouched: float = (1.0 - self.experts_per_token / self.experts) ** max(tokens, 0.0)
        return self.experts * (1.0 - untouched)

    def weight_bytes_read(self, tokens: float) -> float:
        """Weight bytes one pass over `tokens` tokens reads (see the module's note)."""
        if self.has_expert_counts:
            read = self.shared_params + self.expert_params * self.experts_touched(tokens)
        else:
            read = min(self.params, max(tokens, 0.0) * self.active_params)
        return self.bytes_per_param * read

    def flops_per_token(self, position: float) -> float:
        """FLOPs of one token that attends to `position` earlier tokens."""
        return 2.0 * self.active_params + self.attention_flops_per_token(position)

    def attention_flops_per_token(self, position: float) -> float:
        return 4.0 * self.layers * self.attention_dim * position

    def kv_bytes(self, tokens: float) -> float:
        """KV cache bytes of a context of `tokens` tokens."""
        return tokens * self.kv_bytes_per_token


def roof_for(hw: Hardware, model: ModelProfile) -> Hardware:
    """The roofs `model` is held to on `hw`: the peak of its compute number format."""
    return hw.for_dtype(model.compute_dtype)

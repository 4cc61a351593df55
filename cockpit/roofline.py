"""The mini roofline: pure arithmetic on hardware and model profiles. No I/O."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hardware:
    """One accelerator's roofs."""

    id: str
    name: str
    peak_flops: float
    """Dense BF16 FLOP/s."""
    bandwidth: float
    """Memory bandwidth, bytes/s."""
    memory_bytes: float

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the memory slope meets the compute roof."""
        return self.peak_flops / self.bandwidth


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What the roofline needs to know about a model."""

    id: str
    name: str
    params: float
    """Total parameters P."""
    active_params: float
    """Parameters used per token (== params for dense models)."""
    bytes_per_param: float
    layers: int
    hidden: int
    kv_bytes_per_token: float

"""The simulated lanes' shapes: vLLM's histogram bounds and two lane presets."""

from __future__ import annotations

from dataclasses import dataclass

# --- vLLM's default histogram bounds (vllm/v1/metrics/buckets.py) --------------------------

REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKETS: tuple[float, ...] = (
    1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
)  # fmt: skip
PARAMS_N_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 20)
PREEMPTIONS_BUCKETS: tuple[float, ...] = (1, 2, 3, 4, 5, 10, 20)


def request_token_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 series up to `max_model_len` (the request-tokens family)."""
    bounds: list[float] = []
    magnitude = 1
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * magnitude
            if value > max_model_len:
                return tuple(bounds)
            bounds.append(float(value))
        magnitude *= 10


# --- lane presets -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LanePreset:
    """The shape of one simulated lane: its hardware, its model and its traffic."""

    name: str
    served_model: str
    hardware: str
    model: str
    gpus: int
    request_rate: float
    """Requests per second arriving at the lane."""
    prompt_mix: tuple[tuple[float, int, int], ...]
    """(share, low, high): prompt lengths drawn log-uniform in [low, high]."""
    max_model_len: int
    hit_mean: float
    """Mean fraction of a prompt found in the prefix cache."""
    hit_concentration: float
    gen_median: float
    gen_sigma: float
    long_gen_share: float
    max_tokens: int
    spec_accept_by_pos: tuple[float, ...]
    """P(draft position j accepted); empty means no speculative decoding."""
    step_s: float
    prefill_rate: float
    """Effective prefill tokens per second per request."""
    queue_mean_s: float
    chunk_tokens: int
    block_size: int
    num_gpu_blocks: int
    gpu_memory_utilization: float
    active_params: float
    layers: int
    hidden: int
    kv_bytes_per_token: int
    weight_bytes_per_step: float
    """HBM bytes of weights read per engine step, whole lane."""

    @property
    def spec_k(self) -> int:
        return len(self.spec_accept_by_pos)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size


AGENT_PROMPT_MIX: tuple[tuple[float, int, int], ...] = (
    (0.50, 40, 500),
    (0.36, 500, 10_000),
    (0.08, 10_000, 100_000),
    (0.06, 100_000, 500_000),
)

PRESETS: dict[str, LanePreset] = {
    "gb300-dsv4": LanePreset(
        name="gb300-dsv4",
        served_model="deepseek-ai/DeepSeek-V3",
        hardware="gb300",
        model="deepseek-v3",
        gpus=4,
        request_rate=1.5,
        prompt_mix=AGENT_PROMPT_MIX,
        max_model_len=1_048_576,
        hit_mean=0.916,
        hit_concentration=60.0,
        gen_median=140.0,
        gen_sigma=1.0,
        long_gen_share=0.03,
        max_tokens=8192,
        # 1 + sum = 2.76 tokens/step; sum / k = 44 % of draft tokens accepted
        spec_accept_by_pos=(0.70, 0.50, 0.33, 0.23),
        step_s=0.0263,
        prefill_rate=7500.0,
        queue_mean_s=0.24,
        chunk_tokens=8192,
        block_size=64,
        num_gpu_blocks=68_824,
        gpu_memory_utilization=0.92,
        active_params=37e9,
        layers=61,
        hidden=7168,
        kv_bytes_per_token=70_272,
        weight_bytes_per_step=120e9,
    ),
    "h100-llama8b": LanePreset(
        name="h100-llama8b",
        served_model="meta-llama/Llama-3.1-8B-Instruct",
        hardware="h100",
        model="llama-3.1-8b",
        gpus=1,
        request_rate=1.2,
        prompt_mix=(
            (0.55, 40, 500),
            (0.35, 500, 10_000),
            (0.08, 10_000, 60_000),
            (0.02, 60_000, 120_000),
        ),
        max_model_len=131_072,
        hit_mean=0.65,
        hit_concentration=14.0,
        gen_median=160.0,
        gen_sigma=1.0,
        long_gen_share=0.02,
        max_tokens=4096,
        spec_accept_by_pos=(),
        step_s=0.0118,
        prefill_rate=11_000.0,
        queue_mean_s=0.05,
        chunk_tokens=2048,
        block_size=16,
        num_gpu_blocks=26_700,
        gpu_memory_utilization=0.9,
        active_params=8.03e9,
        layers=32,
        hidden=4096,
        kv_bytes_per_token=131_072,
        weight_bytes_per_step=16.06e9,
    ),
}
"""Two lanes of different shape, keyed by lane name."""


# --- KV connectors ----------------------------------------------------------------------

TRANSFER_SIZE_BUCKETS: tuple[float, ...] = (
    1e6, 5e6, 10e6, 20e6, 40e6, 60e6, 80e6, 100e6, 150e6, 200e6,
)  # fmt: skip
"""Offload load/store sizes in bytes (`kv_connector/v1/offloading/metrics.py`)."""
LOOKUP_SYNC_BUCKETS: tuple[float, ...] = (
    0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1,
)  # fmt: skip
NIXL_POST_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0,
)  # fmt: skip
"""NIXL's post time; its transfer time drops the first bound (`nixl/stats.py`)."""
NIXL_BYTES_BUCKETS: tuple[float, ...] = tuple(float(2 ** (10 + i)) for i in range(1, 25, 2))
NIXL_DESCRIPTOR_BUCKETS: tuple[float, ...] = (
    10, 20, 30, 50, 75, 100, 200, 400, 1000, 2000, 4000, 10000, 20000, 50000,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ConnectorShape:
    """A lane's KV connectors, vLLM's MultiConnector of a NixlConnector (a share of the
    requests were prefilled by a peer, their KV read over NIXL) and an OffloadingConnector
    with a CPU tier (`store_threshold` 2): what they find and how fast they move it."""

    p2p_share: float
    """Share of requests whose prompt KV a prefill peer computed."""
    host_hit_mean: float
    """Mean share of the prompt the GPU cache lacked that the CPU tier holds."""
    cpu_bytes: int
    """The CPU tier's size (`cpu_bytes_to_use`)."""
    load_bytes_s: float
    store_bytes_s: float
    nixl_bytes_s: float
    nixl_latency_s: float
    skip_share: float
    """Share of stores the reuse threshold skips (blocks seen only once)."""
    alloc_failure_p: float
    nixl_failure_p: float
    notify_failure_p: float


DEMO_CONNECTORS: dict[str, ConnectorShape] = {
    "h100-llama8b": ConnectorShape(
        p2p_share=0.15,
        host_hit_mean=0.6,
        cpu_bytes=64 * 2**30,
        load_bytes_s=22e9,  # PCIe 5 x16, pinned host memory
        store_bytes_s=18e9,
        nixl_bytes_s=40e9,  # 400 Gb/s RDMA
        nixl_latency_s=0.0004,
        skip_share=0.3,
        alloc_failure_p=0.001,
        nixl_failure_p=0.004,
        notify_failure_p=0.002,
    ),
}
"""The demo's lanes that run KV connectors, keyed by lane name."""

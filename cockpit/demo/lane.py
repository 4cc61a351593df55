"""A simulated vLLM V1 lane: `/metrics` on loopback, moving in the agent-era shape.

The engine's state is `cockpit.demo.lane_engine`; this renders it as vLLM's metric families
and serves them."""

from __future__ import annotations

import contextlib
import random
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from cockpit.demo.lane_engine import (
    CACHED_SOURCES,
    CONNECTOR_KEYS,
    FINISHED_REASONS,
    PROMPT_SOURCES,
    ConnectorState,
    Histogram,
    LaneState,
)
from cockpit.demo.lane_presets import PRESETS, ConnectorShape, LanePreset

LOOPBACK = "127.0.0.1"

# --- the exposition ---------------------------------------------------------------------


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=labels)


def _with_created(family: Metric, labels: dict[str, str], created: float) -> None:
    family.samples.append(Sample(family.name + "_created", labels, created))


class _LaneCollector(Collector):
    """Renders a lane's state as vLLM V1 writes it (names, help texts, labels, `_created`)."""

    def __init__(self, lane: SimulatedLane) -> None:
        self._lane = lane

    def collect(self) -> Iterator[Metric]:
        return iter(self._lane.families())


def lane_families(state: LaneState, created: float | None) -> list[Metric]:
    """Every metric family of the lane, in vLLM's order; `created=None` writes no `_created`
    series (prometheus_client with `PROMETHEUS_DISABLE_CREATED_SERIES`)."""
    p = state.preset
    base = ["engine", "model_name"]
    values = ["0", p.served_model]
    labelled = dict(zip(base, values, strict=True))
    fams: list[Metric] = []

    def counter(name: str, doc: str, value: float) -> None:
        fam = _counter(name, doc, base)
        fam.add_metric(values, value, created=created)
        fams.append(fam)

    def gauge(name: str, doc: str, value: float) -> None:
        fam = GaugeMetricFamily(name, doc, labels=base)
        fam.add_metric(values, value)
        fams.append(fam)

    c = state.counters
    if p.spec_k:
        counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", c["spec_drafts"])
        counter(
            "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", c["spec_draft_tokens"]
        )
        counter(
            "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", c["spec_accepted"]
        )
        fam = _counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            [*base, "position"],
        )
        for j, n in enumerate(state.per_pos):
            fam.add_metric([*values, str(j)], n, created=created)
        fams.append(fam)
    mfu = "(for Model Flops Utilization calculations)."
    counter(
        "vllm:estimated_flops_per_gpu_total",
        f"Estimated number of floating point operations per GPU {mfu}",
        c["flops"],
    )
    counter(
        "vllm:estimated_read_bytes_per_gpu_total",
        f"Estimated number of bytes read from memory per GPU {mfu}",
        c["read_bytes"],
    )
    counter(
        "vllm:estimated_write_bytes_per_gpu_total",
        f"Estimated number of bytes written to memory per GPU {mfu}",
        c["write_bytes"],
    )
    gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.", state.running
    )
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", state.waiting)
    waiting = GaugeMetricFamily(
        "vllm:num_requests_waiting_by_reason",
        "Number of waiting requests by reason.",
        labels=[*base, "reason"],
    )
    waiting.add_metric([*values, "capacity"], state.waiting)
    waiting.add_metric([*values, "deferred"], 0)
    fams.append(waiting)
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", state.kv_usage)
    sleep = GaugeMetricFamily(
        "vllm:engine_sleep_state", "Engine sleep state.", labels=[*base, "sleep_state"]
    )
    for asleep in ("awake", "weights_offloaded", "discard_all"):
        sleep.add_metric([*values, asleep], 1.0 if asleep == "awake" else 0.0)
    fams.append(sleep)
    # The frontend's queue limits: labelled by model and reason, no `engine`.
    fam = _counter(
        "vllm:admission_rejections",
        "Requests rejected at admission by the queue limits.",
        ["model_name", "reason"],
    )
    for limit in ("max_num_queued_reqs", "max_num_queued_tokens"):
        fam.add_metric([p.served_model, limit], 0.0, created=created)
    fams.append(fam)
    counter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        c["prefix_cache_queries"],
    )
    counter(
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        c["prefix_cache_hits"],
    )
    kv = state.connector.counters if state.connector else dict.fromkeys(CONNECTOR_KEYS, 0.0)
    counter(
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector cross-instance cache sharing, "
        "in terms of number of queried tokens.",
        kv["queries"],
    )
    counter(
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector cross-instance cache sharing, "
        "in terms of number of cached tokens.",
        kv["host"] + kv["p2p"],
    )
    counter(
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        c["preemptions"],
    )
    counter("vllm:prompt_tokens", "Number of prefill tokens processed.", c["prompt_tokens"])
    hits, external = c["prefix_cache_hits"], kv["host"] + kv["p2p"]
    by_source = {
        "local_compute": c["prompt_tokens"] - hits - external,
        "local_cache_hit": hits,
        "external_kv_transfer": external,
    }
    fam = _counter(
        "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", [*base, "source"]
    )
    for source in PROMPT_SOURCES:
        fam.add_metric([*values, source], by_source[source], created=created)
    fams.append(fam)
    counter(
        "vllm:prompt_tokens_cached",
        "Number of cached prompt tokens (local + external).",
        hits + external,
    )
    fam = _counter(
        "vllm:prompt_tokens_cached_by_source",
        "Prefix-cache hit tokens by the cache tier that supplied them.",
        [*base, "source"],
    )
    tiers = {"device": hits, "host": kv["host"], "p2p": kv["p2p"]}
    for source in CACHED_SOURCES:
        fam.add_metric([*values, source], tiers.get(source, 0.0), created=created)
    fams.append(fam)
    counter(
        "vllm:generation_tokens", "Number of generation tokens processed.", c["generation_tokens"]
    )
    fam = _counter(
        "vllm:request_success",
        "Count of successfully processed requests.",
        [*base, "finished_reason"],
    )
    for reason in FINISHED_REASONS:
        fam.add_metric([*values, reason], state.success[reason], created=created)
    fams.append(fam)
    for key, doc in HISTOGRAM_DOCS:
        fams.append(_histogram(f"vllm:{key}", doc, state.hists[key], labelled, created))
    if state.connector:
        fams += connector_families(state.connector, labelled, created)
    fams.append(cache_config_info(p))
    return fams


def _histogram(
    name: str, doc: str, hist: Histogram, labels: dict[str, str], created: float | None
) -> HistogramMetricFamily:
    fam = HistogramMetricFamily(name, doc, labels=list(labels))
    fam.add_metric(list(labels.values()), hist.cumulative(), hist.total)
    if created is not None:
        _with_created(fam, labels, created)
    return fam


OFFLOAD_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("kv_offload_load_bytes", "load_bytes", "Total bytes loaded from offload storage to GPU."),
    ("kv_offload_load_time", "load_time",
     "Total load time from offload storage to GPU, in seconds."),
    ("kv_offload_store_bytes", "store_bytes", "Total bytes stored from GPU to offload storage."),
    ("kv_offload_store_time", "store_time",
     "Total store time from GPU to offload storage, in seconds."),
    ("kv_offload_allocation_failure", "allocation_failure",
     "Number of KV offload store allocation attempts that failed."),
    ("kv_offload_stores_skipped", "stores_skipped",
     "Number of KV offload stores skipped because the reuse threshold was not reached."),
    ("nixl_num_failed_transfers", "num_failed_transfers",
     "Number of failed NIXL KV Cache transfers."),
    ("nixl_num_failed_notifications", "num_failed_notifications",
     "Number of failed NIXL KV Cache notifications."),
    ("nixl_num_kv_expired_reqs", "",
     "Number of requests that had their KV expire. NOTE: This metric is tracked on the P "
     "instance."),
)  # fmt: skip
"""(name, counter, help) of the connectors' counters: the OffloadingConnector's
(`kv_connector/v1/offloading/metrics.py`), its CPU tier's (`v1/kv_offload/cpu/spec.py`,
`store_threshold` 2) and NIXL's (`nixl/stats.py`; expiry counts on the prefill side: 0 here)."""
CONNECTOR_HISTOGRAMS: tuple[tuple[str, str, str], ...] = (
    ("kv_offload_load_size", "load_size", "Histogram of KV offload load operation size, in bytes."),
    ("kv_offload_store_size", "store_size",
     "Histogram of KV offload store operation size, in bytes."),
    ("kv_offload_lookup_sync_delay_seconds", "lookup_sync_delay_seconds",
     "Histogram of the time spent in a single offload lookup call, in seconds."),
    ("nixl_xfer_time_seconds", "xfer_time_seconds",
     "Histogram of transfer duration for NIXL KV Cache transfers."),
    ("nixl_post_time_seconds", "post_time_seconds",
     "Histogram of transfer post time for NIXL KV Cache transfers."),
    ("nixl_bytes_transferred", "bytes_transferred",
     "Histogram of bytes transferred per NIXL KV Cache transfers."),
    ("nixl_num_descriptors", "num_descriptors",
     "Histogram of number of descriptors per NIXL  KV Cache transfers."),
)  # fmt: skip
CPU_USAGE_DOC = (
    "Fraction of CPU KV-cache space currently pinned by active transfers (0.0 = idle, 1.0 = "
    "saturated). Sustained high values indicate transfers (stores or promotions) may be "
    "dropped due to insufficient capacity."
)
TRANSFER_TYPES = (("CPU_to_GPU", "load"), ("GPU_to_CPU", "store"))
DEPRECATED_TOTALS = (
    ("bytes", "Number of bytes offloaded by KV connector"),
    ("time", "Total time measured by all KV offloading operations"),
)
"""The deprecated series' `transfer_type`, which vLLM still writes for a CPU tier."""


def connector_families(
    kv: ConnectorState, labels: dict[str, str], created: float | None
) -> list[Metric]:
    """The KV connectors' families as vLLM registers them for this lane's engine."""
    fams: list[Metric] = []
    for name, key, doc in OFFLOAD_COUNTERS:
        fam = _counter(f"vllm:{name}", doc, list(labels))
        fam.add_metric(list(labels.values()), kv.counters[key] if key else 0.0, created=created)
        fams.append(fam)
    for name, key, doc in CONNECTOR_HISTOGRAMS:
        fams.append(_histogram(f"vllm:{name}", doc, kv.hists[key], labels, created))
    usage = GaugeMetricFamily(
        "vllm:kv_offload_cpu_cache_usage_perc", CPU_USAGE_DOC, labels=list(labels)
    )
    usage.add_metric(list(labels.values()), kv.usage)
    fams.append(usage)
    typed = [*labels, "transfer_type"]
    for suffix, doc in DEPRECATED_TOTALS:
        fam = _counter(f"vllm:kv_offload_total_{suffix}", doc, typed)
        for transfer, way in TRANSFER_TYPES:
            fam.add_metric(
                [*labels.values(), transfer], kv.counters[f"{way}_{suffix}"], created=created
            )
        fams.append(fam)
    doc = "Histogram of KV offload transfer size, in bytes."
    sizes = HistogramMetricFamily("vllm:kv_offload_size", doc, labels=typed)
    for transfer, way in TRANSFER_TYPES:
        hist = kv.hists[f"{way}_size"]
        sizes.add_metric([*labels.values(), transfer], hist.cumulative(), hist.total)
    if created is not None:
        for transfer, _ in TRANSFER_TYPES:
            _with_created(sizes, {**labels, "transfer_type": transfer}, created)
    fams.append(sizes)
    return fams


HISTOGRAM_DOCS: tuple[tuple[str, str], ...] = (
    ("request_prompt_tokens", "Number of prefill tokens processed."),
    ("request_generation_tokens", "Number of generation tokens processed."),
    ("iteration_tokens_total", "Histogram of number of tokens per engine_step."),
    ("request_max_num_generation_tokens",
     "Histogram of maximum number of requested generation tokens."),
    ("request_params_n", "Histogram of the n request parameter."),
    ("request_params_max_tokens", "Histogram of the max_tokens request parameter."),
    ("time_to_first_token_seconds", "Histogram of time to first token in seconds."),
    ("inter_token_latency_seconds", "Histogram of inter-token latency in seconds."),
    ("request_time_per_output_token_seconds",
     "Histogram of time_per_output_token_seconds per request."),
    ("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."),
    ("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."),
    ("request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request."),
    ("request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request."),
    ("request_decode_time_seconds", "Histogram of time spent in DECODE phase for request."),
    ("request_num_preemptions", "Histogram of the number of times a request was preempted."),
    (
        "request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
    ),
)  # fmt: skip


def cache_config_info(p: LanePreset) -> GaugeMetricFamily:
    """`vllm:cache_config_info`: CacheConfig fields as string labels + `engine`, no model_name."""
    labels = {
        "block_size": str(p.block_size),
        "cache_dtype": "auto",
        "enable_prefix_caching": "True",
        "engine": "0",
        "gpu_memory_utilization": str(p.gpu_memory_utilization),
        "is_attention_free": "False",
        "kv_cache_max_concurrency": str(round(p.kv_capacity_tokens / p.max_model_len, 2)),
        "kv_cache_size_tokens": str(p.kv_capacity_tokens),
        "kv_offloading_backend": "native",
        "kv_offloading_size": "None",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(p.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_caching_hash_algo": "sha256",
        "sliding_window": "None",
    }
    fam = GaugeMetricFamily(
        "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(labels)
    )
    fam.add_metric(list(labels.values()), 1.0)
    return fam


# --- the simulated lane -----------------------------------------------------------------


class MetricsServer(ThreadingHTTPServer):
    """HTTP/1.1 with kept-alive connections, as vLLM's uvicorn answers; `server_close` also
    ends the connections still open, so a stopped engine answers no one."""

    def __init__(self, port: int, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.connections: set[socket.socket] = set()
        self.lock = threading.Lock()
        super().__init__((LOOPBACK, port), MetricsHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that dropped its connection (reset, broken pipe) is not an error to print:
        the demo shares its terminal with the cockpit."""
        if not isinstance(sys.exception(), OSError):
            super().handle_error(request, client_address)

    def server_close(self) -> None:
        super().server_close()
        with self.lock:
            open_now = list(self.connections)
        for connection in open_now:
            with contextlib.suppress(OSError):  # the client closed it meanwhile
                connection.shutdown(socket.SHUT_RDWR)


class MetricsHandler(BaseHTTPRequestHandler):
    """`/metrics` (and `/`) as text format 0.0.4; anything else 404. No request log on
    stderr: the demo shares its terminal with the cockpit."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    """TCP_NODELAY, as uvicorn sets: the answer's last segment leaves at once instead of waiting
    on the client's delayed ACK of its first (some 40 ms on loopback, at every other scrape)."""
    server: MetricsServer

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] not in ("/metrics", "/"):
            self.answer(404, "text/plain", b"not found: try /metrics\n")
            return
        self.answer(200, CONTENT_TYPE_PLAIN_0_0_4, generate_latest(self.server.registry))

    def answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


def serve_metrics(
    registry: CollectorRegistry, port: int = 0
) -> tuple[MetricsServer, threading.Thread]:
    """Serve the registry on 127.0.0.1 in a daemon thread, always as text format 0.0.4.

    vLLM's `/metrics` negotiates: asked for OpenMetrics 1.0 (Prometheus 2.x asks first),
    prometheus_client 0.26 writes `vllm_prompt_tokens_total` for `vllm:prompt_tokens_total`
    on sample lines. The demo serves the classic text so its names are the catalogue's.
    """
    server = MetricsServer(port, registry)
    thread = threading.Thread(target=server.serve_forever, name="demo-metrics", daemon=True)
    thread.start()
    return server, thread


class SimulatedLane:
    """A vLLM V1 lane on a free loopback port whose metrics advance with time.

    `warm_start` seconds of traffic are simulated at construction, so counters are non-zero
    from the first scrape; with `record_every`, its exposition every that many seconds of it is
    kept in `warm_history` (a scraper given them has the warm start's trend at once).
    `start()` serves `/metrics` and steps the simulation in a daemon thread every `interval`
    seconds; `step(dt)` advances it by hand (tests, benchmarks). With `created_series=False`
    its counters and histograms have no `_created` samples, as an engine run with
    `PROMETHEUS_DISABLE_CREATED_SERIES=true`. With `kv_connector` the engine runs vLLM's
    NixlConnector and OffloadingConnector (a CPU tier) and writes their series.
    """

    def __init__(
        self,
        preset: LanePreset | str = "gb300-dsv4",
        *,
        seed: int | None = 0,
        warm_start: float = 300.0,
        record_every: int = 0,
        interval: float = 0.25,
        clock: Callable[[], float] = time.time,
        created_series: bool = True,
        kv_connector: ConnectorShape | None = None,
    ) -> None:
        self.preset = PRESETS[preset] if isinstance(preset, str) else preset
        self.interval = interval
        self._clock = clock
        self._created = clock() - warm_start
        self._created_series = created_series
        connector = None
        if kv_connector is not None:  # its own generator: the lane's traffic stays the same
            kv_rng = random.Random(None if seed is None else f"kv-connector-{seed}")
            connector = ConnectorState(kv_connector, self.preset, kv_rng)
        self._state = LaneState(self.preset, random.Random(seed), self._created, connector)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stepper: threading.Thread | None = None
        self._server: MetricsServer | None = None
        self._server_thread: threading.Thread | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_LaneCollector(self))
        self.warm_history: list[tuple[float, str]] = []
        """(time, exposition) every `record_every` seconds of the warm start, oldest first."""
        whole = int(warm_start)
        for second in range(1, whole + 1):
            self._state.advance(1.0)
            if record_every and second % record_every == 0:
                self.warm_history.append((self._state.now, self.render()))
        self._state.advance(warm_start - whole)

    @property
    def name(self) -> str:
        return self.preset.name

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"lane {self.name} is not serving; call start() first")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/metrics"

    def step(self, dt: float) -> None:
        """Advance the simulation by `dt` seconds."""
        with self._lock:
            self._state.advance(dt)

    def families(self) -> list[Metric]:
        with self._lock:
            return lane_families(self._state, self._created if self._created_series else None)

    def render(self) -> str:
        """The exposition text a scrape would return now."""
        return generate_latest(self.registry).decode()

    def start(self, port: int = 0) -> str:
        """Serve `/metrics` on 127.0.0.1 (port 0: any free one), start stepping; return the URL."""
        self._server, self._server_thread = serve_metrics(self.registry, port)
        self._stop.clear()
        self._stepper = threading.Thread(
            target=self._run, name=f"demo-lane-{self.name}", daemon=True
        )
        self._stepper.start()
        return self.url

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            self.step(now - last)
            last = now

    def stop(self) -> None:
        """Stop stepping and serving; frees the port."""
        self._stop.set()
        if self._stepper is not None:
            self._stepper.join(timeout=5)
            self._stepper = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._server_thread is not None:
                self._server_thread.join(timeout=5)
            self._server = None
            self._server_thread = None

    def __enter__(self) -> SimulatedLane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

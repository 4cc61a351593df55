"""Config -> the feeds the app and the headless commands read: the real sources, wired."""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING

from cockpit.config.schema import AUTO, Auth, Config, Discover, LaneConfig, LedgerConfig
from cockpit.core.catalogue import split_reason
from cockpit.core.gpu import GpuTotals
from cockpit.core.model import LaneTotals, SourceFailure
from cockpit.core.promql import selector_with
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.core.timeutil import parse_duration, promql_duration
from cockpit.roofline.model import Hardware
from cockpit.runtime.poller import (
    LaneFeed,
    LanePoller,
    LedgerFeed,
    LedgerPoller,
    close_all,
    failure_reason,
    warning_note,
)
from cockpit.sources.gpu import GpuSource, PrometheusGpu, ScrapeGpu, with_gpu
from cockpit.sources.http import SourceError
from cockpit.sources.secret_file import SecretFile, SecretFileError

if TYPE_CHECKING:  # each imported when a lane reads through it: a scraped lane's parser is heavy
    from cockpit.sources.prometheus import PrometheusSource
    from cockpit.sources.scrape import ScrapeSource


@dataclass(eq=False)
class AuthCredentials:
    """An Auth's credentials as they are now: a secret file is read again when it changes
    (a rotated token) or after the server refused it (`forget`)."""

    auth: Auth
    file: SecretFile | None = field(init=False)

    def __post_init__(self) -> None:
        self.file = SecretFile(self.auth.secret_file) if not self.auth.secret_env else None

    def secret(self) -> str:
        """The token or password as it is now; SourceError (naming no secret) when absent."""
        if self.file is None:
            value = os.environ.get(self.auth.secret_env)
            if not value:
                raise SourceError(f"auth: environment variable {self.auth.secret_env} is not set")
            return value
        try:
            return self.file.current()
        except SecretFileError as error:
            raise SourceError(f"auth: {error}") from None

    def current(self) -> tuple[str | None, tuple[str, str] | None]:
        """(bearer token, None) or (None, (username, password))."""
        secret = self.secret()
        return (
            (secret, None) if self.auth.kind == "bearer" else (None, (self.auth.username, secret))
        )

    def forget(self) -> None:
        if self.file is not None:
            self.file.forget()


@dataclass(eq=False)
class ConfiguredLane:
    """What a lane feed answers from its config, and the model filter it reads with."""

    lane: LaneConfig
    model_filter: str | None = field(default=None, kw_only=True)
    gpu_source: GpuSource | None = field(default=None, kw_only=True)

    def filter_model(self, model: str | None) -> None:
        self.model_filter = model or None

    name = property(lambda self: self.lane.name)
    gpus = property(lambda self: self.lane.gpus)
    model = property(lambda self: self.lane.model)
    host_kv_tokens = property(lambda self: self.lane.host_kv_tokens)
    slo = property(lambda self: self.lane.slo)
    chunk_tokens = property(lambda self: self.lane.chunk_tokens)

    @property
    def hardware(self) -> Hardware | None:
        """The lane's GPUs as one roof (ideal tensor parallelism)."""
        return self.lane.hardware.scaled(self.lane.gpus) if self.lane.hardware else None

    @property
    def dialect(self) -> str | None:
        return None if self.lane.engine == AUTO else self.lane.engine

    @property
    def selector(self) -> str:
        """The lane's matchers, plus `model_name` (escaped) when a model filter is set."""
        model, lane = self.model_filter, self.lane.selector
        return selector_with(lane, model_name=model) if model else lane


@dataclass(eq=False)
class PrometheusLaneFeed(ConfiguredLane):
    """A lane read with PromQL from a Prometheus-compatible server."""

    source: PrometheusSource | None
    servers: _Servers | None = None
    setup_error: str = ""
    """Why the source could not be built (a missing secret): every read says so."""

    def _source(self) -> PrometheusSource:
        if self.source is None:
            raise SourceError(self.setup_error or "closed")
        return self.source

    async def read(self, window_s: float, end: float | None) -> LaneTotals:
        gpu = self.gpu_source
        riders = gpu.expressions(window_s) if gpu else None
        totals = await self._source().read_lane(
            self.name,
            self.dialect,
            self.selector,
            window_s,
            end,
            riders,
            gpu.trend_expressions if gpu else None,
        )
        return await with_gpu(totals, self.gpu_source, window_s, end)

    async def model_names(self) -> list[str]:
        """The lane's `model_name` values, whatever the model filter (the `m` filter's list)."""
        source, selector = self._source(), self.lane.selector
        return await source.label_values("model_name", self.name, self.dialect, selector)

    def forget(self) -> None:
        """The next read evaluates the window anew, not reusing a long window's totals."""
        if self.source is not None:
            self.source.forget()

    async def probe(self) -> bool:
        """Cheaply: does the server answer again (asked while it can't be reached)?"""
        return self.source is not None and await self.source.probe()

    async def close(self) -> None:
        """Let go of the server's client; the last lane on a server closes it."""
        if self.source is not None and self.servers is not None:
            await self.servers.release(self.source)
            self.source = None
        if self.gpu_source is not None:
            await self.gpu_source.close()


@dataclass(eq=False)
class ScrapeLaneFeed(ConfiguredLane):
    """A lane read by scraping the engine's /metrics directly (no Prometheus)."""

    source: ScrapeSource

    async def read(self, window_s: float, end: float | None) -> LaneTotals:
        """Take a sample (each refresh is one scrape), then the window from the buffer."""
        if end is None:
            await self.source.poll()
        totals = await self.source.read_lane(self.name, self.dialect, self.selector, window_s, end)
        return await with_gpu(totals, self.gpu_source, window_s, end)

    async def model_names(self) -> list[str]:
        """The `model_name` values of the lane's series scraped so far (one scrape if none)."""
        if not self.source.buffer.scrapes:
            await self.source.poll()
        return self.source.label_values("model_name")

    async def close(self) -> None:
        await self.source.aclose()
        if self.gpu_source is not None:
            await self.gpu_source.close()


def prometheus_source(lane: LaneConfig) -> PrometheusSource:
    """A source for the lane's server: its auth (the secret read now, and again when its
    file changes), TLS, timeout, tenant."""
    from cockpit.sources.prometheus import PrometheusSource

    assert lane.prometheus is not None
    credentials = AuthCredentials(lane.auth) if lane.auth is not None else None
    bearer, basic = credentials.current() if credentials is not None else (None, None)
    return PrometheusSource(
        lane.prometheus,
        bearer=bearer,
        auth=basic,
        credentials=credentials,
        verify=lane.ca_file if lane.ca_file else lane.verify_tls,
        timeout=lane.timeout_s,
        headers={"X-Scope-OrgID": lane.tenant} if lane.tenant else None,
    )


SERVER_KEY = attrgetter("prometheus", "auth", "ca_file", "verify_tls", "timeout_s", "tenant")
"""What makes lanes share one server's client."""


@dataclass
class _Servers:
    """One PrometheusSource per (server, credentials, TLS): lanes on one server share it."""

    by_key: dict[tuple[object, ...], PrometheusSource] = field(default_factory=dict)
    users: dict[int, int] = field(default_factory=dict)

    def get(self, lane: LaneConfig) -> PrometheusSource:
        key = SERVER_KEY(lane)
        if key not in self.by_key:
            self.by_key[key] = prometheus_source(lane)
        source = self.by_key[key]
        self.users[id(source)] = self.users.get(id(source), 0) + 1
        return source

    async def release(self, source: PrometheusSource) -> None:
        self.users[id(source)] -= 1
        if self.users[id(source)] == 0:
            await source.aclose()


def build_lane_feeds(config: Config) -> list[LaneFeed]:
    servers = _Servers()
    feeds: list[LaneFeed] = []
    for lane in config.lanes:
        gpu = gpu_source(lane)
        if lane.prometheus:
            try:
                feeds.append(PrometheusLaneFeed(lane, servers.get(lane), servers, gpu_source=gpu))
            except SourceError as error:
                feeds.append(PrometheusLaneFeed(lane, None, setup_error=str(error), gpu_source=gpu))
        else:
            from cockpit.sources.scrape import ScrapeSource

            assert lane.metrics_url is not None
            verify = lane.ca_file or lane.verify_tls
            source = ScrapeSource(
                lane.metrics_url, selector=lane.selector, timeout=lane.timeout_s, verify=verify
            )
            feeds.append(ScrapeLaneFeed(lane, source, gpu_source=gpu))
    return feeds


def gpu_source(lane: LaneConfig) -> GpuSource | None:
    """The lane's GPU source, as its `gpu:` block says (None without one)."""
    if lane.gpu is None:
        return None
    if lane.gpu.selector is not None:
        return PrometheusGpu(lane.gpu.selector)
    if lane.gpu.metrics_url is not None:
        return ScrapeGpu(lane.gpu.metrics_url, timeout=lane.timeout_s, verify=lane.verify_tls)
    from cockpit.sources.gpu_nvml import NvmlGpu

    return NvmlGpu()


def build_feeds(
    config: Config, first_lane: str | None = None
) -> tuple[list[LaneFeed], LedgerFeed | None]:
    """The lane feeds (the one named `first_lane` first) and the ledger feed."""
    lanes = build_lane_feeds(config)
    if first_lane:
        lanes.sort(key=lambda feed: feed.name != first_lane)
    if not config.ledgers:
        return lanes, None
    # The ledger's reader (aiosqlite, sqlite3) is imported only for a ledger.
    from cockpit.sources.ledger import LedgerSet, LedgerTailer, profile_of, resolve_ledger

    tailers = [
        LedgerTailer(
            resolve_ledger(ledger.path),
            ledger.profile or profile_of(ledger.path),
            also_named=also_named,
        )
        for ledger, also_named in distinct_ledgers(config.ledgers)
    ]
    return lanes, LedgerSet(tailers)


def distinct_ledgers(
    ledgers: Sequence[LedgerConfig],
) -> list[tuple[LedgerConfig, tuple[str, ...]]]:
    """Each ledger file once (the same path twice, a symlink to it, a profile name and its
    path are one file), with the other names it was given."""
    from cockpit.sources.ledger import resolve_ledger, same_files

    groups = same_files([resolve_ledger(ledger.path) for ledger in ledgers])
    return [
        (ledgers[first], tuple(ledgers[other].path for other in others))
        for first, *others in groups
    ]


# --- headless: one read of everything -------------------------------------------------------


async def first_samples(feeds: Sequence[LaneFeed], sample_s: float) -> None:
    """For a one-shot read of direct-scrape lanes: a first scrape `sample_s` before the read
    takes the second, so counters move over that stated interval (a scrape that fails is
    said by the read after it)."""
    scraped = [feed for feed in feeds if isinstance(feed, ScrapeLaneFeed)]
    if sample_s <= 0 or not scraped:
        return
    polls = [feed.source.poll() for feed in scraped]
    if None in await asyncio.gather(*polls, return_exceptions=True):
        await asyncio.sleep(sample_s)


async def since_start(feed: LaneFeed) -> str:
    """A window back to the engine's start (its earliest `_created`), from one scrape of a
    direct-scrape lane: its counters then count from 0 at that start. SourceError if none."""
    if not isinstance(feed, ScrapeLaneFeed):
        raise SourceError("--since-start reads an engine's /metrics (--metrics-url)")
    await feed.source.poll()
    started = feed.source.engine_start()
    if started is None:
        raise SourceError("--since-start: the engine's series carry no _created (multiprocess?)")
    return promql_duration(math.ceil(feed.source.buffer.scrapes[-1] - started) + 1)


async def read_once(
    config: Config,
    lane_name: str | None,
    at: float | None,
    sample_s: float = 0.0,
    from_start: bool = False,
) -> tuple[LaneSnapshot | None, LedgerSnapshot | None, list[str]]:
    """One cycle of the chosen lane and the ledger, through the same pollers as the app
    (a direct-scrape lane sampled over `sample_s`, see `first_samples`, or `from_start`
    over its engine's life, see `since_start`)."""
    lanes, ledger = build_feeds(config, lane_name)
    errors: list[str] = []
    lane_snapshot = ledger_snapshot = None
    lane_window = config.window
    read_lane = bool(lanes)
    try:
        if lanes and from_start:
            try:
                lane_window = await since_start(lanes[0])
            except SourceFailure as error:
                errors.append(f"lane {lanes[0].name}: {failure_reason(error)}")
                read_lane = False  # not read over another window than asked
        elif lanes and at is None:
            await first_samples(lanes[:1], sample_s)
        if read_lane:
            lane_poller = LanePoller(lanes[0], config.refresh_s, replay_at=at)
            lane_snapshot = await lane_poller.cycle(lane_window)
            if lane_snapshot.freshness.state != "ok":
                errors.append(f"lane {lanes[0].name}: {lane_snapshot.freshness.reason}")
        if ledger is not None:
            poller = LedgerPoller(ledger, config.refresh_s, prices=config.prices, replay_at=at)
            ledger_snapshot = await poller.cycle(config.ledger_window or config.window)
            if ledger_snapshot.freshness.state != "ok":
                errors.append(f"ledger: {ledger_snapshot.freshness.reason}")
    finally:
        await close_all(lanes, ledger)
    return lane_snapshot, ledger_snapshot, errors


async def check_sources(config: Config, sample_s: float = 0.0) -> list[tuple[bool, str]]:
    """Reach every source once over the config's window; a line each, as `cockpit check`
    prints them (direct-scrape lanes sampled over `sample_s`, see `first_samples`)."""
    results: list[tuple[bool, str]] = []
    lanes = build_lane_feeds(config)
    window_s = parse_duration(config.window)
    try:
        await first_samples(lanes, sample_s)
        for lane, feed in zip(config.lanes, lanes, strict=True):  # a feed per lane, in order
            where = lane.prometheus or lane.metrics_url
            started = time.perf_counter()
            try:
                totals = await feed.read(window_s, None)
            except (SourceFailure, OSError) as error:
                reason = failure_reason(error)
                said = reason if where and reason.startswith(str(where)) else f"{where}: {reason}"
                results.append((False, f"lane {feed.name}: {said}"))
                continue
            elapsed = (time.perf_counter() - started) * 1000
            missing = f"; missing: {missing_causes(totals.missing)}" if totals.missing else ""
            warned = f", {warning_note(totals.warnings)}" if totals.warnings else ""
            watched = f", {totals.coverage_note}" if totals.coverage_note else ""
            facts = f"{totals.dialect}, {elapsed:.0f} ms{watched}{warned}{missing}"
            line = f"lane {feed.name}: {where} ({facts}){_dialect_hint(lane, totals)}"
            results.append((True, line))
            if totals.gpu is not None:
                results.append(gpu_check_line(feed.name, totals.gpu))
        if config.discover is not None:
            results += await _check_discovery(config.discover, window_s)
        for ledger_config, also_named in distinct_ledgers(config.ledgers):
            results.append(
                await _check_ledger(ledger_config.path, ledger_config.profile, also_named)
            )
    finally:
        await close_all(lanes, None)
    return results


async def _check_discovery(discover: Discover, window_s: float) -> list[tuple[bool, str]]:
    """The lanes found by the discovery's label, and how many of them have their GPUs read."""
    from cockpit.core.fleet import NO_GPU_SERIES
    from cockpit.sources.fleet import FleetSource

    server = discover.server
    where = f"discover {discover.label} on {server.prometheus}"
    try:
        fleet = FleetSource(prometheus_source(server), discover.label, server.selector)
    except SourceError as error:  # its secret can't be read
        return [(False, f"{where}: {failure_reason(error)}")]
    try:
        view = await fleet.read(window_s)
    except (SourceFailure, OSError) as error:
        return [(False, f"{where}: {failure_reason(error)}")]
    finally:
        await fleet.aclose()
    found = [row for row in view.rows if not row.gone]
    lines = [(True, f"{where}: {len(found)} lane{'' if len(found) == 1 else 's'} found")]
    if not any(row.has_gpu for row in found):
        return [*lines, (True, f"gpu (lanes found): {NO_GPU_SERIES}")]
    matched = [row for row in found if row.values.get("gpu_util") is not None]
    why = "".join(
        f"; {row.lane}: {row.reasons.get('gpu_util', '')}" for row in found if row not in matched
    )
    said = f"GPU columns for {len(matched)} of {len(found)} lanes found{why}"
    return [*lines, (True, f"gpu (lanes found): {said}")]


def gpu_check_line(lane: str, gpu: GpuTotals) -> tuple[bool, str]:
    """`cockpit check`'s line for a lane's GPU source: which, the GPUs it saw, or why none."""
    if not gpu.gpus:
        return False, f"gpu {lane}: {gpu.source or 'GPU exporter'} at {gpu.where}: {gpu.reason}"
    count = f"{len(gpu.gpus)} GPU" + ("" if len(gpu.gpus) == 1 else "s")
    said = f"; {gpu.reason}" if gpu.reason else ""
    return not gpu.reason, f"gpu {lane}: {gpu.source} at {gpu.where} ({count}){said}"


def missing_causes(missing: Mapping[str, str]) -> str:
    """What a read lacks, by cause: `needs a second scrape ×31, not exposed by this engine ×3`."""
    causes = Counter(split_reason(reason)[0] for reason in missing.values())
    return ", ".join(f"{cause} ×{count}" for cause, count in causes.most_common())


def _dialect_hint(lane: LaneConfig, totals: LaneTotals) -> str:
    """A forced engine dialect that reads nothing at all is most likely the wrong one."""
    if lane.engine == AUTO or totals.values or totals.histograms:
        return ""
    return f"; nothing read as {lane.engine}: is that the engine? (engine: auto detects it)"


async def _check_ledger(
    path: str, profile: str | None, also_named: tuple[str, ...] = ()
) -> tuple[bool, str]:
    from cockpit.sources.ledger import LedgerError, LedgerTailer, profile_of, resolve_ledger

    resolved = resolve_ledger(path)
    tailer = LedgerTailer(resolved, profile or profile_of(path))
    try:
        totals = await tailer.refresh(parse_duration("90d"))
    except LedgerError as error:
        return False, f"ledger {resolved}: {error}"
    finally:
        await tailer.close()
    info = totals.ledgers[0] if totals.ledgers else None
    schema = f"schema {info.schema_version}" if info else "schema unknown"
    line = f"ledger {resolved}: {schema}, {totals.total.sessions} sessions in 90d"
    also = f"; also named as {', '.join(also_named)}: read once" if also_named else ""
    return True, line + also

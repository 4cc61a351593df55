"""YAML text -> frozen dataclasses. Pure: the caller reads the file; errors name file:line:key."""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import httpx
from yaml.nodes import MappingNode, Node, ScalarNode

from cockpit.config.yaml_values import ConfigError as ConfigError
from cockpit.config.yaml_values import (
    YamlReader,
    boolean,
    choice,
    e_notation,
    integer,
    number,
    text,
)
from cockpit.core.health import Thresholds
from cockpit.core.ledger_figures import Prices
from cockpit.core.slo import NO_SLO, Slo
from cockpit.core.timeutil import WINDOWS, TimeParseError, parse_duration
from cockpit.engines import engines
from cockpit.roofline.model import Hardware, ModelProfile
from cockpit.roofline.profiles import (
    ProfileFieldError,
    hardware_from_mapping,
    model_from_mapping,
    normalize_id,
)

AUTO = "auto"
"""The `engine:` that detects the lane's engine from its metric names."""
ENGINES: tuple[str, ...] = (AUTO, *(engine.name for engine in engines()))
THEME_NAMES: tuple[str, ...] = ("cockpit-dark", "cockpit-light", "cockpit-high-contrast")
"""The cockpit's themes by name, the first the default (their colours: cockpit/themes)."""


@dataclass(frozen=True, slots=True)
class Auth:
    """How to authenticate to a Prometheus; secrets are named, never written in the config."""

    kind: Literal["bearer", "basic"]
    username: str = ""
    secret_env: str = ""
    """Environment variable holding the token or password."""
    secret_file: str = ""
    """File holding the token or password (first line, stripped)."""


@dataclass(frozen=True, slots=True)
class GpuConfig:
    """Where a lane's GPUs are read: exactly one of the three."""

    selector: str | None = None
    """Matchers of an exporter's series on the lane's Prometheus (`job="dcgm"`)."""
    metrics_url: str | None = None
    """An exporter's own /metrics, scraped directly."""
    nvml: bool = False
    """This machine's GPUs, through NVML."""


@dataclass(frozen=True, slots=True)
class LaneConfig:
    name: str
    prometheus: str | None = None
    """Prometheus HTTP API base URL (or Thanos, Mimir, VictoriaMetrics)."""
    metrics_url: str | None = None
    """The engine's own /metrics, scraped directly when no Prometheus is named."""
    selector: str = ""
    """PromQL label matchers without braces, e.g. `job="lane-a"`."""
    engine: str = AUTO
    hardware: Hardware | None = None
    model: ModelProfile | None = None
    gpus: int = 1
    host_kv_tokens: float = 0.0
    """KV tokens held by a host (CPU) tier, added to the GPU's resident tokens."""
    slo: Slo = NO_SLO
    """Latency targets: the share of the window's requests that met each."""
    chunk_tokens: int | None = None
    """Chunked-prefill size; the prefill point's intensity when set."""
    auth: Auth | None = None
    ca_file: str | None = None
    verify_tls: bool = True
    timeout_s: float = 10.0
    ledger_models: tuple[str, ...] = ()
    """The ledger's `provider/model` (or model) names that are this lane's traffic."""
    tenant: str | None = None
    """Sent as `X-Scope-OrgID` (a Mimir, Cortex or multi-tenant Thanos server's tenant)."""
    gpu: GpuConfig | None = None


@dataclass(frozen=True, slots=True)
class Discover:
    """Lanes found on one server by the values of a label among the engines' series."""

    label: str
    """The label whose values are the lanes (`job`)."""
    server: LaneConfig
    """What every found lane shares: the server, its auth/TLS/tenant; its `selector` is the
    optional series matcher (`namespace="llm"`) that narrows the series looked at."""


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    path: str
    """A state.db path, or a Hermes profile name (`default`, `work`)."""
    profile: str | None = None


@dataclass(frozen=True, slots=True)
class Config:
    source: str = "<defaults>"
    """The file this was read from, for messages."""
    lanes: tuple[LaneConfig, ...] = ()
    ledgers: tuple[LedgerConfig, ...] = ()
    prices: Prices = field(default_factory=Prices)
    refresh_s: float = 5.0
    window: str = "1h"
    windows: tuple[str, ...] = WINDOWS
    ledger_window: str | None = None
    """A separate window for the ledger (e.g. 90d) while the lane shows 1h; None = same."""
    theme: str = THEME_NAMES[0]
    health: Thresholds = field(default_factory=Thresholds)
    export_dir: str | None = None
    """Where `e` writes receipts; None: the platform's data dir (`cockpit.runtime.receipts`)."""
    discover: Discover | None = None
    """Lanes found on a server (`--lanes-by`), beside the lanes listed."""


T = TypeVar("T")
Readers = dict[str, Callable[[Node, str], Any]]
"""An option's name -> how its value is read (its node, its key path for messages)."""
Profiles = tuple[Mapping[str, T], Mapping[str, T]]
"""Profiles by id: the known ones (profiles.yaml), the config's own."""

REFRESH_BOUNDS_S = (0.1, 86400.0)
"""The refresh period, from the config or `--refresh`: faster spins a core, slower is stale."""
MAX_TIMEOUT_S = 3600.0
MAX_PRICE = 1e6
MAX_TOKENS = 1e15
MAX_GPUS = 65536
MAX_QUEUE_REFRESHES = 10_000
MAX_SLO_S = 86400.0

_FIELDS = {"refresh": "refresh_s", "timeout": "timeout_s", "match": "selector"}
"""The options whose field is named otherwise."""
_OPTIONS = {"refresh_s": "refresh", "timeout_s": "timeout"}
_TOP_KEYS = (
    *(_OPTIONS.get(f.name, f.name) for f in fields(Config) if f.name != "source"),
    "hardware_profiles",
    "model_profiles",
)
_LANE_KEYS = tuple(_OPTIONS.get(f.name, f.name) for f in fields(LaneConfig))
_GPU_KEYS = tuple(f.name for f in fields(GpuConfig))
_SLO_KEYS = tuple(f.name for f in fields(Slo))
_DISCOVER_KEYS = (
    "prometheus", "label", "match", "hardware", "model", "gpus", "host_kv_tokens",
    "chunk_tokens", "auth", "ca_file", "verify_tls", "timeout", "tenant", "slo",
)  # fmt: skip
_PRICE_KEYS = tuple(f.name for f in fields(Prices))
_HEALTH_KEYS = tuple(f.name for f in fields(Thresholds))

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
"""A Prometheus label name (`discover: label:`, `--lanes-by`)."""
_USERINFO = re.compile(r"(^|//)[^/]*@")
_MATCHERS = re.compile(
    r'(?:\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*(?:,|\Z))*'
)


def parse_config(
    text: str,
    source: str,
    hardware: Mapping[str, Hardware] | None = None,
    models: Mapping[str, ModelProfile] | None = None,
) -> Config:
    """Read config YAML. `hardware`/`models` are the known profiles (from profiles.yaml)."""
    collecting = gc.isenabled()
    gc.disable()  # the node tree is garbage-free: collecting while it grows makes a big config
    try:  # (10,000 lanes) cost twice as much, and more the bigger it is
        reader = YamlReader(source, text)
        root = reader.root()
        if root is None:
            return Config(source=source)
        items = reader.mapping(root, "", _TOP_KEYS)
        # the config's own profiles first: its lanes may name them
        custom_hw = _custom(reader, items, "hardware_profiles", hardware_from_mapping)
        custom_models = _custom(reader, items, "model_profiles", model_from_mapping)
        readers = _readers(reader, (hardware or {}, custom_hw), (models or {}, custom_models))
        config = Config(source, **_read(items, readers, ""))
    finally:
        if collecting:
            gc.enable()
    windows = sorted({*config.windows, config.window}, key=parse_duration)  # the window joins
    return replace(config, windows=tuple(windows))


def _read(items: dict[str, tuple[Node, Node]], readers: Readers, prefix: str) -> dict[str, Any]:
    """Each option's value, by its field's name."""
    return {
        _FIELDS.get(name, name): readers[name](value, prefix + name)
        for name, (_, value) in items.items()
    }


def _readers(
    reader: YamlReader, hardware: Profiles[Hardware], models: Profiles[ModelProfile]
) -> Readers:
    """How each option is read, in every section of the config. `hardware` and `models`: the
    known profiles and the config's own."""
    low, high = REFRESH_BOUNDS_S
    readers: Readers = {
        "lanes": lambda n, k: _lanes(reader, n, k, readers),
        "ledgers": lambda n, k: _each(reader, n, k, _ledger),
        "prices": lambda n, k: Prices(**_section(reader, n, k, _PRICE_KEYS, readers)),
        "refresh": lambda n, k: number(reader, n, k, high, least=low),
        "window": lambda n, k: _window(reader, n, k),
        "windows": lambda n, k: _windows(reader, n, k),
        "ledger_window": lambda n, k: _window(reader, n, k),
        "theme": lambda n, k: choice(reader, n, k, THEME_NAMES),
        "health": lambda n, k: Thresholds(**_section(reader, n, k, _HEALTH_KEYS, readers)),
        "export_dir": lambda n, k: text(reader, n, k),  # `~` is expanded where it is used
        "discover": lambda n, k: _discover(reader, n, k, readers),
        # a lane, and `discover:`
        "name": lambda n, k: text(reader, n, k),
        "prometheus": lambda n, k: _url(reader, n, k),
        "metrics_url": lambda n, k: _url(reader, n, k),
        "selector": lambda n, k: _selector(reader, n, k),
        "match": lambda n, k: _selector(reader, n, k),
        "label": lambda n, k: _label(reader, n, k),
        "engine": lambda n, k: choice(reader, n, k, ENGINES),
        "hardware": lambda n, k: _profile(reader, n, k, hardware, "hardware"),
        "model": lambda n, k: _profile(reader, n, k, models, "model"),
        "gpus": lambda n, k: integer(reader, n, k, MAX_GPUS),
        "host_kv_tokens": lambda n, k: number(reader, n, k, MAX_TOKENS, zero=True),
        "chunk_tokens": lambda n, k: integer(reader, n, k, int(MAX_TOKENS)),
        "auth": lambda n, k: _auth(reader, n, k),
        "ca_file": lambda n, k: text(reader, n, k),
        "verify_tls": lambda n, k: boolean(reader, n, k),
        "timeout": lambda n, k: number(reader, n, k, MAX_TIMEOUT_S),
        "ledger_models": lambda n, k: tuple(dict.fromkeys(_each(reader, n, k, text))),
        "tenant": lambda n, k: text(reader, n, k),
        "gpu": lambda n, k: _gpu(reader, n, k, readers),
        "nvml": lambda n, k: boolean(reader, n, k),
        "slo": lambda n, k: Slo(**_section(reader, n, k, _SLO_KEYS, readers)),
        **dict.fromkeys(_SLO_KEYS, lambda n, k: number(reader, n, k, MAX_SLO_S)),
        # `prices:` (spend units per token)
        **dict.fromkeys(_PRICE_KEYS, lambda n, k: number(reader, n, k, MAX_PRICE, zero=True)),
        # `health:`; a KV threshold of 0 would always fire, the other shares' 0 is a choice
        "queue_refreshes": lambda n, k: integer(reader, n, k, MAX_QUEUE_REFRESHES),
        "kv_usage": lambda n, k: number(reader, n, k, 1.0),
        "gpu_memory": lambda n, k: number(reader, n, k, 1.0),
        "hit_rate": lambda n, k: number(reader, n, k, 1.0, zero=True),
        "failed_share": lambda n, k: number(reader, n, k, 1.0, zero=True),
        "ttft_p99_slo": lambda n, k: (  # null: no SLO
            None if reader.scalar(n, k) is None else number(reader, n, k, MAX_TIMEOUT_S)
        ),
    }
    return readers


def _section(
    reader: YamlReader, node: Node, key: str, allowed: tuple[str, ...], readers: Readers
) -> dict[str, Any]:
    return _read(reader.mapping(node, key, allowed), readers, f"{key}.")


def _each(
    reader: YamlReader, node: Node, key: str, read: Callable[[YamlReader, Node, str], T]
) -> tuple[T, ...]:
    items = reader.sequence(node, key)
    return tuple(read(reader, item, f"{key}[{index}]") for index, item in enumerate(items))


def _lanes(reader: YamlReader, node: Node, key: str, readers: Readers) -> tuple[LaneConfig, ...]:
    lanes: dict[str, LaneConfig] = {}
    for index, lane_node in enumerate(reader.sequence(node, key)):
        lane = _lane(reader, lane_node, f"{key}[{index}]", readers)
        if lane.name in lanes:
            reader.fail(lane_node, f"{key}[{index}].name", f"duplicate lane name {lane.name!r}")
        lanes[lane.name] = lane
    return tuple(lanes.values())


def _lane(reader: YamlReader, node: Node, key: str, readers: Readers) -> LaneConfig:
    items = reader.mapping(node, key, _LANE_KEYS)
    if "name" not in items:
        reader.fail(node, f"{key}.name", "every lane needs a name")
    values = _read(items, readers, f"{key}.")
    if ("prometheus" in values) == ("metrics_url" in values):
        problem = f"lane {values['name']!r} needs exactly one of prometheus or metrics_url"
        reader.fail(node, key, problem)
    if values.get("auth") and "prometheus" not in values:
        reader.fail(items["auth"][0], f"{key}.auth", "auth is for a prometheus server")
    if values.get("gpu") and values["gpu"].selector is not None and "prometheus" not in values:
        problem = "gpu.selector reads the lane's prometheus: use gpu.metrics_url or gpu.nvml"
        reader.fail(items["gpu"][0], f"{key}.gpu.selector", problem)
    return LaneConfig(**values)


def _gpu(reader: YamlReader, node: Node, key: str, readers: Readers) -> GpuConfig:
    """`gpu:` one of `selector` (the lane's Prometheus), `metrics_url` (an exporter), `nvml`."""
    config = GpuConfig(**_section(reader, node, key, _GPU_KEYS, readers))
    given = [config.selector is not None, config.metrics_url is not None, config.nvml]
    if sum(given) != 1:
        reader.fail(node, key, "gpu needs exactly one of selector, metrics_url or nvml: true")
    return config


def _discover(reader: YamlReader, node: Node, key: str, readers: Readers) -> Discover:
    """`discover:` the server, the label lanes are found by (`job`), an optional series
    matcher, and what every lane found shares (auth, TLS, tenant, hardware, model...)."""
    items = reader.mapping(node, key, _DISCOVER_KEYS)
    if "prometheus" not in items:
        reader.fail(node, key, "discover needs prometheus: the server to find lanes on")
    values = _read(items, readers, f"{key}.")
    return Discover(values.pop("label", "job"), LaneConfig(name="", **values))


def _url(reader: YamlReader, node: Node, key: str) -> str:
    value = text(reader, node, key)
    try:
        parts = urlsplit(value)
    except ValueError as exc:  # `http://[::1`
        reader.fail(node, key, f"expected an http:// or https:// URL ({exc})")
    if parts.username or parts.password or "@" in parts.netloc:
        reader.fail(node, key, "credentials don't go in the URL: use auth with *_env or *_file")
    shown = _USERINFO.sub(r"\1***@", value)  # what might be a password is never echoed
    if parts.scheme not in ("http", "https") or not parts.hostname:
        reader.fail(node, key, f"expected an http:// or https:// URL, got {shown!r}")
    try:
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        reader.fail(node, key, f"expected a valid port in {shown!r}")
    try:
        httpx.URL(value)  # the client's own rule: a host IDNA can't spell, say
    except httpx.InvalidURL as exc:
        reader.fail(node, key, f"expected a URL the client can reach: {exc}")
    return value.rstrip("/")


def _window(reader: YamlReader, node: Node, key: str) -> str:
    value = str(reader.scalar(node, key)).strip()
    try:
        parse_duration(value)
    except TimeParseError as exc:
        reader.fail(node, key, str(exc))
    return value


def _windows(reader: YamlReader, node: Node, key: str) -> tuple[str, ...]:
    windows = _each(reader, node, key, _window)
    if not windows:
        reader.fail(node, key, "expected at least one window")
    return windows


def _selector(reader: YamlReader, node: Node, key: str) -> str:
    value = text(reader, node, key).strip("{}").strip()
    if not _MATCHERS.fullmatch(value):
        reader.fail(node, key, f'expected label matchers such as job="lane-a", got {value!r}')
    return value


def _label(reader: YamlReader, node: Node, key: str) -> str:
    label = text(reader, node, key)
    if not LABEL_NAME.fullmatch(label):
        reader.fail(node, key, f"expected a label name such as job, got {label!r}")
    return label


def _auth(reader: YamlReader, node: Node, key: str) -> Auth:
    allowed = ("bearer_env", "bearer_file", "username", "password_env", "password_file")
    items = reader.mapping(node, key, allowed)
    got = {name: text(reader, value, f"{key}.{name}") for name, (_, value) in items.items()}
    bearer = [name for name in ("bearer_env", "bearer_file") if name in got]
    password = [name for name in ("password_env", "password_file") if name in got]
    if bearer and (password or "username" in got):
        reader.fail(node, key, "give either bearer_env/bearer_file or username + password_*")
    if len(bearer) > 1 or len(password) > 1:
        reader.fail(node, key, "name the secret once: an environment variable or a file")
    for name in ("bearer_file", "password_file"):
        if name in got:
            _usable_secret_file(reader, items[name][1], f"{key}.{name}", got[name])
    if bearer:
        return Auth("bearer", "", got.get("bearer_env", ""), got.get("bearer_file", ""))
    if "username" not in got or not password:
        reader.fail(node, key, "basic auth needs username and password_env or password_file")
    return Auth("basic", got["username"], got.get("password_env", ""), got.get("password_file", ""))


def _usable_secret_file(reader: YamlReader, node: Node, key: str, path: str) -> None:
    """A secret file that exists must be one the lane can read: a special file, one too big
    or not text is a config error now; a missing one is said by the lane (it may appear)."""
    from cockpit.sources.secret_file import SecretFileError, read_secret_file

    if not Path(path).expanduser().exists():
        return
    try:
        read_secret_file(path)
    except SecretFileError as error:
        reader.fail(node, key, str(error))


def _profile(reader: YamlReader, node: Node, key: str, profiles: Profiles[T], kind: str) -> T:
    known, custom = profiles
    ident = text(reader, node, key)
    if normalize_id(ident) in custom:
        return custom[normalize_id(ident)]
    try:
        return known[ident]
    except KeyError:
        names = ", ".join(sorted([*known, *custom]))
        reader.fail(node, key, f"unknown {kind} profile {ident!r} (known: {names})")


def _ledger(reader: YamlReader, node: Node, key: str) -> LedgerConfig:
    if isinstance(node, ScalarNode):
        return LedgerConfig(text(reader, node, key))
    items = reader.mapping(node, key, ("path", "profile"))
    if "path" not in items:
        reader.fail(node, f"{key}.path", "every ledger needs a path (or a Hermes profile name)")
    return LedgerConfig(
        **{name: text(reader, value, f"{key}.{name}") for name, (_, value) in items.items()}
    )


def _custom(
    reader: YamlReader,
    items: dict[str, tuple[Node, Node]],
    key: str,
    build: Callable[[str, Mapping[str, Any]], T],
) -> dict[str, T]:
    """Profiles defined in the config, their key taken out of `items`; a bad field is reported
    at its own line."""
    if key not in items:
        return {}
    node = items.pop(key)[1]
    if not isinstance(node, MappingNode):
        reader.fail(node, key, "expected a mapping of profile id -> fields")
    profiles: dict[str, T] = {}
    for key_node, value_node in node.value:
        ident = normalize_id(str(reader.scalar(key_node, key)))
        path = f"{key}.{ident}"
        if not isinstance(value_node, MappingNode):
            reader.fail(value_node, path, "expected a mapping of fields")
        nodes = {str(reader.scalar(k, path)): v for k, v in value_node.value}
        mapping = {
            name: e_notation(reader.scalar(v, f"{path}.{name}")) for name, v in nodes.items()
        }
        try:
            profiles[ident] = build(ident, mapping)
        except ProfileFieldError as error:
            at = nodes.get(error.field, value_node)
            reader.fail(at, f"{path}.{error.field}", str(error).split(": ", 1)[-1])
    return profiles

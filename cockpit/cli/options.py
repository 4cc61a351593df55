"""The config a command reads: the config file (or the platform default), with the command
line's ad-hoc sources, window and `--at` laid over it; errors name the flag or file:line."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from cockpit.cli.fleet import discover_of
from cockpit.config.schema import AUTO, Config, ConfigError, LaneConfig, LedgerConfig, parse_config
from cockpit.core.timeutil import TimeParseError, parse_duration, parse_time, stamp
from cockpit.sources.small_files import UnreadableFile, read_small_text


def refused(flag: str, problem: str) -> ConfigError:
    return ConfigError("<command line>", None, flag, problem)


def parse_text(text: str, source: str) -> Config:
    from cockpit.roofline.profiles import hardware_profiles, model_profiles

    return parse_config(text, source, hardware_profiles(), model_profiles())


CONFIG_LIMIT_BYTES = 1 << 20
"""A config file's size cap: thousands of listed lanes fit in a tenth of it."""


def read_config(path: Path | None) -> Config:
    """The config file (or the platform default if it exists), parsed; ConfigError if bad."""
    if path is None:
        from platformdirs import user_config_dir

        path = Path(user_config_dir("lane-cockpit")) / "config.yaml"
        if not path.exists():
            return Config(source="<no config file>")
    try:
        text = read_small_text(path, CONFIG_LIMIT_BYTES)
    except UnreadableFile as exc:
        raise ConfigError(str(path), None, "", f"cannot read the config file: {exc}") from None
    return parse_text(text, str(path))


def _lane_flags(args: argparse.Namespace) -> dict[str, object]:
    """The ad-hoc lane's options given on the command line, by their config key."""
    options = ("prometheus", "metrics_url", "selector", "hardware", "model", "gpus")
    given = {option: getattr(args, option) for option in options}
    flags = {option: value for option, value in given.items() if value not in (None, "")}
    gpu = {"selector": args.gpu_selector, "metrics_url": args.gpu_metrics_url}
    gpu = {key: value for key, value in gpu.items() if value is not None}
    if gpu or args.nvml:
        flags["gpu"] = {**gpu, **({"nvml": True} if args.nvml else {})}
    slo = {f"{target}_s": getattr(args, f"slo_{target}") for target in SLO_TARGETS}
    slo = {key: value for key, value in slo.items() if value is not None}
    if slo:
        flags["slo"] = slo
    return flags


SLO_TARGETS = ("ttft", "itl", "e2e")
GPU_FLAGS = {
    "gpu": "--gpu-selector, --gpu-metrics-url, --nvml",
    "gpu.selector": "--gpu-selector",
    "gpu.metrics_url": "--gpu-metrics-url",
    "gpu.nvml": "--nvml",
    "slo": "--slo-ttft, --slo-itl, --slo-e2e",
    **{f"slo.{target}_s": f"--slo-{target}" for target in SLO_TARGETS},
}
"""The ad-hoc lane's `gpu:` and `slo:` options by the flags that give them."""


def _adhoc_lane(args: argparse.Namespace) -> LaneConfig | None:
    if not (args.prometheus or args.metrics_url):
        # alone, these would be ignored without a word
        given = [GPU_FLAGS.get(o, f"--{o}") for o in _lane_flags(args)]  # no server among them
        given += ["--engine"] if args.engine != AUTO else []
        if given:
            problem = "describes an ad-hoc lane: give --prometheus URL or --metrics-url URL with it"
            raise refused(given[0], f"{problem} (a config file's lanes set it in the file)")
        return None
    import yaml

    for option, value in _lane_flags(args).items():
        # argv bytes that aren't UTF-8 arrive as surrogates, which no config text can hold
        if isinstance(value, str) and value.encode(errors="replace").decode() != value:
            raise refused("--" + option.replace("_", "-"), "is not UTF-8 text")
    lane = {"name": _adhoc_name(args.selector), "engine": args.engine, **_lane_flags(args)}
    try:
        text = yaml.safe_dump({"lanes": [lane]}, sort_keys=False)
        return parse_text(text, "<command line>").lanes[0]
    except ConfigError as error:  # said by its flag rather than by the config it becomes
        path = error.key.removeprefix("lanes[0]").removeprefix(".")
        key = path.split(".")[0]
        if not key:
            raise refused("--prometheus, --metrics-url", "give one of the two, not both") from None
        flag = "--selector" if key == "name" else "--" + key.replace("_", "-")
        flag = GPU_FLAGS.get(path, flag)
        raise refused(flag, error.problem) from None


def _adhoc_name(selector: str) -> str:
    for matcher in selector.split(","):
        name, _, value = matcher.partition("=")
        if name.strip() == "job" and value.strip().startswith('"'):
            return value.strip().strip('"') or "lane"
    return "lane"


def effective_config(args: argparse.Namespace) -> Config:
    """Config file + command-line sources. Ad-hoc sources replace the file's of their kind."""
    config = read_config(Path(args.config).expanduser() if args.config else None)
    discover = discover_of(args, config, functools.partial(_adhoc_lane, args))
    adhoc = None if args.lanes_by else _adhoc_lane(args)
    if discover is not None:
        config = replace(config, discover=discover)
    if adhoc is not None:
        config = replace(config, lanes=(adhoc,))
    if args.ledger:
        config = replace(config, ledgers=tuple(LedgerConfig(path) for path in args.ledger))
    if args.window:
        try:
            parse_duration(args.window)
        except TimeParseError as exc:
            raise refused("--window", str(exc)) from None
        config = replace(config, window=args.window)
    if args.lane and args.lane not in [lane.name for lane in config.lanes] and not config.discover:
        names = ", ".join(lane.name for lane in config.lanes) or "none configured"
        raise ConfigError(config.source, None, "--lane", f"unknown lane {args.lane!r} ({names})")
    return config


FUTURE_SLACK_S = 60.0
"""How far past this machine's clock `--at` may be (another server's clock may run ahead)."""


def replay_time(args: argparse.Namespace, lanes: Sequence[LaneConfig]) -> float | None:
    """The moment `--at` replays, if given; the `lanes` it will be read on must keep history."""
    if not args.at:
        return None
    try:
        at = parse_time(args.at)
    except TimeParseError as exc:
        raise refused("--at", str(exc)) from None
    if at > time.time() + FUTURE_SLACK_S:
        raise refused("--at", f"{stamp(at)} is in the future")
    scraped = [lane.name for lane in lanes if lane.metrics_url]
    if scraped:
        raise refused("--at", f"replays Prometheus's history, and lane {scraped[0]!r} is read "
                       "from its /metrics, which has only the present")  # fmt: skip
    return at


def require_sources(config: Config) -> None:
    if not config.lanes and not config.ledgers and config.discover is None:
        problem = ("no lane and no ledger to read: write a config (see config.example.yaml), or "
                   "pass --prometheus URL --selector ... / --metrics-url URL / --ledger PATH, or "
                   "try `cockpit demo`")  # fmt: skip
        raise ConfigError(config.source, None, "", problem)

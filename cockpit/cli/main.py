"""`cockpit`: the command line. Everything heavy is imported only by the command that needs it."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from cockpit import __version__
from cockpit.app.lifecycle import LAST_WORDS_S, Setup, build_app, run_app
from cockpit.cli.fleet import fleet_feed, report_fleet
from cockpit.cli.options import (
    effective_config,
    parse_text,
    refused,
    replay_time,
    require_sources,
)
from cockpit.cli.output import output_failed, symbols_that_fit, unfit_terminal
from cockpit.config.schema import (
    AUTO,
    ENGINES,
    REFRESH_BOUNDS_S,
    ConfigError,
)
from cockpit.config.yaml_values import did_you_mean
from cockpit.core.text import visible
from cockpit.core.timeutil import TimeParseError, parse_duration
from cockpit.runtime.cards import CardError

COMMANDS = ("run", "demo", "report", "roofline", "check", "card")

DESCRIPTION = """\
A terminal cockpit for an LLM inference lane and the agents that feed it: token ratios,
the prefix-cache hit rate, where each request's time goes, the spend split and a mini
roofline, from the engine's Prometheus counters and the Hermes agent's state.db.
Read-only: it never writes to what it watches.
"""

EPILOG = """\
`cockpit COMMAND --help` shows a command's options; `run` is the default command, so
`cockpit --prometheus URL ...` runs the cockpit. Config: ~/.config/lane-cockpit/config.yaml
or --config FILE (every option: config.example.yaml).

examples:
  cockpit demo
  cockpit --prometheus http://127.0.0.1:9090 --selector 'job="lane-a"' --ledger ~/.hermes/state.db
  cockpit report --lane lane-a --window 7d --at 2026-10-26T11:19:00Z --format md
  cockpit roofline --hardware h100 --model llama-3.1-8b --prompt 2000 --batch 64
"""


# --- arguments ------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, its refusals quoting the command line with control characters made visible."""

    def error(self, message: str) -> NoReturn:
        super().error(visible(message))


SOURCE_FLAGS = (
    ("--config", "PATH", "config file (default: %(default)s)"),
    ("--lane", "NAME", "the lane to show first / report"),
    ("--window", "W", "window: 5m, 1h, 6h, 24h, 7d, 30d, 90d"),
    ("--at", "TIME", "evaluate at a past moment: epoch, ISO 8601 (UTC) or -2h"),
    ("--prometheus", "URL", "ad-hoc lane: a Prometheus (or compatible) server, no config needed"),
    ("--metrics-url", "URL", "ad-hoc lane: scrape an engine's /metrics directly"),
    ("--selector", "MATCHERS", "ad-hoc lane's label matchers, e.g. 'job=\"lane-a\"'"),
    (
        "--lanes-by",
        "LABEL",
        "every lane on the --prometheus server, one per value of LABEL (e.g. "
        "job) among the engines' series; --selector narrows the series",
    ),
    ("--hardware", "ID", "ad-hoc lane's hardware profile"),
    ("--model", "ID", "ad-hoc lane's model profile"),
    (
        "--gpu-selector",
        "MATCHERS",
        "ad-hoc lane's GPUs: dcgm-exporter or nvidia_gpu_exporter series on its --prometheus",
    ),
    ("--gpu-metrics-url", "URL", "ad-hoc lane's GPUs: scrape an exporter directly"),
)
"""The source options that take one value, their metavar and help."""


def _source_options() -> _Parser:
    common = _Parser(add_help=False)
    add = common.add_argument_group("sources").add_argument
    for flag, metavar, about in SOURCE_FLAGS:
        add(flag, metavar=metavar, help=about)
    common.set_defaults(selector="")
    add("--engine", default=AUTO, choices=ENGINES, help="ad-hoc lane's engine (default: detect)")
    add("--gpus", type=int, metavar="N", help="ad-hoc lane's GPUs in one tensor-parallel group")
    add("--nvml", action="store_true", help="ad-hoc lane's GPUs: this machine's, through NVML")
    for target, what in (("ttft", "time to first token"), ("itl", "inter-token latency"),
                         ("e2e", "end-to-end latency")):  # fmt: skip
        add(f"--slo-{target}", type=float, metavar="S", help=f"ad-hoc lane's {what} target "
            "in seconds: the share of the window that met it")  # fmt: skip
    ledger = "a Hermes state.db or profile name (repeatable)"
    add("--ledger", metavar="PATH", action="append", default=[], help=ledger)
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cockpit",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lane-cockpit {__version__}")
    commands = parser.add_subparsers(metavar="command", title="commands")
    sources = _source_options()
    run = commands.add_parser("run", parents=[sources], help="the cockpit (the default)")
    run.set_defaults(handler=command_run)
    run.add_argument("--refresh", type=float, metavar="SECONDS", help="refresh period (default 5)")
    demo = commands.add_parser(
        "demo", help="the cockpit on an embedded simulated lane and ledger: nothing to set up"
    )
    demo.add_argument(
        "--prometheus",
        action="store_true",
        help="run a real Prometheus scraping the simulated lanes (needs prometheus)",
    )
    demo.add_argument("--refresh", type=float, metavar="SECONDS", help="refresh period")
    demo.set_defaults(handler=command_demo)
    report = commands.add_parser(
        "report", parents=[sources], help="the receipts, headless: markdown or JSON tables"
    )
    report.add_argument("--format", choices=("md", "json"), default="md")
    report.set_defaults(handler=command_report)
    report.add_argument("--fleet", action="store_true", help="the overview: one row per "
                        "lane found (--lanes-by, or the config's discover)")  # fmt: skip
    _sample_option(report)
    report.add_argument("--since-start", action="store_true", help="a lane read by direct "
                        "scrape: over its engine's life (from _created), not --window")  # fmt: skip
    roofline = commands.add_parser(
        "roofline", help="the roofline back-of-envelope for a GPU and a model"
    )
    roofline.set_defaults(handler=command_roofline)
    add = roofline.add_argument
    add("--hardware", metavar="ID", help="e.g. h100, a100, gb300")
    add("--model", metavar="ID", help="e.g. llama-3.1-8b")
    add("--prompt", type=int, default=2000, metavar="N", help="prompt tokens")
    add("--batch", type=int, default=1, metavar="B", help="decode batch")
    add("--context", type=int, metavar="C", help="decode context tokens")
    add("--gpus", type=int, default=1, metavar="N", help="GPUs in one tensor-parallel group")
    add("--list", action="store_true", help="list the known profiles")
    check = commands.add_parser(
        "check", parents=[sources], help="validate the config and reach every source (exit 0/1)"
    )
    check.set_defaults(handler=command_check)
    _sample_option(check)
    _card_parser(commands, sources)
    return parser  # fmt: skip


def _card_parser(commands: Any, sources: argparse.ArgumentParser) -> None:
    """The `card` command and its sub-commands, each with the source options (`--config`…)."""
    card = commands.add_parser("card", help="benchmark cards: mark a run, keep, compare")
    verbs = card.add_subparsers(metavar="verb", title="verbs", required=True)

    def verb(name: str, about: str) -> Any:
        parser = verbs.add_parser(name, parents=[sources], help=about)
        parser.set_defaults(handler=command_card, verb=name)
        return parser

    start = verb("start", "mark now as a card's start on a lane")
    start.add_argument("name", metavar="NAME")
    start.add_argument("--note", default="", help="a word on the run, kept with the card")
    stop = verb("stop", "mark a running card's end; print and keep its receipt")
    stop.add_argument("name", metavar="NAME", nargs="?")
    add = verb("add", "a card of a past interval (a Prometheus lane)")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--from", dest="start", metavar="TIME", required=True)
    add.add_argument("--to", dest="end", metavar="TIME", required=True)
    add.add_argument("--note", default="")
    imported = verb("import", "a benchmark client's result (vllm bench serve, guidellm)")
    imported.add_argument("result", metavar="RESULT.json")
    imported.add_argument(
        "--benchmark", type=int, default=0, metavar="N",
        help="which run of a guidellm report (from 0; the first by default)",
    )  # fmt: skip
    imported.add_argument("--name", help="the card it belongs to (made from the file if new)")
    verb("list", "the cards (of --lane)")
    show = verb("show", "a card's receipt (and its client's figures beside)")
    show.add_argument("name", metavar="NAME")
    show.add_argument("--again", action="store_true",
                      help="evaluate a Prometheus lane's card anew, not as kept")  # fmt: skip
    compared = verb("compare", "two cards figure by figure")
    compared.add_argument("a", metavar="A")
    compared.add_argument("b", metavar="B")
    removed = verb("rm", "forget a card")
    removed.add_argument("name", metavar="NAME")
    for parser in (stop, add, imported, show, compared, start):
        parser.add_argument("--format", choices=("md", "json"), default="md")
    verbs.choices["list"].add_argument("--format", choices=("md", "json"), default="md")


def _sample_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--sample", metavar="D", default="5s", help="a lane read by direct "
                         "scrape is scraped twice, D apart, so its counters move over D "
                         "(default 5s; 0: one scrape)")  # fmt: skip


def sample_seconds(args: argparse.Namespace) -> float:
    """The interval between a one-shot read's two scrapes of a direct-scrape lane."""
    if args.sample.strip() in ("0", "0s"):
        return 0.0
    try:
        return parse_duration(args.sample)
    except TimeParseError as exc:
        raise refused("--sample", str(exc)) from None


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    argv = _attach_relative_times(argv)
    parser = build_parser()
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        commands = f" (commands: {', '.join(COMMANDS)})"
        parser.error(f"unknown command {argv[0]!r}{did_you_mean(argv[0], COMMANDS, commands)}")
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    wants_help = any(arg in ("-h", "--help", "--version") for arg in argv)
    if first not in COMMANDS and not (wants_help and first is None):
        argv.insert(0, "run")
    return parser.parse_args(argv)


TIME_FLAGS = ("--at", "--from", "--to")


def _attach_relative_times(argv: Sequence[str]) -> list[str]:
    """`--at -2h` as `--at=-2h` (and `--from`, `--to`): argparse takes any value that starts
    with a dash for an option and would say `--at: expected one argument`."""
    attached: list[str] = []
    for arg in argv:
        if attached and attached[-1] in TIME_FLAGS and re.match(r"-\d", arg):
            attached[-1] = f"{attached[-1]}={arg}"
        else:
            attached.append(arg)
    return attached


# --- commands -------------------------------------------------------------------------------


def _check_refresh(args: argparse.Namespace) -> None:
    low, high = REFRESH_BOUNDS_S
    if args.refresh is not None and not low <= args.refresh <= high:  # NaN is in no range
        expected = f"expected seconds from {low:g} to {high:g}, got {args.refresh:g}"
        raise refused("--refresh", expected)


def _terminal_refused() -> bool:
    reason = unfit_terminal()
    if reason is not None:
        print(f"cockpit: {reason}", file=sys.stderr)
    return reason is not None


def command_run(args: argparse.Namespace) -> int:
    _check_refresh(args)
    if _terminal_refused():
        return 2

    def setup() -> Setup:
        config = effective_config(args)
        require_sources(config)
        at = replay_time(args, config.lanes)
        from cockpit.runtime.feeds import build_feeds

        lanes, ledger = build_feeds(config, first_lane=args.lane)
        fleet = fleet_feed(config, lanes)
        return Setup(config, lanes, ledger, at, args.refresh, fleet=fleet, lane=args.lane)

    return run_app(build_app(setup))


def command_demo(args: argparse.Namespace) -> int:
    _check_refresh(args)
    if _terminal_refused():
        return 2
    from cockpit.runtime.demo_process import DemoProcess, DemoProcessError

    simulators = DemoProcess.start(prometheus=args.prometheus)

    def setup() -> Setup:
        import cockpit.app.app  # noqa: F401  Textual loads while the simulators start on another core
        from cockpit.runtime.feeds import build_feeds

        ready = simulators.ready()
        config = parse_text(ready.config_text, "<cockpit demo>")
        lanes, ledger = build_feeds(config)
        ready.warm(lanes)  # the simulated warm start, as if scraped: the trend from the first frame
        fleet = fleet_feed(config, lanes)
        return Setup(config, lanes, ledger, refresh_s=args.refresh, notice=ready.note, fleet=fleet)

    try:
        app = build_app(setup)
        return run_app(app, last_words=functools.partial(simulators.stop, timeout=LAST_WORDS_S))
    except DemoProcessError as error:
        print(f"cockpit demo: {visible(str(error))}", file=sys.stderr)
        return 1
    finally:
        simulators.stop()


def command_report(args: argparse.Namespace) -> int:
    config = effective_config(args)
    if args.fleet:
        return report_fleet(args, config, replay_time(args, []))
    require_sources(config)
    named = [lane for lane in config.lanes if lane.name == args.lane]
    at = replay_time(args, named or config.lanes[:1])  # the lane reported: named, or the first
    from cockpit.cli.card import cards_in_window
    from cockpit.runtime.card_receipts import split_json, split_markdown
    from cockpit.runtime.feeds import read_once
    from cockpit.runtime.report import json_receipt, markdown_receipt

    read = read_once(config, args.lane, at, sample_seconds(args), args.since_start)
    lane, ledger, errors = asyncio.run(read)
    split = cards_in_window(config, lane, ledger, errors)
    if args.format == "json":
        receipt = json_receipt(lane, ledger, config.prices)
        if split is not None:
            receipt["cards"] = split_json(split)
        print(json.dumps(receipt, indent=2))
    else:
        text = markdown_receipt(lane, ledger, config.prices)
        if split is not None:
            text += "\n" + "\n".join(map(visible, split_markdown(split))) + "\n"
        print(text, end="")
    for error in errors:
        print(f"cockpit: {visible(error)}", file=sys.stderr)
    return 1 if errors else 0


def command_roofline(args: argparse.Namespace) -> int:
    from cockpit.roofline.profiles import find_hardware, find_model
    from cockpit.roofline.table import profiles_listing, roofline_table

    if args.list:
        print(profiles_listing())
        return 0
    if not args.hardware or not args.model:
        raise refused(
            "roofline", "needs --hardware ID and --model ID (see cockpit roofline --list)"
        )
    for option in ("prompt", "batch", "context", "gpus"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            raise refused(f"--{option}", "expected a whole number ≥ 1")
    try:
        hardware = find_hardware(args.hardware).scaled(args.gpus)
        model = find_model(args.model)
    except KeyError as exc:
        raise refused("roofline", str(exc.args[0])) from None
    print(roofline_table(hardware, model, args.prompt, args.batch, args.context))
    return 0


def command_card(args: argparse.Namespace) -> int:
    from cockpit.cli.card import VERBS

    return VERBS[args.verb](args)


def command_check(args: argparse.Namespace) -> int:
    if args.at:
        raise refused("--at", "check reaches every source as it is now; --at is for run and report")
    config = effective_config(args)
    require_sources(config)
    from cockpit.runtime.feeds import check_sources, distinct_ledgers

    files = len(distinct_ledgers(config.ledgers))
    named_twice = len(config.ledgers) - files
    ledgers = _count(files, "ledger") + (f" ({named_twice} named twice)" if named_twice else "")
    counts = f"{_count(len(config.lanes), 'lane')}, {ledgers}"
    print(f"config: {visible(config.source)}: ok ({counts})")
    results = asyncio.run(check_sources(config, sample_seconds(args)))
    for ok, line in results:
        print(f"{'ok  ' if ok else 'FAIL'} {visible(line)}")
    return 0 if all(ok for ok, _ in results) else 1


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def main(argv: Sequence[str] | None = None) -> int:
    with symbols_that_fit():
        try:
            try:
                return _run_command(sys.argv[1:] if argv is None else argv)
            finally:
                sys.stdout.flush()  # a closed pipe or a full disk shows here, not at exit
        except OSError as error:
            return output_failed(error)


def _run_command(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.handler
    try:
        return command(args)
    except ConfigError as error:
        print(f"cockpit: {visible(str(error))}", file=sys.stderr)
        return 2
    except CardError as error:
        print(f"cockpit card: {visible(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

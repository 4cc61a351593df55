"""The command line's fleet: which fleet the overview reads, and `cockpit report --fleet`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from cockpit.config.schema import LABEL_NAME, Config, ConfigError, Discover, LaneConfig
from cockpit.core.text import visible
from cockpit.core.timeutil import parse_duration

if TYPE_CHECKING:
    from cockpit.core.fleet import FleetView
    from cockpit.runtime.poller import FleetFeed, LaneFeed


def discover_of(
    args: argparse.Namespace, config: Config, adhoc_lane: Callable[[], LaneConfig | None]
) -> Discover | None:
    """`--prometheus URL --lanes-by LABEL [--selector ...]` (the server: `adhoc_lane()`), or
    the config's `discover:` (its label replaced by `--lanes-by` when given alone)."""
    if not args.lanes_by:
        return config.discover
    if not LABEL_NAME.fullmatch(args.lanes_by):
        raise ConfigError("<command line>", None, "--lanes-by", "expected a label name such as "
                          f"job, got {args.lanes_by!r}")  # fmt: skip
    if args.prometheus:
        lane = adhoc_lane()
        assert lane is not None
        return Discover(args.lanes_by, replace(lane, name=""))
    if config.discover is None:
        raise ConfigError("<command line>", None, "--lanes-by", "finds lanes on a server: give "
                          "--prometheus URL with it (or discover: in the config)")  # fmt: skip
    return replace(config.discover, label=args.lanes_by)


def fleet_feed(config: Config, lanes: Sequence[LaneFeed] = ()) -> FleetFeed | None:
    """What the overview reads: the lanes found by a label, the listed `lanes` (the app's feeds)
    when more than one, or both; None for one listed lane (the cockpit opens on its panes)."""
    found = None
    if (discover := config.discover) is not None:
        from cockpit.runtime.feeds import prometheus_source
        from cockpit.sources.fleet import FleetSource
        from cockpit.sources.http import SourceError

        try:
            source = prometheus_source(discover.server)
        except SourceError as error:  # its secret can't be read
            raise ConfigError(config.source, None, "discover", str(error)) from None
        server = discover.server
        found = FleetSource(source, discover.label, server.selector, server.slo)
    if not lanes or (found is None and len(lanes) == 1):
        return found
    from cockpit.runtime.listed_fleet import ListedFleet

    return ListedFleet(lanes, found)


def report_fleet(args: argparse.Namespace, config: Config, at: float | None) -> int:
    """`cockpit report --fleet`: the overview's rows at `at` (one listed lane alone too)."""
    from cockpit.core.model import SourceFailure
    from cockpit.runtime.feeds import build_feeds
    from cockpit.runtime.fleet_report import fleet_json, fleet_markdown
    from cockpit.runtime.listed_fleet import ListedFleet
    from cockpit.runtime.poller import close_all

    lanes, ledger = build_feeds(config)
    fleet = fleet_feed(config, lanes) or (ListedFleet(lanes) if lanes else None)
    if fleet is None:
        raise ConfigError("<command line>", None, "--fleet", "needs lanes: listed in the config, "
                          "or found by --prometheus URL --lanes-by LABEL (discover:)")  # fmt: skip

    async def read() -> FleetView:
        try:
            return await fleet.read(parse_duration(config.window), at)
        finally:
            await fleet.aclose()
            await close_all(lanes, ledger)

    try:
        view = asyncio.run(read())
    except SourceFailure as error:
        print(f"cockpit: {visible(str(error))}", file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps(fleet_json(view), indent=2))
    else:
        print(fleet_markdown(view), end="")
    return 0

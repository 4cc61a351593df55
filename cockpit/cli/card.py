"""`cockpit card …`, imported for that command only: mark a benchmark run on a lane, keep its
receipt, compare two runs.

cockpit card start NAME [--lane L] [--note TEXT]     mark now as the card's start
cockpit card stop [NAME]                             mark its end, keep and print its receipt
cockpit card add NAME --from TIME --to TIME          a card of a past interval (Prometheus)
cockpit card import RESULT.json [--name NAME]        the benchmark client's own result
cockpit card list | show NAME | compare A B | rm NAME
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cockpit.cli.options import effective_config
from cockpit.config.schema import Config, ConfigError, LaneConfig
from cockpit.core.compare import Comparison, change_text, compare, delta_text
from cockpit.core.figures import format_value
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.core.split import WindowSplit
from cockpit.core.text import visible
from cockpit.core.timeutil import TimeParseError, parse_time, stamp
from cockpit.runtime.card_marks import (
    card_length,
    card_name,
    card_requests,
    evaluate,
    start_card,
    stop_card,
)
from cockpit.runtime.cards import Card, CardError, CardStore

# --- the verbs -------------------------------------------------------------------------------


def _lane(config: Config, name: str | None) -> LaneConfig:
    """The lane named (or the only one); ConfigError naming the choices otherwise."""
    lanes = {lane.name: lane for lane in config.lanes}
    if name is None and len(lanes) == 1:
        return next(iter(lanes.values()))
    if name in lanes:
        return lanes[name]
    known = ", ".join(lanes) or "none configured"
    problem = f"unknown lane {name!r}" if name else "name the card's lane"
    raise ConfigError(config.source, None, "--lane", f"{problem} ({known})")


def card_start(args: argparse.Namespace) -> int:
    lane = _lane(effective_config(args), args.lane)
    card = asyncio.run(start_card(CardStore(), lane, args.name, args.note))
    print(f"card {visible(card.name)} started on lane {visible(lane.name)} at {stamp(card.start)}")
    return 0


def card_stop(args: argparse.Namespace) -> int:
    config, store = effective_config(args), CardStore()
    card = _running(store, args.name, args.lane)
    lane = _lane(config, card.lane)
    return _print_card(asyncio.run(stop_card(config, store, lane, card)), args.format)


def _running(store: CardStore, name: str | None, lane: str | None) -> Card:
    if name is not None:
        card = store.get(name)
        if not card.running:
            raise CardError(f"card {name!r} has stopped already")
        return card
    running = store.running(lane)
    if not running:
        raise CardError("no card is running" + (f" on lane {lane!r}" if lane else ""))
    if len(running) > 1:
        names = ", ".join(card.name for card in running)
        raise CardError(f"several cards are running ({names}): name the one to stop")
    return running[0]


def card_add(args: argparse.Namespace) -> int:
    config = effective_config(args)
    lane = _lane(config, args.lane)
    try:
        start, end = parse_time(args.start), parse_time(args.end)
    except TimeParseError as exc:
        raise CardError(str(exc)) from None
    card = Card(card_name(args.name), lane.name, start, end, args.note)
    _only_prometheus(lane, "a past interval")
    if end <= start:
        raise CardError(f"card {card.name!r}: its end is not after its start")
    return _add(config, lane, card, args.format)


def _add(config: Config, lane: LaneConfig, card: Card, format_: str) -> int:
    """Keep `card` with its receipt, evaluated now over its interval; print it."""
    store = CardStore()
    store.add(replace(card, receipt=asyncio.run(evaluate(config, lane, card))))
    return _print_card(store.get(card.name), format_)


def _only_prometheus(lane: LaneConfig, what: str) -> None:
    if not lane.prometheus:
        raise CardError(
            f"lane {lane.name} is read from its /metrics, which has only the present: {what} "
            "needs a Prometheus lane (mark a run with card start and stop)"
        )


def card_import(args: argparse.Namespace) -> int:
    from cockpit.runtime.bench_results import client_json, read_result

    path = Path(args.result).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise CardError(f"{path}: cannot read it: {reason}") from None
    result = read_result(str(path), text, args.benchmark)
    store = CardStore()
    name = card_name(args.name or path.stem)
    if any(card.name == name for card in store.cards()):
        store.keep(name, client=client_json(result))
        return _print_card(store.get(name), args.format)
    config = effective_config(args)
    lane = _lane(config, args.lane)
    _only_prometheus(lane, "a card made from a result file's interval")
    card = Card(name, lane.name, result.start, result.end, f"from {path.name}")
    return _add(config, lane, replace(card, client=client_json(result)), args.format)


def card_list(args: argparse.Namespace) -> int:
    cards = CardStore().cards(args.lane)
    if args.format == "json":
        print(json.dumps([_card_json(card) for card in cards], indent=2))
        return 0
    from cockpit.runtime.report import markdown_table

    rows = [
        (card.name, card.lane, stamp(card.start), stamp(card.end) if card.end else "running",
         card_length(card), card_requests(card), card.note)
        for card in cards
    ]  # fmt: skip
    header = ("Card", "Lane", "Start", "End", "Length", "Requests", "Note")
    print("\n".join(markdown_table(header, rows)) if rows else "no cards yet")
    return 0


def card_show(args: argparse.Namespace) -> int:
    card = CardStore().get(args.name)
    if args.again:
        config = effective_config(args)
        lane = _lane(config, card.lane)
        if card.end is None:
            raise CardError(f"card {card.name!r} is still running")
        card = replace(card, receipt=asyncio.run(evaluate(config, lane, card)))
    return _print_card(card, args.format)


def card_compare(args: argparse.Namespace) -> int:
    store = CardStore()
    a, b = store.get(args.a), store.get(args.b)
    from cockpit.runtime.card_receipts import compared_figures

    for card in (a, b):
        if not card.receipt:
            raise CardError(f"card {card.name!r} has no receipt yet (still running?)")
    bounds = {**a.receipt.get("buckets", {}), **b.receipt.get("buckets", {})}
    rows = compare(compared_figures(a.receipt), compared_figures(b.receipt), bounds)
    if args.format == "json":
        print(json.dumps({"a": _card_json(a), "b": _card_json(b),
                          "figures": {row.key: _comparison_json(row) for row in rows}},
                         indent=2))  # fmt: skip
        return 0
    print("\n".join(_comparison_markdown(a, b, rows)))
    return 0


def card_rm(args: argparse.Namespace) -> int:
    CardStore().remove(args.name)
    print(f"card {visible(args.name)} removed")
    return 0


# --- receipts --------------------------------------------------------------------------------


def _card_json(card: Card) -> dict[str, Any]:
    return {
        "name": card.name,
        "lane": card.lane,
        "start": _rfc3339(card.start),
        "end": _rfc3339(card.end) if card.end is not None else None,
        "duration_s": None if card.end is None else card.end - card.start,
        "note": card.note,
        "edges": card.receipt.get("lane", {}).get("edges"),
    }


def _rfc3339(epoch: float) -> str:
    return (
        datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _print_card(card: Card, format_: str) -> int:
    if format_ == "json":
        data: dict[str, Any] = {"card": _card_json(card)}
        if card.receipt:
            data["lane"] = card.receipt.get("lane")
        if card.client:
            data["client"] = _client_beside(card)
        print(json.dumps(data, indent=2))
        return 0
    print("\n".join(_card_markdown(card)), end="")
    return 0


def _card_markdown(card: Card) -> list[str]:
    end = stamp(card.end) if card.end else "running"
    lines = [f"# Card {visible(card.name)} — lane {visible(card.lane)}", "",
             f"{stamp(card.start)} → {end} ({card_length(card)})"]  # fmt: skip
    if card.note:
        lines += ["", f"Note: {visible(card.note)}"]
    edges = card.receipt.get("lane", {}).get("edges")
    if edges:
        lines += ["", f"Counts: {visible(str(edges)).removeprefix('counts: ')}"]
    if card.client:
        lines += ["", *_client_markdown(card)]
    markdown = str(card.receipt.get("markdown") or "")
    if markdown:
        lines += ["", markdown.rstrip()]
    return [*lines, ""]


def _client_beside(card: Card) -> dict[str, Any]:
    from cockpit.runtime.bench_results import CLIENT_VS_ENGINE
    from cockpit.runtime.card_receipts import figures_of

    engine = figures_of(card.receipt)
    client = dict(card.client)
    beside = {}
    for field, figure in dict(client.get("figures", {})).items():
        found = engine.get(figure["engine"], {})
        beside[field] = {**figure, "engine_value": found.get("value"),
                         "engine_reason": found.get("reason")}  # fmt: skip
    return {**client, "figures": beside, "explained": CLIENT_VS_ENGINE}


def _client_markdown(card: Card) -> list[str]:
    from cockpit.runtime.report import markdown_table

    client = _client_beside(card)
    rows = []
    for figure in client["figures"].values():
        unit = figure["unit"]
        engine = figure["engine_value"]
        engine_text = (
            format_value(engine, unit) if engine is not None
            else f"— ({figure['engine_reason'] or 'not in the receipt'})"
        )  # fmt: skip
        rows.append((figure["label"], format_value(figure["value"], unit), engine_text))
    head = f"## Client ({client['tool']}, {Path(client['file']).name}) beside the engine"
    return [head, "", *markdown_table(("Figure", "Client", "Engine"), rows), "",
            client["explained"]]  # fmt: skip


def _comparison_json(row: Comparison) -> dict[str, Any]:
    return {"label": row.label, "unit": row.unit, "a": row.a, "b": row.b, "delta": row.delta,
            "change": row.change, "verdict": row.verdict}  # fmt: skip


def _comparison_markdown(a: Card, b: Card, rows: Sequence[Comparison]) -> list[str]:
    from cockpit.runtime.report import markdown_table

    table = [(row.label, row.a_text, row.b_text, delta_text(row), change_text(row), row.verdict)
             for row in rows]  # fmt: skip
    head = f"# Cards compared: A {visible(a.name)} ({card_length(a)}), "
    head += f"B {visible(b.name)} ({card_length(b)})"
    header = ("Figure", "A", "B", "B − A", "Change", "Verdict")
    return [head, "", *markdown_table(header, table), ""]


def cards_in_window(
    config: Config,
    lane: LaneSnapshot | None,
    ledger: LedgerSnapshot | None,
    errors: list[str],
) -> WindowSplit | None:
    """The reported lane's window split between its cards and the rest, when it has cards in
    the window; a card store that can't be read is one more error line, not a failed report."""
    if lane is None:
        return None
    from cockpit.core.ledger_figures import lane_models
    from cockpit.core.snapshot import for_lane
    from cockpit.runtime.card_receipts import window_split

    lanes = {found.name: found for found in config.lanes}
    if lane.lane not in lanes:
        return None
    found = lanes[lane.lane]
    narrowed = for_lane(ledger, lane_models(found.ledger_models, None), config.prices)
    try:
        return asyncio.run(window_split(config, found, lane, narrowed, CardStore()))
    except CardError as error:
        errors.append(f"cards: {error}")
        return None


VERBS: dict[str, Callable[[argparse.Namespace], int]] = {
    "start": card_start,
    "stop": card_stop,
    "add": card_add,
    "import": card_import,
    "list": card_list,
    "show": card_show,
    "compare": card_compare,
    "rm": card_rm,
}

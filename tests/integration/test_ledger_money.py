"""Money from the Hermes ledger: USD for the window, priced models apart from local ones, and a
lane's figures narrowed to its own models. Real ledgers (the shipped fixtures, copied, in WAL
mode), expected sums from SQL of the test's own."""

from __future__ import annotations

import math
import random
import sqlite3
from collections.abc import Iterable
from pathlib import Path

import pytest

from cockpit.app.app import make_app
from cockpit.config.schema import Config, LaneConfig
from cockpit.core.ledger_figures import (
    LedgerFigures,
    Prices,
    lane_models,
    ledger_figures,
    model_matches,
    narrow,
)
from cockpit.core.model import LedgerTotals
from cockpit.runtime.report import spend_markdown
from cockpit.sources.ledger import LedgerSet, LedgerTailer
from cockpit.widgets import SpendPane
from tests.support.feeds import ScriptedLaneFeed, ScriptedLedgerFeed
from tests.support.ledger_writer import Cost, HermesLikeWriter, Usage, make_wal
from tests.support.pilot import settle

NOW = 1794700800.0
DAY = 86400.0
HOUR = 3600.0


async def read(path: Path, window_s: float, end: float = NOW) -> LedgerTotals:
    tailer = LedgerTailer(path)
    try:
        await tailer.refresh(window_s, end)
        await tailer.settle()  # per model exact once session_model_usage is read
        return await tailer.refresh(window_s, end)
    finally:
        await tailer.close()


def sql_cost(path: Path, where: str, table: str = "sessions") -> list[tuple[float, bool]]:
    """Each row's cost and whether it is actual: Hermes's actual cost where it recorded one
    (NULL: none; in the usage table, where no cost is 0, a 0 not said to be actual: none)."""
    alias, rows = (
        ("s", "sessions AS s")
        if table == "sessions"
        else ("u", "sessions AS s JOIN session_model_usage AS u ON u.session_id = s.id")
    )
    query = (
        f"SELECT {alias}.actual_cost_usd, {alias}.estimated_cost_usd, {alias}.cost_status "
        f"FROM {rows} WHERE {where}"
    )
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        found = db.execute(query).fetchall()
    out = []
    for actual, estimated, status in found:
        is_actual = actual is not None and (actual != 0 or status == "actual")
        out.append((actual if is_actual else (estimated or 0.0), is_actual))
    return out


def usd(costs: Iterable[tuple[float, bool]], actual: bool | None = None) -> float:
    return math.fsum(cost for cost, is_actual in costs if actual is None or is_actual == actual)


def window(days: float, end: float = NOW) -> str:
    return f"s.started_at > {end - days * DAY} AND s.started_at <= {end}"


@pytest.mark.parametrize("days", [1, 7, 30, 120])
async def test_window_usd_equals_a_direct_sql_sum(hermes_v22: Path, days: int) -> None:
    make_wal(hermes_v22)
    totals = await read(hermes_v22, days * DAY)
    figures = ledger_figures(totals)
    costs = sql_cost(hermes_v22, window(days))
    assert figures["cost_usd"].value == pytest.approx(usd(costs), rel=1e-12, abs=1e-12)
    assert figures["cost_usd_actual"].value == 0.0  # the fixture has no actual costs
    assert figures["cost_usd_estimated"].value == pytest.approx(usd(costs), abs=1e-12)
    # per provider/model from session_model_usage's main loop, as Hermes wrote it there
    for key, counts in totals.by_model.items():
        provider, _, model = key.rpartition("/")
        where = f"{window(days)} AND u.task = '' AND u.billing_provider = '{provider}' AND " + (
            f"(u.model = '{model}' OR u.model LIKE '%/{model}')"
        )
        assert counts.cost_usd == pytest.approx(usd(sql_cost(hermes_v22, where, "usage")))


async def test_the_receipt_states_the_windows_usd(hermes_v22: Path) -> None:
    figures = ledger_figures(await read(hermes_v22, 30 * DAY))
    text = "\n".join(spend_markdown(figures, Prices()))
    assert f"USD: ${usd(sql_cost(hermes_v22, window(30))):,.2f} (estimated by Hermes" in text
    assert "of models without a price" in text and "custom/Qwen3-32B" in text


async def test_an_older_schema_with_cost_columns_has_usd_too(hermes_v11: Path) -> None:
    totals = await read(hermes_v11, 30 * DAY)
    figures = ledger_figures(totals)
    assert figures["cost_usd"].value == pytest.approx(usd(sql_cost(hermes_v11, window(30))))
    assert figures["cost_usd"].value > 0


async def test_a_ledger_without_cost_columns_says_so(hermes_v11: Path, tmp_path: Path) -> None:
    with sqlite3.connect(hermes_v11) as db:
        db.execute("ALTER TABLE sessions DROP COLUMN actual_cost_usd")
        db.execute("ALTER TABLE sessions DROP COLUMN estimated_cost_usd")
    figures = ledger_figures(await read(hermes_v11, 30 * DAY))
    for key in ("cost_usd", "cost_usd_actual", "paid_tokens", "unpriced_tokens"):
        assert figures[key].value is None
        assert "has no sessions.estimated_cost_usd" in figures[key].reason
    assert figures["output_tokens"].value  # the tokens are still there


async def test_in_a_set_a_ledger_without_costs_leaves_usd_missing_naming_it(
    hermes_v22: Path, hermes_v11: Path
) -> None:
    """A total that silently lacks one ledger's money would look right and be wrong."""
    with sqlite3.connect(hermes_v11) as db:
        db.execute("ALTER TABLE sessions DROP COLUMN actual_cost_usd")
    ledgers = LedgerSet([LedgerTailer(hermes_v22), LedgerTailer(hermes_v11)])
    try:
        figures = ledger_figures(await ledgers.read(30 * DAY, NOW))
    finally:
        await ledgers.close()
    assert figures["cost_usd"].value is None
    assert str(hermes_v11) in figures["cost_usd"].reason


def empty_ledger(source: Path, path: Path) -> HermesLikeWriter:
    """The real schema-22 ledger with no rows, written the way Hermes writes."""
    path.write_bytes(source.read_bytes())
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM session_model_usage")
        db.execute("DELETE FROM sessions")
    return HermesLikeWriter(path)


LANES = {
    # provider/model: what Hermes records of a call's price
    "anthropic/claude-sonnet-4.6": lambda rng: Cost(rng.uniform(0.001, 0.2), None, "estimated"),
    "openrouter/qwen/qwen3-coder": lambda rng: Cost(rng.uniform(0.0001, 0.01), 0.0042, "actual"),
    "custom/Qwen/Qwen3-32B": lambda rng: Cost(0.0, None, "unknown"),
    "openai-codex/gpt-5.4": lambda rng: Cost(0.0, None, "included"),
}


def write_sessions(writer: HermesLikeWriter, models: Iterable[str], seed: int) -> None:
    """Sessions of one model each (the same ones whatever `models` leaves out), a side call
    in some, a few still open."""
    rng = random.Random(seed)
    for index in range(120):
        name = rng.choice(sorted(LANES))
        cost = LANES[name](rng)
        started = NOW - rng.uniform(0, 2 * DAY)
        calls = [Usage(*(rng.randrange(1, 5000) for _ in range(5))) for _ in range(3)]
        side = rng.random() < 0.3
        closed = rng.random() < 0.9
        source = rng.choice(["cli", "cron"])
        if name not in models:
            continue
        provider, _, model = name.partition("/")
        session = f"s{index}"
        writer.start_session(session, source, model, started)
        for usage in calls:
            writer.record_call(
                session, model, usage, cost=Cost(**{**vars(cost), "provider": provider})
            )
        if side:
            writer.record_call(session, "gemini-3-flash", Usage(500, 0, 0, 12, 0), task="title",
                               cost=Cost(0.0003, None, "estimated", "google"))  # fmt: skip
        if closed:
            writer.end_session(session, started + 60)


async def test_priced_and_local_models_are_kept_apart(hermes_v22: Path, tmp_path: Path) -> None:
    writer = empty_ledger(hermes_v22, tmp_path / "state.db")
    write_sessions(writer, LANES, seed=3)
    writer.close()
    totals = await read(tmp_path / "state.db", 2 * DAY)
    figures = ledger_figures(totals)
    path = tmp_path / "state.db"
    costs = sql_cost(path, window(2))
    rounding = len(costs) * 0.5e-9  # each row's cost is summed in whole billionths of a dollar
    assert figures["cost_usd"].value == pytest.approx(usd(costs), abs=rounding)
    assert figures["cost_usd_actual"].value == pytest.approx(usd(costs, True), abs=rounding)
    assert figures["cost_usd_estimated"].value == pytest.approx(usd(costs, False), abs=rounding)
    assert figures["cost_usd_actual"].value and figures["cost_usd_estimated"].value
    assert totals.total.cost_estimated == sum(
        math.floor(cost * 1e9 + 0.5) for cost, actual in costs if not actual
    )
    with sqlite3.connect(path) as db:
        ((local,),) = db.execute(
            "SELECT SUM(input_tokens + cache_read_tokens + cache_write_tokens + output_tokens) "
            "FROM sessions WHERE billing_provider IN ('custom', 'openai-codex')"
        )
        ((all_tokens,),) = db.execute(
            "SELECT SUM(input_tokens + cache_read_tokens + cache_write_tokens + output_tokens) "
            "FROM sessions"
        )
    assert figures["unpriced_tokens"].value == local > 0
    assert figures["paid_tokens"].value == all_tokens - local
    assert "custom/Qwen3-32B" in figures["unpriced_tokens"].reason
    assert "openai-codex/gpt-5.4" in figures["unpriced_tokens"].reason
    assert "anthropic" not in figures["unpriced_tokens"].reason
    assert "side calls cost $" in figures["cost_usd"].reason  # said, not added


async def test_a_local_lane_has_no_usd_rather_than_zero(hermes_v22: Path, tmp_path: Path) -> None:
    writer = empty_ledger(hermes_v22, tmp_path / "state.db")
    write_sessions(writer, ["custom/Qwen/Qwen3-32B"], seed=3)
    writer.close()
    figures = ledger_figures(await read(tmp_path / "state.db", 2 * DAY))
    assert figures["cost_usd"].value is None
    assert figures["cost_usd"].reason == "no model with a price in the window"
    assert figures["unpriced_tokens"].value and figures["paid_tokens"].value == 0


def values(figures: LedgerFigures) -> dict[str, float | None]:
    return {key: figure.value for key, figure in figures.figures.items()}


@pytest.mark.parametrize(
    ("asked", "kept"),
    [
        (["Qwen3-32B"], ["custom/Qwen/Qwen3-32B"]),
        (["anthropic/claude-sonnet-4.6", "qwen3-coder"],
         ["anthropic/claude-sonnet-4.6", "openrouter/qwen/qwen3-coder"]),
    ],
)  # fmt: skip
async def test_narrowed_figures_equal_a_ledger_of_only_those_models(
    hermes_v22: Path, tmp_path: Path, asked: list[str], kept: list[str]
) -> None:
    whole, only = tmp_path / "whole.db", tmp_path / "only.db"
    for path, models in ((whole, list(LANES)), (only, kept)):
        writer = empty_ledger(hermes_v22, path)
        write_sessions(writer, models, seed=11)
        writer.close()
    narrowed = narrow(await read(whole, 2 * DAY), asked)
    alone = await read(only, 2 * DAY)
    assert narrowed.by_model == alone.by_model
    assert narrowed.total == alone.total
    assert values(ledger_figures(narrowed)) == values(ledger_figures(alone))
    assert narrowed.narrowed_to == tuple(asked)
    assert ledger_figures(narrowed).narrowed == ", ".join(sorted(alone.by_model))
    # what the ledger can't split by model is not passed off as the lane's
    assert not narrowed.by_source and "narrowed to models" in narrowed.missing["by_source"]
    assert narrowed.side_calls is None


async def test_narrowing_on_an_old_ledger_uses_its_session_models(hermes_v11: Path) -> None:
    totals = await read(hermes_v11, 30 * DAY)
    narrowed = narrow(totals, ["gpt-5.4"])
    assert set(narrowed.by_model) == {k for k in totals.by_model if k.endswith("gpt-5.4")}
    with sqlite3.connect(hermes_v11) as db:
        ((sessions, output),) = db.execute(
            f"SELECT COUNT(*), SUM(output_tokens) FROM sessions AS s WHERE {window(30)} "
            "AND model = 'gpt-5.4'"
        )
    assert (narrowed.total.sessions, narrowed.total.output) == (sessions, output)


async def test_no_models_is_the_whole_ledger_and_none_matching_says_so(hermes_v22: Path) -> None:
    totals = await read(hermes_v22, 30 * DAY)
    assert narrow(totals, ()) is totals
    figures = ledger_figures(narrow(totals, ["llama-9"]))
    assert figures["sessions"].value == 0
    assert figures.narrowed == "no llama-9 in the window"


def test_a_model_name_matches_its_key_with_or_without_the_provider() -> None:
    assert model_matches("custom/Qwen3-32B", "custom/Qwen3-32B")
    assert model_matches("qwen3-32b", "custom/Qwen3-32B")
    assert not model_matches("anthropic/claude-sonnet-4.6", "openrouter/claude-sonnet-4.6")
    assert not model_matches("claude", "anthropic/claude-sonnet-4.6")


def test_a_lane_shows_its_ledger_models_else_its_model_filter() -> None:
    assert lane_models(("custom/Qwen3-32B",), "Qwen/Qwen3-32B") == ("custom/Qwen3-32B",)
    assert lane_models((), "Qwen/Qwen3-32B") == ("Qwen3-32B",)
    assert lane_models((), None) == ()


async def test_each_lane_shows_its_own_models_of_the_ledger() -> None:
    """lane-a names its ledger models in the config; lane-b has none until the `m` filter."""
    a, b, ledger = ScriptedLaneFeed("lane-a"), ScriptedLaneFeed("lane-b"), ScriptedLedgerFeed()
    lanes = (LaneConfig("lane-a", ledger_models=("qwen3-32b",)), LaneConfig("lane-b"))
    app = make_app(Config(lanes=lanes, window="1h", refresh_s=3600.0), [a, b], ledger)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        spend = app.query_one(SpendPane)
        shown = app.lane_ledger()
        assert shown is not None and shown.totals is not None
        assert list(shown.totals.by_model) == ["qwen3-32b"]
        assert "lane only: qwen3-32b" in spend.render().plain
        await pilot.press("2")
        await settle(pilot)
        assert "lane only" not in spend.render().plain  # the whole ledger
        app.filter_model("org/claude-sonnet-4")
        await settle(pilot)
        assert "lane only: claude-sonnet-4" in spend.render().plain


async def test_a_ledger_read_is_narrowed_for_the_lane_once() -> None:
    """Each lane refresh shows the ledger the last ledger read left: narrowed once for the
    lane's models, again for other models or another read."""
    a, ledger = ScriptedLaneFeed("lane-a"), ScriptedLedgerFeed()
    app = make_app(
        Config(lanes=(LaneConfig("lane-a"),), window="1h", refresh_s=3600.0), [a], ledger
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.filter_model("Qwen/qwen3-32b")
        await settle(pilot)
        first = app.lane_ledger()
        assert first is not None and first.totals is not None
        assert list(first.totals.by_model) == ["qwen3-32b"]
        assert app.lane_ledger() is first
        app.filter_model("org/claude-sonnet-4")
        await settle(pilot)
        other = app.lane_ledger()
        assert other is not None and other.totals is not None
        assert list(other.totals.by_model) == ["claude-sonnet-4"]
        assert app.lane_ledger() is other
        await pilot.press("r")  # a new ledger read: narrowed anew, to the same models
        await settle(pilot)
        again = app.lane_ledger()
        assert again is not other and again is not None and again.totals is not None
        assert list(again.totals.by_model) == ["claude-sonnet-4"]

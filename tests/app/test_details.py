"""Without a mouse: the arrows focus a pane, enter or i lists its figures (definition, query,
evaluation time, why one is missing), escape closes; `l` shows the ledger tables."""

from __future__ import annotations

from dataclasses import dataclass, replace

from textual.pilot import Pilot

from cockpit.app.app import CockpitApp, make_app
from cockpit.app.screens import DetailsScreen, LedgerTablesScreen
from cockpit.core import promql
from cockpit.core.catalogue import TRENDS
from cockpit.core.catalogue import definition as lane_definition
from cockpit.core.figures import lane_figures
from cockpit.core.gpu_figures import NO_GPU_SOURCE
from cockpit.core.ledger_figures import ledger_definition, ledger_figures
from cockpit.core.model import LaneTotals, frozen_map
from cockpit.core.models import MODEL_FIGURES, NO_MODELS_SEEN, with_models
from cockpit.core.text import visible
from cockpit.widgets.pane import Pane
from cockpit.widgets.vitals import VitalStrip
from tests.support.feeds import (
    ScriptedLaneFeed,
    ScriptedLedgerFeed,
    config,
    fixed_clocks,
    gpu_totals,
    lane_totals,
    ledger_totals,
    with_two_models,
)
from tests.support.pilot import focus_pane, on_screen, settle
from tests.support.screentext import screen_text

COMPUTED_QUERY = 'sum(increase(vllm:prompt_computed_tokens_total{job="[lane]"}[1h]))'
QUERIES_QUERY = 'sum(increase(vllm:prefix_cache_queries_total{job="[lane]"}[1h]))'
SOURCE_QUERY = 'sum by (source) (increase(vllm:prompt_tokens_by_source_total{job="[lane]"}[1h]))'
NOT_EXPOSED = "not exposed by this engine (vllm:prefix_cache_hits)"
EVALUATED = "2026-09-21 14:13:20 UTC"
"""`EVAL_AT` as the details say it."""


@dataclass(eq=False)
class QueriedLaneFeed(ScriptedLaneFeed):
    """A lane whose totals carry their PromQL and lack the prefix-cache hits."""

    async def read(self, window_s: float, end: float | None) -> LaneTotals:
        totals = await super().read(window_s, end)
        values = {k: v for k, v in totals.values.items() if k != "prefix_cache_hits"}
        return replace(
            totals,
            values=frozen_map(values),
            missing=frozen_map({**totals.missing, "prefix_cache_hits": NOT_EXPOSED}),
            queries=frozen_map(
                {
                    "prompt_computed": COMPUTED_QUERY,
                    "prefix_cache_queries": QUERIES_QUERY,
                    "prompt_by_source": SOURCE_QUERY,
                }
            ),
        )


def app() -> CockpitApp:
    feeds = [QueriedLaneFeed()]
    return make_app(config("lane-a"), feeds, ScriptedLedgerFeed(), clocks=fixed_clocks())


def details_text(cockpit: CockpitApp) -> str:
    assert isinstance(cockpit.screen, DetailsScreen)
    return cockpit.screen.text


async def open_details(pilot: Pilot[None], pane: str) -> str:
    """The details of `pane` once the lane is read, enter pressed on it."""
    await settle(pilot)
    await focus_pane(pilot, pane)
    await pilot.press("enter")
    await pilot.pause()
    assert isinstance(pilot.app, CockpitApp)
    return details_text(pilot.app)


async def test_enter_on_a_focused_pane_lists_what_each_figure_is_and_where_it_came_from() -> None:
    cockpit = app()
    async with cockpit.run_test(size=(160, 48)) as pilot:
        text = await open_details(pilot, "cache")
        computed = text[text.index("Prefill computed") :]
        assert "Prompt tokens actually computed" in computed  # its definition
        assert COMPUTED_QUERY in computed  # its PromQL, as data: [lane] and [1h] stay
        assert EVALUATED in computed
        hit_rate = text[text.index("Hit rate (engine)") : text.index("Prefill computed")]
        assert "Share of looked-up prompt tokens found in the prefix cache" in hit_rate
        assert QUERIES_QUERY in hit_rate  # the query of a raw key it is made from
        assert NOT_EXPOSED in hit_rate  # why it is missing
        hits = text[text.index("Prompt: local cache hit") : text.index("Cached: device")]
        assert "Prompt tokens by source (local cache hit) in the window" in hits
        assert SOURCE_QUERY in hits and "18.32 M · 91.6%" in hits
        assert "Prompt tokens served from the host cache tier" in text
        ledger = text[text.index("Ledger cache-read share") :]
        assert "FROM sessions WHERE started_at >" in ledger  # the ledger's own SQL
        assert EVALUATED in ledger
        assert EVALUATED in screen_text(cockpit)  # on screen, not only in the widget
        await pilot.press("escape")
        await pilot.pause()
        assert cockpit.screen is cockpit.screen_stack[0]
        assert cockpit.focused is not None and cockpit.focused.id == "cache"


async def test_i_opens_the_details_too_and_the_arrows_go_round_the_strip_and_panes() -> None:
    cockpit = app()
    async with cockpit.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await focus_pane(pilot, "cache")
        await pilot.press("up")  # the vital strip comes before the first pane
        assert isinstance(cockpit.focused, VitalStrip)
        await pilot.press("left")  # and after the last
        last = cockpit.focused
        assert isinstance(last, Pane) and last.id != "cache"
        await pilot.press("right", "right")
        assert cockpit.focused is not None and cockpit.focused.id == "cache"
        await pilot.press("left", "left", "i")
        await pilot.pause()
        assert isinstance(cockpit.screen, DetailsScreen)
        assert str(last.border_title) in screen_text(cockpit)
        await pilot.press("escape")
        await pilot.pause()
        assert cockpit.focused is last


async def test_the_vital_strip_tails_and_trends_say_what_their_figures_are() -> None:
    cockpit = app()
    async with cockpit.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        for pane, words in (
            ("vitals", ("Requests being served at the evaluation time", EVALUATED)),
            ("tails", ("99th percentile of the time to first token", "`ttft` histogram")),
            ("trends", ("Prefix-cache hit rate within each step", "without data")),
        ):
            await focus_pane(pilot, pane)
            await pilot.press("enter")
            await pilot.pause()
            text = details_text(cockpit)
            assert all(word in text for word in words), (pane, text)
            await pilot.press("escape")
            await pilot.pause()


async def test_the_trends_gpu_utilisation_says_why_it_is_missing() -> None:
    """No GPU source: no sparkline, the details say so; a GPU source that read nothing: a line
    saying why, in the pane and the details."""
    failed = gpu_totals(failed="connection refused (:9400)")
    for feed, pane_line, why in (
        (ScriptedLaneFeed(), None, NO_GPU_SOURCE),
        (ScriptedLaneFeed(gpu=failed), f"GPU util: {failed.reason}", failed.reason),
    ):
        lane = make_app(config("lane-a"), [feed], None, clocks=fixed_clocks())
        async with lane.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            pane = [line for line in screen_text(lane).splitlines() if "GPU util" in line]
            if pane_line is None:
                assert pane == []
            else:
                assert len(pane) == 1 and pane_line in pane[0]
            await focus_pane(pilot, "trends")
            await pilot.press("enter")
            await pilot.pause()
            text = details_text(lane)
            assert "GPU utilisation within each step" in text and why in text, text


async def test_l_shows_the_ledger_tables_at_any_size() -> None:
    cockpit = app()
    async with cockpit.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(cockpit.screen, LedgerTablesScreen)
        text = await on_screen(pilot, "per source", "per model", "per profile")
        for group in ("cli", "cron", "claude-sonne", "qwen3-32b"):  # a long name cut at 80
            assert group in text, group
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(cockpit.screen, LedgerTablesScreen)


async def test_without_a_ledger_the_tables_say_how_to_add_one() -> None:
    cockpit = make_app(config("lane-a"), [ScriptedLaneFeed()], None, clocks=fixed_clocks())
    async with cockpit.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("l")
        await on_screen(pilot, "ledger")
        assert isinstance(cockpit.screen, LedgerTablesScreen)


def test_every_figure_has_a_plain_language_definition() -> None:
    """A figure added without a line in the catalogue would open details that say nothing."""
    lane = lane_figures(lane_totals()).figures
    ledger = ledger_figures(ledger_totals()).figures
    assert [key for key in lane if not lane_definition(key)] == []
    assert [key for key in ledger if not ledger_definition(key)] == []
    assert all(series.definition for series in TRENDS)


HOSTILE_MODEL = 'sql-lora "v2" [bold red]x[/]\x1b[2J'
"""A model name from outside: a quote, markup and a control byte (a terminal's screen clear)."""
TWO_MODELS = {"llama-3.1-8b": (0.75, 0.95), HOSTILE_MODEL: (0.25, None)}
LANE_SELECTOR = '{job="lane-a"}'
PLAN = promql.lane_plan("vllm", LANE_SELECTOR, 3600.0, None, False)


@dataclass(eq=False)
class TwoModelsFeed(ScriptedLaneFeed):
    """A lane of two models whose totals carry the queries the Prometheus source plans: the
    lane's own, and one `sum by (model_name)` per raw key read per model."""

    async def read(self, window_s: float, end: float | None) -> LaneTotals:
        lane = replace(lane_totals(self.name, window_s), queries=frozen_map(PLAN.exprs))
        per_model = {key.removeprefix(promql.MODEL): query for key, query in PLAN.extra.items()
                     if key.startswith(promql.MODEL)}  # fmt: skip
        return with_two_models(lane, TWO_MODELS, per_model)


def model_queries(model: str) -> dict[str, list[str]]:
    """What the details must say each of a model's figures was read with: the lane's planned
    query with the model's matcher (its `"` escaped, as PromQL reads it)."""
    matcher = 'model_name="{}",job="lane-a"'.format(model.replace('"', '\\"'))

    def own(metric: str, by: str = "model_name") -> str:
        return f"sum by ({by}) (increase({metric}{{{matcher}}}[1h]))"

    prompt, generated = own("vllm:prompt_tokens_total"), own("vllm:generation_tokens_total")
    lane = [f'(sum(increase(vllm:{name}_tokens_total{{job="lane-a"}}[1h])))'
            for name in ("prompt", "generation")]  # fmt: skip
    return {
        "requests_per_s": [own("vllm:request_success_total")],
        "prompt_tok_s": [prompt],
        "generation_tok_s": [generated],
        "prefix_cache_hit_rate": [own("vllm:prefix_cache_hits_total"),
                                  own("vllm:prefix_cache_queries_total")],
        "ttft_p95": [own("vllm:time_to_first_token_seconds_bucket", "le, model_name")],
        # the model's tokens over its lane's: the lane's own queries, with no model matcher
        "token_share": [prompt, generated, " + ".join(lane)],
    }  # fmt: skip


async def test_enter_on_the_models_pane_lists_each_model_s_figures_and_its_queries() -> None:
    cockpit = make_app(config("lane-a"), [TwoModelsFeed()], None, clocks=fixed_clocks())
    async with cockpit.run_test(size=(250, 70)) as pilot:
        text = await open_details(pilot, "models")
        lines = text.split("\n")
        names = tuple(f"{visible(model)}  " for model in TWO_MODELS)
        heads = [n for n, line in enumerate(lines) if line.startswith(names)]
        assert len(heads) == len(TWO_MODELS) * len(MODEL_FIGURES)  # a head per model and figure
        lora = next(n for n, line in enumerate(lines) if line.startswith("LoRA"))
        ends = zip(heads, [*heads[1:], lora], strict=True)
        said = [(lines[n], "\n".join(lines[n + 1 : end])) for n, end in ends]
        for model in TWO_MODELS:
            for key, queries in model_queries(model).items():
                (fields,) = [body for head, body in said if head.startswith(f"{visible(model)}  ")
                             and lane_definition(key) in body]  # fmt: skip
                shown = [line.removeprefix("query   ") for line in fields.split("\n")
                         if line.startswith("query")]  # fmt: skip
                assert [q for q in shown if q.startswith("sum") or q.startswith("(")] == [
                    visible(query) for query in queries
                ], (model, key)
                assert EVALUATED in fields
        # The numbers are each model's own: 75 % and 25 % of the lane's 1,000 requests an hour.
        assert "llama-3.1-8b  Requests/s (window mean)  0.208" in text
        assert f"{visible(HOSTILE_MODEL)}  Requests/s (window mean)  0.0694" in text
        assert "LoRA running" in text and "summarise-lora" in text  # the adapters, as before
        # The name is data: its markup stays text, its control byte is shown, not sent.
        on = await on_screen(pilot, f"{visible(HOSTILE_MODEL)}  Share of the lane's tokens")
        assert "[bold red]x[/]" in on and "\x1b" not in on


async def test_enter_in_the_models_pop_up_lists_the_same_details_as_on_a_wide_screen() -> None:
    wide = make_app(config("lane-a"), [TwoModelsFeed()], None, clocks=fixed_clocks())
    async with wide.run_test(size=(250, 70)) as pilot:
        expected = await open_details(pilot, "models")
    narrow = make_app(config("lane-a"), [TwoModelsFeed()], None, clocks=fixed_clocks())
    async with narrow.run_test(size=(160, 48)) as pilot:  # the Models pane is not on the screen
        await settle(pilot)
        await pilot.press("M")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert details_text(narrow) == expected
        assert "llama-3.1-8b  Requests/s (window mean)  0.208" in expected


@dataclass(eq=False)
class NoModelsFeed(ScriptedLaneFeed):
    """A lane none of whose series carries a model label."""

    async def read(self, window_s: float, end: float | None) -> LaneTotals:
        return with_models(lane_totals(self.name, window_s), {}, {}, None)


async def test_the_models_pane_details_say_why_there_are_no_rows() -> None:
    cockpit = make_app(config("lane-a"), [NoModelsFeed()], None, clocks=fixed_clocks())
    async with cockpit.run_test(size=(250, 70)) as pilot:
        text = await open_details(pilot, "models")
        assert f"models  {NO_MODELS_SEEN}" in text

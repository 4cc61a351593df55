"""A lane's trend read from a real Prometheus loaded with two hours of history (promtool).

The trend's points are checked against what Prometheus answers for the figures' own
definitions written out here, per minute; a gap in the history stays a gap, a counter reset
doesn't spike, later reads ask only the steps that became due, and a failed history read
leaves the lane's figures as they are."""

from __future__ import annotations

import math
import re

import httpx
import pytest

from cockpit.app.app import make_app
from cockpit.config.schema import Config, LaneConfig
from cockpit.core.trends import trend_query
from cockpit.engines import dialects, engines
from cockpit.runtime.feeds import build_feeds
from cockpit.sources.history import TREND
from cockpit.sources.prometheus import PrometheusSource
from tests.support.faultproxy import FaultProxy, json_answer
from tests.support.promharness import (
    OpenMetricsWriter,
    PromServer,
    remote_write,
)
from tests.support.screentext import screen_text

pytestmark = pytest.mark.prometheus

HOUR = 3600
END = 1_790_000_000 - (1_790_000_000 % HOUR)
"""A whole hour, in the past: the 1 h window's trend is its 60 minutes."""
GAP = (END - 40 * 60, END - 30 * 60)
"""No sample in between: ten minutes of the lane's history missing."""
RESET = END - 20 * 60 + 7
"""The engine restarts: its counters start again from 0."""
SELECTOR = '{job="trend"}'
BOUNDS = ("0.1", "0.5", "1.0", "+Inf")


def history() -> OpenMetricsWriter:
    """Samples every 15 s (7 s past the step's multiples), two hours up to END: 1 token a
    second, 100 prefix-cache queries a scrape (a quarter hits), one TTFT and 4 ITL observations
    a scrape; the gauges move with the minute."""
    writer = OpenMetricsWriter()
    times = [t for t in range(END - 2 * HOUR + 7, END, 15) if not GAP[0] < t < GAP[1]]
    labels = {"job": "trend", "instance": "e1", "model_name": "m"}
    scrapes = [(t, (t - (RESET - 15 if t >= RESET else END - 2 * HOUR - 8)) // 15) for t in times]

    def counter(name: str, per_scrape: float, extra: dict[str, str] | None = None) -> None:
        family = name.removesuffix("_total").removesuffix("_sum").removesuffix("_count")
        kind = "counter" if name.endswith("_total") else "histogram"
        series = [(float(t), n * per_scrape) for t, n in scrapes]
        writer.add(family, kind, name, {**labels, **(extra or {})}, series)

    counter("vllm:generation_tokens_total", 15)
    counter("vllm:prefix_cache_queries_total", 100)
    counter("vllm:prefix_cache_hits_total", 25)
    ttft = "vllm:time_to_first_token_seconds"
    for bound, share in zip(BOUNDS, (0.25, 0.75, 1.0, 1.0), strict=True):
        counter(f"{ttft}_bucket", share, {"le": bound})
    counter(f"{ttft}_sum", 0.3)
    counter(f"{ttft}_count", 1)
    counter("vllm:inter_token_latency_seconds_sum", 4 * 0.02)
    counter("vllm:inter_token_latency_seconds_count", 4)
    for name, value in (
        ("vllm:num_requests_running", lambda t: float(t // 60 % 7)),
        ("vllm:num_requests_waiting", lambda t: float(t // 60 % 3)),
        ("vllm:kv_cache_usage_perc", lambda t: t // 60 % 10 / 10),
    ):
        writer.add(name, "gauge", name, labels, [(float(t), value(t)) for t, _ in scrapes])
    slow = {"job": "slow", "instance": "e2", "model_name": "m"}
    minutes = range(END - 2 * HOUR + 7, END, 60)  # scraped at Prometheus's default interval
    tokens = [(float(t), 60.0 * n) for n, t in enumerate(minutes)]
    writer.add("vllm:generation_tokens", "counter", "vllm:generation_tokens_total", slow, tokens)
    running = [(float(t), 2.0) for t in minutes]
    writer.add("vllm:num_requests_running", "gauge", "vllm:num_requests_running", slow, running)
    return writer


@pytest.fixture(scope="module")
def server(prometheus: PromServer) -> PromServer:
    remote_write(prometheus, history())
    return prometheus


def prometheus_minutes(url: str, expr: str, end: float = END) -> list[float | None]:
    """Prometheus's own answer for `expr` at each minute of the hour up to `end`."""
    form = {"query": expr, "start": str(end - HOUR + 60), "end": str(end), "step": "60"}
    result = httpx.post(f"{url}/api/v1/query_range", data=form).json()["data"]["result"]
    answered = {float(t): float(v) for t, v in result[0]["values"]} if result else {}
    minutes = [end - HOUR + 60 * (i + 1) for i in range(60)]
    values = [answered.get(t) for t in minutes]
    return [v if v is not None and math.isfinite(v) else None for v in values]


def prometheus_points(url: str, expr: str, window_s: int, step_s: int) -> list[float | None]:
    """Prometheus's own answer for `expr` at each step of the window up to END."""
    form = {"query": expr, "start": str(END - window_s + step_s), "end": str(END)}
    result = httpx.post(f"{url}/api/v1/query_range", data={**form, "step": str(step_s)}).json()
    answered = {float(t): float(v) for t, v in result["data"]["result"][0]["values"]}
    return [answered.get(END - window_s + step_s * (i + 1)) for i in range(window_s // step_s)]


def increase(name: str) -> str:
    return f"sum(increase({name}{SELECTOR}[1m]))"


FIGURES = {
    "hit_rate": f"{increase('vllm:prefix_cache_hits_total')}"
    f" / {increase('vllm:prefix_cache_queries_total')}",
    "ttft_p95": "histogram_quantile(0.95, sum by (le) "
    f"(increase(vllm:time_to_first_token_seconds_bucket{SELECTOR}[1m])))",
    "itl_step": f"{increase('vllm:inter_token_latency_seconds_sum')}"
    f" / {increase('vllm:inter_token_latency_seconds_count')}",
    "generation_tok_s": f"{increase('vllm:generation_tokens_total')} / 60",
    "running": f"sum(avg_over_time(vllm:num_requests_running{SELECTOR}[1m]))",
    "waiting": f"sum(avg_over_time(vllm:num_requests_waiting{SELECTOR}[1m]))",
    "kv_usage": f"avg(avg_over_time(vllm:kv_cache_usage_perc{SELECTOR}[1m]))",
}
"""Each trend key over one minute, as the lane's figure defines it (vLLM: no speculation)."""


async def test_the_first_read_has_the_windows_hour_as_prometheus_answers_it(
    server: PromServer,
) -> None:
    source = PrometheusSource(server.url)
    try:
        totals = await source.read_lane("lane", None, SELECTOR, HOUR, END)
    finally:
        await source.aclose()
    trend = totals.trend
    assert trend is not None, totals.missing.get(TREND)
    assert (trend.step_s, trend.end) == (60, END)
    for key, expr in FIGURES.items():
        expected = prometheus_minutes(server.url, expr)
        assert sum(v is not None for v in expected) > 40, f"{key}: the history answers"
        assert trend.series[key] == pytest.approx(expected, rel=1e-12), key


async def test_a_gap_stays_a_gap_and_a_reset_does_not_spike(server: PromServer) -> None:
    source = PrometheusSource(server.url)
    try:
        trend = (await source.read_lane("lane", None, SELECTOR, HOUR, END)).trend
    finally:
        await source.aclose()
    assert trend is not None
    minutes = [END - HOUR + 60 * (i + 1) for i in range(60)]
    for key, points in trend.series.items():
        for t, value in zip(minutes, points, strict=True):
            if GAP[0] + 60 <= t <= GAP[1]:
                assert value is None, f"{key} at {t - END} s: no sample then, not {value}"
            else:
                assert value is not None, f"{key} at {t - END} s"
    assert all(0.9 <= v <= 1.1 for v in trend.series["generation_tok_s"] if v is not None)
    reset_minute = minutes.index(RESET - RESET % 60 + 60)
    assert trend.series["generation_tok_s"][reset_minute] == pytest.approx(1.0, rel=0.1)


async def test_later_reads_ask_only_when_a_step_is_due_and_at_most_two_requests(
    server: PromServer,
) -> None:
    source = PrometheusSource(server.url)
    try:
        first = (await source.read_lane("lane", None, SELECTOR, HOUR, END)).trend
        spent = []
        trends = []
        for at in (END + 5, END + 30, END + 59, END + 60, END + 65, END + 125):
            before = source.requests
            trends.append((await source.read_lane("lane", None, SELECTOR, HOUR, at)).trend)
            spent.append(source.requests - before)
    finally:
        await source.aclose()
    assert first is not None
    assert spent == [1, 1, 1, 2, 1, 2], "the history asked only when a new minute was due"
    assert [t.end if t else None for t in trends] == [END] * 3 + [END + 60] * 2 + [END + 120]
    moved = trends[3]
    assert moved is not None
    for key, points in first.series.items():
        assert moved.series[key][:-1] == points[1:], f"{key}: the kept minutes, shifted by one"
        assert moved.series[key][-1] is None, f"{key}: no history after END"


async def test_another_window_reads_its_own_trend_at_once(server: PromServer) -> None:
    source = PrometheusSource(server.url)
    try:
        await source.read_lane("lane", None, SELECTOR, HOUR, END)
        trend = (await source.read_lane("lane", None, SELECTOR, 6 * HOUR, END)).trend
    finally:
        await source.aclose()
    assert trend is not None and (trend.step_s, trend.end) == (600, END)
    tok_s = trend.series["generation_tok_s"]
    assert len(tok_s) == 36
    assert tok_s[:24] == (None,) * 24, "no history before its two hours"
    gap = (GAP[1] - (END - 2 * HOUR)) // 600 + 23
    assert tok_s[gap] is None, "ten minutes without data"
    assert all(v == pytest.approx(1.0, rel=0.1) for i, v in enumerate(tok_s[24:], 24) if i != gap)


async def test_a_failed_history_read_keeps_the_figures_and_says_why(server: PromServer) -> None:
    with FaultProxy(server.url) as proxy:
        proxy.canned["/api/v1/query_range"] = json_answer(
            {"status": "error", "errorType": "execution", "error": "out of memory"}, 422
        )
        source = PrometheusSource(proxy.url)
        try:
            totals = await source.read_lane("lane", None, SELECTOR, HOUR, END)
        finally:
            await source.aclose()
    assert totals.trend is None
    assert "out of memory" in totals.missing[TREND]
    assert totals.values["generation_tokens"] > 0, "the window's figures are read all the same"


@pytest.mark.parametrize("escaped", [False, True])
@pytest.mark.parametrize("dialect", [known.name for known in engines()])
def test_every_engines_trend_query_is_one_the_server_evaluates(
    server: PromServer, dialect: str, escaped: bool
) -> None:
    specs = dialects.lane_specs(dialect, escaped).values()
    names = frozenset(name for spec in specs for name in dialects.required_metrics(spec))
    query = trend_query(dialect, '{job="trend",model_name="m \\" q"}', 60.0, names)
    table = dialects.lane_specs(dialect)
    figs = {"kv_usage": "kv_usage", "itl_sum": "itl_sum", "ttft": "ttft_p95"}  # raw key -> fig
    stated = [fig for key, fig in figs.items() if not isinstance(table[key], dialects.Unavailable)]
    assert stated and all(f'"fig", "{fig}"' in query for fig in stated)
    form = {"query": query, "start": str(END - HOUR), "end": str(END), "step": "60"}
    answer = httpx.post(f"{server.url}/api/v1/query_range", data=form).json()
    assert answer["status"] == "success", answer.get("error")


async def first_frame(server: PromServer, window: str) -> str:
    """The screen of a cockpit at END (`--at`) on the test lane, once its first read is drawn."""
    config = Config(
        source="<test>",
        lanes=(LaneConfig("lane-t", prometheus=server.url, selector=SELECTOR),),
        window=window,
        refresh_s=60.0,
    )
    lanes, ledger = build_feeds(config)
    app = make_app(config, lanes, ledger, refresh_s=config.refresh_s, replay_at=END)
    async with app.run_test(size=(160, 48)) as pilot:
        while app.lane_snapshot is None:
            await pilot.pause(0.02)
        await pilot.pause()
        return screen_text(app)


async def test_a_cockpit_opened_on_an_hours_history_shows_that_hour_in_its_first_frame(
    server: PromServer,
) -> None:
    """The cockpit at END (`--at`: the history ends there) draws the whole hour from its first
    lane read: the trend's step stated, every minute a block but the gap's, left blank."""
    screen = await first_frame(server, "1h")
    assert "Trends · step 1 min" in screen, screen
    line = next(row for row in screen.splitlines() if "Gen tok/s" in row)
    spark = re.search(r"Gen tok/s +([▁-█][▁-█ ]*[▁-█]) +\S+ tok/s", line)
    assert spark is not None, line
    cells = spark.group(1)
    parts = re.fullmatch(r"([▁-█]+)( +)([▁-█]+)", cells)
    assert parts is not None, f"the hour, the ten minutes without data blank: {cells!r}"
    before, gap, _ = (len(part) for part in parts.groups())
    assert before / len(cells) == pytest.approx(20 / 60, abs=0.06), cells
    assert gap / len(cells) == pytest.approx(10 / 60, abs=0.06), cells


def rate(name: str, selector: str = SELECTOR, over: str = "1m") -> str:
    return f"sum(rate({name}{selector}[{over}]))"


async def test_a_five_minute_window_of_15_s_scrapes_has_rates_over_a_minute_at_every_step(
    server: PromServer,
) -> None:
    """15 s steps on 15 s scrapes: a step holds one sample, so its counters are read over four
    scrape intervals (a minute), their rate times the step; the title says so."""
    source = PrometheusSource(server.url)
    try:
        trend = (await source.read_lane("lane", None, SELECTOR, 300, END)).trend
    finally:
        await source.aclose()
    assert trend is not None and (trend.step_s, trend.rates_over_s) == (15, 60)
    ttft = "vllm:time_to_first_token_seconds_bucket"
    expected = {
        "hit_rate": f"{rate('vllm:prefix_cache_hits_total')}"
        f" / {rate('vllm:prefix_cache_queries_total')}",
        "ttft_p95": f"histogram_quantile(0.95, sum by (le) (rate({ttft}{SELECTOR}[1m])))",
        "itl_step": f"{rate('vllm:inter_token_latency_seconds_sum')}"
        f" / {rate('vllm:inter_token_latency_seconds_count')}",
        "generation_tok_s": rate("vllm:generation_tokens_total"),
        "running": f"sum(avg_over_time(vllm:num_requests_running{SELECTOR}[15s]))",
    }
    for key, expr in expected.items():
        points = trend.series[key]
        assert len(points) == 20 and None not in points, f"{key}: a gap where data is: {points}"
        wanted = prometheus_points(server.url, expr, 300, 15)
        assert points == pytest.approx(wanted, rel=1e-9), key


async def test_one_minute_steps_on_one_minute_scrapes_read_rates_over_four_minutes(
    server: PromServer,
) -> None:
    source = PrometheusSource(server.url)
    try:
        trend = (await source.read_lane("slow", None, '{job="slow"}', HOUR, END)).trend
    finally:
        await source.aclose()
    assert trend is not None and (trend.step_s, trend.rates_over_s) == (60, 240)
    tok_s = trend.series["generation_tok_s"]
    assert None not in tok_s and tok_s == pytest.approx([1.0] * 60, rel=1e-9)
    assert trend.series["running"] == (2.0,) * 60, "one sample in each minute"


async def test_the_trends_title_says_the_range_its_rates_are_read_over(
    server: PromServer,
) -> None:
    screen = await first_frame(server, "5m")
    assert "Trends · step 15 s · rates over 1 min" in screen, screen

"""A lane's trend: the step per window, its points on the step's multiples, and a direct scrape's
trend grown from its buffer (a gap stays a gap, a counter reset does not spike)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from cockpit.core.quantiles import histogram_quantile
from cockpit.core.trends import point_times, trend_step
from cockpit.sources.scrape import ScrapeSource

HOUR = 3600
END = 1_790_000_000 - (1_790_000_000 % HOUR)
"""A whole hour: the trend's points of a 1 h window are its minutes."""
BOUNDS = ("0.1", "0.5", "1.0", "+Inf")


@pytest.mark.parametrize(
    ("window", "step"),
    [
        (60, 15),
        (300, 15),
        (900, 15),
        (1800, 30),
        (HOUR, 60),
        (6 * HOUR, 600),
        (24 * HOUR, 1800),
        (7 * 86400, 3 * HOUR),
        (30 * 86400, 12 * HOUR),
        (90 * 86400, 2 * 86400),
    ],
)
def test_the_step_is_a_nice_sixtieth_of_the_window(window: float, step: float) -> None:
    assert trend_step(window) == step


@pytest.mark.parametrize("end", [END, END + 1, END + 59.5, END + 61])
def test_points_sit_on_the_steps_multiples_up_to_the_end(end: float) -> None:
    times = point_times(HOUR, end)
    assert len(times) == 60
    assert all(t % 60 == 0 for t in times)
    assert times[-1] <= end < times[-1] + 60
    assert [b - a for a, b in itertools.pairwise(times)] == [60.0] * 59


def exposition(tokens: float, queries: float, running: float, ttft: tuple[float, ...]) -> str:
    """A small vLLM exposition: counters, a gauge and the TTFT histogram (cumulative counts)."""
    labels = 'model_name="m"'
    lines = [
        "# TYPE vllm:generation_tokens counter",
        f"vllm:generation_tokens_total{{{labels}}} {tokens}",
        "# TYPE vllm:prefix_cache_queries counter",
        f"vllm:prefix_cache_queries_total{{{labels}}} {queries}",
        "# TYPE vllm:prefix_cache_hits counter",
        f"vllm:prefix_cache_hits_total{{{labels}}} {queries / 4}",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{labels}}} {running}",
        "# TYPE vllm:time_to_first_token_seconds histogram",
    ]
    for bound, count in zip(BOUNDS, ttft, strict=True):
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{le="{bound}",{labels}}} {count}')
    lines += [
        f"vllm:time_to_first_token_seconds_sum{{{labels}}} {ttft[-1] * 0.4}",
        f"vllm:time_to_first_token_seconds_count{{{labels}}} {ttft[-1]}",
    ]
    return "\n".join(lines) + "\n"


GAP = (END - 40 * 60, END - 30 * 60)
"""No scrape in (start, end]: ten steps without data."""
RESET = END - 20 * 60 + 15
"""The engine restarts: its counters start again from 0 at this scrape."""


def scraped_hour() -> ScrapeSource:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for text, at in scrapes():
        source.ingest(text, at)
    return source


def scrapes() -> Iterator[tuple[str, float]]:
    """An hour of scrapes every 15 s: 60 tokens, 400 prefix-cache queries (a quarter hits) and
    4 TTFT observations (1 under 0.1 s, 2 under 0.5 s, 1 under 1 s) a minute; running = the
    minute's number; a gap and a restart."""
    base = 0
    for at in range(END - HOUR - 60, END + 1, 15):
        if GAP[0] < at <= GAP[1]:
            continue
        if at == RESET:
            base = at - 15
        count = (at - base) // 15
        observed = count  # one TTFT observation a scrape
        ttft = (observed // 4, observed * 3 // 4, observed, observed)
        running = float((at - 1) // 60 % 60)
        yield exposition(15.0 * count, 100.0 * count, running, ttft), at


def test_a_scraped_trend_has_one_point_a_step_gaps_as_none_and_no_spike_at_a_reset() -> None:
    source = scraped_hour()
    trend = source.totals("lane", "", HOUR, END).trend
    assert trend is not None
    assert (trend.step_s, trend.end) == (60, END)
    times = point_times(HOUR, END)
    in_gap = [GAP[0] <= t - 60 and t <= GAP[1] for t in times]
    tok_s = trend.series["generation_tok_s"]
    assert len(tok_s) == 60
    for t, gap, value in zip(times, in_gap, tok_s, strict=True):
        if gap:
            assert value is None, f"step to {t} has no scrape: a gap, not {value}"
        elif t == GAP[1] + 60:
            assert value == 45 / 60, "after a gap a step counts from its own first scrape"
        else:
            assert value == 1.0, f"step to {t}: 60 tokens a minute (a reset doesn't spike)"
    hit_rate = trend.series["hit_rate"]
    assert {v for v, gap in zip(hit_rate, in_gap, strict=True) if not gap} == {0.25}
    assert all(v is None for v, gap in zip(hit_rate, in_gap, strict=True) if gap)
    running = trend.series["running"]
    assert running[-1] == 59.0 and running[0] == 0.0
    expected_p95 = histogram_quantile(0.95, ((0.1, 1), (0.5, 3), (1.0, 4), (float("inf"), 4)))
    assert expected_p95 is not None
    p95 = trend.series["ttft_p95"]
    assert p95[-1] == pytest.approx(expected_p95[0])
    assert all(v is None for v, gap in zip(p95, in_gap, strict=True) if gap)


def test_a_scraped_trend_before_the_first_scrape_is_all_gaps() -> None:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for at in range(END - 300, END + 1, 15):
        source.ingest(exposition(at - END + 300.0, 0.0, 1.0, (0, 0, 0, 0)), at)
    trend = source.totals("lane", "", HOUR, END).trend
    assert trend is not None
    tok_s = trend.series["generation_tok_s"]
    assert tok_s[:55] == (None,) * 55
    assert tok_s[-4:] == (1.0,) * 4
    assert trend.series["hit_rate"][-1] is None, "no query in the step: no rate, not 0"


def test_a_trend_read_at_every_scrape_ends_as_one_read_once_at_the_end() -> None:
    refreshed = ScrapeSource("http://127.0.0.1:1/metrics")
    for text, at in scrapes():
        refreshed.ingest(text, at)
        refreshed.totals("lane", "", HOUR, at + 20)  # a step not over yet is read too
    assert refreshed.totals("lane", "", HOUR, END).trend == (
        scraped_hour().totals("lane", "", HOUR, END).trend
    )

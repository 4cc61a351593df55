"""What the simulated agents do: which models each Hermes source calls, how long a session
runs, how its context grows and hits the cache, and what a call costs."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Route:
    """A model as Hermes stores it, and how it is billed."""

    model: str
    provider: str
    base_url: str
    prices: tuple[float, float, float, float] | None
    """$ per million (input, cache read, cache write, output); None when unknown (local)."""
    reasoning_share: float
    context: int
    reports_cache: bool = True


ROUTES: dict[str, Route] = {
    r.model: r
    for r in (
        Route("claude-sonnet-4.6", "anthropic", "https://api.anthropic.invalid",
              (3.0, 0.30, 3.75, 15.0), 0.15, 400_000),
        Route("openrouter/anthropic/claude-sonnet-4.6", "openrouter",
              "https://openrouter.invalid/api/v1", (3.0, 0.30, 3.75, 15.0), 0.15, 400_000),
        Route("gpt-5.4", "openai", "https://api.openai.invalid/v1",
              (1.25, 0.125, 0.0, 10.0), 0.40, 400_000),
        Route("openrouter/qwen/qwen3-coder", "openrouter", "https://openrouter.invalid/api/v1",
              (0.22, 0.022, 0.0, 0.95), 0.0, 256_000),
        Route("deepseek-ai/DeepSeek-V3", "custom", "http://127.0.0.1:8000/v1",
              None, 0.20, 500_000, reports_cache=False),
        Route("meta-llama/Llama-3.1-8B-Instruct", "custom", "http://127.0.0.1:8001/v1",
              None, 0.0, 120_000, reports_cache=False),
    )
}  # fmt: skip
"""Includes the two demo lanes' models (provider `custom`) and provider-prefixed names."""

SOURCE_ROUTES: dict[str, dict[str, int]] = {
    "desktop": {"claude-sonnet-4.6": 6, "openrouter/anthropic/claude-sonnet-4.6": 1, "gpt-5.4": 4,
                "deepseek-ai/DeepSeek-V3": 1},
    "cli": {"claude-sonnet-4.6": 4, "gpt-5.4": 2, "openrouter/qwen/qwen3-coder": 2,
            "deepseek-ai/DeepSeek-V3": 1},
    "tui": {"claude-sonnet-4.6": 3, "deepseek-ai/DeepSeek-V3": 1,
            "meta-llama/Llama-3.1-8B-Instruct": 1},
    "telegram": {"gpt-5.4": 3, "openrouter/anthropic/claude-sonnet-4.6": 1,
                 "meta-llama/Llama-3.1-8B-Instruct": 1},
    "cron": {"meta-llama/Llama-3.1-8B-Instruct": 2, "openrouter/qwen/qwen3-coder": 2, "gpt-5.4": 1},
    "subagent": {"openrouter/qwen/qwen3-coder": 3, "deepseek-ai/DeepSeek-V3": 1,
                 "claude-sonnet-4.6": 2},
}  # fmt: skip
SOURCE_WEIGHTS: dict[str, int] = {
    "desktop": 80, "cli": 55, "tui": 30, "telegram": 30, "cron": 35, "subagent": 50,
}  # fmt: skip
CALLS_MEDIAN: dict[str, float] = {
    "desktop": 24, "cli": 28, "tui": 18, "telegram": 8, "cron": 5, "subagent": 14,
}  # fmt: skip
END_REASONS: dict[str, str] = {
    "desktop": "agent_close", "cli": "cli_close", "tui": "cli_close",
    "telegram": "session_reset", "cron": "cron_complete", "subagent": "agent_close",
}  # fmt: skip
INTERACTIVE = frozenset({"desktop", "cli", "tui", "telegram"})
TITLE_VERBS = (
    "Fix",
    "Refactor",
    "Review",
    "Debug",
    "Draft",
    "Plan",
    "Benchmark",
    "Profile",
    "Trace",
)
TITLE_NOUNS = (
    "ledger tailer", "prefix cache stats", "CI pipeline", "config loader", "GPU memory spike",
    "retry policy", "metrics scrape", "tmux layout", "roofline plot", "queue latency",
)  # fmt: skip
TITLE_ROUTE = Route("gemini-3-flash", "google", "https://generativelanguage.invalid/v1beta",
                    (0.30, 0.03, 0.0, 2.50), 0.0, 1_000_000)  # fmt: skip


@dataclass(slots=True)
class Session:
    """A session being written: what it will do and how far it got."""

    id: str
    source: str
    route: Route
    calls: int
    base: int
    growth: int
    started_at: float
    parent_id: str | None = None
    done: int = 0
    prev_prompt: int = 0


@dataclass(frozen=True, slots=True)
class CallUsage:
    """One API call's usage delta, as Hermes adds it to the session row."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    prompt: int

    @classmethod
    def total(cls, usages: Sequence[CallUsage]) -> CallUsage:
        """The calls' token counts summed, with the last call's prompt."""
        return cls(
            input_tokens=sum(u.input_tokens for u in usages),
            output_tokens=sum(u.output_tokens for u in usages),
            cache_read_tokens=sum(u.cache_read_tokens for u in usages),
            cache_write_tokens=sum(u.cache_write_tokens for u in usages),
            reasoning_tokens=sum(u.reasoning_tokens for u in usages),
            prompt=usages[-1].prompt,
        )

    def cost(self, route: Route) -> float | None:
        if route.prices is None:
            return None
        p_in, p_read, p_write, p_out = route.prices
        return (
            self.input_tokens * p_in
            + self.cache_read_tokens * p_read
            + self.cache_write_tokens * p_write
            + self.output_tokens * p_out
        ) / 1e6


def pick(rng: random.Random, weights: dict[str, int]) -> str:
    """One key of `weights`, drawn in proportion to its weight."""
    keys = list(weights)
    return rng.choices(keys, [weights[k] for k in keys])[0]


def new_session(rng: random.Random, started_at: float, source: str | None = None) -> Session:
    """A session starting at `started_at`: its source (drawn when not given), its model, how many
    calls it will make and how its context grows."""
    if source is None:
        source = pick(rng, SOURCE_WEIGHTS)
    route = ROUTES[pick(rng, SOURCE_ROUTES[source])]
    calls = int(rng.lognormvariate(math.log(CALLS_MEDIAN[source]), 0.7))
    stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(started_at))
    if source == "cron":
        sid = f"cron_{rng.getrandbits(48):012x}_{stamp}"
    else:
        sid = f"{stamp}_{rng.getrandbits(24):06x}"
    return Session(
        id=sid,
        source=source,
        route=route,
        calls=max(1, min(120, calls)),
        base=rng.randrange(12_000, 30_000),
        growth=rng.randrange(4_000, 12_000),
        started_at=started_at,
    )


def call_usage(rng: random.Random, s: Session) -> CallUsage:
    """The next call of a session: the context grows each turn and mostly hits the cache."""
    route = s.route
    prompt = min(s.base + s.done * s.growth + rng.randrange(0, 3000), route.context)
    if not route.reports_cache:
        cached = int(prompt * rng.uniform(0.0, 0.04))
    elif s.done == 0:
        cached = int(s.base * rng.uniform(0.0, 0.7))
    else:
        cached = int(min(s.prev_prompt, prompt) * rng.uniform(0.80, 0.99))
    fresh = prompt - cached
    anthropic = route.provider == "anthropic" or "anthropic/" in route.model
    cache_write = int(fresh * rng.uniform(0.6, 0.95)) if anthropic else 0
    output = max(1, int(rng.lognormvariate(math.log(480), 1.0)))
    reasoning = min(output, int(output * route.reasoning_share * rng.uniform(0.5, 1.5)))
    return CallUsage(fresh - cache_write, output, cached, cache_write, reasoning, prompt)

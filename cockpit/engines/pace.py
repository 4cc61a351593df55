"""How fast a stream decodes, from an engine's inter-token (ITL) histogram: vLLM observes
one ITL per request per engine step (however many tokens it carried), SGLang one per token.
No I/O."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cockpit.core.model import divide

Values = Callable[[str], float | None]
"""Raw lane key -> its window value (None when absent), e.g. `LaneTotals.values.get`."""

NO_SPECULATION = "no speculative decoding: 1 token per step"
_ITL = ("itl_sum", "itl_count")


@dataclass(frozen=True, slots=True)
class Derived:
    """A value worked out from raw keys; when it is None, their missing reasons say why."""

    value: float | None
    inputs: tuple[str, ...]
    empty: str = "no data in window"
    """Why it is None when every input is there (a zero denominator)."""
    note: str = ""
    """How it was found, shown beside a value."""


@dataclass(frozen=True, slots=True)
class DecodePace:
    """A stream's decode over the window: tokens per engine step, the step, tokens per second."""

    tokens_per_step: Derived
    step_s: Derived
    stream_tok_s: Derived


def _itl_per_step(v: Values) -> DecodePace:
    """vLLM. Under speculative decoding `1 + accepted/drafts` counts only the steps that drafted
    (an n-gram proposer drafts only on a match), so tokens per step is measured: tokens after
    each request's first (generated - TTFT count) over decode steps (ITL count)."""
    no_steps = "no decode steps in window"
    step = Derived(divide(v("itl_sum"), v("itl_count")), _ITL, no_steps)
    if v("spec_drafts") is None:
        one = None if step.value is None else 1.0
        return DecodePace(
            Derived(one, _ITL, no_steps, NO_SPECULATION),
            step,
            Derived(divide(one, step.value), _ITL, no_steps),
        )
    first = v("ttft_count")
    generated = v("generation_tokens")
    decoded = None if generated is None or first is None else generated - first
    if decoded is not None and decoded <= 0:  # window extrapolation can dip below zero
        decoded = None
    counts = ("generation_tokens", "ttft_count")
    return DecodePace(
        Derived(
            divide(decoded, v("itl_count")), (*counts, "itl_count"), no_steps,
            "tokens after each first token / decode steps",
        ),
        step,
        Derived(divide(decoded, v("itl_sum")), (*counts, "itl_sum"), no_steps),
    )  # fmt: skip


def _itl_per_token(v: Values) -> DecodePace:
    """SGLang: the ITL mean is time per token; a step is that times tokens per step, from the
    verify calls (each a decode step under speculation): 1 + accepted / verify calls. No verify
    call while tokens were decoded (a counter that is there at 0) is no speculation."""
    no_tokens = "no decode tokens in window"
    per_token = divide(v("itl_sum"), v("itl_count"))
    stream = Derived(divide(v("itl_count"), v("itl_sum")), _ITL, no_tokens)
    if not v("spec_drafts"):
        tokens = Derived(None if per_token is None else 1.0, _ITL, no_tokens, NO_SPECULATION)
    else:
        accepted = divide(v("spec_accepted"), v("spec_drafts"))
        tokens = Derived(
            None if accepted is None else 1.0 + accepted,
            ("spec_accepted", "spec_drafts"),
            "no verify steps in window",
        )
    step = None if per_token is None or tokens.value is None else per_token * tokens.value
    return DecodePace(tokens, Derived(step, (*_ITL, *tokens.inputs), no_tokens), stream)


@dataclass(frozen=True, slots=True)
class PaceReading:
    """How an engine's ITL histogram counts, and the raw keys its step reads."""

    read: Callable[[Values], DecodePace]
    step_inputs: tuple[str, ...]


PER_STEP = PaceReading(_itl_per_step, _ITL)
PER_TOKEN = PaceReading(_itl_per_token, (*_ITL, "spec_accepted", "spec_drafts"))

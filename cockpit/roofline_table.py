"""The text that `cockpit roofline` prints: pure formatting of roofline.py's numbers."""

from __future__ import annotations

import math

from cockpit.profiles import hardware_profiles, model_profiles
from cockpit.roofline import (
    DecodePoint,
    Hardware,
    ModelProfile,
    PrefillPoint,
    decode_step,
    prefill_pass,
)

_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
LABEL_WIDTH = 20


def si(value: float, unit: str) -> str:
    """Three significant digits with a metric prefix: `33.2 TFLOP`, `16.1 GB`."""
    if not math.isfinite(value):
        return f"∞ {unit}"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale * 0.9995:
            return f"{_three_digits(value / scale)} {prefix}{unit}"
    return f"{_three_digits(value)} {unit}"


def _three_digits(value: float) -> str:
    magnitude = abs(value)
    if magnitude >= 99.95:
        return f"{value:,.0f}"
    if magnitude >= 9.995:
        return f"{value:.1f}"
    return f"{value:.2f}"


def params_text(params: float) -> str:
    """Parameter counts the way model cards write them: `8.03B`, `671B`."""
    return f"{_three_digits(params / 1e9)}B"


def seconds_text(seconds: float) -> str:
    """`33.5 ms`, `812 µs`, `1.20 s`."""
    if seconds >= 0.9995:
        return f"{_three_digits(seconds)} s"
    if seconds >= 0.9995e-3:
        return f"{_three_digits(seconds * 1e3)} ms"
    return f"{_three_digits(seconds * 1e6)} µs"


def intensity_text(intensity: float) -> str:
    """FLOP/byte: whole numbers from 100 up, else three significant digits."""
    if not math.isfinite(intensity):
        return "∞"
    return _three_digits(intensity)


def rate_text(tokens_per_s: float) -> str:
    """`209 tok/s`, `11.8k tok/s`."""
    return si(tokens_per_s, "tok/s").replace(" ktok/s", "k tok/s").replace(" Mtok/s", "M tok/s")


def percent_text(share: float) -> str:
    """A share (0..1) as `3.2 %`, `35 %`, `81,614 %`."""
    pct = 100.0 * share
    return f"{pct:.1f} %" if abs(pct) < 9.95 else f"{pct:,.0f} %"


def _row(label: str, value: str) -> str:
    return f"  {label:<{LABEL_WIDTH}}{value}"


def _header(hw: Hardware, model: ModelProfile) -> list[str]:
    counted = f"{params_text(model.params)} params"
    if model.is_moe:
        counted += f", {params_text(model.active_params)} active"
    per_param = f"{model.bytes_per_param:g} byte{'' if model.bytes_per_param == 1 else 's'}"
    return [
        f"{model.name} on {hw.name}",
        _row("peak", f"{si(hw.peak_flops, 'FLOP/s')} dense BF16"),
        _row("bandwidth", si(hw.bandwidth, "B/s")),
        _row("ridge", f"{intensity_text(hw.ridge)} FLOP/byte"),
        _row("weights", f"{si(model.weight_bytes, 'B')} ({counted} × {per_param})"),
        _row(
            "KV cache",
            f"{si(model.kv_bytes_per_token, 'B')} per token"
            f" ({model.kv_bytes_per_token / 1024:,.4g} KiB)",
        ),
    ]


def _prefill_rows(point: PrefillPoint) -> list[str]:
    return [
        f"prefill of {point.tokens:,.0f} tokens",
        _row("FLOPs", si(point.flops, "FLOP")),
        _row("bytes", f"{si(point.bytes_moved, 'B')} (weights read once)"),
        _row("intensity", f"{intensity_text(point.intensity)} FLOP/byte ({point.bound} bound)"),
        _row("time on the roof", seconds_text(point.seconds)),
        _row("attention share", f"{percent_text(point.attention_share)} of the FLOPs"),
    ]


def _decode_rows(point: DecodePoint, hw: Hardware) -> list[str]:
    resident = point.weight_bytes + point.kv_bytes
    fits = "fits" if resident <= hw.memory_bytes else "does NOT fit"
    return [
        f"decode step at batch {point.batch:,.0f}, context {point.context:,.0f}",
        _row("FLOPs", si(point.flops, "FLOP")),
        _row(
            "bytes",
            f"{si(point.bytes_moved, 'B')} (weights {si(point.weight_bytes, 'B')}"
            f" + KV {si(point.kv_bytes, 'B')})",
        ),
        _row("intensity", f"{intensity_text(point.intensity)} FLOP/byte ({point.bound} bound)"),
        _row("step time", seconds_text(point.seconds)),
        _row(
            "ceiling",
            f"{rate_text(point.tokens_per_s)} ({rate_text(point.tokens_per_s_per_stream)}"
            " per stream)",
        ),
        _row(
            "KV share of step",
            f"{percent_text(point.kv_share)} of the bytes"
            f" (+{percent_text(point.kv_over_weights)} over the weights)",
        ),
        _row("memory", f"{si(resident, 'B')} resident, {fits} in {si(hw.memory_bytes, 'B')}"),
    ]


def roofline_table(
    hw: Hardware,
    model: ModelProfile,
    prompt: int = 2000,
    batch: int = 1,
    context: int | None = None,
) -> str:
    """The roofs, a prefill of `prompt` tokens and a decode step at `batch` and `context`
    (the prompt length by default), as plain text."""
    if prompt < 1:
        raise ValueError("prompt must be at least 1 token")
    if batch < 1:
        raise ValueError("batch must be at least 1")
    decode_context = prompt if context is None else context
    if decode_context < 0:
        raise ValueError("context must not be negative")
    prefill = prefill_pass(hw, model, prompt)
    decode = decode_step(hw, model, batch, decode_context)
    lines = [*_header(hw, model), "", *_prefill_rows(prefill), "", *_decode_rows(decode, hw)]
    lines += ["", "Ceilings, not predictions: real kernels reach roughly 40-90 % of them."]
    return "\n".join(lines) + "\n"


def profiles_listing() -> str:
    """The packaged hardware and model profiles, for `cockpit roofline --list`."""
    hardware = hardware_profiles()
    models = model_profiles()
    lines = ["hardware", f"  {'id':<14}{'FLOP/s':>12}{'B/s':>11}{'ridge':>7}{'memory':>10}  name"]
    for hw_id, hw in hardware.items():
        lines.append(
            f"  {hw_id:<14}{si(hw.peak_flops, ''):>12}{si(hw.bandwidth, ''):>11}"
            f"{intensity_text(hw.ridge):>7}{si(hw.memory_bytes, 'B'):>10}  {hw.name}"
        )
    lines += ["", "models", f"  {'id':<15}{'params':>8}{'active':>8}{'B/param':>8}"]
    lines[-1] += f"{'layers':>7}{'hidden':>7}{'KV B/token':>12}  name"
    for model_id, model in models.items():
        lines.append(
            f"  {model_id:<15}{params_text(model.params):>8}{params_text(model.active_params):>8}"
            f"{model.bytes_per_param:>8g}{model.layers:>7}{model.hidden:>7}"
            f"{model.kv_bytes_per_token:>12,.0f}  {model.name}"
        )
    lines += ["", "Ids and aliases match in any case; aliases:"]
    for table in (hardware, models):
        for profile_id in table:
            aliases = table.aliases_of(profile_id)
            if aliases:
                lines.append(f"  {profile_id}: {', '.join(aliases)}")
    return "\n".join(lines) + "\n"

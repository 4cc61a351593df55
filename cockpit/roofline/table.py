"""The text that `cockpit roofline` prints: pure formatting of roofline.py's numbers."""

from __future__ import annotations

import math

from cockpit.core.figures import SI_PREFIXES
from cockpit.roofline.model import (
    DecodePoint,
    Hardware,
    ModelProfile,
    PrefillPoint,
    decode_step,
    prefill_pass,
    roof_for,
)
from cockpit.roofline.profiles import hardware_profiles, model_profiles


def si(value: float, unit: str) -> str:
    """Three significant digits with a metric prefix: `33.2 TFLOP`, `16.1 GB`."""
    if not math.isfinite(value):
        return f"∞ {unit}"
    for scale, prefix in SI_PREFIXES:
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
    """Parameter counts the way model cards write them: `8.03B`, `671B` (the one place a
    count keeps the word billion: it names a model's size and always reads `params`)."""
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
    """`209 tok/s`, `11.8k tok/s`, `2.50G tok/s`: the prefix on the number, every prefix."""
    number, _, prefix = si(tokens_per_s, "").partition(" ")
    return f"{number}{prefix} tok/s"


def percent_text(share: float) -> str:
    """A share (0..1) as `3.2 %`, `35 %`, `81,614 %`."""
    pct = 100.0 * share
    return f"{pct:.1f} %" if abs(pct) < 9.95 else f"{pct:,.0f} %"


def _row(label: str, value: str) -> str:
    return f"  {label:<20}{value}"


def _each(hw: Hardware, value: float, unit: str) -> str:
    """`15.8 PFLOP/s (8 × 1.98 PFLOP/s)` for a tensor-parallel group, else the value."""
    total = si(value, unit)
    return total if hw.devices == 1 else f"{total} ({hw.devices} × {si(value / hw.devices, unit)})"


def _peak(hw: Hardware, model: ModelProfile) -> str:
    text = f"{_each(hw, hw.peak_flops, 'FLOP/s')} dense {hw.dtype.upper()}"
    if hw.dtype != model.compute_dtype:
        text += f" (no {model.compute_dtype.upper()} peak listed: computes in {hw.dtype.upper()})"
    return text


def _header(hw: Hardware, model: ModelProfile) -> list[str]:
    counted = f"{params_text(model.params)} params"
    if model.is_moe:
        counted += f", {params_text(model.active_params)} active"
    per_param = f"{model.bytes_per_param:g} byte{'' if model.bytes_per_param == 1 else 's'}"
    kv = model.kv_bytes_per_token
    routed = f"{model.experts_per_token} of {model.experts} routed per token and layer"
    experts = f"{routed}, {params_text(model.shared_params)} params shared"
    return [
        f"{model.name} on {hw.name}",
        _row("peak", _peak(hw, model)),
        _row("bandwidth", _each(hw, hw.bandwidth, "B/s")),
        _row("ridge", f"{intensity_text(hw.ridge)} FLOP/byte"),
        _row("weights", f"{si(model.weight_bytes, 'B')} ({counted} × {per_param})"),
        *([_row("experts", experts)] if model.has_expert_counts else []),
        _row("KV cache", f"{si(kv, 'B')} per token ({kv / 1024:,.4g} KiB)"),
    ]


def _weights_read(model: ModelProfile, tokens: float) -> list[str]:
    """The MoE row: how many experts `tokens` tokens read, marked as the footnote's estimate."""
    if not model.is_moe:
        return []
    if model.has_expert_counts:
        touched = f"{model.experts_touched(tokens):,.1f} of {model.experts} per layer"
        return [_row("experts read", f"{touched} (estimate*)")]
    read = params_text(model.weight_bytes_read(tokens) / model.bytes_per_param)
    return [_row("weights read", f"{read} params (upper bound*)")]


def _moe_footnote(model: ModelProfile) -> list[str]:
    if not model.is_moe:
        return []
    if model.has_expert_counts:
        e, k = model.experts, model.experts_per_token
        return [
            f"* Expected experts touched when each of T tokens picks {k} of {e} independently"
            " and uniformly:",
            f"  {e}·(1 − (1 − {k}/{e})^T), at most all {e}; the shared params are read every pass.",
            "  An estimate: an upper bound if routing is skewed or tokens route alike.",
            "",
        ]
    return [
        "* Each token's active params with no expert shared between tokens, at most all"
        " params: an upper bound.",
        "",
    ]


def _prefill_rows(point: PrefillPoint, model: ModelProfile) -> list[str]:
    return [
        f"prefill of {point.tokens:,.0f} tokens",
        _row("FLOPs", si(point.flops, "FLOP")),
        _row("bytes", f"{si(point.bytes_moved, 'B')} (weights read once)"),
        *_weights_read(model, point.tokens),
        _row("intensity", f"{intensity_text(point.intensity)} FLOP/byte ({point.bound} bound)"),
        _row("time on the roof", seconds_text(point.seconds)),
        _row("attention share", f"{percent_text(point.attention_share)} of the FLOPs"),
    ]


def _memory(hw: Hardware, model: ModelProfile, kv_bytes: float) -> list[str]:
    """Resident memory: every weight plus the batch's KV, split evenly over the GPUs."""
    resident = model.weight_bytes + kv_bytes
    text = f"{si(resident, 'B')} resident (all weights {si(model.weight_bytes, 'B')}"
    text += f" + KV {si(kv_bytes, 'B')})"
    each = resident / hw.devices
    fits = "fits" if each <= hw.memory_per_device else "does NOT fit"
    if hw.devices == 1:
        return [_row("memory", f"{text}, {fits} in {si(hw.memory_bytes, 'B')}")]
    per_gpu = f"{si(each, 'B')}, {fits} in {si(hw.memory_per_device, 'B')}"
    return [_row("memory", text), _row("per GPU", f"{per_gpu} (weights and KV split evenly)")]


def _decode_rows(point: DecodePoint, hw: Hardware, model: ModelProfile) -> list[str]:
    weights = "weights read" if model.is_moe else "weights"
    parts = f"{weights} {si(point.weight_bytes, 'B')} + KV {si(point.kv_bytes, 'B')}"
    per_stream = rate_text(point.tokens_per_s_per_stream)
    share, over = percent_text(point.kv_share), percent_text(point.kv_over_weights)
    return [
        f"decode step at batch {point.batch:,.0f}, context {point.context:,.0f}",
        _row("FLOPs", si(point.flops, "FLOP")),
        _row("bytes", f"{si(point.bytes_moved, 'B')} ({parts})"),
        *_weights_read(model, point.batch * point.tokens_per_step),
        _row("intensity", f"{intensity_text(point.intensity)} FLOP/byte ({point.bound} bound)"),
        _row("step time", seconds_text(point.seconds)),
        _row("ceiling", f"{rate_text(point.tokens_per_s)} ({per_stream} per stream)"),
        _row("KV share of step", f"{share} of the bytes (+{over} over the weights)"),
        *_memory(hw, model, point.kv_bytes),
    ]


def roofline_table(
    hw: Hardware,
    model: ModelProfile,
    prompt: int = 2000,
    batch: int = 1,
    context: int | None = None,
) -> str:
    """The roofs, a prefill of `prompt` tokens and a decode step at `batch` and `context`
    (the prompt length by default), as plain text. `hw` may be a tensor-parallel group
    (`Hardware.scaled`); its peak is the one of the model's compute number format."""
    if prompt < 1:
        raise ValueError("prompt must be at least 1 token")
    if batch < 1:
        raise ValueError("batch must be at least 1")
    decode_context = prompt if context is None else context
    if decode_context < 0:
        raise ValueError("context must not be negative")
    hw = roof_for(hw, model)
    prefill = prefill_pass(hw, model, prompt)
    decode = decode_step(hw, model, batch, decode_context)
    lines = [*_header(hw, model), "", *_prefill_rows(prefill, model), ""]
    lines += [*_decode_rows(decode, hw, model), "", *_moe_footnote(model)]
    lines += ["Ceilings, not predictions: real kernels reach roughly 40-90 % of them."]
    return "\n".join(lines) + "\n"


def profiles_listing() -> str:
    """The packaged hardware and model profiles, for `cockpit roofline --list`."""
    hardware = hardware_profiles()
    models = model_profiles()
    lines = ["hardware (dense FLOP/s; the ridge at BF16)"]
    lines += [f"  {'id':<14}{'BF16':>10}{'FP8':>10}{'B/s':>10}{'ridge':>7}{'memory':>9}  name"]
    for hw_id, hw in hardware.items():
        fp8 = hw.peak_for("fp8")
        lines.append(
            f"  {hw_id:<14}{si(hw.peak_flops, ''):>10}{si(fp8, '') if fp8 else '—':>10}"
            f"{si(hw.bandwidth, ''):>10}{intensity_text(hw.ridge):>7}"
            f"{si(hw.memory_bytes, 'B'):>9}  {hw.name}"
        )
    lines += ["", "models", f"  {'id':<15}{'params':>8}{'active':>8}{'experts':>8}{'B/param':>8}"]
    lines[-1] += f"{'dtype':>6}{'layers':>7}{'hidden':>7}{'KV B/token':>11}  name"
    for model_id, model in models.items():
        experts = f"{model.experts_per_token}/{model.experts}" if model.has_expert_counts else "—"
        lines.append(
            f"  {model_id:<15}{params_text(model.params):>8}{params_text(model.active_params):>8}"
            f"{experts:>8}{model.bytes_per_param:>8g}{model.compute_dtype.upper():>6}"
            f"{model.layers:>7}{model.hidden:>7}{model.kv_bytes_per_token:>11,.0f}  {model.name}"
        )
    lines += ["", "Ids and aliases match in any case; aliases:"]
    for table in (hardware, models):
        for profile_id in table:
            aliases = table.aliases_of(profile_id)
            if aliases:
                lines.append(f"  {profile_id}: {', '.join(aliases)}")
    return "\n".join(lines) + "\n"

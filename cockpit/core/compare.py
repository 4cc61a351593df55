"""Two cards' figures side by side: A, B, B − A, the change, and a verdict a user can trust
(two quantiles closer than their bucket's width can't be told apart: it says so). Pure."""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

QUANTILE_KEY = re.compile(r"(?s)^(?P<histogram>[a-z0-9]+)_p\d+(@.*)?\Z")
"""A quantile's key, the lane's or a model's (`ttft_p95@<model>`)."""
WITHIN_BUCKET = "within one bucket, not measurable"


@dataclass(frozen=True, slots=True)
class Comparison:
    key: str
    label: str
    unit: str
    a: float | None
    b: float | None
    a_text: str
    b_text: str
    verdict: str

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def change(self) -> float | None:
        """B − A over A (None when A is zero or either is missing)."""
        delta = self.delta
        return None if delta is None or not self.a else delta / abs(self.a)


def bucket_width(bounds: Sequence[float], value: float) -> float | None:
    """The width of the histogram bucket `value` falls in (None: past the largest bound)."""
    at = bisect_left(bounds, value)
    if at >= len(bounds):
        return None
    return bounds[at] - (bounds[at - 1] if at else 0.0)


def compare(
    a: Mapping[str, Mapping[str, Any]],
    b: Mapping[str, Mapping[str, Any]],
    bounds: Mapping[str, Sequence[float]] | None = None,
) -> list[Comparison]:
    """Every figure either side has (A's order first), as receipts' JSON gives them: `label`,
    `value`, `unit`, `text`, `reason`; `bounds`: each histogram's finite `le` bounds."""
    rows = []
    for key in [*a, *(k for k in b if k not in a)]:
        fa, fb = a.get(key, {}), b.get(key, {})
        va, vb = _number(fa.get("value")), _number(fb.get("value"))
        label = str(fa.get("label") or fb.get("label") or key)
        unit = str(fa.get("unit") or fb.get("unit") or "")
        verdict = _verdict(key, fa, fb, bounds or {})
        rows.append(Comparison(key, label, unit, va, vb, _text(fa, va), _text(fb, vb), verdict))
    return rows


def _verdict(
    key: str, fa: Mapping[str, Any], fb: Mapping[str, Any], bounds: Mapping[str, Sequence[float]]
) -> str:
    va, vb = _number(fa.get("value")), _number(fb.get("value"))
    if va is None or vb is None:
        missing = [
            f"{side} missing: {figure.get('reason') or 'not in its receipt'}"
            for side, figure, value in (("A", fa, va), ("B", fb, vb))
            if value is None
        ]
        return "; ".join(missing)
    if fa.get("above") or fb.get("above"):
        return "past the largest bucket on one side: a lower bound, not measurable"
    quantile = QUANTILE_KEY.match(key)
    if quantile and quantile["histogram"] in bounds:
        edges = sorted(bounds[quantile["histogram"]])
        width = max(
            (w for w in (bucket_width(edges, va), bucket_width(edges, vb)) if w is not None),
            default=None,
        )
        same_bucket = bisect_left(edges, va) == bisect_left(edges, vb)
        if same_bucket or (width is not None and abs(vb - va) < width):
            return WITHIN_BUCKET
    if va == vb:
        return "same"
    return "higher in B" if vb > va else "lower in B"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _text(figure: Mapping[str, Any], value: float | None) -> str:
    return str(figure.get("text") or "—") if value is not None else "—"


def delta_text(row: Comparison) -> str:
    """B − A in the figure's unit, signed (— when either side is missing)."""
    from cockpit.core.figures import format_value

    if row.delta is None:
        return "—"
    text = format_value(abs(row.delta), row.unit)  # type: ignore[arg-type]
    return ("−" if row.delta < 0 else "+") + text


def change_text(row: Comparison) -> str:
    return "—" if row.change is None else f"{row.change * 100:+.1f}%"

"""Windows and evaluation times: parsing and formatting, no I/O."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

WINDOWS: tuple[str, ...] = ("5m", "1h", "6h", "24h", "7d", "30d", "90d")
"""The windows the `w`/`W` keys cycle through, shortest first."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^(\d{1,12}(?:\.\d{1,12})?)([smhdw])$")
LONGEST_S = 10 * 366 * 86400
"""The longest duration a window or a relative `--at` may be: ten years."""
LATEST = datetime(9999, 12, 31, tzinfo=UTC).timestamp()


class TimeParseError(ValueError):
    """A duration or a time that could not be read; the message says what was expected."""


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus-style duration such as `5m`, `24h`, `7d`."""
    match = _DURATION.match(text.strip())
    seconds = float(match.group(1)) * _UNITS[match.group(2)] if match else 0.0
    if not 0 < seconds <= LONGEST_S:
        raise TimeParseError(f"{text!r} is not a duration of up to ten years (expected e.g. 5m, "
                             "1h, 7d)")  # fmt: skip
    return seconds


def promql_duration(seconds: float) -> str:
    """The shortest exact PromQL duration for whole seconds (`604800` -> `7d`)."""
    whole = round(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def parse_time(text: str, now: float | None = None) -> float:
    """Epoch seconds from `--at`: epoch, ISO 8601 (UTC unless it says otherwise) or `-2h`;
    a moment from 1970 to the year 9999."""
    moment = _parse_time(text.strip(), time.time() if now is None else now)
    if not 0 <= moment <= LATEST:  # NaN is in no range
        raise TimeParseError(f"{text!r} is not a time from 1970 to the year 9999")
    return moment


def _parse_time(text: str, now: float) -> float:
    if text == "now":
        return now
    if text.startswith("-"):
        return now - parse_duration(text[1:])
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise TimeParseError(
            f"{text!r} is not a time (expected epoch seconds, ISO 8601 such as "
            "2026-10-26T11:19:00Z, or a relative time such as -2h)"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def clock(epoch: float) -> str:
    """`HH:MM:SS` in UTC: the cockpit shows every time in UTC, as receipts and `--at` do."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S")


def stamp(epoch: float) -> str:
    """An unambiguous UTC time for receipts: `2026-10-26 11:19:00 UTC`."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

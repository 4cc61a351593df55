"""A lane's decode pace by its dialect."""

from __future__ import annotations

from cockpit.engines import engine
from cockpit.engines.base import NO_SPECULATION, DecodePace, Derived, Values

__all__ = ["NO_SPECULATION", "DecodePace", "Derived", "Values", "decode_pace"]


def decode_pace(dialect: str, values: Values) -> DecodePace:
    """Tokens per step, the step and tok/s per stream (DialectError for an unknown dialect)."""
    return engine(dialect).pace.read(values)

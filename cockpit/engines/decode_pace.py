"""A lane's decode pace by its dialect."""

from __future__ import annotations

from cockpit.engines import engine
from cockpit.engines.base import NO_SPECULATION, DecodePace, Derived, Values

__all__ = ["NO_SPECULATION", "DecodePace", "Derived", "Values", "decode_pace"]


def decode_pace(dialect: str, values: Values) -> DecodePace:
    """Tokens per step, the step and tok/s per stream, as this engine's ITL histogram counts
    (DialectError for a dialect no engine has)."""
    return engine(dialect).pace.read(values)

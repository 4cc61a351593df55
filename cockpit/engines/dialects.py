"""Engines by their id (a lane's dialect), for callers that hold only that string; the spec
types, also importable from here, are `cockpit.engines.specs`'."""

from __future__ import annotations

from collections.abc import Mapping

from cockpit.engines import DialectError as DialectError
from cockpit.engines import engine, find
from cockpit.engines import names_escaped as names_escaped
from cockpit.engines.specs import *  # noqa: F403
from cockpit.engines.specs import Combined, Spec

Difference = Combined


def lane_specs(dialect: str, escaped: bool = False) -> Mapping[str, Spec]:
    """Raw lane key -> spec; `escaped`: names as an OpenMetrics scrape stored them."""
    return engine(dialect).lane_specs(escaped)


def figure_notes(dialect: str) -> Mapping[str, str]:
    """Figure key -> how this engine's value was found, said beside the value."""
    found = find(dialect)
    return found.notes if found else {}

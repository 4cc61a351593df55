"""The cockpit's panes: each draws one snapshot and never does I/O."""

from __future__ import annotations

from .cache_gauge import CacheGauge
from .pane import Pane, PaneView
from .phase_bar import PhaseBar
from .prefill import PrefillPane
from .ratios import RatiosPane
from .spend import SpendPane
from .status import StatusLine, StatusView

__all__ = [
    "CacheGauge",
    "Pane",
    "PaneView",
    "PhaseBar",
    "PrefillPane",
    "RatiosPane",
    "SpendPane",
    "StatusLine",
    "StatusView",
]

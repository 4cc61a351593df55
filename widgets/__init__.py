"""The cockpit's panes: each draws one snapshot and never does I/O."""

from __future__ import annotations

from .cache_gauge import CacheGauge as CacheGauge
from .phase_bar import PhaseBar as PhaseBar
from .prefill import PrefillPane as PrefillPane
from .ratios import RatiosPane as RatiosPane
from .spend import SpendPane as SpendPane
from .status import StatusLine as StatusLine
from .status import StatusView as StatusView

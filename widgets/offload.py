"""What the lane's KV connector moves: the offload tier's loads and stores, NIXL's transfers
between engines, and what failed. Shown only on a lane whose engine exposes either."""

from __future__ import annotations

from typing import Any

from cockpit.core.catalogue import pane_keys
from cockpit.core.health import CONNECTOR_FAILURES
from cockpit.core.snapshot import LaneSnapshot

from .pane import Pane, PaneView, lane_source

CONNECTORS = tuple(
    tuple(key for key in pane_keys("offload") if key.startswith(prefix))
    for prefix in ("offload_", "nixl_")
)
"""Each connector's figures (the offload tier's, NIXL's), in the pane's order."""


def offload_view(lane: LaneSnapshot | None, lane_configured: bool = True) -> PaneView:
    """Each connector's rows where it has a value; a moved failure counter in its rule's tone."""
    engine = lane_source(lane, lane_configured)
    lines = [
        engine.row(key, tone=CONNECTOR_FAILURES.get(key, "plain") if engine.value(key) else "plain")
        for keys in CONNECTORS
        if any(engine.value(key) is not None for key in keys)
        for key in keys
    ]
    return PaneView(tuple(lines), (("lane", engine.freshness),))


class OffloadPane(Pane):
    """Offload loads and stores, CPU cache use and failures; NIXL transfers and failures."""

    BORDER_TITLE = "KV offload & transfer"
    DEFAULT_CSS = "OffloadPane { display: none; }"
    """Hidden until a read finds a connector's figures."""
    build = staticmethod(offload_view)
    builds_hidden = True

    def show(self, *args: Any, **kwargs: Any) -> None:
        super().show(*args, **kwargs)
        self.display = bool(self.view.lines)

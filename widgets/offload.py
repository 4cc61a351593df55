"""What the lane's KV connector moves: the offload tier's loads and stores, NIXL's transfers
between engines, and what failed. Shown only on a lane whose engine exposes either."""

from __future__ import annotations

from cockpit.core.catalogue import pane_keys
from cockpit.core.health import CONNECTOR_FAILURES
from cockpit.core.snapshot import LaneSnapshot

from .pane import Line, Pane, PaneView, Row, Source, Tone, lane_source

CONNECTORS = tuple(
    tuple(key for key in pane_keys("offload") if key.startswith(prefix))
    for prefix in ("offload_", "nixl_")
)
"""Each connector's figures (the offload tier's, NIXL's), in the pane's order."""


class OffloadPane(Pane):
    """Offload load and store bytes/s, time per second and bandwidth, CPU cache in use,
    allocation failures and skipped stores; NIXL mean transfer time, bytes/s and failures."""

    BORDER_TITLE = "KV offload & transfer"
    DEFAULT_CSS = "OffloadPane { display: none; }"
    """Hidden until a read finds a connector's figures."""

    def show(self, lane: LaneSnapshot | None, lane_configured: bool = True) -> None:
        self.view = offload_view(lane, lane_configured)
        self.display = bool(self.view.lines)


def _row(engine: Source, key: str) -> Row:
    """A failure counter that moved in the window in its health rule's colour."""
    tone: Tone = CONNECTOR_FAILURES.get(key, "plain") if engine.value(key) else "plain"
    return engine.row(key, tone=tone)


def offload_view(lane: LaneSnapshot | None, lane_configured: bool = True) -> PaneView:
    """The rows of each connector the lane has (a figure of it with a value); none without."""
    engine = lane_source(lane, lane_configured)
    lines: list[Line] = []
    for keys in CONNECTORS:
        if any(engine.value(key) is not None for key in keys):
            lines += [_row(engine, key) for key in keys]
    return PaneView(tuple(lines), (("lane", engine.freshness),))

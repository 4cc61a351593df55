"""The cockpit as a process: start-up, SIGTERM and a closed terminal, a stalled exit. Nothing
here imports Textual until the app is built."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from cockpit.config.schema import Config

if TYPE_CHECKING:
    from cockpit.app.app import CockpitApp
    from cockpit.runtime.poller import FleetFeed, LaneFeed, LedgerFeed

STALL_S = 10.0
"""After SIGTERM or a hang-up, how long the clean exit may take before the process ends itself."""
LAST_WORDS_S = 3.0
"""Of what is left when it does, how long the demo's simulators get to stop before they are
killed and their folder removed."""


class Setup(NamedTuple):
    """What the cockpit runs on: `make_app`'s arguments, by name."""

    config: Config
    lanes: Sequence[LaneFeed]
    ledger: LedgerFeed | None
    replay_at: float | None = None
    refresh_s: float | None = None
    notice: str = ""
    """Said once when the cockpit starts (why `cockpit demo --prometheus` has no Prometheus)."""
    fleet: FleetFeed | None = None
    """Every lane at once: the cockpit opens on their overview (`cli.fleet.fleet_feed`)."""
    lane: str | None = None
    """The lane named on the command line: the cockpit opens on its panes."""


def build_app(setup: Callable[[], Setup]) -> CockpitApp:
    """The app on what `setup` returns, built with the garbage collector off: start-up builds a
    few hundred thousand objects that live as long as the process, which collecting would only
    scan again and again. The app turns it on again once its first read is drawn."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        arguments = setup()._asdict()
        from cockpit.app.app import FIRST_READ_WAIT_S, make_app

        app = make_app(**arguments)
    except BaseException:
        if collecting:
            gc.enable()
        raise
    app.settles_collector = collecting
    app.first_read_wait_s = FIRST_READ_WAIT_S
    return app


def run_app(app: CockpitApp, last_words: Callable[[], None] | None = None) -> int:
    """Run the app to its end; its exit code. SIGTERM or a closed terminal (SIGHUP) quits the
    app the normal way (feeds close, the demo removes its files). Should that exit stall for
    `STALL_S`, `last_words` (the demo's clean-up) runs and the process ends itself: a cockpit
    whose terminal is gone must not live on unseen."""
    armed: list[threading.Timer] = []

    def quit_app(signum: int, frame: object) -> None:
        if signum == signal.SIGHUP:
            let_go_of_terminal()
        if not armed:
            armed.append(end_if_stalled(128 + signum, last_words))
        exit_app = functools.partial(app.exit, return_code=128 + signum)
        try:
            # A handler runs between two steps of the loop's select(); only a wake-up through
            # the loop's own pipe makes it act now rather than at its next timer.
            asyncio.get_running_loop().call_soon_threadsafe(exit_app)
        except RuntimeError:  # the app is not running yet (or any more)
            exit_app()

    previous = {sig: signal.signal(sig, quit_app) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        app.run()
    finally:
        app.settle_collector()  # one that never mounted
        for timer in armed:
            timer.cancel()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return app.return_code or 0


def let_go_of_terminal() -> None:
    """The terminal hung up. The kernel sends SIGCONT with SIGHUP, which Textual answers by
    restarting its output thread on the dead terminal: that thread dies on its first write and
    the exit then blocks forever on its full queue. So no restart, and output to /dev/null."""
    signal.signal(signal.SIGCONT, signal.SIG_DFL)
    discard_output()


def discard_output() -> None:
    """Whatever stdout and stderr are still to write goes to /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.__stdout__, sys.__stderr__):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


def end_if_stalled(code: int, last_words: Callable[[], None] | None) -> threading.Timer:
    """A timer that, unless cancelled within STALL_S, runs `last_words` and ends the process."""

    def end() -> None:
        try:
            if last_words is not None:
                last_words()
        finally:
            os._exit(code)

    timer = threading.Timer(STALL_S, end)
    timer.daemon = True
    timer.start()
    return timer

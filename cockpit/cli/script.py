"""The `cockpit` console script: the command line imported with the garbage collector off."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence


def load() -> Callable[[Sequence[str] | None], int]:
    """`cockpit.cli.main.main`, imported with the collector off: importing builds only objects
    that live as long as the process, which collecting would scan again and again (some fifty
    times). They are frozen, out of every later collection's way; the collector is on again."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        from cockpit.cli.main import main
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
    return main


def main(argv: Sequence[str] | None = None) -> int:
    return load()(argv)

"""The terminal driver: Textual's Linux driver, with an input thread that sleeps while idle.

Textual's input thread wakes ten times a second to check whether a lone escape has waited long
enough to be the Escape key; that alone costs an idle app about 0.15 % of a core. Here the
thread waits for input, a wake-up or, only while an escape sequence is incomplete, Textual's
tick. Everything else (parsing, events, modes) is Textual's own.
"""

from __future__ import annotations

import os
import selectors
import threading
from codecs import getincrementaldecoder
from typing import Any

from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

TICK_S = 0.1
"""How often Textual's input thread checks an incomplete escape sequence for its time-out."""


class _WakingEvent(threading.Event):
    """The driver's exit flag: setting it also wakes the sleeping input thread."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self.wake_fd: int | None = wake_fd
        """None once the driver has closed the pipe."""

    def set(self) -> None:
        super().set()
        if self.wake_fd is not None:
            os.write(self.wake_fd, b"\0")


def tick_timeout(parser: object) -> float | None:
    """None (wait for input) unless the parser holds an escape that may time out.

    Parsers that don't say (another Textual) get Textual's own regular tick."""
    return None if getattr(parser, "_timeout_time", 0.0) is None else TICK_S


class QuietLinuxDriver(LinuxDriver):
    """LinuxDriver whose input thread wakes only for input, an escape's time-out, or exit."""

    def __init__(self, app: Any, **options: Any) -> None:
        super().__init__(app, **options)
        self._wake_read, self._wake_write = os.pipe()
        self.exit_event: _WakingEvent = _WakingEvent(self._wake_write)

    def run_input_thread(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(self._wake_read, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        try:
            while not self.exit_event.is_set():
                for key, _ in selector.select(tick_timeout(parser)):
                    if key.fd == self._wake_read:
                        os.read(self._wake_read, 64)
                        continue
                    text = decode(os.read(self.fileno, 4096))
                    if not text:  # end of input (a closed terminal): stop reading it
                        selector.unregister(self.fileno)
                        continue
                    for event in parser.feed(text):
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
        finally:
            selector.close()

    def close(self) -> None:
        super().close()
        if self.exit_event.wake_fd is not None:
            self.exit_event.wake_fd = None
            os.close(self._wake_read)
            os.close(self._wake_write)

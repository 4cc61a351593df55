"""The terminal driver: Textual's Linux driver, with an input thread that sleeps while idle.

Textual's input thread wakes ten times a second to check whether a lone escape has waited long
enough to be the Escape key; that alone costs an idle app about 0.15 % of a core. Here the
thread waits for input, a wake-up or, only while an escape sequence is incomplete, Textual's
tick. Everything else (parsing, events, modes, suspend and resume) is Textual's own.
"""

from __future__ import annotations

import contextlib
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
    """The driver's stop flag for its input thread: setting it also wakes the thread."""

    def __init__(self) -> None:
        super().__init__()
        self.wake_fd: int | None = None
        """The write end of the running input thread's wake-up pipe, if one runs."""

    def set(self) -> None:
        super().set()
        wake_fd = self.wake_fd
        if wake_fd is not None:
            with contextlib.suppress(OSError):  # full (a wake-up is pending already) or gone
                os.write(wake_fd, b"\0")


def tick_timeout(parser: object) -> float | None:
    """None (wait for input) unless the parser holds an escape that may time out.

    Parsers that don't say (another Textual) get Textual's own regular tick."""
    return None if getattr(parser, "_timeout_time", 0.0) is None else TICK_S


class QuietLinuxDriver(LinuxDriver):
    """LinuxDriver whose input thread wakes only for input, an escape's time-out, or exit.

    Each run of application mode (the first, and each resume after ctrl+z) has its own
    wake-up pipe, closed once its input thread has ended."""

    def __init__(self, app: Any, **options: Any) -> None:
        super().__init__(app, **options)
        self.exit_event: _WakingEvent = _WakingEvent()
        self._wake: tuple[int, int] | None = None

    def start_application_mode(self) -> None:
        if self._wake is not None:
            # Textual starts application mode again at any SIGCONT (after a SIGSTOP, say),
            # not only after a suspend: the running session's input thread must end first.
            self.disable_input()
        self._wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.exit_event.wake_fd = self._wake[1]
        super().start_application_mode()  # type: ignore[no-untyped-call]

    def disable_input(self) -> None:
        super().disable_input()  # sets the flag, which wakes the thread, and joins it
        wake = self._wake
        if wake is None or (self._key_thread is not None and self._key_thread.is_alive()):
            return  # its thread may still read it: kept for a later call
        self._wake = None
        if self.exit_event.wake_fd == wake[1]:
            self.exit_event.wake_fd = None
        for fd in wake:
            os.close(fd)

    def run_input_thread(self) -> None:
        assert self._wake is not None
        wake_read = self._wake[0]
        # poll, not epoll: stdin may be a file or /dev/null, which epoll refuses.
        selector = selectors.PollSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        try:
            while not self.exit_event.is_set():
                for key, _ in selector.select(tick_timeout(parser)):
                    if key.fd == wake_read:
                        os.read(wake_read, 64)
                        continue
                    data = os.read(self.fileno, 4096)
                    if not data:  # end of input (a closed terminal): stop reading it
                        selector.unregister(self.fileno)
                        continue
                    for event in parser.feed(decode(data)):
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
        finally:
            selector.close()

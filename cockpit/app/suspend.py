"""ctrl+z for a Textual app: SIGCONT passed on only after a SIGTSTP."""

from __future__ import annotations

import asyncio
import signal


def resume_only_after_suspend() -> None:
    """Textual's driver answers every SIGCONT by starting application mode again, also after a
    SIGSTOP that never stopped it (a debugger, `kill -STOP`): that leaves a second input thread
    the exit then waits on forever. So SIGCONT is passed on only after a SIGTSTP (ctrl+z).

    Both go through the running loop, which wakes for them at once (a plain handler waits for
    the loop's next wake-up when the signal lands on another thread: up to a refresh period).
    Call once the driver is running (it sets both handlers); without them, nothing changes."""
    on_stop, on_continue = signal.getsignal(signal.SIGTSTP), signal.getsignal(signal.SIGCONT)
    if not callable(on_stop) or not callable(on_continue):
        return
    suspended = False

    def stop() -> None:
        nonlocal suspended
        suspended = True
        on_stop(signal.SIGTSTP, None)

    def resume() -> None:
        nonlocal suspended
        if suspended:
            suspended = False
            on_continue(signal.SIGCONT, None)

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTSTP, stop)
    loop.add_signal_handler(signal.SIGCONT, resume)

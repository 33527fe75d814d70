"""How a run is stopped from outside its loop: Ctrl-C and SIGTERM between iterations,
a deadline past max_time_s for an iteration that hangs, and a command's bounded exit.
A run must end when asked or when due, whatever Ray's threads or a full pipe do."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

EXIT_GRACE_S = 30.0
"""How long the command's process may take to exit once its work is done or it was
interrupted (Ray's exit handlers, a print to a pipe nobody reads) before it ends anyway."""


def exit_within(seconds: float, status: int | str | None) -> None:
    """End this process with ``status`` after ``seconds`` unless it ended by then (a
    daemon timer: it holds nothing up and runs while exit handlers do)."""
    code = status if isinstance(status, int) else 0 if status is None else 1
    timer = threading.Timer(seconds, os._exit, (code,))
    timer.daemon = True
    timer.start()


def command(run: Callable[[], None], end_process: bool) -> None:
    """``run()`` as a command: Ctrl-C outside a training loop (or a second one inside)
    is one line and exit status 130. With ``end_process`` (the process's own command
    line, not a test's call), the process ends within EXIT_GRACE_S of the command's end
    (EXIT_GRACE_S / 6 after an interrupt) even when exit handlers or a print block, and
    one that finished ends at its end (end_now)."""
    status: int | str | None = 1
    try:
        run()
        status = 0
    except KeyboardInterrupt:
        status = 130
        if end_process:  # the line below may block on a full pipe: the process still ends
            exit_within(EXIT_GRACE_S / 6, status)
        print("\ndistrl: interrupted; stopped without saving anything more", file=sys.stderr)
        raise SystemExit(130) from None
    except SystemExit as err:
        status = err.code
        raise
    finally:
        if end_process:
            exit_within(EXIT_GRACE_S, status)
    if end_process:
        end_now()


def end_now() -> None:
    """End the process of a command that finished as the interpreter would, up to its
    teardown: threads that are not daemons are waited for, the exit handlers run (Ray's,
    logging's, the user's) and the output is flushed; the teardown of torch's and Ray's
    native modules is skipped: it took a second of every command here (and once crashed
    after a finished run)."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(0)


class RunOverdue(RuntimeError):
    """The run passed max_time_s by its grace inside one iteration (a hung call)."""


def overdue_grace_s(max_time_s: float, longest_iteration_s: float) -> float:
    """How far past max_time_s an iteration may run before it is cut: one as long as
    the longest so far (a league's evaluation, AlphaZero's self-play) finishes, with
    room to spare; a hung one does not."""
    return max(60.0, 0.25 * max_time_s, 3.0 * longest_iteration_s)


class Deadline:
    """When a run with max_time_s is overdue: max_time_s of loop time, then the grace.
    Moved at each iteration's end, so that the grace follows the iterations' length."""

    def __init__(self, max_time_s: float, time_s: float):
        self.max_time_s, self.longest = max_time_s, 0.0
        self.at = 0.0
        self.passed(time_s, 0.0)

    def passed(self, time_s: float, iteration_s: float) -> None:
        """An iteration of ``iteration_s`` ended with ``time_s`` of loop time spent."""
        self.longest = max(self.longest, iteration_s)
        self.grace = overdue_grace_s(self.max_time_s, self.longest)
        self.at = time.monotonic() + max(0.0, self.max_time_s - time_s) + self.grace

    def message(self) -> str:
        return (f"no iteration ended within {self.grace:g} s after --max-time-s "
                f"({self.max_time_s:g} s) passed (a call that never returns?); stopped "
                "without finishing it. Raise --max-time-s if iterations are this long.")


@contextmanager
def interrupt_between_iterations(say: Callable[[str], None], deadline: Deadline | None = None
                                 ) -> Iterator[threading.Event]:
    """The first SIGINT or SIGTERM (Ctrl-C, `kill`, a scheduler's stop) only sets the
    event the loop checks between iterations: the run then saves and stops cleanly. A
    second one aborts (KeyboardInterrupt). Past the ``deadline``, a run still in the loop
    is cut where it waits (RunOverdue, raised by a SIGINT to the main thread), so that
    max_time_s holds even when an iteration hangs."""
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted  # signal handlers can only be set from the main thread
        return
    late, done = threading.Event(), threading.Event()

    def handler(signum, frame):
        if late.is_set():
            raise RunOverdue(deadline.message())
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()
        say(f"distrl: {signal.Signals(signum).name}: finishing this iteration, then saving a "
            "checkpoint (Ctrl-C again to abort without saving)")

    def watch() -> None:
        while not done.wait(min(1.0, max(0.0, deadline.at - time.monotonic()))):
            if time.monotonic() >= deadline.at:
                late.set()
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                return

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    if deadline is not None:
        threading.Thread(target=watch, name="distrl-max-time", daemon=True).start()
    try:
        yield interrupted
    finally:
        done.set()
        for s, h in previous.items():
            signal.signal(s, h)

"""`carry_on`: what a loop on a thread of the runtime does with an exception of any kind.

The command poller, the store writer, the touch timer and the clock's timer
thread each serve the whole process: the one that ends takes every stop, every
write or every lease renewal with it, silently (a traceback on stderr nobody
reads, and a ``stop`` that says it was sent). So each catches whatever one round
raises — a store's bug, a row nobody can read, a ``SystemExit`` — logs it with its
traceback, records it where the operator looks (`Controller.persist_failures`),
and goes on with the next round (design D65).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["NOTIFIED_POLL", "Report", "carry_on", "describe"]

#: The fallback poll (seconds) of a loop that a store's notification wakes (new work, a
#: command): it only catches what a lost notification or a time that passed (a task due
#: later) would miss, so it need not come at every poll interval.
NOTIFIED_POLL = 1.0

#: Records a failure where the operator sees it: ``report(operation, what happened)``.
Report = Callable[[str, str], None]


def describe(exc: BaseException) -> str:
    """``Type: message`` of `exc`, on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def carry_on(what: str, exc: BaseException, log: logging.Logger, report: Report | None) -> None:
    """Log `exc` with its traceback and `report` it; the caller's loop then goes on.

    Call it from the ``except BaseException`` of one round of a background loop. On the
    main thread a `KeyboardInterrupt` or `SystemExit` is raised again instead: it is the
    user's (a `FakeClock` runs timer callbacks on the caller's thread).
    """
    if not isinstance(exc, Exception) and threading.current_thread() is threading.main_thread():
        raise exc
    log.error("%s failed and carries on: %s", what, describe(exc), exc_info=exc)
    if report is None:
        return
    try:
        report(what, describe(exc))
    except Exception:  # recording must not be what ends the loop
        log.exception("could not record the failure of %s", what)

"""`call_each`: call every callback, whatever one of them does."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

__all__ = ["call_each"]


def call_each(calls: Iterable[Callable[[], None]], log: logging.Logger, failed: str) -> None:
    """Call each of `calls`; one that fails is logged with `failed` and the rest still run.
    A KeyboardInterrupt (or other BaseException) is raised once all were called."""
    interrupted: BaseException | None = None
    for call in calls:
        try:
            call()
        except Exception:
            log.exception(failed)
        except BaseException as exc:  # the rest first, then re-raised
            interrupted = interrupted or exc
    if interrupted is not None:
        raise interrupted

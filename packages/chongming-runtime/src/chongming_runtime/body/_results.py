"""Checks on what a body returns (guide §8.13): results must be JSON every store keeps.

A result is written to the store (the outcome column). A value that cannot be
stored would show ``succeeded`` in this process while the store stayed at
``running`` (and a later reconcile would call a finished task lost), so an
invalid result fails the attempt loudly, with kind ``result_invalid``. The store
itself decides (`TaskStore.stored_outcome`, D68); `result_problem` applies the
rules every store shares, where no store is at hand (a process executor's child).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chongming_core import Failure, FailureKind, storable_text
from chongming_core.backend import portable_json

__all__ = ["keep_result", "result_failure", "result_problem"]


def result_problem(value: Any) -> str | None:
    """Why no store can keep `value` as a JSON outcome, or None when every store can.

    Beyond what ``json.dumps`` refuses: text that is not valid Unicode, ints of more
    digits than other processes read back, dict keys that are not strings (JSON would
    turn ``1`` into ``"1"``), structures nested too deep to decode (see `portable_json`).
    """
    try:
        portable_json(value)
    except ValueError as exc:
        return str(exc)
    return None


def result_failure(task_id: str, value: Any, problem: str) -> Failure:
    """The `result_invalid` failure for a value the store (or `result_problem`) refused."""
    return Failure.of(
        FailureKind.RESULT_INVALID,
        storable_text(
            f"task {task_id!r} returned {_a(type(value).__qualname__)} that cannot be stored as "
            f"JSON: {problem}"
            + ("" if problem.endswith("return plain JSON data") else ". Return plain JSON data")
            + " (dict, list, str, number, bool, None); for large or binary data return a "
            "pointer instead (an object key, a file path, a table name + id)"
        ),
        retryable=False,
    )


def keep_result(
    task_id: str, value: Any, stored_outcome: Callable[[Any], Any]
) -> tuple[Any, Failure | None]:
    """The outcome the store keeps for the returned `value` (`TaskStore.stored_outcome`),
    or None and the `result_invalid` failure saying why it cannot."""
    try:
        return stored_outcome(value), None
    except ValueError as refused:
        problem = str(refused)
    except Exception as broken:  # a store's check must never leave the run unsettled
        problem = f"the store could not check it ({type(broken).__name__}: {broken})"
    return None, result_failure(task_id, value, problem)


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"

"""Checks on what a body returns (guide §8.13): results must be JSON.

A result is written to the store (the outcome column). A value that cannot be
stored would show ``succeeded`` in this process while the store stayed at
``running`` (and a later reconcile would call a finished task lost), so an
invalid result fails the attempt loudly, with kind ``result_invalid``.
"""

from __future__ import annotations

import json
from typing import Any

from chongming_core import Failure, FailureKind

__all__ = ["result_failure", "result_problem"]


def result_problem(value: Any) -> str | None:
    """Why `value` cannot be stored as a JSON outcome, or None when it can."""
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return None  # always JSON (a float may be NaN or infinite: it goes through dumps)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def result_failure(task_id: str, value: Any, problem: str) -> Failure:
    """The `result_invalid` failure for a value `result_problem` refused."""
    return Failure.of(
        FailureKind.RESULT_INVALID,
        f"task {task_id!r} returned a {type(value).__qualname__} that is not JSON-serialisable "
        f"({problem}); return plain JSON data (dict, list, str, number, bool, None), and for "
        "large or binary data return a pointer instead (an object key, a file path, a table "
        "name + id)",
        retryable=False,
    )

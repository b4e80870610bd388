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
from chongming_runtime._text import unstorable_text

__all__ = ["result_failure", "result_problem"]


def result_problem(value: Any) -> str | None:
    """Why `value` cannot be stored as a JSON outcome, or None when it can.

    Beyond what ``json.dumps`` refuses: text that is not valid Unicode (no store can keep a
    lone surrogate), and dict keys that are not strings (JSON would turn ``1`` into ``"1"``,
    so other processes would read another value than this one).
    """
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return None  # always JSON (a float may be NaN or infinite: it goes through dumps)
    if kind is str:
        return None if value.isascii() else _text_problem(value)
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    problem = None if text.isascii() else _text_problem(text)
    if problem is None and "{" in text:  # no dict, no key to check (a list of numbers, say)
        problem = _key_problem(value)
    return problem


def _text_problem(text: str) -> str | None:
    why = unstorable_text(text.replace("\x00", ""))  # a NUL is kept: outcomes are JSON text
    return None if why is None else f"a string {why}"


def _key_problem(value: Any) -> str | None:
    """A dict key that JSON would change (not a string), anywhere in `value`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    return (
                        f"the dict key {key!r} ({type(key).__name__}) is not a string: JSON "
                        f"keeps only string keys, so other processes would read {str(key)!r}"
                        if not isinstance(key, bool | None)
                        else f"the dict key {key!r} is not a string: JSON keeps only string keys"
                    )
                stack.append(inner)
        elif isinstance(item, list | tuple):
            stack.extend(item)
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

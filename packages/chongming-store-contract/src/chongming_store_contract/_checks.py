"""Assertion helpers that explain themselves without pytest's assert rewriting.

pytest rewrites ``assert`` only in test modules it collects, not in an installed
package such as this one, so every check here says what was expected and what
was found.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Generic, TypeVar

__all__ = ["expect", "expect_equal", "present", "raises", "same_json", "short_repr"]

_E = TypeVar("_E", bound=BaseException)
_V = TypeVar("_V")
_MAX_REPR = 400


def short_repr(value: object) -> str:
    """`repr(value)` cut to a readable length (a 1 MB payload must not flood the report)."""
    text = repr(value)
    if len(text) <= _MAX_REPR:
        return text
    return f"{text[: _MAX_REPR // 2]}...<{len(text) - _MAX_REPR} chars>...{text[-_MAX_REPR // 2 :]}"


def same_json(found: Any, expected: Any) -> bool:
    """Equal values of equal JSON types all the way down (True is not 1, 1.0 is not 1, a
    tuple is not a list, every key a str)."""
    if type(found) is not type(expected):
        return False
    if isinstance(expected, dict):
        return found.keys() == expected.keys() and all(
            type(k) is str and same_json(found[k], expected[k]) for k in expected
        )
    if isinstance(expected, list):
        return len(found) == len(expected) and all(
            same_json(f, e) for f, e in zip(found, expected, strict=True)
        )
    return bool(found == expected)


def expect(condition: object, message: str) -> None:
    """Fail with `message` unless `condition` is true.

    Args:
        condition: the fact that must hold.
        message: what was expected and what was found.
    """
    if not condition:
        raise AssertionError(message)


def expect_equal(found: object, expected: object, what: str) -> None:
    """Fail unless ``found == expected``, naming `what` and both values.

    Args:
        found: the value the store produced.
        expected: the value the contract requires.
        what: a short description of the value, e.g. ``"status_version after save"``.
    """
    if found != expected:
        raise AssertionError(f"{what}: expected {short_repr(expected)}, found {short_repr(found)}")


def present(value: _V | None, what: str) -> _V:
    """`value`, failing with a message naming `what` when it is None.

    Example::

        snapshot = present(store.get("t1"), "task t1 after save()")
    """
    if value is None:
        raise AssertionError(f"{what}: expected a value, found None")
    return value


class _Raises(Generic[_E]):
    """The context manager returned by `raises`; `.value` holds the caught exception."""

    def __init__(self, exc_type: type[_E], what: str) -> None:
        self._exc_type = exc_type
        self._what = what
        self._value: _E | None = None

    @property
    def value(self) -> _E:
        """The exception that was raised (only after the block ended)."""
        if self._value is None:
            raise AssertionError(f"{self._exc_type.__name__} was not caught (yet)")
        return self._value

    def __enter__(self) -> _Raises[_E]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        name = self._exc_type.__name__
        suffix = f" ({self._what})" if self._what else ""
        if exc is None:
            raise AssertionError(f"expected {name} to be raised{suffix}, but nothing was raised")
        if isinstance(exc, self._exc_type):
            self._value = exc
            return True
        if not isinstance(exc, Exception):
            return False  # let KeyboardInterrupt and friends through untouched
        raise AssertionError(
            f"expected {name}{suffix}, found {type(exc).__module__}.{type(exc).__qualname__}: "
            f"{short_repr(str(exc))}"
        ) from exc


def raises(exc_type: type[_E], what: str = "") -> _Raises[_E]:
    """A context manager that fails unless its block raises `exc_type` (or a subclass).

    Example::

        with raises(ConcurrencyConflict, "saving a stale version") as caught:
            store.save(snapshot, expect_version=0)
        expect_equal(caught.value.actual, 1, "conflict.actual")
    """
    return _Raises(exc_type, what)

"""The completeness guard: a backend may not drop or silently override a contract test."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

__all__ = ["contract_problems", "contract_test_names"]

_PREFIX = "test_"


def contract_test_names(contract: type) -> list[str]:
    """The names of every test `contract` defines (own or inherited from its mixins)."""
    names: set[str] = set()
    for klass in contract.__mro__:
        names.update(n for n in vars(klass) if n.startswith(_PREFIX))
    return sorted(names)


def _contract_function(contract: type, name: str) -> Any:
    for klass in contract.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


def _marks(obj: object) -> Iterator[Any]:
    marks = getattr(obj, "pytestmark", None)
    if marks is None:
        return
    if not isinstance(marks, list | tuple):
        marks = [marks]
    yield from marks


def _has_xfail_reason(obj: object) -> bool:
    for mark in _marks(obj):
        if getattr(mark, "name", None) != "xfail":
            continue
        kwargs = getattr(mark, "kwargs", None)
        reason = kwargs.get("reason") if isinstance(kwargs, dict) else None
        if isinstance(reason, str) and reason.strip():
            return True
    return False


def contract_problems(backend: type, contract: type) -> list[str]:
    """Why `backend` (a subclass of `contract`) does not run the whole contract.

    A contract test must stay an inherited, callable test. A backend that cannot
    meet one yet may override it, but only with a pytest ``xfail`` mark carrying a
    non-empty ``reason`` (detected through the function's ``pytestmark`` list, so
    this needs no pytest import).

    Returns:
        One sentence per problem; an empty list when the backend runs the whole contract.
    """
    if not (isinstance(backend, type) and issubclass(backend, contract)):
        return [f"{backend!r} is not a subclass of {contract.__name__}"]
    problems: list[str] = []
    for name in contract_test_names(contract):
        original = _contract_function(contract, name)
        found = inspect.getattr_static(backend, name, None)
        if found is original:
            continue
        if isinstance(found, staticmethod | classmethod):
            found = found.__func__
        if found is None or not callable(found):
            problems.append(
                f"{backend.__name__}.{name} is {found!r}: the contract test was dropped; "
                "delete the assignment, or override it with "
                '@pytest.mark.xfail(reason="...") saying why the backend cannot pass it'
            )
        elif not _has_xfail_reason(found):
            problems.append(
                f"{backend.__name__}.{name} overrides a contract test without an xfail mark; "
                "remove the override, or mark it "
                '@pytest.mark.xfail(reason="...") saying why the backend cannot pass it'
            )
    return problems

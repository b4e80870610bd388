"""`@task` (guide §8.13): a task's spec lives on the function, with no global registry.

Whoever registers the function decides which controller may run it; importing a
module never registers anything.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from chongming_core._errors import ConfigurationError
from chongming_core._policies import RetryPolicy, Timeout

__all__ = ["TASK_SPEC_ATTRIBUTE", "TaskSpec", "get_task_spec", "task", "validate_tags"]

#: The attribute `@task` sets on the decorated function.
TASK_SPEC_ATTRIBUTE = "__chongming_task__"

F = TypeVar("F", bound=Callable[..., Any])


def validate_tags(tags: Iterable[str] | None, *, where: str = "tags") -> frozenset[str]:
    """Return `tags` as a frozenset of strings, or raise a clear `ConfigurationError`."""
    if tags is None:
        return frozenset()
    if isinstance(tags, str):
        raise ConfigurationError(
            f"{where} must be a collection of strings, got the single string {tags!r}; "
            f"write {where}={{{tags!r}}}"
        )
    try:
        items = list(tags)
    except TypeError:
        raise ConfigurationError(f"{where} must be a collection of strings, got {tags!r}") from None
    for tag in items:
        if not isinstance(tag, str) or not tag:
            raise ConfigurationError(
                f"{where} must be non-empty strings, got {tag!r} ({type(tag).__name__}); "
                "pass e.g. tags={'io'}"
            )
    return frozenset(items)


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """What `@task` recorded about a function: name, description and default policies."""

    name: str
    fn: Callable[..., Any] = field(repr=False)
    description: str | None = None
    tags: frozenset[str] = frozenset()
    retry: RetryPolicy | None = None
    timeout: Timeout | None = None


def _first_doc_line(fn: Callable[..., Any]) -> str | None:
    doc = inspect.getdoc(fn)
    if not doc:
        return None
    first = doc.strip().splitlines()[0].strip()
    return first or None


def _make_spec(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    tags: Iterable[str] | None,
    retry: RetryPolicy | None,
    timeout: Timeout | None,
) -> TaskSpec:
    if not callable(fn):
        raise ConfigurationError(f"@task decorates functions, got {fn!r}")
    if name is None:
        name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"task name must be a non-empty string, got {name!r}")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
    if timeout is not None and not isinstance(timeout, Timeout):
        raise ConfigurationError(f"timeout must be a Timeout, got {timeout!r}")
    return TaskSpec(
        name=name,
        fn=fn,
        description=description if description is not None else _first_doc_line(fn),
        tags=validate_tags(tags),
        retry=retry,
        timeout=timeout,
    )


@overload
def task(fn: F, /) -> F: ...


@overload
def task(
    *,
    name: str | None = None,
    description: str | None = None,
    tags: Iterable[str] | None = None,
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
) -> Callable[[F], F]: ...


def task(
    fn: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    tags: Iterable[str] | None = None,
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
) -> F | Callable[[F], F]:
    """Mark a function as a task; usable bare (``@task``) or with options (``@task(tags=...)``).

    The name defaults to the function's name and the description to the first line
    of its docstring. The function itself is returned unchanged, with its spec in
    ``fn.__chongming_task__``.
    """

    def decorate(func: F) -> F:
        spec = _make_spec(func, name, description, tags, retry, timeout)
        setattr(func, TASK_SPEC_ATTRIBUTE, spec)
        return func

    if fn is not None:
        if not callable(fn):
            raise ConfigurationError(
                f"@task takes options by keyword, e.g. @task(tags={{'io'}}); got {fn!r}"
            )
        return decorate(fn)
    return decorate


def get_task_spec(fn: Any) -> TaskSpec | None:
    """The spec `@task` put on `fn`, or None for an undecorated callable."""
    spec = getattr(fn, TASK_SPEC_ATTRIBUTE, None)
    return spec if isinstance(spec, TaskSpec) else None

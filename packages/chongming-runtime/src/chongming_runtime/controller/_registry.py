"""The whitelist of task definitions a controller may run (guide §8.1, §8.5, §8.13).

Only registered names can ever be started — by `submit`, by a pipeline node,
or by anything found in a store. A name is never resolved to code any other
way: no imports by name, no evaluation. Registering a name twice is an error,
never a silent override.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from chongming_core import (
    ConfigurationError,
    RetryPolicy,
    StartPlan,
    TaskSpec,
    Timeout,
    get_task_spec,
    storable_text,
    validate_tags,
)
from chongming_runtime.support._text import refuse_control_characters, refuse_unstorable

__all__ = ["RegisteredTask", "TaskRegistry"]


@dataclass(frozen=True, slots=True)
class RegisteredTask:
    """A task definition as the controller knows it."""

    name: str
    fn: Callable[..., Any]
    description: str | None
    tags: frozenset[str]
    retry: RetryPolicy | None
    timeout: Timeout | None


class TaskRegistry:
    """Name -> definition. Not thread-safe for writes: register before submitting."""

    def __init__(self) -> None:
        self._tasks: dict[str, RegisteredTask] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def __iter__(self) -> Iterator[RegisteredTask]:
        return iter(self._tasks.values())

    def __len__(self) -> int:
        return len(self._tasks)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._tasks)

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        tags: Iterable[str] | None = None,
        description: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
    ) -> RegisteredTask:
        """Register `fn` under `name`. A ``@task`` spec supplies the defaults (R10)."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"a task name must be a non-empty string, got {name!r}")
        refuse_unstorable("task name", name)
        refuse_control_characters("task name", name)
        if not callable(fn):
            raise ConfigurationError(
                f"register({name!r}, ...) needs a callable task body, got {fn!r}"
            )
        _refuse_without_context(name, fn)
        if name in self._tasks:
            raise ConfigurationError(
                f"task name {name!r} is already registered (to "
                f"{_describe(self._tasks[name].fn)}); names are unique — silently replacing it "
                "would keep running the old code, so pick another name"
            )
        spec: TaskSpec | None = get_task_spec(fn)
        tag_set = validate_tags(tags) if tags is not None else (spec.tags if spec else frozenset())
        for tag in tag_set:  # they are written with every submission of the task
            refuse_unstorable("tag", tag)
        refuse_unstorable("description", description)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
        if timeout is not None and not isinstance(timeout, Timeout):
            raise ConfigurationError(f"timeout must be a Timeout, got {timeout!r}")
        if description is None:  # from the docstring: kept, with unstorable text escaped
            description = spec.description if spec else _first_doc_line(fn)
            description = None if description is None else storable_text(description)
        registered = RegisteredTask(
            name=name,
            fn=fn,
            description=description,
            tags=tag_set,
            retry=retry if retry is not None else (spec.retry if spec else None),
            timeout=timeout if timeout is not None else (spec.timeout if spec else None),
        )
        self._tasks[name] = registered
        return registered

    def register_task(self, fn: Callable[..., Any]) -> RegisteredTask:
        """Register a ``@task``-decorated function under its spec's name."""
        spec = get_task_spec(fn)
        if spec is None:
            raise ConfigurationError(
                f"{_describe(fn)} is not decorated with @task; decorate it, or register it "
                "explicitly with register(name, fn)"
            )
        return self.register(spec.name, fn)

    def register_module(self, module: ModuleType) -> list[RegisteredTask]:
        """Register every ``@task`` function defined or imported at the top of `module`."""
        if not isinstance(module, ModuleType):
            raise ConfigurationError(
                f"register_module() takes an imported module object, got {module!r}"
            )
        found = []
        seen: set[int] = set()
        for _, value in inspect.getmembers(module):
            if get_task_spec(value) is not None and id(value) not in seen:
                seen.add(id(value))
                found.append(value)
        if not found:
            raise ConfigurationError(
                f"module {module.__name__!r} has no @task functions; decorate its task "
                "functions with @task, or register them one by one"
            )
        return [self.register_task(fn) for fn in found]

    def start_plans(self) -> dict[str, StartPlan]:
        """Per registered name, how a claim starts its tasks here: the registered retry
        budget (one attempt without a policy) and description (`ClaimStart`)."""
        return {
            name: StartPlan(
                max_attempts=1 if task.retry is None else task.retry.max_attempts,
                description=task.description,
            )
            for name, task in self._tasks.items()
        }

    def tags_by_name(self) -> dict[str, frozenset[str]]:
        """The registered tags of each name that has some."""
        return {name: task.tags for name, task in self._tasks.items() if task.tags}

    def find(self, name: str) -> RegisteredTask | None:
        """The definition of `name`, or None when it is not registered."""
        return self._tasks.get(name)

    def get(self, name: str) -> RegisteredTask:
        """The definition of `name`.

        Raises:
            ConfigurationError: `name` is not registered (nothing else can ever run).
        """
        registered = self._tasks.get(name) if isinstance(name, str) else None
        if registered is None:
            known = ", ".join(repr(n) for n in sorted(self._tasks)) or "none"
            raise ConfigurationError(
                f"unknown task name {name!r}: only registered names can run "
                f"(registered: {known}); register it first with register(name, fn)"
            )
        return registered


def _first_doc_line(fn: Callable[..., Any]) -> str | None:
    doc = inspect.getdoc(fn)
    return doc.strip().splitlines()[0].strip() or None if doc and doc.strip() else None


def _describe(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}.{qualname}"


def _refuse_without_context(name: str, fn: Callable[..., Any]) -> None:
    """Refuse a body that cannot take the task context as its first argument: every attempt
    calls it as ``fn(ctx, *args, **kwargs)``, so it would fail each time it runs. A
    callable whose signature cannot be read is taken as it is."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind_partial(None)
    except TypeError:
        shown = getattr(fn, "__name__", None)
        parameters = signature.replace(return_annotation=inspect.Signature.empty)
        if shown == "<lambda>":
            write = "lambda ctx, ...: ..."
        else:
            write = f"def {shown}(ctx, ...)" if shown and shown.isidentifier() else "(ctx, ...)"
        raise ConfigurationError(
            f"task {name!r}: {_describe(fn)}{parameters} takes no positional parameter for "
            f"the task context, which every attempt passes first; write it as {write}"
        ) from None

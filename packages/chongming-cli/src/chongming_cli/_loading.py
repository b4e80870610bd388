"""Names, never code (guide §8.5): load the operator's task module and parse ``--arg``.

The task module is the operator's own code, imported by name as any application
server imports its app. It decides what may run: its ``register(controller)``
function if it has one, else its ``@task`` functions. Nothing the user types on
the command line is ever evaluated: ``--arg`` values are JSON or plain strings.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from chongming_cli._exit import CliError
from chongming_core import get_task_spec
from chongming_runtime import Controller

__all__ = [
    "RESERVED_ARG_NAMES",
    "check_task_args",
    "load_task_module",
    "parse_arg_value",
    "parse_task_args",
]

#: Keyword names `Controller.submit` takes itself; a task cannot receive them via ``--arg``.
RESERVED_ARG_NAMES = frozenset(
    {"name", "task_id", "label", "tags", "priority", "bucket_key", "retry", "timeout", "executor"}
)


def parse_arg_value(text: str) -> Any:
    """A ``--arg`` value: JSON when it parses as JSON, else the text itself.

    Example::

        parse_arg_value("3") == 3
        parse_arg_value("true") is True
        parse_arg_value('["a", "b"]') == ["a", "b"]
        parse_arg_value("kafka://orders") == "kafka://orders"
    """
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; keep them as the strings the user typed
    raise ValueError(name)


def parse_task_args(items: Iterable[str]) -> dict[str, Any]:
    """``["n=3", "s=x"]`` -> ``{"n": 3, "s": "x"}`` (keyword arguments of the task)."""
    result: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise CliError(f"--arg {item!r} has no '='; write --arg NAME=VALUE, e.g. --arg n=3")
        if not key.isidentifier():
            raise CliError(
                f"--arg {item!r}: {key!r} is not a valid keyword argument name; "
                "write --arg NAME=VALUE with a Python identifier as NAME"
            )
        if key in RESERVED_ARG_NAMES:
            raise CliError(
                f"--arg {key}=...: {key!r} is an option of the run itself, not a task argument; "
                f"use --{key.replace('_', '-')} if there is such an option, or rename the "
                "task's parameter"
            )
        if key in result:
            raise CliError(f"--arg {key}=... is given twice; give each argument once")
        result[key] = parse_arg_value(value)
    return result


def check_task_args(name: str, fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """Refuse arguments the task's signature cannot take, before a doomed task is written."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # not introspectable: the task itself will say
    try:
        signature.bind(None, **kwargs)  # the first parameter is the task context
    except TypeError as exc:
        parameters = list(signature.parameters.values())[1:]
        shown = ", ".join(str(p.replace(annotation=p.empty)) for p in parameters)
        raise CliError(
            f"task {name!r} cannot take these arguments ({exc}); its parameters are "
            f"({shown}): pass them as --arg NAME=VALUE"
        ) from None


def _check_module_name(name: str) -> None:
    if name.endswith(".py") or "/" in name or "\\" in name:
        dotted = name.removesuffix(".py").replace("\\", "/").strip("/").replace("/", ".")
        raise CliError(
            f"--tasks takes a module name, not a file path: write --tasks {dotted} "
            "(the module's folder must be on PYTHONPATH; the current directory is searched)"
        )
    if not all(part.isidentifier() for part in name.split(".")):
        raise CliError(f"--tasks {name!r} is not a module name; write e.g. --tasks myapp.tasks")


def import_task_module(name: str) -> ModuleType:
    """Import the task module `name` (the current directory is searched too)."""
    _check_module_name(name)
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (name == missing or name.startswith(missing + ".")):
            raise CliError(
                f"cannot import the task module {name!r}: no module named {missing!r}; check "
                "--tasks and put the module's folder on PYTHONPATH (the current directory "
                "is searched)"
            ) from exc
        raise CliError(
            f"importing the task module {name!r} failed: {exc}; install what it needs "
            "(run with --debug for the traceback)"
        ) from exc
    except Exception as exc:
        raise CliError(
            f"importing the task module {name!r} failed: {type(exc).__name__}: {exc}; "
            "fix the module (run with --debug for the traceback)"
        ) from exc


def load_task_module(controller: Controller, name: str) -> list[str]:
    """Register the tasks of module `name` on `controller`; returns the registered names.

    The module's ``register(controller)`` decides what may run when it exists;
    otherwise every ``@task`` function of the module is registered.
    """
    module = import_task_module(name)
    register = getattr(module, "register", None)
    if callable(register) and get_task_spec(register) is None:
        try:
            register(controller)
        except CliError:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith("chongming_"):
                raise
            raise CliError(
                f"{name}.register(controller) raised {type(exc).__name__}: {exc}; fix the "
                "module (run with --debug for the traceback)"
            ) from exc
        if not controller.task_names:
            raise CliError(
                f"{name}.register(controller) registered no task; register at least one "
                "with controller.register(name, fn)"
            )
        return controller.task_names
    controller.register_module(module)
    return controller.task_names

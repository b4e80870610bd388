"""Names, never code (guide §8.5): load the operator's task module, check a task's arguments.

The task module is the operator's own code, imported by name as any application
server imports its app. It decides what may run: its ``register(controller)``
function if it has one, else its ``@task`` functions. Nothing the user types on
the command line is ever evaluated: ``--arg`` values are converted by `_args`.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from chongming_cli._exit import CliError
from chongming_core import get_task_spec
from chongming_runtime import Controller

__all__ = ["check_task_args", "import_task_module", "load_task_module", "task_function"]


def check_task_args(name: str, fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """Refuse arguments the task's signature cannot take, before a doomed task is written.

    A name the task has no parameter for is named first: a misspelt ``--arg`` would
    otherwise be reported as the parameter it was meant for, missing."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # not introspectable: the task itself will say
    parameters = list(signature.parameters.values())[1:]  # the first is the task context
    shown = ", ".join(str(p.replace(annotation=p.empty)) for p in parameters)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unknown = [key for key in kwargs if key not in named]
    if unknown and not takes_any:
        listed = ", ".join(repr(key) for key in unknown)
        raise CliError(
            f"task {name!r} has no parameter {listed}; its parameters are ({shown}): "
            "pass them as --arg NAME=VALUE"
        )
    try:
        signature.bind(None, **kwargs)
    except TypeError as exc:
        raise CliError(
            f"task {name!r} cannot take these arguments ({exc}); its parameters are "
            f"({shown}): pass them as --arg NAME=VALUE"
        ) from None


def task_function(controller: Controller, task: str, module: str) -> Callable[..., Any]:
    """The function registered as `task` from the `--tasks` module `module`, or the
    console's one-line error naming the tasks the module does define."""
    if task in controller.task_names:
        return controller.registered(task).fn
    known = ", ".join(repr(n) for n in controller.task_names) or "none"
    raise CliError(
        f"unknown task name {task!r}: --tasks {module} defines no task of that name (its "
        f"tasks: {known}); check the spelling, or name the module that defines it"
    )


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
    except SystemExit as exc:  # a module that ends the process as it is imported
        raise CliError(
            f"importing the task module {name!r} called exit({exc.code!r}); a task module "
            'only defines tasks: keep a script\'s work under `if __name__ == "__main__":`'
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

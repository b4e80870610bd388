"""The curated public API of `chongming_core`: every name in `__all__` exists and is documented."""

from __future__ import annotations

import importlib
import importlib.resources
import inspect
import pkgutil

import pytest

import chongming_core

# constants cannot carry their own docstring; they are documented where they are defined
_CONSTANTS = {
    "ACTIVE_STATUSES",
    "DEFAULT_NUM_BUCKETS",
    "NON_TERMINAL_STATUSES",
    "SYSTEM_CLOCK",
    "TASK_SPEC_ATTRIBUTE",
    "TERMINAL_STATUSES",
    "TRANSITIONS",
    "UNSET",
}


def test_all_has_no_duplicates() -> None:
    names = chongming_core.__all__
    assert len(names) == len(set(names))
    assert "StateMachine" in names
    assert "TaskCancelled" in names


@pytest.mark.parametrize("name", chongming_core.__all__)
def test_every_public_name_is_importable(name: str) -> None:
    module = importlib.import_module("chongming_core")
    assert hasattr(module, name), f"chongming_core.__all__ lists {name!r} but it is missing"
    exec(f"from chongming_core import {name}", {})


@pytest.mark.parametrize("name", sorted(set(chongming_core.__all__) - _CONSTANTS))
def test_every_public_name_is_documented(name: str) -> None:
    value = getattr(chongming_core, name)
    doc = inspect.getdoc(value)
    assert doc, f"chongming_core.{name} has no docstring"
    if inspect.isclass(value) and value.__module__.startswith("chongming_core"):
        # a class must say what it is for itself, not inherit a parent's text
        assert vars(value).get("__doc__"), name


@pytest.mark.parametrize("name", sorted(_CONSTANTS))
def test_constants_are_public_values(name: str) -> None:
    assert name in chongming_core.__all__
    assert getattr(chongming_core, name) is not None


def test_public_callables_of_public_classes_are_documented() -> None:
    missing = []
    for name in chongming_core.__all__:
        value = getattr(chongming_core, name)
        if not inspect.isclass(value) or not value.__module__.startswith("chongming_core"):
            continue
        for attr, member in vars(value).items():
            if attr.startswith("_"):
                continue
            target = member.__func__ if isinstance(member, classmethod | staticmethod) else member
            if isinstance(target, property):
                target = target.fget
            if callable(target) and not inspect.getdoc(target):
                missing.append(f"{name}.{attr}")
    assert missing == []


def test_every_module_of_the_package_imports() -> None:
    for info in pkgutil.iter_modules(chongming_core.__path__, "chongming_core."):
        importlib.import_module(info.name)


def test_the_package_is_typed() -> None:
    files = importlib.resources.files("chongming_core")
    assert files.joinpath("py.typed").is_file()

"""`@task` (guide §8.13, R10): the spec lives on the function; there is no global registry."""

from __future__ import annotations

import gc
import importlib.util
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

import chongming_core
from chongming_core import (
    TASK_SPEC_ATTRIBUTE,
    ConfigurationError,
    ExponentialBackoff,
    RetryPolicy,
    TaskSpec,
    Timeout,
    get_task_spec,
    task,
    validate_tags,
)


def test_bare_decorator_uses_the_function_name_and_docstring() -> None:
    @task
    def extract(ctx: Any, source: str) -> list[str]:
        """Read rows from source.

        More text that is not the description.
        """
        return [source]

    spec = extract.__chongming_task__  # type: ignore[attr-defined]
    assert isinstance(spec, TaskSpec)
    assert spec.name == "extract"
    assert spec.description == "Read rows from source."
    assert spec.tags == frozenset()
    assert spec.retry is None
    assert spec.timeout is None
    assert spec.fn is extract
    assert TASK_SPEC_ATTRIBUTE == "__chongming_task__"
    assert get_task_spec(extract) is spec


def test_decorator_with_arguments() -> None:
    retry = RetryPolicy(max_attempts=3)
    timeout = Timeout(per_attempt=60)

    @task(tags={"io"}, retry=retry, timeout=timeout)
    def extract(ctx: Any, source: str) -> str:
        """从 source 读取数据。"""
        return source.upper()

    spec = get_task_spec(extract)
    assert spec is not None
    assert (spec.name, spec.description, spec.tags) == (
        "extract",
        "从 source 读取数据。",
        frozenset({"io"}),
    )
    assert spec.retry is retry
    assert spec.timeout is timeout


def test_explicit_name_and_description_win() -> None:
    @task(name="抽取", description="custom", tags=["io", "db"])
    def extract(ctx: Any) -> None:
        """Docstring line."""

    spec = get_task_spec(extract)
    assert spec is not None
    assert (spec.name, spec.description, spec.tags) == ("抽取", "custom", frozenset({"io", "db"}))


def test_a_function_without_docstring_has_no_description() -> None:
    @task
    def quiet(ctx: Any) -> None:
        pass

    spec = get_task_spec(quiet)
    assert spec is not None
    assert spec.description is None


def test_the_function_is_returned_unchanged_and_still_callable() -> None:
    def add(ctx: Any, a: int, *, b: int = 1) -> int:
        return a + b

    decorated = task(add)
    assert decorated is add
    assert decorated(None, 2, b=3) == 5
    assert decorated.__name__ == "add"

    def mul(ctx: Any, a: int) -> int:
        return a * 2

    assert task(tags={"cpu"})(mul) is mul
    assert mul(None, 4) == 8


def test_get_task_spec_of_an_undecorated_callable_is_none() -> None:
    def plain(ctx: Any) -> None:
        pass

    assert get_task_spec(plain) is None
    assert get_task_spec(len) is None
    plain.__chongming_task__ = "not a spec"  # type: ignore[attr-defined]
    assert get_task_spec(plain) is None


def _import_module_from(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_decorating_registers_nothing_anywhere(tmp_path: Path) -> None:
    """Two modules define a task of the same name; neither import registers anything."""
    source = textwrap.dedent(
        '''
        from chongming_core import task

        @task(tags={"io"})
        def sync(ctx, tenant):
            """Sync one tenant."""
            return tenant
        '''
    )
    (tmp_path / "tasks_one.py").write_text(source, encoding="utf-8")
    (tmp_path / "tasks_two.py").write_text(source, encoding="utf-8")
    core_state = {name: id(value) for name, value in vars(chongming_core).items()}
    modules_before = set(sys.modules)

    one = _import_module_from(tmp_path / "tasks_one.py", "tasks_one")
    two = _import_module_from(tmp_path / "tasks_two.py", "tasks_two")

    # same name twice is no conflict: nothing global was written
    for fn in (one.sync, two.sync):
        spec = get_task_spec(fn)
        assert spec is not None
        assert (spec.name, spec.fn, spec.tags) == ("sync", fn, frozenset({"io"}))
    assert {name: id(value) for name, value in vars(chongming_core).items()} == core_state
    assert set(sys.modules) == modules_before
    # the only holder of each spec is its own function
    for fn in (one.sync, two.sync):
        holders = [
            r for r in gc.get_referrers(get_task_spec(fn)) if not isinstance(r, types.FrameType)
        ]
        assert holders == [fn.__dict__]


@pytest.mark.parametrize(
    ("tags", "fragment"),
    [
        ("io", "got the single string 'io'; write tags={'io'}"),
        ({1}, "tags must be non-empty strings, got 1 (int)"),
        (["io", None], "tags must be non-empty strings, got None (NoneType)"),
        ([""], "tags must be non-empty strings, got ''"),
        (42, "tags must be a collection of strings, got 42"),
    ],
)
def test_tags_must_be_strings(tags: Any, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:

        @task(tags=tags)
        def extract(ctx: Any) -> None:
            pass

    assert fragment in str(info.value)


def test_validate_tags() -> None:
    assert validate_tags(None) == frozenset()
    assert validate_tags(["a", "b", "a"]) == frozenset({"a", "b"})
    assert validate_tags(("网络",)) == frozenset({"网络"})
    with pytest.raises(ConfigurationError) as info:
        validate_tags("gpu", where="submit(tags=...)")
    assert "submit(tags=...) must be a collection of strings" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"name": ""}, "task name must be a non-empty string, got ''"),
        ({"retry": 3}, "retry must be a RetryPolicy, got 3"),
        ({"retry": ExponentialBackoff()}, "retry must be a RetryPolicy"),
        ({"timeout": 60}, "timeout must be a Timeout, got 60"),
    ],
)
def test_bad_options_are_rejected(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:

        @task(**kwargs)
        def extract(ctx: Any) -> None:
            pass

    assert fragment in str(info.value)


def test_options_must_be_passed_by_keyword() -> None:
    with pytest.raises(ConfigurationError) as info:
        task("extract")  # type: ignore[call-overload]
    assert "@task takes options by keyword" in str(info.value)

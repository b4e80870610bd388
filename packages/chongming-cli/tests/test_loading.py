"""``--arg`` parsing and task-module loading (names, never code)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_cli import CliError, parse_arg_value
from chongming_cli._args import parse_task_args
from chongming_cli._loading import check_task_args, load_task_module
from chongming_runtime import Controller


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3", 3),
        ("-1.5", -1.5),
        ("true", True),
        ("null", None),
        ('["a", 1]', ["a", 1]),
        ('{"k": "v"}', {"k": "v"}),
        ('"42"', "42"),
        ("kafka://x", "kafka://x"),
        ("__import__('os')", "__import__('os')"),
        ("NaN", "NaN"),
        ("", ""),
        ("订单", "订单"),
    ],
)
def test_arg_values_are_json_or_text(text: str, value: Any) -> None:
    assert parse_arg_value(text) == value


def test_task_args_become_keyword_arguments() -> None:
    assert parse_task_args(["n=3", "url=a=b", " s =x"]) == {"n": 3, "url": "a=b", "s": "x"}


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (["n"], "has no '='"),
        (["1n=3"], "not a valid keyword"),
        (["n=1", "n=2"], "given twice"),
        (["task_id=x"], "option of the run itself"),
    ],
)
def test_bad_task_args_are_refused(items: list[str], expected: str) -> None:
    with pytest.raises(CliError, match=expected):
        parse_task_args(items)


def test_arguments_are_checked_against_the_signature() -> None:
    def body(ctx: Any, a: int, b: int = 0) -> int:
        return a + b

    check_task_args("body", body, {"a": 1})
    with pytest.raises(CliError, match=r"its parameters are \(a, b=0\)"):
        check_task_args("body", body, {"c": 1})


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "decorated_mod.py").write_text(
        "from chongming_core import task\n\n@task\ndef hello(ctx):\n    return 'hi'\n",
        encoding="utf-8",
    )
    (tmp_path / "explicit_mod.py").write_text(
        "from decorated_mod import hello\n\ndef register(controller):\n"
        "    controller.register('greet', hello)\n",
        encoding="utf-8",
    )
    (tmp_path / "broken_mod.py").write_text("raise RuntimeError('bad config')\n", "utf-8")
    (tmp_path / "empty_register_mod.py").write_text("def register(c):\n    pass\n", "utf-8")
    (tmp_path / "exiting_mod.py").write_text("raise SystemExit(5)\n", "utf-8")
    yield tmp_path
    for name in (
        "decorated_mod",
        "explicit_mod",
        "broken_mod",
        "empty_register_mod",
        "exiting_mod",
    ):
        sys.modules.pop(name, None)


@pytest.mark.usefixtures("modules")
def test_register_function_wins_over_decorated_functions() -> None:
    with Controller() as controller:
        assert load_task_module(controller, "decorated_mod") == ["hello"]
    with Controller() as controller:
        assert load_task_module(controller, "explicit_mod") == ["greet"]


@pytest.mark.usefixtures("modules")
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("no_such_module_x", "no module named 'no_such_module_x'"),
        ("broken_mod", "RuntimeError: bad config"),
        ("empty_register_mod", "registered no task"),
        ("exiting_mod", r"called exit\(5\); a task module only defines tasks"),
        ("pkg/tasks.py", "write --tasks pkg.tasks"),
        ("1bad", "is not a module name"),
    ],
)
def test_module_problems_are_one_clear_error(name: str, expected: str) -> None:
    with Controller() as controller, pytest.raises(CliError, match=expected):
        load_task_module(controller, name)

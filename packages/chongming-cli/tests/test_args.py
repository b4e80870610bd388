"""``--arg`` text converted by the task function's annotations (`convert_args`)."""

from __future__ import annotations

import enum
import math
from pathlib import Path
from typing import Any, Literal, Optional

import pytest

from chongming_cli import EXIT_FAILED, CliError, main
from chongming_cli._args import convert_args, split_args
from chongming_cli._numbers import whole_number


def typed(  # type: ignore[no-untyped-def]  # `bare` has no annotation on purpose
    ctx: Any,
    n: int,
    ratio: float = 1.0,
    flag: bool = False,
    code: str = "",
    limit: int | None = None,
    old_style: Optional[int] = None,  # noqa: UP045 - the typing.Optional spelling on purpose
    either: int | str = 0,
    ids: list[int] | None = None,
    options: dict[str, int] | None = None,
    anything: Any = None,
    bare=None,
    **more: float,
) -> None:
    """A task whose parameters carry every kind of annotation."""


def _convert(**raw: str) -> dict[str, Any]:
    return convert_args(typed, raw, task="typed")


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("n", "3", 3),
        ("n", "-12", -12),
        ("ratio", "0.5", 0.5),
        ("ratio", "2", 2.0),
        ("flag", "true", True),
        ("flag", "False", False),
        ("flag", "yes", True),
        ("flag", "NO", False),
        ("flag", "1", True),
        ("flag", "0", False),
        ("flag", "on", True),
        ("code", "007", "007"),  # a str parameter keeps the text: no JSON on the way
        ("code", "3", "3"),
        ("code", "true", "true"),
        ("code", '"quoted"', '"quoted"'),
        ("limit", "5", 5),
        ("limit", "null", None),
        ("old_style", "7", 7),
        ("old_style", "null", None),
        ("either", "4", 4),
        ("either", "four", "four"),
        ("ids", "[1, 2]", [1, 2]),
        ("options", '{"a": 1}', {"a": 1}),
        ("anything", "3", 3),  # Any: JSON when it is JSON, else the text
        ("anything", "kafka://x", "kafka://x"),
        ("bare", "[1]", [1]),
        ("bare", "plain text", "plain text"),
        ("extra", "2.5", 2.5),  # goes to **more: float
    ],
)
def test_values_follow_the_annotation(name: str, text: str, value: Any) -> None:
    converted = _convert(**{name: text})[name]
    assert converted == value
    assert type(converted) is type(value)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("n", "abc", "takes n as int, and 'abc' is not one; write a whole number, e.g. --arg n=3"),
        ("n", "3.5", "a whole number"),
        ("ratio", "fast", "takes ratio as float"),
        ("flag", "maybe", "--arg flag=true (or false, yes, no, 1, 0)"),
        ("limit", "many", "--arg limit=3 (or --arg limit=null)"),
        ("ids", "1,2", "JSON, e.g. --arg ids='[1, 2]'"),
        ("options", "a=1", """JSON, e.g. --arg options='{"key": 1}'"""),
        ("extra", "lots", "takes extra as float"),
    ],
)
def test_a_value_that_does_not_convert_is_one_clear_line(
    name: str, text: str, expected: str
) -> None:
    with pytest.raises(CliError) as caught:
        _convert(**{name: text})
    message = str(caught.value)
    assert message.startswith(f"--arg {name}={text!r}: task 'typed' takes {name} as ")
    assert expected in message
    assert "\n" not in message


def test_unresolvable_annotations_fall_back_to_their_names() -> None:
    def body(ctx: Any, n: int, when: UndefinedType) -> None:  # type: ignore[name-defined]  # noqa: F821
        """``UndefinedType`` is never defined: get_type_hints fails on it."""

    assert convert_args(body, {"n": "3", "when": "x"}) == {"n": 3, "when": "x"}
    with pytest.raises(CliError, match="takes n as int"):
        convert_args(body, {"n": "x"})


def test_unknown_names_are_left_to_the_signature_check() -> None:
    def body(ctx: Any, n: int) -> None:
        """No **kwargs: an unknown name stays as parse_arg_value makes it."""

    assert convert_args(body, {"m": "3"}) == {"m": 3}


def test_split_args_keeps_the_text() -> None:
    assert split_args(["n=3", "url=a=b", " s =x"]) == {"n": "3", "url": "a=b", "s": "x"}


@pytest.mark.parametrize("text", ["nan", "inf", " -Infinity"])
def test_a_number_json_cannot_hold_is_refused_for_a_stored_task_only(text: str) -> None:
    with pytest.raises(CliError) as caught:
        convert_args(typed, {"ratio": text}, task="typed", stored=True)
    message = str(caught.value)
    assert message.startswith(f"--arg ratio={text!r}: a durable task's arguments are stored")
    assert "write a finite number, e.g. --arg ratio=0.5" in message
    assert not math.isfinite(convert_args(typed, {"ratio": text}, task="typed")["ratio"])


@pytest.mark.parametrize("command", ["submit", "run"])
@pytest.mark.parametrize("bad", ["a\nb", "a\tb", "a\x1b[31mred"])
def test_a_task_id_with_a_control_character_is_refused_before_anything_is_written(
    command: str, bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ids.db"
    argv = ["--db", str(db), command, "add", "--task-id", bad]
    if command == "run":
        argv += ["--tasks", "chongming_cli.demo_tasks"]
    assert main(argv) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "holds the control character" in err
    assert not db.exists()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["prune", "--keep-terminal", str(2**63)], "--keep-terminal: '9223372036854775808' is too"),
        (["ps", "--bucket", str(2**70)], "is too large: stores keep it as a 64-bit integer"),
        (["--num-buckets", str(2**64), "ps"], "stores keep a bucket as a 64-bit integer"),
    ],
)  # fmt: skip
def test_integers_past_64_bits_are_refused_before_the_store_is_touched(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ints.db"
    assert main(["--db", str(db), *argv]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert said in err
    assert not db.exists()


@pytest.mark.parametrize("typed", ["١", "1_0", "+3", " 3", "3 ", "0x10", "1e3", "٣٠"])
@pytest.mark.parametrize(
    "argv",
    [
        ["prune", "--keep-terminal", "{}"],
        ["ps", "--bucket", "{}"],
        ["--num-buckets", "{}", "ps"],
        ["worker", "--tasks", "chongming_cli.demo_tasks", "--fleet-limit", "gpu={}"],
    ],
)
def test_a_whole_number_is_ascii_digits_only(
    argv: list[str], typed: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Digits of another script, underscores, a plus sign or blanks are refused in one line
    before the store is touched (Python's int() would read each: ``prune --keep-terminal ١``
    deleted all but one finished task)."""
    db = tmp_path / "ints.db"
    assert main(["--db", str(db), *(a.format(typed) for a in argv)]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "whole number" in err
    assert not db.exists()


def test_whole_number_reads_what_it_shows_back() -> None:
    assert [whole_number(t) for t in ("0", "42", "-7", "007")] == [0, 42, -7, 7]
    with pytest.raises(ValueError, match="is not a whole number"):
        whole_number("")


class _Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def chosen(  # the annotations the console checks beyond JSON
    ctx: Any,
    color: _Color = _Color.RED,
    level: _Level = _Level.LOW,
    mode: Literal["fast", "slow", 3] = "fast",
    ids: list[int] | None = None,
    pair: tuple[str, int] | None = None,
    weights: dict[str, float] | None = None,
    names: set[str] | None = None,
) -> None:
    """A task with enums, literals and typed containers."""


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("color", "red", "red"),  # by value: the task gets the value (arguments are JSON)
        ("color", "RED", "red"),  # by name
        ("color", '"green"', "green"),  # as JSON
        ("level", "2", 2),
        ("level", "HIGH", 2),
        ("mode", "slow", "slow"),
        ("mode", "3", 3),
        ("ids", "[1, 2]", [1, 2]),
        ("pair", '["a", 1]', ["a", 1]),
        ("weights", '{"a": 1, "b": 0.5}', {"a": 1, "b": 0.5}),
        ("names", '["x", "y"]', ["x", "y"]),
    ],
)
def test_enums_literals_and_containers_are_checked(name: str, text: str, value: Any) -> None:
    converted = convert_args(chosen, {name: text}, task="chosen")[name]
    assert converted == value
    assert type(converted) is type(value)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("color", "blue", "write one of its values (red, green) or a member's name"),
        ("color", "3", "takes color as _Color"),
        ("level", "5", "one of its values (1, 2)"),
        ("level", "true", "takes level as _Level"),
        ("mode", "medium", "write one of fast, slow, 3"),
        ("ids", '["a"]', "takes ids as list[int] | None"),
        ("ids", '{"a": 1}', "takes ids as list[int] | None"),
        ("pair", '["a", "b"]', "takes pair as tuple[str, int] | None"),
        ("weights", '{"a": "x"}', "takes weights as dict[str, float] | None"),
        ("weights", "[1]", "takes weights as dict[str, float] | None"),
    ],
)
def test_a_value_outside_an_enum_a_literal_or_a_container_is_refused(
    name: str, text: str, expected: str
) -> None:
    with pytest.raises(CliError) as caught:
        convert_args(chosen, {name: text}, task="chosen")
    assert expected in str(caught.value)

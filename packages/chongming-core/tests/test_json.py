"""The rules every store shares for JSON values and progress (``chongming_core._json``)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from chongming_core import (
    InMemoryTaskStore,
    Progress,
    SnapshotWrite,
    StoreError,
    TaskSnapshot,
    TouchUpdate,
)
from chongming_core._json import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    number_problem,
    portable_json,
    progress_problem,
)


def nested_dicts(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def refused(value: Any) -> str:
    with pytest.raises(ValueError, match=r"the result|a key of the result") as caught:
        portable_json(value)
    return str(caught.value)


def test_scalars_that_every_store_keeps_come_back_as_they_are() -> None:
    for value in (None, True, 0, -(10**MAX_INT_DIGITS - 1), 1.5, "plain", "名前 \x00"):
        found = portable_json(value)
        assert found == value
        assert type(found) is type(value)


def test_what_no_store_can_keep_is_refused_with_where_and_why() -> None:
    assert refused(10**5000) == (
        "the result is an int of 5001 digits, which the store cannot encode as JSON "
        "(limit 4300 digits); return it as a str"
    )
    assert refused({"a": [0, {"b": 10**MAX_INT_DIGITS}]}).startswith(
        "the result at ['a'][1]['b'] is an int of 4301 digits"
    )
    assert refused([float("nan")]) == (
        "the result at [0] is NaN, which JSON cannot hold; return None or a str"
    )
    assert refused({"x": float("-inf")}).startswith("the result at ['x'] is -inf")
    assert refused({1, 2}).endswith("is a set, which is not JSON; return a list")
    assert refused([object()]).endswith("is an object, which is not JSON; return plain JSON data")
    assert "lone surrogate '\\udce9'" in refused(["caf\udce9"])
    assert refused({"caf\udce9": 1}).startswith("a key of the result is not valid Unicode")
    assert refused({1: "a"}) == (
        "the dict key 1 (int) of the result is not a string: JSON keeps only string keys, "
        "so other processes would read '1'"
    )
    assert "would read 'true'" in refused({True: 1})
    assert "the dict key an int of 5001 digits (int)" in refused({10**5000: 1})
    cycle: list[Any] = []
    cycle.append(cycle)
    assert "circular reference" in refused(cycle)


def test_keys_that_collide_as_text_are_refused_not_merged() -> None:
    assert "the dict key 1 (int)" in refused({"1": "b", 1: "a"})


def test_nesting_is_limited_whatever_the_stack_of_the_reader() -> None:
    assert portable_json(nested_dicts(MAX_DEPTH)) == nested_dicts(MAX_DEPTH)
    message = refused(nested_dicts(MAX_DEPTH + 1))
    assert message.startswith("the result at ['k']['k']['k']... nests lists and dicts more than")
    assert refused(nested_dicts(5000)).endswith("return a flatter structure")  # beyond recursion


def test_brackets_and_escapes_inside_text_are_not_nesting() -> None:
    tricky = ["[" * (MAX_DEPTH + 1), '\\"[[[', "{" * 500, '"]"']
    assert portable_json(tricky) == tricky


def test_what_json_renames_is_converted_for_every_reader_alike() -> None:
    found = portable_json({"pair": (1, (2, "x")), "list": [(3,)]})
    assert found == {"pair": [1, [2, "x"]], "list": [[3]]}
    assert type(found["pair"][1]) is list


def test_the_portable_int_limit_holds_when_this_process_raised_or_lowered_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = 10**MAX_INT_DIGITS
    monkeypatch.setattr(sys, "get_int_max_str_digits", lambda: 0)  # no limit here
    assert "limit 4300 digits" in refused([big])
    assert portable_json(["9" * 5000]) == ["9" * 5000]  # digits in text are text
    monkeypatch.setattr(sys, "get_int_max_str_digits", lambda: 1000)  # this process: fewer
    assert "an int of 1001 digits" in refused(10**1000)
    assert "(limit 1000 digits)" in refused(10**1000)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (1, None),
        (2.5, None),
        (2**1023, None),
        (True, "must be a number, got True"),
        ("3", "must be a number, got '3'"),
        (float("nan"), "must be a finite number, got NaN"),
        (float("inf"), "must be a finite number, got inf"),
        (10**400, "must fit a float, got an int of 401 digits"),
        (10**5000, "must fit a float, got an int of 5001 digits"),
    ],
    ids=lambda value: str(value)[:20] if not isinstance(value, int) or value < 10**50 else "big",
)
def test_progress_numbers(value: Any, problem: str | None) -> None:
    assert number_problem(value) == problem


def test_progress_text_must_be_valid_unicode_text() -> None:
    assert progress_problem(Progress(1, 2, "行", "批 \x00")) is None
    assert progress_problem(Progress(1, unit=b"x")) == (  # type: ignore[arg-type]
        "progress unit must be a str or None, got b'x'"
    )
    message = progress_problem(Progress(1, message="caf\udce9"))
    assert message is not None
    assert message.startswith("progress message is not valid Unicode")
    assert progress_problem(Progress(1, total=float("inf"))) == (
        "progress total must be a finite number, got inf"
    )


def test_the_memory_store_refuses_a_batch_with_one_unstorable_item_whole() -> None:
    store = InMemoryTaskStore()
    good = TaskSnapshot(task_id="good", name="job")
    bad = TaskSnapshot(task_id="bad", name="job", outcome={1: "a"})
    with pytest.raises(StoreError, match="cannot store task 'bad': the dict key 1"):
        store.save_many([SnapshotWrite(good, None), SnapshotWrite(bad, None)])
    assert store.query() == []
    store.create(good)
    with pytest.raises(StoreError, match="progress done must be a finite number"):
        store.touch_many(
            [TouchUpdate("good", pid=7), TouchUpdate("good", progress=Progress(float("inf")))]
        )
    assert store.get("good") == good


def test_the_memory_store_keeps_what_every_other_store_hands_back() -> None:
    store = InMemoryTaskStore()
    store.create(TaskSnapshot(task_id="t", name="job", outcome={"pair": (1, 2)}))
    stored = store.get("t")
    assert stored is not None
    assert stored.outcome == {"pair": [1, 2]}

"""Generated task ids: 12 hex digits, unique, independent of `random.seed`, new after fork."""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable

import pytest

from chongming_core import InMemoryTaskStore
from chongming_runtime import Controller, TaskContext
from chongming_runtime.support._ids import random_hex12


def noop(ctx: TaskContext) -> None:
    return None


def test_ids_are_twelve_hex_digits_and_do_not_repeat() -> None:
    ids = [random_hex12() for _ in range(20_000)]
    assert all(re.fullmatch(r"[0-9a-f]{12}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_seeding_the_global_generator_does_not_repeat_ids() -> None:
    random.seed(42)
    first = [random_hex12() for _ in range(5)]
    random.seed(42)
    second = [random_hex12() for _ in range(5)]
    assert set(first).isdisjoint(second)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_draw_its_parents_ids() -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report the ids it draws, then leave at once
        try:
            os.write(write_end, " ".join(random_hex12() for _ in range(5)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    parent = [random_hex12() for _ in range(5)]
    with os.fdopen(read_end, "rb") as pipe:
        child = pipe.read().decode().split()
    os.waitpid(pid, 0)
    assert len(child) == 5
    assert set(child).isdisjoint(parent)


def test_controller_ids_are_the_name_and_twelve_hex_digits(
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller(store=InMemoryTaskStore())
    try:
        controller.register("noop", noop)
        run = controller.submit("noop")
        assert re.fullmatch(r"noop-[0-9a-f]{12}", run.task_id)
        run.wait(timeout=10)
    finally:
        controller.close()

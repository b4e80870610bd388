"""`HeldRuns` alone: one run per task id, a retry in its predecessor's place, the closing
check in the same critical section (D45), and a drop that spares a retried id."""

from __future__ import annotations

import threading

import pytest

from chongming_core import ConfigurationError, StateMachine
from chongming_runtime import TaskRun
from chongming_runtime.controller._held_runs import HeldRuns


def _run(task_id: str, *, ended: bool = False) -> TaskRun:
    machine = StateMachine.create(task_id, "t")
    if ended:
        machine.mark_stopped(actor="test")
    return TaskRun(lambda ctx: None, machine=machine)


def test_a_run_is_held_under_its_id_and_a_second_one_loses() -> None:
    held = HeldRuns(threading.RLock())
    first = _run("t1")
    held.add(first)
    assert held.get("t1") is first
    assert "t1" in held
    assert held.get("t2") is None
    with pytest.raises(ConfigurationError, match="'t1' is already taken by a run held here"):
        held.add(_run("t1"))
    assert held.all() == [first]


def test_a_retry_takes_its_predecessors_place_once() -> None:
    held = HeldRuns(threading.RLock())
    ended = _run("t1", ended=True)
    held.add(ended)
    retry = _run("t1")
    held.add(retry, replacing=ended)
    assert held.get("t1") is retry
    with pytest.raises(ConfigurationError, match="'t1' was retried already"):
        held.add(_run("t1"), replacing=ended)


def test_the_check_runs_under_the_lock_and_refuses_before_anything_is_held() -> None:
    lock = threading.RLock()
    held = HeldRuns(lock)
    under_lock: list[bool] = []

    def closing() -> None:
        under_lock.append(lock._is_owned())  # type: ignore[attr-defined]
        raise ConfigurationError("this controller is closed")

    with pytest.raises(ConfigurationError, match="closed"):
        held.add(_run("t1"), check=closing)
    assert under_lock == [True]
    assert len(held) == 0


def test_finished_unfinished_and_a_drop_that_spares_a_retried_id() -> None:
    held = HeldRuns(threading.RLock())
    ended, live = _run("ended", ended=True), _run("live")
    held.add(ended)
    held.add(live)
    assert held.finished() == [ended]
    assert held.unfinished() == [live]
    assert held.unfinished_ids() == {"live"}
    assert held.held_among(["live", "elsewhere"]) == {"live": live}
    retry = _run("ended")
    held.add(retry, replacing=ended)
    assert not held.drop(ended)  # retried under its id meanwhile: kept
    assert held.get("ended") is retry
    assert held.drop(live)
    assert held.get("live") is None

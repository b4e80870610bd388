"""The builders and assertion helpers that the contract and backends' tests share."""

from __future__ import annotations

import itertools
import re
import threading

import pytest

from chongming_core import (
    ConcurrencyConflict,
    FakeClock,
    StateMachine,
    TaskStatus,
)
from chongming_store_contract import (
    BASE_TIME,
    advance,
    build_command,
    build_task,
    build_versions,
    expect,
    expect_equal,
    next_version,
    present,
    raises,
)
from chongming_store_contract._checks import short_repr
from chongming_store_contract._concurrency import run_concurrently


@pytest.mark.parametrize("status", list(TaskStatus))
def test_build_task_reaches_every_status_with_a_contiguous_chain(status: TaskStatus) -> None:
    snapshot, chain = build_task("t1", status)
    assert snapshot.status is status
    assert snapshot.status_version == len(chain)
    assert [t.status_version for t in chain] == list(range(1, len(chain) + 1))
    if chain:
        assert chain[-1].to_status is status
        assert chain[0].from_status is TaskStatus.PENDING
    assert all(b.from_status is a.to_status for a, b in itertools.pairwise(chain))


def test_build_task_steps_one_second_on_the_given_clock() -> None:
    clock = FakeClock(BASE_TIME)
    _, chain = build_task("t1", TaskStatus.SUCCEEDED, clock=clock, label="x", tags={"io"})
    assert [(t.at - BASE_TIME).total_seconds() for t in chain] == [1, 2, 3, 4]
    assert clock.now() == chain[-1].at


@pytest.mark.parametrize("versions", [0, 1, 2, 3, 4, 9])
def test_build_versions_has_exactly_that_many_transitions(versions: int) -> None:
    snapshot, chain = build_versions("t1", versions)
    assert snapshot.status_version == versions == len(chain)


def test_build_versions_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="versions must be >= 0"):
        build_versions("t1", -1)


def test_next_version_and_advance_return_only_new_transitions() -> None:
    snapshot, _ = build_task("t1", TaskStatus.RUNNING)
    nxt, more = next_version(snapshot)
    assert nxt.status is TaskStatus.PAUSING
    assert [t.status_version for t in more] == [4]
    back, again = next_version(nxt)
    assert back.status is TaskStatus.RUNNING
    assert [t.status_version for t in again] == [5]
    done, last = advance(back, StateMachine.mark_succeeded)
    assert done.status is TaskStatus.SUCCEEDED
    assert len(last) == 1


def test_next_version_explains_what_it_needs() -> None:
    snapshot, _ = build_task("t1", TaskStatus.QUEUED)
    with pytest.raises(ValueError, match="needs a running or pausing task"):
        next_version(snapshot)


def test_build_command_is_unclaimed() -> None:
    cmd = build_command("c1", "t1", bucket=3)
    assert (cmd.claimed_by, cmd.lease_until, cmd.completed_at) == (None, None, None)
    assert cmd.issued_at == BASE_TIME
    assert cmd.bucket == 3


def test_raises_catches_the_expected_error_and_exposes_it() -> None:
    with raises(ConcurrencyConflict) as caught:
        raise ConcurrencyConflict("x", task_id="t1", expected=1, actual=2)
    assert caught.value.actual == 2


def test_raises_fails_when_nothing_is_raised() -> None:
    expected = re.escape("expected ValueError to be raised (doing x)")
    with pytest.raises(AssertionError, match=expected), raises(ValueError, "doing x"):
        pass


def test_raises_fails_on_another_error_and_names_it() -> None:
    expected = re.escape("expected ValueError, found builtins.KeyError")
    with pytest.raises(AssertionError, match=expected), raises(ValueError):
        raise KeyError("k")


def test_raises_value_before_the_block_ended_is_an_error() -> None:
    context = raises(ValueError)
    with pytest.raises(AssertionError, match="was not caught"):
        _ = context.value


def test_expect_equal_names_what_was_expected_and_found() -> None:
    expect_equal(1, 1, "same")
    with pytest.raises(AssertionError, match=r"^count: expected 2, found 3$"):
        expect_equal(3, 2, "count")


def test_expect_passes_and_fails() -> None:
    expect(True, "never shown")
    with pytest.raises(AssertionError, match=r"^boom$"):
        expect(False, "boom")


def test_short_repr_cuts_huge_values() -> None:
    text = short_repr("x" * 1_000_000)
    assert len(text) < 500
    assert "chars>" in text


def test_run_concurrently_returns_results_in_order() -> None:
    assert run_concurrently([lambda i=i: i * i for i in range(5)]) == [0, 1, 4, 9, 16]  # type: ignore[misc]


def test_run_concurrently_reports_a_failing_worker() -> None:
    def boom() -> int:
        raise RuntimeError("worker failed")

    with pytest.raises(AssertionError, match=r"1 of 2 workers raised.*worker failed"):
        run_concurrently([lambda: 1, boom])


def test_run_concurrently_reports_a_stuck_worker() -> None:
    release = threading.Event()
    try:
        with pytest.raises(AssertionError, match=re.escape("still running after 0.2 s")):
            run_concurrently([lambda: release.wait(10), lambda: True], timeout=0.2)
    finally:
        release.set()


def test_present_returns_the_value_or_names_what_is_missing() -> None:
    assert present(0, "zero") == 0
    with pytest.raises(AssertionError, match=re.escape("task t1: expected a value, found None")):
        present(None, "task t1")

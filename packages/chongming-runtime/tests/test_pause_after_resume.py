"""A pause however soon after a resume (D60): confirmed, and the body held exactly while paused.

Each case runs on every executor that can pause (a thread, a thread running an
``async def`` body, a child process, a child running an ``async def`` body), with
a body that checkpoints and counts a step every millisecond in a file, so the
test sees from outside whether the body advances.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from chongming_core import TaskStatus
from chongming_runtime import TaskRun
from chongming_runtime.executors._base import Executor
from pause_helpers import EXECUTORS, TESTS, Steps, body_and_executor, moves, started, still_for
from run_helpers import st

S = TaskStatus
HELD = 0.05  # seconds a held body is watched for a step it must not make


@pytest.fixture(scope="module")
def tasks() -> Iterator[ModuleType]:
    """The task module, importable by name in this process and in spawned children."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(TESTS))
        import runtime_proc_tasks

        yield runtime_proc_tasks


def _run(
    tasks: ModuleType, tmp_path: Path, asynchronous: bool, make: Callable[[], Executor]
) -> tuple[TaskRun, Steps]:
    steps = Steps(tmp_path / "steps")
    body, executor = body_and_executor(tasks, asynchronous, make)
    run = TaskRun(body, (str(steps),), executor=executor, graceful_stop=10)
    started(run, steps)
    return run, steps


def _end(run: TaskRun) -> None:
    assert run.stop(reason="test over") is True
    assert run.wait(30).status is S.STOPPED


@pytest.mark.parametrize(("name", "asynchronous", "make"), EXECUTORS, ids=[e[0] for e in EXECUTORS])
def test_a_pause_at_once_after_a_resume_is_confirmed_and_holds_the_body(
    tasks: ModuleType,
    tmp_path: Path,
    name: str,
    asynchronous: bool,
    make: Callable[[], Executor],
) -> None:
    run, steps = _run(tasks, tmp_path, asynchronous, make)
    for round_ in range(8):
        assert run.pause(timeout=5) is True, f"round {round_}: the first pause"
        assert run.resume() is True
        started_at = time.monotonic()
        # before the body has even seen the resume: it is still at its checkpoint
        assert run.pause(timeout=5) is True, f"round {round_}: the pause after the resume"
        assert time.monotonic() - started_at < 5
        assert st(run) is S.PAUSED
        assert still_for(steps, HELD), f"round {round_}: paused, but the body advanced"
        assert run.resume() is True
        assert st(run) is S.RUNNING
        assert moves(steps), f"round {round_}: running, but the body did not advance"
    triggers = [t.trigger for t in run.transitions]
    assert "runtime:pause_aborted" not in triggers
    assert triggers.count("runtime:paused") == 16
    _end(run)


@pytest.mark.parametrize(("name", "asynchronous", "make"), EXECUTORS, ids=[e[0] for e in EXECUTORS])
def test_pauses_and_resumes_from_several_threads_never_leave_a_held_body_running(
    tasks: ModuleType,
    tmp_path: Path,
    name: str,
    asynchronous: bool,
    make: Callable[[], Executor],
) -> None:
    run, steps = _run(tasks, tmp_path, asynchronous, make)
    window = 2.0
    longest: list[float] = []

    def hammer() -> None:
        for _ in range(15):
            began = time.monotonic()
            run.pause(timeout=window)
            longest.append(time.monotonic() - began)
            run.resume()
            began = time.monotonic()
            run.pause(timeout=window)
            longest.append(time.monotonic() - began)

    threads = [threading.Thread(target=hammer, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive(), "a pause() or resume() did not return"
    # every pause() returned within its window (and some slack for a loaded machine)
    assert max(longest) < window + 1.5, max(longest)
    # settled: whatever the last call left, the status tells the truth about the body
    status = run.status
    assert status in {S.PAUSED, S.RUNNING}
    if status is S.RUNNING:
        assert moves(steps), "running, but the body does not advance"
        assert run.pause(timeout=5) is True
    assert still_for(steps, HELD), "paused, but the body advances"
    assert run.resume() is True
    assert moves(steps), "resumed, but the body does not advance"
    _end(run)

"""Pause, resume, stop and the start timeout while an attempt is still ``starting`` (D90, D91).

``starting`` has no body yet, so no checkpoint to reach and, in the table, no way
back from ``pausing``: a pause asked then waits for the body, within its window,
and the status never says ``running`` before the body began. Each case runs on
two slow starts: a child process held while it loads its arguments (a
`StartGate` it waits for), and a thread whose launch a listener holds back. A
listener notes, for every transition, the pid its snapshot shows and whether
the start had been let through by then.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from chongming_core import (
    FailureKind,
    FakeClock,
    FixedBackoff,
    RetryPolicy,
    TaskStatus,
    Timeout,
    Transition,
)
from chongming_runtime import ProcessExecutor, TaskRun, ThreadExecutor
from chongming_runtime.executors import process as process_executor
from chongming_runtime.testing import wait_until
from pause_helpers import TESTS, Steps, moves, still_for
from run_helpers import path, pause_asked, st

S = TaskStatus
KINDS = ["process", "thread"]
HELD = 0.05  # seconds a held body is watched for a step it must not make
TO_STARTING = [(S.PENDING, S.QUEUED), (S.QUEUED, S.STARTING)]

#: (from, to, trigger, pid of the snapshot told, whether the start was let through by then)
Row = tuple[TaskStatus, TaskStatus, str, int | None, bool]


@pytest.fixture(scope="module")
def tasks() -> Iterator[ModuleType]:
    """The task module, importable by name in this process and in spawned children."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(TESTS))
        import runtime_proc_tasks

        yield runtime_proc_tasks


class _Seen:
    """Every transition as a listener is told it, with what was true outside at that time."""

    def __init__(self, released: Callable[[], bool]) -> None:
        self.rows: list[Row] = []
        self._released = released

    def on_transition(self, run: TaskRun, transition: Transition, snapshot: Any) -> None:
        self.rows.append(
            (
                transition.from_status,
                transition.to_status,
                transition.trigger,
                snapshot.pid,
                self._released(),
            )
        )

    def on_side_update(self, run: TaskRun, snapshot: Any) -> None:
        pass


class _HoldLaunch:
    """Holds the launch of the first attempt (told ``starting`` before it is launched)."""

    def __init__(self, release: threading.Event) -> None:
        self._release = release
        self._held = False

    def on_transition(self, run: TaskRun, transition: Transition, snapshot: Any) -> None:
        if transition.to_status is S.STARTING and not self._held:
            self._held = True
            self._release.wait(60)

    def on_side_update(self, run: TaskRun, snapshot: Any) -> None:
        pass


class SlowStart:
    """A counting run whose first attempt stays ``starting`` until `release()`."""

    def __init__(
        self, kind: str, tasks: ModuleType, folder: Path, gate: Any = None, **options: Any
    ) -> None:
        self.kind = kind
        self.steps = Steps(folder / "steps")
        self._gate = folder / "gate"
        self._launch = threading.Event()
        listeners: list[Any] = []
        if kind == "process":
            executor: Any = ProcessExecutor()
            if gate is None:
                gate = tasks.StartGate(str(self._gate))
        else:
            executor = ThreadExecutor()
            listeners.append(_HoldLaunch(self._launch))
        self.seen = _Seen(self.released)
        self.clock: FakeClock | None = options.get("clock")
        options.setdefault("graceful_stop", 30)
        self.run = TaskRun(
            tasks.count_steps_behind,
            (gate, str(self.steps)),
            executor=executor,
            listeners=[*listeners, self.seen],
            **options,
        )
        # a held launch holds the thread that starts the run: not the test's
        self._starter = threading.Thread(target=self.run.start, daemon=True)

    def start(self) -> None:
        self._starter.start()
        wait_until(lambda: len(path(self.run)) >= 2, "the run to be starting")
        assert path(self.run)[:2] == TO_STARTING

    def began(self) -> None:
        """Wait for the body's first step and for its start to be recorded: a child runs
        its body before the supervisor reads its report that it began."""
        wait_until(lambda: self.steps.count() > 0, "the body's first step")
        wait_until(lambda: st(self.run) is not S.STARTING, "the body's start to be recorded")

    def released(self) -> bool:
        return self._gate.exists() or self._launch.is_set()

    def release(self) -> None:
        self._gate.touch()
        self._launch.set()

    def pause_in_background(self, timeout: float, actor: str | None = None) -> Callable[[], bool]:
        """Call ``pause(timeout)`` on another thread once the pause is asked; its result."""
        result: list[bool] = []
        caller = threading.Thread(
            target=lambda: result.append(self.run.pause(timeout, actor=actor)), daemon=True
        )
        caller.start()
        wait_until(lambda: pause_asked(self.run) or bool(result), "the pause to be asked")

        def outcome() -> bool:
            caller.join(30)
            assert not caller.is_alive(), "pause() did not return"
            return result[0]

        return outcome

    def advance(self, seconds: float) -> None:
        assert self.clock is not None
        self.clock.advance(seconds)

    def close(self) -> None:
        """Let it through and see it end (a stop, and a fake clock moved past its window)."""
        self.release()
        self._starter.join(30)
        run = self.run
        if not run.done and not st(run).is_terminal:
            run.stop(reason="test over")
        deadline = time.monotonic() + 60
        while not run.done and time.monotonic() < deadline:
            if self.clock is not None:
                self.clock.advance(60)
            threading.Event().wait(0.01)
        run.wait(30)

    def running_only_once_begun(self) -> None:
        """Every ``running`` told came after the start was let through, with a pid."""
        for row in self.seen.rows:
            if row[1] is S.RUNNING:
                assert row[3] is not None, f"running without a pid: {row}"
                assert row[4], f"running before the body could begin: {row}"
        launched = [row for row in self.seen.rows if row[2] == "executor:launched"]
        if launched and self.kind == "process":
            assert launched[0][3] != os.getpid()


@pytest.fixture
def slow_start(
    tasks: ModuleType, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., SlowStart]]:
    made: list[SlowStart] = []

    def make(**options: Any) -> SlowStart:
        folder = tmp_path / f"run-{len(made)}"
        folder.mkdir()
        slow = SlowStart(request.param, tasks, folder, **options)
        made.append(slow)
        return slow

    yield make
    for slow in made:
        slow.close()


both = pytest.mark.parametrize("slow_start", KINDS, indirect=True)
process_only = pytest.mark.parametrize("slow_start", ["process"], indirect=True)


# ==================================================================== pause and resume
@both
def test_a_pause_whose_window_ends_while_starting_changes_nothing(
    slow_start: Callable[..., SlowStart],
) -> None:
    slow = slow_start()
    run = slow.run
    slow.start()
    began = time.monotonic()
    assert run.pause(timeout=0.2) is False
    assert time.monotonic() - began < 0.2 + 2.0  # within its window (slack for a loaded box)
    assert st(run) is S.STARTING  # never pausing: there was no body to reach a checkpoint
    assert path(run) == TO_STARTING
    slow.release()
    slow.began()
    assert path(run) == [*TO_STARTING, (S.STARTING, S.RUNNING)]
    assert [t.trigger for t in run.transitions][-1] == "executor:launched"
    slow.running_only_once_begun()
    assert moves(slow.steps), "running, but the body does not advance"


@both
def test_a_pause_asked_while_starting_is_applied_once_the_body_begins(
    slow_start: Callable[..., SlowStart],
) -> None:
    slow = slow_start()
    run = slow.run
    slow.start()
    paused = slow.pause_in_background(30, actor="ops")
    assert st(run) is S.STARTING
    slow.release()
    assert paused() is True
    assert st(run) is S.PAUSED
    assert path(run) == [
        *TO_STARTING,
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.PAUSING),
        (S.PAUSING, S.PAUSED),
    ]
    pausing = run.transitions[3]
    assert (pausing.trigger, pausing.actor) == ("control:pause", "ops")
    assert "while the task was starting" in (pausing.reason or "")
    slow.running_only_once_begun()
    assert still_for(slow.steps, HELD), "paused, but the body advances"
    assert run.resume() is True
    assert moves(slow.steps), "resumed, but the body does not advance"


@both
def test_a_resume_while_starting_withdraws_the_pause_before_it_was_applied(
    slow_start: Callable[..., SlowStart],
) -> None:
    slow = slow_start()
    run = slow.run
    slow.start()
    paused = slow.pause_in_background(30)
    assert run.resume() is True  # the pause asked is withdrawn
    assert paused() is False
    assert st(run) is S.STARTING
    assert run.resume() is False  # nothing left to withdraw
    slow.release()
    slow.began()
    assert moves(slow.steps), "the withdrawn pause held the body"
    assert st(run) is S.RUNNING
    assert path(run) == [*TO_STARTING, (S.STARTING, S.RUNNING)]
    slow.running_only_once_begun()


# ==================================================================== stop
@both
def test_a_stop_while_starting_ends_it_stopped_without_running_its_body(
    slow_start: Callable[..., SlowStart],
) -> None:
    slow = slow_start()
    run = slow.run
    slow.start()
    paused = slow.pause_in_background(30)
    assert run.stop(reason="not now") is True
    assert paused() is False  # the stop ended the pause asked
    assert st(run) is S.STOPPING
    slow.release()
    outcome = run.wait(60)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert path(run) == [*TO_STARTING, (S.STARTING, S.STOPPING), (S.STOPPING, S.STOPPED)]
    assert slow.steps.count() == 0  # the body never ran
    slow.running_only_once_begun()


@process_only
def test_a_child_stopped_before_its_body_began_is_not_said_to_have_ignored_the_stop(
    slow_start: Callable[..., SlowStart],
) -> None:
    slow = slow_start(clock=FakeClock(), graceful_stop=5)
    run = slow.run
    slow.start()
    assert run.stop(reason="not now") is True
    slow.advance(5)  # the graceful window passes: the child, still loading, is ended
    outcome = run.wait(60)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert "its body had not begun when the graceful window of 5s passed" in (
        outcome.failure.message
    )
    assert "did not stop" not in outcome.failure.message
    assert path(run) == [*TO_STARTING, (S.STARTING, S.STOPPING), (S.STOPPING, S.STOPPED)]
    assert slow.steps.count() == 0


# ==================================================================== the start timeout (R1)
def _timed_out_starting(run: TaskRun, to: TaskStatus) -> None:
    assert st(run) is to
    failure = run.snapshot.failure
    assert failure is not None
    assert failure.kind is FailureKind.TIMEOUT_START
    assert path(run) == [*TO_STARTING, (S.STARTING, to)]


@both
def test_the_start_timeout_holds_after_a_pause_window_ended_while_starting(
    slow_start: Callable[..., SlowStart],
) -> None:
    slow = slow_start(clock=FakeClock(), timeout=Timeout(start=5))
    slow.start()
    paused = slow.pause_in_background(1)
    slow.advance(1)
    assert paused() is False
    assert st(slow.run) is S.STARTING
    slow.advance(4)  # the start timeout expires before the body began
    _timed_out_starting(slow.run, S.FAILED)
    slow.release()
    assert slow.run.wait(60).status is S.FAILED
    assert slow.steps.count() == 0
    slow.running_only_once_begun()


@both
def test_the_start_timeout_holds_after_a_resume_while_starting(
    slow_start: Callable[..., SlowStart],
) -> None:
    slow = slow_start(clock=FakeClock(), timeout=Timeout(start=5))
    slow.start()
    paused = slow.pause_in_background(30)
    assert slow.run.resume() is True
    assert paused() is False
    slow.advance(5)
    _timed_out_starting(slow.run, S.FAILED)
    slow.release()
    assert slow.run.wait(60).status is S.FAILED
    assert slow.steps.count() == 0
    slow.running_only_once_begun()


@both
def test_the_start_timeout_ends_an_attempt_whose_pause_waits_for_the_body(
    slow_start: Callable[..., SlowStart],
) -> None:
    slow = slow_start(
        clock=FakeClock(),
        timeout=Timeout(start=5),
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(60)),
    )
    slow.start()
    paused = slow.pause_in_background(30)  # a longer window than the start timeout left
    slow.advance(5)
    assert paused() is False  # the attempt it waited for has ended
    _timed_out_starting(slow.run, S.RETRY_WAIT)  # R1: the normal edge, retryable
    assert slow.run.stop(reason="enough") is True
    slow.release()
    assert slow.run.wait(60).status is S.STOPPED
    assert path(slow.run)[-1] == (S.RETRY_WAIT, S.STOPPED)
    assert slow.steps.count() == 0
    slow.running_only_once_begun()


def test_the_start_timeout_holds_while_retry_waiting_after_an_attempt_that_never_began(
    tasks: ModuleType, tmp_path: Path
) -> None:
    clock = FakeClock()
    steps = Steps(tmp_path / "steps")
    run = TaskRun(
        tasks.count_steps_behind,
        (tasks.LoadsNowhere(), str(steps)),
        executor=ProcessExecutor(),
        clock=clock,
        timeout=Timeout(start=5),
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(10)),
    )
    run.start()
    wait_until(lambda: st(run) is S.RETRY_WAIT, "the child to die before its body began")
    first = run.snapshot.failure
    assert first is not None
    assert first.kind is FailureKind.NONZERO_EXIT
    clock.advance(5)  # still waiting to retry: the body never began
    assert st(run) is S.CANCELLED  # R1, as for a task still queued
    outcome = run.wait(30)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_START
    assert path(run) == [*TO_STARTING, (S.STARTING, S.RETRY_WAIT), (S.RETRY_WAIT, S.CANCELLED)]
    assert [a.failure.kind for a in outcome.attempts if a.failure] == [FailureKind.NONZERO_EXIT]
    assert S.RUNNING not in {t.to_status for t in run.transitions}


# ==================================================================== ended before a carrier exists
class _AtStarting:
    """Runs `act(run)` when told the first ``starting``, which is told before the attempt
    is launched: whatever `act` ends, it ends before a thread or a child exists (D92)."""

    def __init__(self, act: Callable[[TaskRun], None]) -> None:
        self._act = act
        self._done = False

    def on_transition(self, run: TaskRun, transition: Transition, snapshot: Any) -> None:
        if transition.to_status is S.STARTING and not self._done:
            self._done = True
            self._act(run)

    def on_side_update(self, run: TaskRun, snapshot: Any) -> None:
        pass


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the child processes started in this process while the test runs."""
    started: list[str] = []
    original = BaseProcess.start

    def spy(process: BaseProcess) -> None:
        started.append(process.name)
        original(process)

    monkeypatch.setattr(BaseProcess, "start", spy)
    return started


def _executor(kind: str) -> Any:
    return ProcessExecutor() if kind == "process" else ThreadExecutor()


def _never_ran(steps: Steps, children: list[str]) -> None:
    assert still_for(steps, HELD)
    assert steps.count() == 0
    assert children == []  # not even a child that would have waited for its gate


def _stopped_unbegun(outcome: Any) -> None:
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert outcome.failure.message == (
        "stopped: not now; its body had not begun when the graceful window of 5s passed, "
        "and now never will"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_window_that_passes_before_the_launch_starts_no_body(
    kind: str, tasks: ModuleType, tmp_path: Path, children: list[str]
) -> None:
    clock = FakeClock()
    steps = Steps(tmp_path / "steps")

    def stop_and_let_the_window_pass(run: TaskRun) -> None:
        assert run.stop(reason="not now") is True
        clock.advance(5)

    run = TaskRun(
        tasks.count_steps_behind,
        (None, str(steps)),  # no gate: a body started would count at once
        executor=_executor(kind),
        clock=clock,
        graceful_stop=5,
        listeners=[_AtStarting(stop_and_let_the_window_pass)],
    )
    run.start()
    _stopped_unbegun(run.wait(30))
    assert path(run) == [*TO_STARTING, (S.STARTING, S.STOPPING), (S.STOPPING, S.STOPPED)]
    _never_ran(steps, children)


@pytest.mark.parametrize("kind", KINDS)
def test_a_start_timeout_before_the_launch_starts_no_body(
    kind: str, tasks: ModuleType, tmp_path: Path, children: list[str]
) -> None:
    clock = FakeClock()
    steps = Steps(tmp_path / "steps")
    run = TaskRun(
        tasks.count_steps_behind,
        (None, str(steps)),
        executor=_executor(kind),
        clock=clock,
        timeout=Timeout(start=5),
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(60)),
        listeners=[_AtStarting(lambda run: clock.advance(5))],
    )
    run.start()
    _timed_out_starting(run, S.RETRY_WAIT)  # R1: the normal edge, retryable
    _never_ran(steps, children)
    assert run.stop(reason="enough") is True
    assert run.wait(30).status is S.STOPPED
    assert path(run)[-1] == (S.RETRY_WAIT, S.STOPPED)
    _never_ran(steps, children)


@pytest.mark.parametrize("ending", ["stop", "start timeout"])
def test_an_attempt_ended_between_its_handle_and_its_child_start_gets_no_child(
    ending: str,
    tasks: ModuleType,
    tmp_path: Path,
    children: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worst interleaving: the launch has handed over the child's handle, and the
    window (or the start timeout) passes before it starts the child."""
    at_start, ended = threading.Event(), threading.Event()
    original = process_executor._ProcessHandle.start

    def held(handle: Any) -> bool:
        at_start.set()
        assert ended.wait(30), "the test never let the start go on"
        return original(handle)

    monkeypatch.setattr(process_executor._ProcessHandle, "start", held)
    clock = FakeClock()
    steps = Steps(tmp_path / "steps")
    options: dict[str, Any] = {"timeout": Timeout(start=5)} if ending == "start timeout" else {}
    run = TaskRun(
        tasks.count_steps_behind,
        (None, str(steps)),
        executor=ProcessExecutor(),
        clock=clock,
        graceful_stop=5,
        **options,
    )
    starter = threading.Thread(target=run.start, daemon=True)  # held in the launch
    starter.start()
    assert at_start.wait(30), "the launch never came to start the child"
    attempt = run._attempt
    assert attempt is not None
    assert attempt.handle is not None  # handed over
    if ending == "stop":
        assert run.stop(reason="not now") is True
    clock.advance(5)
    # settled at once: there is no child whose exit could be waited for
    if ending == "stop":
        _stopped_unbegun(run.wait(0))
        assert path(run) == [*TO_STARTING, (S.STARTING, S.STOPPING), (S.STOPPING, S.STOPPED)]
    else:
        _timed_out_starting(run, S.FAILED)
    ended.set()
    starter.join(30)
    assert not starter.is_alive()
    _never_ran(steps, children)
    assert len(run.transitions) == (4 if ending == "stop" else 3)  # nothing more came

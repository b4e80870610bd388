"""ProcessExecutor (§7.4, R2, R9): spawn, hard stop, crash isolation, pickling checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from chongming_core import (
    ConfigurationError,
    FailureKind,
    FixedBackoff,
    RetryPolicy,
    TaskStatus,
    Timeout,
)
from chongming_runtime import ProcessExecutor, TaskContext, TaskOutcome, TaskRun, run_task
from chongming_runtime.executors.process import ProcessExecutor as ProcessFromModule
from chongming_runtime.testing import wait_until

S = TaskStatus
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def tasks() -> Iterator[ModuleType]:
    """The task module, importable by name in this process and in spawned children."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(TESTS))
        import runtime_proc_tasks

        yield runtime_proc_tasks


def path(run: TaskRun) -> list[tuple[TaskStatus, TaskStatus]]:
    return [(t.from_status, t.to_status) for t in run.transitions]


def _in_child(fn: Callable[..., Any], *args: Any, attempts: int, **policy: Any) -> TaskOutcome:
    """`fn` run in child processes, with `attempts` attempts and no backoff between them."""
    return run_task(
        fn,
        *args,
        executor=ProcessExecutor(),
        retry=RetryPolicy(max_attempts=attempts, backoff=FixedBackoff(0), **policy),
    )


def local_function() -> Callable[[TaskContext], int]:
    def inner(ctx: TaskContext) -> int:
        return 1

    return inner


def test_the_submodule_exposes_the_class() -> None:
    assert ProcessFromModule is ProcessExecutor


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda ctx: 1, "it is a lambda"),
        (local_function(), "local function or closure"),
    ],
)
def test_lambdas_and_local_functions_are_refused_at_submit(fn: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match) as caught:
        TaskRun(fn, executor=ProcessExecutor())
    message = str(caught.value)
    assert "module-level function" in message
    assert 'if __name__ == "__main__":' in message
    assert "ThreadExecutor()" in message


def test_a_function_of_a_module_a_child_cannot_import_is_refused() -> None:
    # A module that exists only in this process (built at run time): pickling works
    # here, but a spawned child could never import it, so it is refused at submit time.
    module = ModuleType("chongming_dynamic_tasks")
    exec("def body(ctx):\n    return 1\n", module.__dict__)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, module.__name__, module)
        with pytest.raises(ConfigurationError, match="cannot be imported") as caught:
            TaskRun(module.body, executor=ProcessExecutor())
    assert "importable module" in str(caught.value)


def test_unpicklable_arguments_are_refused_at_submit(tasks: ModuleType) -> None:
    with pytest.raises(ConfigurationError, match="argument 0") as caught:
        TaskRun(tasks.square, (threading.Lock(),), executor=ProcessExecutor())
    assert "cannot be pickled" in str(caught.value)
    with pytest.raises(ConfigurationError, match="keyword argument 'lock'"):
        TaskRun(tasks.square, (1,), {"lock": threading.Lock()}, executor=ProcessExecutor())


def test_a_task_runs_in_a_child_and_reports_pid_progress_and_logs(tasks: ModuleType) -> None:
    run = TaskRun(tasks.square, (7,), executor=ProcessExecutor(), task_id="proc-ok")
    run.start()
    outcome = run.wait(60)
    assert outcome.status is S.SUCCEEDED
    assert outcome.value["value"] == 49
    child_pid = outcome.value["pid"]
    assert child_pid != os.getpid()
    assert outcome.snapshot.pid == child_pid
    assert outcome.snapshot.executor == "process"
    assert outcome.snapshot.progress is not None
    assert outcome.snapshot.progress.unit == "item"
    assert run.logs == ("INFO squaring 7",)
    assert path(run) == [
        (S.PENDING, S.QUEUED),
        (S.QUEUED, S.STARTING),
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.SUCCEEDED),
    ]


def test_async_bodies_run_in_the_child(tasks: ModuleType) -> None:
    assert run_task(tasks.async_square, 5, executor=ProcessExecutor()).value == 25


def test_cooperative_stop_pause_and_resume_cross_the_process_boundary(tasks: ModuleType) -> None:
    run = TaskRun(tasks.loop_forever, executor=ProcessExecutor())
    run.start()
    wait_until(lambda: run.snapshot.progress is not None, timeout=30)
    assert run.pause(timeout=10) is True
    assert run.status is S.PAUSED
    frozen = run.snapshot.progress
    assert frozen is not None
    threading.Event().wait(0.1)
    paused_progress = run.snapshot.progress
    assert paused_progress is not None
    assert paused_progress.done == frozen.done
    assert run.resume() is True
    wait_until(lambda: (run.snapshot.progress or frozen).done > frozen.done, timeout=30)
    run.stop(reason="enough")
    outcome = run.wait(30)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert path(run)[3:] == [
        (S.RUNNING, S.PAUSING),
        (S.PAUSING, S.PAUSED),
        (S.PAUSED, S.RUNNING),
        (S.RUNNING, S.STOPPING),
        (S.STOPPING, S.STOPPED),
    ]


def test_a_child_that_returns_after_the_stop_succeeds(tasks: ModuleType) -> None:
    run = TaskRun(tasks.loop_until_stopped, executor=ProcessExecutor())
    run.start()
    wait_until(lambda: run.snapshot.progress is not None, timeout=30)  # the body is in its loop
    run.stop()
    outcome = run.wait(30)
    assert outcome.status is S.SUCCEEDED
    assert isinstance(outcome.value, int)
    assert path(run)[-1] == (S.STOPPING, S.SUCCEEDED)


def test_a_child_ignoring_the_stop_is_terminated_then_killed_and_ends_stopped(
    tasks: ModuleType,
) -> None:
    run = TaskRun(
        tasks.ignore_everything,
        executor=ProcessExecutor(kill_after=0.2),
        graceful_stop=0.2,
    )
    run.start()
    wait_until(
        lambda: run.snapshot.progress is not None, timeout=30
    )  # SIGTERM is ignored from now on
    pid = run.snapshot.pid
    assert pid is not None
    assert pid != os.getpid()
    run.stop(reason="hard stop")
    outcome = run.wait(30)
    assert outcome.status is S.STOPPED  # R9: never lost
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert outcome.failure.retryable is False
    assert "SIGKILL" in outcome.failure.message
    assert path(run)[-2:] == [(S.RUNNING, S.STOPPING), (S.STOPPING, S.STOPPED)]


def test_a_timeout_terminates_the_child_and_keeps_the_timeout_kind(tasks: ModuleType) -> None:
    run = TaskRun(
        tasks.sleep_without_checkpoint,
        (60,),
        executor=ProcessExecutor(),
        timeout=Timeout(per_attempt=0.3),
        graceful_stop=0.2,
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),
    )
    run.start()
    outcome = run.wait(60)
    assert outcome.status is S.FAILED  # R2/R9: not lost
    assert [a.failure.kind for a in outcome.attempts if a.failure] == [
        FailureKind.TIMEOUT_ATTEMPT,
        FailureKind.TIMEOUT_ATTEMPT,
    ]
    assert outcome.failure is not None
    assert "SIGTERM" in outcome.failure.message
    assert S.LOST not in {t.to_status for t in run.transitions}
    assert S.STOPPING not in {t.to_status for t in run.transitions}
    assert (S.RUNNING, S.RETRY_WAIT) in path(run)


def test_os_exit_in_the_child_is_one_failed_attempt_with_the_exit_code(tasks: ModuleType) -> None:
    outcome = _in_child(tasks.exit_hard, 3, attempts=2)
    assert outcome.status is S.FAILED
    assert len(outcome.attempts) == 2  # retryable (R9)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.NONZERO_EXIT
    assert "exited with code 3" in outcome.failure.message


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_segfault_takes_only_the_child_down(tasks: ModuleType) -> None:
    outcome = run_task(tasks.segfault, executor=ProcessExecutor())
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.NONZERO_EXIT
    assert "SIGSEGV" in outcome.failure.message
    assert outcome.failure.retryable is True
    assert run_task(tasks.square, 2, executor=ProcessExecutor()).ok  # the supervisor lives on


def test_exceptions_and_invalid_results_come_back_with_their_kind(tasks: ModuleType) -> None:
    outcome = run_task(
        tasks.raise_value_error,
        executor=ProcessExecutor(),
        retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0), give_up_on=(ValueError,)),
    )
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.EXCEPTION
    assert outcome.failure.message == "ValueError: bad input"
    assert outcome.failure.retryable is False  # give_up_on applied to the child's exception
    assert len(outcome.attempts) == 1
    assert outcome.failure.traceback is not None
    assert "raise_value_error" in outcome.failure.traceback
    outcome = run_task(tasks.return_set, executor=ProcessExecutor())
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.RESULT_INVALID
    assert "set" in outcome.failure.message


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):  # gone (ESRCH when it ends while being read)
        return False
    return state != "Z"


def test_the_retry_policy_judges_an_exception_that_cannot_cross_back_whole(
    tasks: ModuleType,
) -> None:
    """Its pickle does not round-trip, so the parent gets its description and class names:
    give_up_on still applies (it was retried as if no policy existed)."""
    outcome = _in_child(tasks.raise_two_part_error, attempts=3, give_up_on=(tasks.TwoPartError,))
    assert outcome.failure is not None
    assert outcome.failure.message == "TwoPartError: input: unreadable"
    assert outcome.failure.retryable is False
    assert len(outcome.attempts) == 1
    only_oserror = _in_child(tasks.raise_two_part_error, attempts=3, retry_on=(OSError,))
    assert len(only_oserror.attempts) == 1  # not an OSError: not retried
    every = _in_child(tasks.raise_two_part_error, attempts=2)
    assert len(every.attempts) == 2  # an Exception: retried by the default policy


def test_a_child_result_is_the_value_every_reader_gets_back(tasks: ModuleType) -> None:
    """The child sends its value whole; the parent keeps what the store hands back."""
    outcome = _in_child(tasks.return_tuples, attempts=1)
    assert outcome.status is S.SUCCEEDED
    assert outcome.value == [1, [2, "x"], {"pair": [3, 4]}]
    assert type(outcome.value[1]) is list


def test_values_no_store_can_keep_are_refused_in_the_child(tasks: ModuleType) -> None:
    outcome = _in_child(tasks.return_int_of_5001_digits, attempts=3)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.RESULT_INVALID
    assert "an int of 5001 digits" in outcome.failure.message
    assert len(outcome.attempts) == 1
    refused = _in_child(tasks.report_infinite_progress, attempts=1)
    assert refused.value == "refused: progress total must be a finite number, got inf"


def test_a_log_level_that_is_not_an_int_is_refused_alike_on_every_executor(
    tasks: ModuleType,
) -> None:
    """Refused at the call, before anything is kept: the thread and inline executors kept a
    line that never reached a handler, and a child process took it and dropped it."""
    from chongming_runtime.executors.inline import InlineExecutor
    from chongming_runtime.executors.thread import ThreadExecutor

    for executor in (InlineExecutor(), ThreadExecutor(), ProcessExecutor()):
        run = TaskRun(tasks.log_at_a_level_by_name, executor=executor)
        run.start()
        outcome = run.wait(60)
        assert outcome.value == (
            "refused: log level must be an int such as logging.WARNING (30), got 'WARNING'; "
            "or use ctx.warning(...) and ctx.error(...)"
        ), executor
        assert run.logs == ("INFO after",), executor


def test_ctx_logs_in_a_child_holds_the_lines_of_earlier_attempts(tasks: ModuleType) -> None:
    """`ctx.logs` is the task's latest lines, as on a thread: a later attempt's child sees
    those of the attempts before it."""
    outcome = _in_child(tasks.log_then_fail_once, attempts=2)
    assert outcome.status is S.SUCCEEDED
    assert outcome.value == ["INFO attempt 1", "INFO attempt 2"]


def test_a_result_that_cannot_be_sent_back_is_result_invalid(tasks: ModuleType) -> None:
    outcome = _in_child(tasks.return_unpicklable_dict, attempts=3)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.RESULT_INVALID
    assert "cannot be sent back from its process" in outcome.failure.message
    assert outcome.failure.retryable is False
    assert len(outcome.attempts) == 1  # it would fail the same way


@pytest.mark.parametrize(
    "body",
    [
        "start_grandchild_and_wait",
        # the SIGTERM ends the child; the subprocess ignores it and is killed at kill_after
        "start_stubborn_grandchild_and_wait",
    ],
)
def test_a_force_stop_ends_what_the_body_started_too(
    tasks: ModuleType, tmp_path: Path, body: str
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    run = TaskRun(
        getattr(tasks, body),
        (str(pid_file),),
        executor=ProcessExecutor(kill_after=0.3),
        graceful_stop=0.2,
    )
    run.start()
    wait_until(lambda: run.snapshot.progress is not None, timeout=30)
    grandchild = int(pid_file.read_text())
    try:
        assert _alive(grandchild)
        run.stop(reason="hard stop")
        outcome = run.wait(30)
        assert outcome.status is S.STOPPED
        assert outcome.failure is not None
        assert "ended by force" in outcome.failure.message
        wait_until(lambda: not _alive(grandchild), timeout=10)
    finally:
        if _alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_a_sigterm_ends_a_child_busy_in_c_code_at_once(tasks: ModuleType, tmp_path: Path) -> None:
    """What multiprocessing's exit handler and an operator's kill send: no handler in the
    child may wait for the C call to end (an exiting parent joins its child)."""
    pid_file = tmp_path / "child.pid"
    run = TaskRun(tasks.busy_in_c, (str(pid_file),), executor=ProcessExecutor())
    run.start()
    wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", timeout=30)
    child = int(pid_file.read_text())
    try:
        os.kill(child, signal.SIGTERM)
        wait_until(lambda: not _alive(child), timeout=5)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
    outcome = run.wait(30)
    assert outcome.failure is not None
    assert "SIGTERM" in outcome.failure.message


def test_a_body_may_start_a_session_of_its_own(tasks: ModuleType) -> None:
    outcome = run_task(tasks.new_session, executor=ProcessExecutor())
    assert outcome.ok, outcome.failure


_MAIN_SCRIPT = """
from chongming_core import FixedBackoff, RetryPolicy
from chongming_runtime import ProcessExecutor, run_task


class TwoPartError(Exception):
    def __init__(self, what, why):
        super().__init__(f"{what}: {why}")


def body(ctx):
    raise TwoPartError("input", "unreadable")


if __name__ == "__main__":
    policy = RetryPolicy(max_attempts=3, backoff=FixedBackoff(0), give_up_on=(TwoPartError,))
    print(len(run_task(body, executor=ProcessExecutor(), retry=policy).attempts))
"""


def test_give_up_on_a_class_of_the_main_script_applies_to_its_child(tmp_path: Path) -> None:
    """spawn re-imports the script as __mp_main__; its classes are named as the parent knows
    them, __main__."""
    script = tmp_path / "script.py"
    script.write_text(_MAIN_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "1"  # give_up_on: one attempt


def test_a_child_killed_from_outside_during_the_graceful_window_is_not_said_forced(
    tasks: ModuleType,
) -> None:
    run = TaskRun(tasks.ignore_everything, executor=ProcessExecutor(kill_after=5), graceful_stop=30)
    run.start()
    wait_until(lambda: run.snapshot.progress is not None, timeout=30)
    pid = run.snapshot.pid
    assert pid is not None
    run.stop(reason="hard stop")
    wait_until(lambda: run.status is S.STOPPING, timeout=30)
    os.kill(pid, signal.SIGKILL)  # an operator's kill, long before the window runs out
    outcome = run.wait(30)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert "its process ended before the body stopped" in outcome.failure.message
    assert "ended by force" not in outcome.failure.message


_ORPHAN_PARENT = """
import sys, time
sys.path.insert(0, {tests!r})
import runtime_proc_tasks as tasks
from chongming_runtime import ProcessExecutor, TaskRun

if __name__ == "__main__":
    run = TaskRun(tasks.start_grandchild_and_wait, ({pid_file!r},), executor=ProcessExecutor())
    run.start()
    while run.snapshot.pid is None or run.snapshot.progress is None:
        time.sleep(0.01)
    print(run.snapshot.pid, flush=True)
    time.sleep(120)
"""


def test_when_the_supervising_process_dies_its_children_end_too(tmp_path: Path) -> None:
    """Nothing may outlive its supervision: reconcile() will call the task lost, and a rerun
    must not race a body still running."""
    pid_file = tmp_path / "grandchild.pid"
    script = tmp_path / "parent.py"
    script.write_text(
        _ORPHAN_PARENT.format(tests=str(TESTS), pid_file=str(pid_file)), encoding="utf-8"
    )
    with subprocess.Popen(  # its resource tracker reports the killed parent's semaphores
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as parent:
        try:
            assert parent.stdout is not None
            child = int(parent.stdout.readline())
            grandchild = int(pid_file.read_text())
            assert _alive(child)
            assert _alive(grandchild)
            parent.kill()  # SIGKILL: no cleanup of any kind in the parent
            parent.wait(10)
            wait_until(lambda: not _alive(child) and not _alive(grandchild), timeout=10)
        finally:
            parent.kill()


_UNCLOSED = """
import sys, time
sys.path.insert(0, {tests!r})
import runtime_proc_tasks as tasks
from chongming_runtime import Controller, ProcessExecutor

if __name__ == "__main__":
    controller = Controller(executor=ProcessExecutor())
    controller.register("deaf", tasks.ignore_everything)
    run = controller.submit("deaf")
    while run.snapshot.progress is None:  # its SIGTERM handler is in place
        time.sleep(0.01)
    print(run.snapshot.pid, flush=True)
    # falls off the end without close()
"""


def test_a_script_that_never_closes_its_controller_exits_all_the_same(tmp_path: Path) -> None:
    """A child that ignores SIGTERM, still running when the interpreter exits: it is
    killed after a short grace (multiprocessing's exit handler alone joined it for ever)."""
    script = tmp_path / "unclosed.py"
    script.write_text(_UNCLOSED.format(tests=str(TESTS)), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    child = int(done.stdout.split()[0])
    wait_until(lambda: not _alive(child), timeout=10)


_GUARDED_SCRIPT = """
import sys
from chongming_core import ConfigurationError
from chongming_runtime import ProcessExecutor, run_task


def top(ctx):
    return "top"


try:
    def in_try(ctx):
        return "in_try"
except ImportError:
    pass


if __name__ == "__main__":
    def guarded(ctx):
        return "guarded"

    try:
        run_task(guarded, executor=ProcessExecutor())
    except ConfigurationError as exc:
        print("refused:", exc)
    for fn in (top, in_try):
        print(fn.__name__, run_task(fn, executor=ProcessExecutor()).value)
"""


def test_a_function_a_child_cannot_find_in_the_script_is_refused_at_submit(
    tmp_path: Path,
) -> None:
    """spawn re-imports the script without its `if __name__ == "__main__":` block: a function
    defined there failed in the child (nonzero_exit, retried) instead of at submit."""
    script = tmp_path / "script.py"
    script.write_text(_GUARDED_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("refused: ProcessExecutor cannot run __main__.guarded")
    assert "not defined at the top level of the script" in lines[0]
    assert lines[1:] == ["top top", "in_try in_try"]


def test_the_kill_after_the_window_ends_what_the_body_started_before_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child's exit reports the attempt ended: nothing it started may outlive that."""
    from chongming_runtime.executors import process as module

    order: list[str] = []

    class Child:
        pid = 4242

        def is_alive(self) -> bool:
            return True

        def kill(self) -> None:
            order.append("kill child")

    monkeypatch.setattr(module, "descendants", lambda pid: [(5151, 1)])
    monkeypatch.setattr(module, "same_process", lambda pid, started: True)
    monkeypatch.setattr(os, "kill", lambda pid, sig: order.append(f"{sig.name} {pid}"))
    handle = module._ProcessHandle(Child(), kill_after=1.0)  # type: ignore[arg-type]
    handle._kill()
    assert order == ["SIGSTOP 4242", "SIGKILL 5151", "kill child"]


_UNGUARDED_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from runtime_proc_tasks import square
from chongming_runtime import Controller, ProcessExecutor

controller = Controller(executor=ProcessExecutor())
with open({made!r}, "a") as made:
    made.write("a controller\\n")
controller.register("square", square)
outcome = controller.wait(controller.submit("square", 3).task_id, timeout=60)
print(outcome.status.value, outcome.failure.kind.value if outcome.failure else "-")
controller.close()
"""


def test_a_controller_made_by_the_main_script_in_a_spawned_child_is_refused(
    tmp_path: Path,
) -> None:
    """A script that makes its controller at module level, without the guard: spawn runs
    that code again in the child, which made (and could serve) a second controller under
    the parent's owner. The child now refuses it, says why on its stderr, and the attempt
    fails as a child that exited early; only the parent's controller was made."""
    made = tmp_path / "made.txt"
    script = tmp_path / "script.py"
    script.write_text(_UNGUARDED_SCRIPT.format(tests=str(TESTS), made=str(made)), "utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["failed", "nonzero_exit"]
    assert "put the code that creates and runs the controller under `if __name__ ==" in (
        done.stderr
    )
    assert made.read_text(encoding="utf-8").splitlines() == ["a controller"]


def test_a_task_module_imported_by_a_spawned_child_may_make_a_controller(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Only the main script's code is refused while a child imports it: code of any other
    module (a task module imported in the child) makes a controller as in any process."""
    import multiprocessing
    import runpy

    from chongming_runtime import Controller

    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    Controller().close()  # this test module is not the re-imported main script
    script = tmp_path / "script.py"
    script.write_text("from chongming_runtime import Controller\nController()\n", "utf-8")
    with pytest.raises(ConfigurationError, match="imports the main module"):
        runpy.run_path(str(script), run_name="__mp_main__")  # as spawn runs the script

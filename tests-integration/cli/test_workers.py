"""``submit``, ``worker`` and ``nodes`` as real processes, on a SQLite file and on
PostgreSQL: a worker fed by ``submit``, ``--wait`` exit codes, the shutdown on
SIGTERM (a task that stops ends ``stopped``, one that will not ends ``lost``; exit 0),
a second signal, and the worker row live then expired."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import textwrap
import time
from collections.abc import Callable
from typing import Any

import pytest
from cli_support import Workspace, finish, first_line

pytestmark = pytest.mark.timeout(120)

#: The module the workers serve (written beside the workspace's own task module).
WORKER_TASKS = textwrap.dedent(
    '''
    """Tasks of the worker tests."""
    from __future__ import annotations

    import os
    import time
    from typing import Any

    from chongming_core import task
    from chongming_runtime.testing import spin as _spin


    @task
    def add(ctx: Any, a: int, b: int = 0) -> int:
        ctx.checkpoint()
        return a + b


    @task
    def boom(ctx: Any, message: str = "boom") -> None:
        raise ValueError(message)


    @task
    def spin(ctx: Any) -> None:
        """Loops until stopped (a stop ends it stopped)."""
        _spin(ctx)


    @task
    def crash(ctx: Any) -> int:
        """Ends its own process with exit code 3 (in a child process: only that attempt)."""
        os._exit(3)


    @task
    def whose(ctx: Any) -> int:
        """The pid of the process that runs the body."""
        return os.getpid()


    @task
    def nap(ctx: Any, seconds: float = 60.0) -> None:
        """Never reaches a checkpoint: a stop cannot reach it (it ends lost)."""
        time.sleep(seconds)
    '''
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, workspace: Workspace) -> list[str]:
    """The store options of a test: a SQLite file, or a fresh PostgreSQL database."""
    (workspace.root / "worker_tasks.py").write_text(WORKER_TASKS, encoding="utf-8")
    if request.param == "sqlite":
        return ["--db", str(workspace.db)]
    return ["--dsn", request.getfixturevalue("pg_url")]


def _status(workspace: Workspace, store: list[str], task_id: str) -> dict[str, Any]:
    done = workspace.cli(*store, "status", task_id, "--json")
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _until(
    workspace: Workspace,
    store: list[str],
    task_id: str,
    predicate: Callable[[dict[str, Any]], bool],
    timeout: float = 30.0,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = _status(workspace, store, task_id)
        if predicate(last):
            return last
        time.sleep(0.1)
    pytest.fail(f"{task_id} never reached the expected state; last: {last}")


def _nodes(workspace: Workspace, store: list[str]) -> list[dict[str, Any]]:
    done = workspace.cli(*store, "nodes", "--json")
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def _worker(workspace: Workspace, store: list[str], *extra: str) -> subprocess.Popen[str]:
    process = workspace.spawn(*store, "--owner", "w-1", "worker", "--tasks", "worker_tasks", *extra)
    assert process.stderr is not None
    line = first_line(process.stderr, timeout=30)
    if line.startswith("note: created the task database"):  # the first to open the store
        line = first_line(process.stderr, timeout=30)
    if not line.startswith("worker w-1 serves add, boom, crash, nap, spin, whose (every bucket"):
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"the worker did not start: {line}{err}{out}")
    return process


def _sigterm(worker: subprocess.Popen[str], timeout: float = 60.0) -> tuple[int, str]:
    """SIGTERM `worker` and wait for it: its exit code and stderr."""
    worker.send_signal(signal.SIGTERM)
    code, _, err = finish(worker, timeout=timeout)
    return code, err


def _reap(worker: subprocess.Popen[str]) -> None:
    """Kill `worker` if a failed test left it running."""
    if worker.poll() is None:
        worker.kill()
        worker.communicate()


def _submit(workspace: Workspace, store: list[str], *args: str) -> str:
    done = workspace.cli(*store, "submit", *args, "--tasks", "worker_tasks")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_worker_fed_by_submit(workspace: Workspace, store: list[str]) -> None:
    before = workspace.cli(*store, "submit", "add", "--arg", "a=1", "--task-id", "early")
    assert before.returncode == 0, before.stderr
    assert "read as JSON" in before.stderr  # no --tasks: said in one line
    waiting = workspace.cli(*store, "ps")
    assert "waiting: early: no worker serves 'add'" in waiting.stderr
    status_text = workspace.cli(*store, "status", "early").stdout
    assert "waiting:   no worker serves 'add'" in status_text
    assert "arguments: a=1" in status_text, status_text

    worker = _worker(workspace, store, "--max-parallel", "3", "--grace", "1")
    try:
        [row] = _nodes(workspace, store)
        assert (row["owner"], row["live"], row["names"]) == (
            "w-1", True, ["add", "boom", "crash", "nap", "spin", "whose"]
        )  # fmt: skip
        listed = workspace.cli(*store, "nodes").stdout
        for shown in ("w-1", "max_parallel=3", "live"):
            assert shown in listed

        ok = workspace.cli(
            *store, "submit", "add", "--tasks", "worker_tasks", "--arg", "a=2", "--arg", "b=3",
            "--wait", "--timeout", "30",
        )  # fmt: skip
        assert ok.returncode == 0, ok.stderr
        assert "succeeded" in ok.stdout
        assert "value:   5" in ok.stdout
        bad = workspace.cli(*store, "submit", "boom", "--wait", "--timeout", "30")
        assert bad.returncode == 3, bad.stderr
        assert "failed" in bad.stdout
        assert "ValueError: boom" in bad.stdout

        ids = [_submit(workspace, store, "add", "--arg", f"a={n}") for n in range(5)]
        for task_id in ["early", *ids]:
            done = _until(workspace, store, task_id, lambda s: s["status"] == "succeeded")
            assert done["lease_owner"] in (None, "w-1")
        assert _status(workspace, store, ids[3])["arguments"] == {"args": [], "kwargs": {"a": 3}}

        later = _submit(workspace, store, "add", "--arg", "a=1", "--delay", "1h")
        assert "due at" in workspace.cli(*store, "status", later).stdout

        spin = _submit(workspace, store, "spin", "--task-id", "spin-1")
        nap = _submit(workspace, store, "nap", "--task-id", "nap-1")
        for task_id in (spin, nap):
            _until(workspace, store, task_id, lambda s: s["status"] == "running")
        [row] = _nodes(workspace, store)
        assert row["active"] == 2  # spin-1 and nap-1, running under its lease
        code, err = _sigterm(worker)
    finally:
        _reap(worker)
    assert code == 0, err
    assert "received SIGTERM: no new claims" in err
    assert "Traceback" not in err
    assert _status(workspace, store, "spin-1")["status"] == "stopped"
    assert _status(workspace, store, "nap-1")["status"] == "lost"
    assert _status(workspace, store, later)["status"] == "queued"  # never claimed
    [row] = _nodes(workspace, store)
    assert (row["live"], row["active"]) == (False, 0)  # it ended what it held
    assert "expired" in workspace.cli(*store, "nodes").stdout


def test_a_second_signal_stops_at_once(workspace: Workspace, store: list[str]) -> None:
    worker = _worker(workspace, store, "--grace", "60")
    try:
        _submit(workspace, store, "nap", "--task-id", "nap-2")
        _until(workspace, store, "nap-2", lambda s: s["status"] == "running")
        worker.send_signal(signal.SIGINT)
        time.sleep(0.5)
        code, err = _sigterm(worker, timeout=20)
    finally:
        _reap(worker)
    assert code == 1, err
    assert "received SIGTERM again: exiting at once (exit 1)" in err
    assert "Traceback" not in err
    # its task is still running in the store, under a lease that has not run out: reconcile
    # judges nothing yet, and says when to come back
    again = workspace.cli(*store, "reconcile")
    assert again.stdout.startswith("reconcile: marked 0 lost"), again.stdout
    assert "1 unfinished task(s) are held under a lease that has not run out" in again.stderr
    assert "run reconcile again after that" in again.stderr


def test_bad_input_gets_one_line(workspace: Workspace, store: list[str]) -> None:
    bad = workspace.cli(*store, "submit", "add", "--tasks", "worker_tasks", "--arg", "a=x")
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1
    assert "takes a as int" in bad.stderr
    assert "no task" in workspace.cli(*store, "status", "x").stderr  # nothing was written
    sqlite = store[0] == "--db"
    if sqlite:
        assert not workspace.db.exists()  # not even an empty store
    for args, said in (
        (["submit", "add", "--delay", "soon"], "not a duration"),
        (["submit", "add", "--at", "tomorrow"], "ISO-8601"),
        (["submit", "add", "--arg", "priority=3"], "not a task argument"),
        (["submit", "add", "--timeout", "5"], "add --wait"),
        (["submit", "add", "--delay", "99999999999d"], "past the year 9999"),
        (["submit", "add", "--at", "9999-12-31T23:59:59-05:00"], "outside the years 1 to 9999"),
        (["submit", "add", "--delay", "-5s"], "is negative"),
        (["submit", "add", "--priority", str(2**63)], "--priority 9223372036854775808 is out of"),
        (["submit", "add", f"--priority={-(2**63) - 1}"], "stores keep it as a 64-bit"),
        (["worker", "--tasks", "no_such_module"], "cannot import the task module"),
        (["worker", "--tasks", "worker_tasks", "--fleet-limit", "gpu"], "TAG=N"),
        (
            [
                "worker",
                "--tasks",
                "worker_tasks",
                "--fleet-limit",
                "gpu=1",
                "--fleet-limit",
                "gpu=2",
            ],
            "given twice",
        ),
        (["worker", "--tasks", "worker_tasks", "--grace", "-1"], ">= 0"),
    ):
        done = workspace.cli(*store, *args, timeout=30)
        assert done.returncode == 1, (args, done.stderr)
        assert said in done.stderr, (args, done.stderr)
        assert done.stderr.count("\n") == 1, (args, done.stderr)
    assert not (sqlite and workspace.db.exists())
    # the first write creates the store, and says so: a mistyped path is seen at once
    first = workspace.cli(*store, "submit", "add", "--tasks", "worker_tasks", "--arg", "a=1")
    assert first.returncode == 0, first.stderr
    assert "note: created the task database" in first.stderr
    again = workspace.cli(*store, "submit", "add", "--tasks", "worker_tasks", "--arg", "a=2")
    assert again.returncode == 0, again.stderr
    assert "created" not in again.stderr


def test_submit_passes_parameters_named_like_options_of_the_call(
    workspace: Workspace, store: list[str]
) -> None:
    """``submit`` enqueues one job whose keyword arguments travel as a dict: a task whose
    parameters are called ``name``, ``tags`` or ``delay`` gets them by ``--arg``. Only the
    job's own options (``task_id``, ``label``, ``priority``, ``bucket_key``) are refused."""
    (workspace.root / "named_tasks.py").write_text(
        textwrap.dedent(
            """
            from typing import Any

            from chongming_core import task


            @task
            def greet(ctx: Any, name: str, tags: list[str], delay: int = 0) -> str:
                return f"{name} {tags} {delay}"
            """
        ),
        encoding="utf-8",
    )
    done = workspace.cli(
        *store, "submit", "greet", "--tasks", "named_tasks", "--arg", "name=ann",
        "--arg", 'tags=["a", "b"]', "--arg", "delay=3", "--delay", "1h",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stored = _status(workspace, store, done.stdout.strip())
    assert stored["arguments"] == {
        "args": [],
        "kwargs": {"name": "ann", "tags": ["a", "b"], "delay": 3},
    }
    assert stored["status"] == "queued"
    refused = workspace.cli(
        *store, "submit", "greet", "--tasks", "named_tasks", "--arg", "priority=3"
    )
    assert refused.returncode == 1, refused.stderr
    assert "'priority' is an option of the run itself" in refused.stderr
    assert "--priority" in refused.stderr


def test_controls_of_a_task_no_worker_holds_yet_say_they_took_effect(
    workspace: Workspace, store: list[str]
) -> None:
    """A durable task that waits for a worker has no holder: the console applies a stop,
    a pause or a resume of it in the store at once, and says so (``confirmed``, nothing
    sent), instead of promising that a holder applies it at its next poll."""

    def control(*args: str) -> dict[str, Any]:
        done = workspace.cli(*store, *args, "--json")
        assert done.returncode == 0, done.stderr
        document: dict[str, Any] = json.loads(done.stdout)
        return document

    for task_id in ("later-1", "later-2"):
        done = workspace.cli(
            *store, "submit", "add", "--tasks", "worker_tasks", "--arg", "a=1",
            "--delay", "1h", "--task-id", task_id,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    stopped = control("stop", "later-1", "--reason", "not needed")
    assert (stopped["outcome"], stopped["command_sent"], stopped["holder"]) == (
        "confirmed",
        False,
        None,
    )
    assert _status(workspace, store, "later-1")["status"] == "stopped"
    said = workspace.cli(*store, "stop", "later-2")
    assert said.returncode == 0, said.stderr
    assert "no worker held it yet, so the stop was applied in the store" in said.stdout
    assert "next poll" not in said.stdout
    done = workspace.cli(
        *store, "submit", "add", "--tasks", "worker_tasks", "--arg", "a=1",
        "--delay", "1h", "--task-id", "later-3",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    paused = control("pause", "later-3")
    assert (paused["outcome"], paused["command_sent"]) == ("confirmed", False)
    assert _status(workspace, store, "later-3")["status"] == "paused"
    assert workspace.cli(*store, "resume", "later-3").returncode == 0
    said = workspace.cli(*store, "pause", "later-3")
    assert "no worker held it yet, so the pause was applied in the store" in said.stdout
    resumed = control("resume", "later-3")
    assert (resumed["outcome"], resumed["command_sent"]) == ("confirmed", False)
    assert _status(workspace, store, "later-3")["status"] == "queued"


def test_a_task_held_back_by_a_full_fleet_limit_says_so(
    workspace: Workspace, store: list[str]
) -> None:
    worker = _worker(workspace, store, "--fleet-limit", "gpu=1", "--grace", "5")
    try:
        first = _submit(workspace, store, "spin", "--tag", "gpu", "--task-id", "gpu-1")
        _until(workspace, store, first, lambda s: s["status"] == "running")
        second = _submit(workspace, store, "spin", "--tag", "gpu", "--task-id", "gpu-2")
        other = _submit(workspace, store, "spin", "--task-id", "free-1")
        _until(workspace, store, other, lambda s: s["status"] == "running")  # room is left
        assert _status(workspace, store, second)["status"] == "queued"
        status_text = workspace.cli(*store, "status", second).stdout
        assert re.search(
            r"^waiting: +fleet limit 'gpu' is full \(1 of 1 held\)$", status_text, re.M
        )
        listed = workspace.cli(*store, "ps")
        assert "waiting: gpu-2: fleet limit 'gpu' is full (1 of 1 held)" in listed.stderr
        stopped = workspace.cli(*store, "stop", first)
        assert stopped.returncode == 0, stopped.stderr
        # its slot is free: the waiting one is claimed, and nothing is said of it any more
        _until(workspace, store, second, lambda s: s["status"] == "running")
        assert "waiting:" not in workspace.cli(*store, "status", second).stdout
        code, err = _sigterm(worker)
    finally:
        _reap(worker)
    assert code == 0, err


def test_retry_queues_a_finished_durable_task_again_for_the_workers(
    workspace: Workspace, store: list[str]
) -> None:
    worker = _worker(workspace, store, "--grace", "5")
    try:
        failed = workspace.cli(*store, "submit", "boom", "--task-id", "boom-1", "--wait")
        assert failed.returncode == 3, failed.stderr
        again = workspace.cli(*store, "retry", "boom-1", "--reason", "once more")
        assert again.returncode == 0, again.stderr
        assert again.stdout.startswith("task 'boom-1' is queued again (attempt 2 of at most 2)")
        assert "a worker that serves 'boom' claims it" in again.stdout
        done = _until(
            workspace, store, "boom-1", lambda s: s["attempt"] == 2 and s["status"] == "failed"
        )
        assert done["lease_owner"] in (None, "w-1")
        history = json.loads(workspace.cli(*store, "history", "boom-1", "--json").stdout)
        retried = [t for t in history if t["trigger"] == "control:retry"]
        assert [(t["from_status"], t["to_status"], t["reason"]) for t in retried] == [
            ("failed", "queued", "once more")
        ]
        spin = _submit(workspace, store, "spin", "--task-id", "spin-r")
        _until(workspace, store, spin, lambda s: s["status"] == "running")
        busy = workspace.cli(*store, "retry", spin)
        assert busy.returncode == 1
        assert "is running, not finished" in busy.stderr
        assert busy.stderr.count("\n") == 1
        code, err = _sigterm(worker)
    finally:
        _reap(worker)
    assert code == 0, err


def test_a_paused_task_does_not_hold_the_shutdown_for_the_whole_grace(
    workspace: Workspace, store: list[str]
) -> None:
    worker = _worker(workspace, store, "--grace", "60")
    try:
        _submit(workspace, store, "spin", "--task-id", "spin-p")
        _until(workspace, store, "spin-p", lambda s: s["status"] == "running")
        workspace.cli(*store, "pause", "spin-p")
        _until(workspace, store, "spin-p", lambda s: s["status"] == "paused")
        began = time.monotonic()
        code, err = _sigterm(worker, timeout=30)  # the grace is 60 s: not waited for
    finally:
        _reap(worker)
    assert code == 0, err
    assert time.monotonic() - began < 30
    assert "stopping 1 task(s) not finished (1 paused, so it cannot finish): spin-p" in err
    assert _status(workspace, store, "spin-p")["status"] == "stopped"


RETRY_TASKS = textwrap.dedent(
    '''
    from typing import Any

    from chongming_core import FixedBackoff, RetryPolicy, task


    @task(retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(600)))
    def flaky(ctx: Any) -> str:
        """Fails its first attempt; its second, due ten minutes later, succeeds."""
        if ctx.attempt == 1:
            raise ConnectionError("first fails")
        return "second time"
    '''
)


def test_a_worker_hands_a_task_waiting_to_retry_back_to_the_queue_when_it_stops(
    workspace: Workspace, store: list[str]
) -> None:
    """Stopping a worker (a deploy) does not end a task between two attempts: it goes back
    to the queue, due at its retry time, and the worker does not wait its grace for it
    (D207)."""
    (workspace.root / "retry_tasks.py").write_text(RETRY_TASKS, encoding="utf-8")
    worker = workspace.spawn(
        *store, "--owner", "w-1", "worker", "--tasks", "retry_tasks", "--grace", "60"
    )
    try:
        assert worker.stderr is not None
        line = first_line(worker.stderr, timeout=30)
        if line.startswith("note: created the task database"):
            line = first_line(worker.stderr, timeout=30)
        assert line.startswith("worker w-1 serves flaky"), line
        done = workspace.cli(*store, "submit", "flaky", "--task-id", "flaky-1")
        assert done.returncode == 0, done.stderr
        waiting = _until(workspace, store, "flaky-1", lambda s: s["status"] == "retry_wait")
        began = time.monotonic()
        code, err = _sigterm(worker, timeout=30)  # the grace is 60 s: not waited for
    finally:
        _reap(worker)
    assert code == 0, err
    assert time.monotonic() - began < 30
    assert (
        "handing back 1 task(s) that run no attempt (waiting to retry, or to start) to the "
        "queue; any worker runs the next attempt when it is due: flaky-1"
    ) in err
    assert "the tasks it held ended: 1 queued again" in err
    assert "Traceback" not in err
    queued = _status(workspace, store, "flaky-1")
    assert (queued["status"], queued["lease_owner"], queued["attempt"]) == ("queued", None, 1)
    assert queued["run_at"] == waiting["retry_at"]


def test_a_worker_runs_each_body_in_a_child_process_with_executor_process(
    workspace: Workspace, store: list[str]
) -> None:
    worker = _worker(workspace, store, "--executor", "process", "--max-parallel", "2")
    try:
        crashed = _submit(workspace, store, "crash")
        ran = _submit(workspace, store, "whose")
        for task_id in (crashed, ran):
            _until(workspace, store, task_id, lambda s: s["status"] in ("failed", "succeeded"))
        failed = _status(workspace, store, crashed)
        assert (failed["status"], failed["failure"]["kind"]) == ("failed", "nonzero_exit")
        assert "exited with code 3" in failed["failure"]["message"]
        done = _status(workspace, store, ran)
        assert done["status"] == "succeeded"
        assert done["outcome"] != worker.pid  # not the worker's own process
        assert worker.poll() is None  # the crash took only its child
        code, err = _sigterm(worker)
    finally:
        _reap(worker)
    assert code == 0, err

"""A task run by one ``chongming-task run`` process, controlled from other processes and by
signals (guide §4.5): pause/resume/stop across processes, Ctrl-C and SIGTERM."""

from __future__ import annotations

import json
import os
import signal

import pytest
from cli_support import Workspace, finish, reaped, status_is

from chongming_core import FailureKind, TaskStatus

TASKS = ("--tasks", "cli_tasks")
S = TaskStatus


def test_pause_resume_and_stop_from_another_process(workspace: Workspace) -> None:
    db = str(workspace.db)
    runner = workspace.spawn("--db", db, "run", "spin", *TASKS, "--task-id", "w-1")
    with reaped(runner):
        workspace.wait_for("w-1", status_is(S.RUNNING), process=runner)

        pause = workspace.cli("--db", db, "pause", "w-1")
        assert pause.returncode == 0, pause.stderr
        assert "not confirmed" in pause.stdout
        assert f"chongming-task --db {db} status w-1" in pause.stdout  # pasteable (D80)
        paused = workspace.wait_for("w-1", status_is(S.PAUSED), process=runner)
        assert paused.paused_in_place

        status = workspace.cli("--db", db, "status", "w-1", "--json")
        assert json.loads(status.stdout)["status"] == "paused"

        resume = workspace.cli("--db", db, "resume", "w-1")
        assert resume.returncode == 0, resume.stderr
        workspace.wait_for("w-1", status_is(S.RUNNING), process=runner)

        running = workspace.cli("--db", db, "ps", "--status", "running", "--json")
        assert [t["task_id"] for t in json.loads(running.stdout)] == ["w-1"]

        stop = workspace.cli("--db", db, "stop", "w-1", "--reason", "发布窗口")
        assert stop.returncode == 0, stop.stderr
        assert "a command was written to the store" in stop.stdout
        code, out, err = finish(runner)
    assert code == 3, err
    assert "status:  stopped" in out
    assert "failure: cancelled" in out
    history = json.loads(workspace.cli("--db", db, "history", "w-1", "--json").stdout)
    triggers = [(t["to_status"], t["reason"]) for t in history]
    assert ("stopping", "发布窗口") in triggers
    assert [t["to_status"] for t in history][-1] == "stopped"
    assert [t["to_status"] for t in history].count("paused") == 1


def test_a_worker_that_winds_up_on_stop_succeeds_with_its_value(workspace: Workspace) -> None:
    db = str(workspace.db)
    runner = workspace.spawn("--db", db, "run", "graceful", *TASKS, "--task-id", "g-1", "--json")
    with reaped(runner):
        workspace.wait_for(
            "g-1", lambda s: s.status is S.RUNNING and s.progress is not None, process=runner
        )
        stop = workspace.cli("--db", db, "stop", "g-1")
        assert stop.returncode == 0, stop.stderr
        code, out, err = finish(runner)
    assert code == 0, err
    document = json.loads(out)
    assert document["status"] == "succeeded"
    assert isinstance(document["value"], int)
    assert document["value"] >= 1
    assert document["snapshot"]["attempts"][0]["status"] == "succeeded"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_task_cleanly(workspace: Workspace, signum: signal.Signals) -> None:
    db = str(workspace.db)
    runner = workspace.spawn("--db", db, "run", "spin", *TASKS, "--task-id", "sig-1")
    with reaped(runner):
        workspace.wait_for("sig-1", status_is(S.RUNNING), process=runner)
        runner.send_signal(signum)
        code, out, err = finish(runner)
    assert code == 3, err
    assert "status:  stopped" in out
    assert f"received {signum.name}" in err
    assert "Traceback" not in err
    final = workspace.snapshot("sig-1")
    assert final is not None
    assert final.status is S.STOPPED
    assert final.failure is not None
    assert signum.name in final.failure.message


def test_ctrl_c_to_the_process_group_stops_a_process_executor_task_cleanly(
    workspace: Workspace,
) -> None:
    """A terminal's Ctrl-C reaches the whole foreground process group: the child that
    carries the body must not take it (it raised KeyboardInterrupt in the body, and the task
    ended failed), so the console stops the task cleanly."""
    signum = signal.SIGINT
    db = str(workspace.db)
    runner = workspace.spawn(
        "--db", db, "run", "spin", *TASKS, "--task-id", "grp-1", "--executor", "process",
        own_group=True,
    )  # fmt: skip
    with reaped(runner):
        running = workspace.wait_for("grp-1", status_is(S.RUNNING), process=runner)
        assert running.pid is not None
        assert running.pid != runner.pid
        os.killpg(runner.pid, signum)
        code, out, err = finish(runner)
    assert code == 3, err
    assert "status:  stopped" in out
    assert "Traceback" not in err
    final = workspace.snapshot("grp-1")
    assert final is not None
    assert final.status is S.STOPPED
    assert final.failure is not None
    assert final.failure.kind is FailureKind.CANCELLED
    assert signum.name in final.failure.message


def test_progress_is_plain_and_sparse_when_not_a_terminal(workspace: Workspace) -> None:
    db = str(workspace.db)
    runner = workspace.spawn("--db", db, "run", "spin", *TASKS, "--task-id", "p-1")
    with reaped(runner):
        workspace.wait_for(
            "p-1", lambda s: s.progress is not None and s.progress.done >= 5, process=runner
        )
        runner.send_signal(signal.SIGINT)
        code, _, err = finish(runner)
    assert code == 3
    lines = [line for line in err.splitlines() if line.startswith("progress:")]
    assert 1 <= len(lines) <= 2, err  # at most one line every 5 s
    assert "\r" not in err
    assert "\x1b[" not in err

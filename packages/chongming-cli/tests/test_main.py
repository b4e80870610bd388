"""``main()`` in-process: usage errors exit 1, help exits 0, run exits by outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chongming_cli import EXIT_FAILED, EXIT_OK, EXIT_TASK_NOT_SUCCEEDED, main


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in (
        "CHONGMING_DB",
        "CHONGMING_DSN",
        "CHONGMING_OWNED_BUCKETS",
        "CHONGMING_OWNER",
        "CHONGMING_NUM_BUCKETS",
        "CHONGMING_DEBUG",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == EXIT_OK
    assert "CHONGMING_OWNED_BUCKETS" in capsys.readouterr().out


def test_usage_errors_exit_1_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ps", "--bogus"]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("chongming-task: error: unrecognized arguments: --bogus")


@pytest.mark.parametrize("command", ["ps", "nodes", "reconcile", "stats"])
def test_an_unknown_option_of_a_command_points_to_the_commands_help(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main([command, "--bogus"]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err == (
        f"chongming-task: error: unrecognized arguments: --bogus (see: chongming-task "
        f"{command} --help)\n"
    )


def test_a_value_that_begins_with_a_dash_is_told_how_to_be_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["submit", "add", "--delay", "-5s"]) == EXIT_FAILED  # its own problem first
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "argument --delay: '-5s' is negative; a duration counts forward from now" in err
    assert main(["stop", "t1", "--reason", "-urgent"]) == EXIT_FAILED  # a value it takes
    err = capsys.readouterr().err
    assert "'-urgent' was taken for an option; a value that begins with '-' is written " in err
    assert "--reason=-urgent" in err
    assert main(["submit", "add", "--delay"]) == EXIT_FAILED  # really missing: as argparse says
    assert "expected one argument (see: chongming-task submit --help)" in capsys.readouterr().err


def test_global_options_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ps", "--db", "none.db"]) == EXIT_FAILED
    assert "no task database at 'none.db'" in capsys.readouterr().err


def test_run_exit_codes_follow_the_outcome(capsys: pytest.CaptureFixture[str]) -> None:
    tasks = ["--tasks", "chongming_cli.demo_tasks"]
    assert main(["--db", "t.db", "run", "transform", *tasks, "--arg", "factor=3", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["value"] == 3
    assert main(["--db", "t.db", "run", "fail", *tasks]) == EXIT_TASK_NOT_SUCCEEDED
    assert "ConnectionError: upstream unavailable" in capsys.readouterr().out
    assert main(["--db", "t.db", "--owned-buckets", "0", "run", "fail", *tasks]) == EXIT_FAILED
    assert "bucket_key is required" in capsys.readouterr().err


def test_ps_limit_lists_the_most_recent_tasks_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    tasks = ["--tasks", "chongming_cli.demo_tasks"]
    for number in range(4):
        assert main(["--db", "t.db", "run", "transform", *tasks, "--task-id", f"t{number}"]) == 0
    capsys.readouterr()
    assert main(["--db", "t.db", "ps", "--limit", "2", "--json"]) == EXIT_OK
    listed = [task["task_id"] for task in json.loads(capsys.readouterr().out)]
    assert listed == ["t2", "t3"]  # not the first two ever made
    assert main(["--db", "t.db", "ps", "--json"]) == EXIT_OK
    assert [t["task_id"] for t in json.loads(capsys.readouterr().out)] == ["t0", "t1", "t2", "t3"]


def test_retry_refuses_what_no_worker_can_take_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tasks = ["--tasks", "chongming_cli.demo_tasks"]
    assert main(["--db", "t.db", "run", "fail", *tasks, "--task-id", "here-1"]) == 3
    capsys.readouterr()
    for argv, said in (
        (["retry", "here-1"], "task 'here-1' was not enqueued for workers (submit)"),
        (["retry", "ghost"], "no task 'ghost'"),
    ):
        assert main(["--db", "t.db", *argv]) == EXIT_FAILED
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert said in err, err
    assert main(["--db", "t.db", "submit", "fail", "--task-id", "later", "--delay", "1h"]) == 0
    capsys.readouterr()
    assert main(["--db", "t.db", "retry", "later"]) == EXIT_FAILED
    assert "task 'later' is queued, not finished" in capsys.readouterr().err
    assert main(["--db", "t.db", "stop", "later"]) == 0  # stopped in the store: nobody held it
    capsys.readouterr()
    assert main(["--db", "t.db", "retry", "later", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["status"], document["lease_owner"], document["run_at"]) == (
        "queued",
        None,
        None,
    )


def test_retry_of_a_lost_task_warns_that_its_last_attempt_may_have_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from chongming_core import FakeClock, StateMachine
    from chongming_store_sqlite import SqliteTaskStore

    with SqliteTaskStore("t.db") as store:
        machine = StateMachine.create("gone-1", "transform", clock=FakeClock())
        machine = StateMachine(machine.snapshot.evolve(durable=True), clock=FakeClock())
        machine.mark_queued(actor="web")
        machine.mark_starting(executor="thread", actor="w-1")
        machine.mark_running(actor="w-1")
        machine.mark_lost(actor="reconcile", reason="lease of w-1 expired")
        store.create(machine.snapshot, machine.transitions)
    assert main(["--db", "t.db", "retry", "gone-1"]) == EXIT_OK
    captured = capsys.readouterr()
    assert "ended lost: its last attempt may have run to its end" in captured.err
    assert captured.out.startswith("task 'gone-1' is queued again (attempt 2 of at most 2)")

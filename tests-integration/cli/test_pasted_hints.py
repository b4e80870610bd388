"""Every command the console suggests works when pasted into another shell (D80).

The suggestions are taken from the real output and run with bash, in a shell that
has none of the store options of the command that printed them: a hint that lost
``--db`` (or ``--dsn``) fails there, or reads another store.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from cli_support import Workspace, finish, first_line, hints, paste, reaped, status_is

from chongming_core import StateMachine, TaskStatus
from chongming_store_postgres import PostgresTaskStore
from chongming_store_sqlite import SqliteTaskStore

TASKS = ("--tasks", "cli_tasks")
S = TaskStatus


def _pasted(workspace: Workspace, text: str, env: dict[str, str], count: int = 1) -> list[str]:
    """Paste each of the `count` hints of `text`; returns their output (stdout + stderr)."""
    found = hints(text)
    assert len(found) == count, f"expected {count} suggestion(s) in:\n{text}"
    outputs = []
    for hint in found:
        done = paste(workspace, hint, env)
        assert done.returncode == 0, f"{hint!r} failed when pasted:\n{done.stdout}{done.stderr}"
        outputs.append(done.stdout + done.stderr)
    return outputs


def _controls_of_a_running_task(
    workspace: Workspace,
    cli: Callable[..., subprocess.CompletedProcess[str]],
    runner: subprocess.Popen[str],
    env: dict[str, str],
    wait: Callable[[str, TaskStatus], object],
) -> None:
    """`runner` runs task h-1; pause, pause again, resume, an unknown id, stop: each hint
    pasted in `env`."""
    with reaped(runner):
        note = first_line(runner.stderr) if runner.stderr else ""
        wait("h-1", S.RUNNING)
        pause = cli("pause", "h-1")
        assert pause.returncode == 0, pause.stderr
        (shown,) = _pasted(workspace, pause.stdout, env)
        assert re.search(r"^task: +h-1$", shown, re.MULTILINE), shown
        wait("h-1", S.PAUSED)

        again = cli("pause", "h-1", "--json")
        assert json.loads(again.stdout)["outcome"] == "unchanged"
        again = cli("pause", "h-1")
        assert "already paused; no other pause was sent" in again.stdout
        (resumed,) = _pasted(workspace, again.stdout, env)  # resume it with: ...
        assert "resume requested" in resumed
        _pasted(workspace, resumed, env)  # check it with: ... status h-1
        wait("h-1", S.RUNNING)

        ghost = cli("status", "ghost")
        assert ghost.returncode == 1
        (listed,) = _pasted(workspace, ghost.stderr, env)
        assert "h-1" in listed

        (stopped,) = _pasted(workspace, note, env)  # the run's "stop it from another terminal"
        assert "stop requested for task 'h-1'" in stopped
        (followed,) = _pasted(workspace, stopped, env)
        assert re.search(r"^task: +h-1$", followed, re.MULTILINE), followed
        code, _, err = finish(runner)
    assert code == 3, err
    history = json.loads(cli("history", "h-1", "--json").stdout)
    assert [t["to_status"] for t in history].count("pausing") == 1  # the second pause sent none


@pytest.mark.parametrize("given", ["--db", "CHONGMING_DB"])
def test_hints_on_sqlite_carry_the_database(workspace: Workspace, given: str) -> None:
    clean = dict(workspace.env)  # the shell the hints are pasted into: no CHONGMING_DB
    if given == "--db":
        store, env = ["--db", "tasks.db"], clean
    else:
        store, env = [], dict(clean, CHONGMING_DB=str(workspace.db))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return workspace.cli(*store, *args, env=env)

    def wait(task_id: str, status: TaskStatus) -> object:
        return workspace.wait_for(task_id, status_is(status))

    runner = workspace.spawn(*store, "run", "spin", *TASKS, "--task-id", "h-1", env=env)
    _controls_of_a_running_task(workspace, cli, runner, clean, wait)

    if given == "--db":
        missing = workspace.cli("--db", "x.db", "ps", env=clean)
    else:
        missing = workspace.cli("ps", env=dict(clean, CHONGMING_DB=str(workspace.root / "x.db")))
    (create,) = hints(missing.stderr)
    assert create.endswith(" run TASK --tasks MODULE")
    made = paste(workspace, create.replace("TASK", "echo").replace("MODULE", "cli_tasks"), clean)
    assert made.returncode == 0, made.stderr
    assert (workspace.root / "x.db").exists()


def test_hints_about_an_expired_lease_carry_the_database(workspace: Workspace) -> None:
    m = StateMachine.create("orphan", "worker")
    m.mark_queued(actor="node-k")
    m.mark_starting(executor="thread", actor="node-k")
    m.mark_running(actor="node-k")
    long_ago = datetime(2020, 1, 1, tzinfo=UTC)
    with SqliteTaskStore(workspace.db) as store:
        store.create(m.snapshot.evolve(lease_owner="node-k", lease_until=long_ago), m.transitions)
    clean = dict(workspace.env)
    env = dict(clean, CHONGMING_DB=str(workspace.db))
    listed = workspace.cli("ps", env=env)
    (dry,) = _pasted(workspace, listed.stderr, clean)  # see: ... reconcile --dry-run
    assert "would mark 1 lost" in dry
    status = workspace.cli("status", "orphan", env=env)
    _pasted(workspace, status.stdout, clean)
    stop = workspace.cli("stop", "orphan", env=env)
    reconciled, followed = _pasted(workspace, stop.stdout, clean, count=2)
    assert "marked 1 lost" in reconciled
    assert re.search(r"^status: +lost$", followed, re.MULTILINE), followed


@pytest.mark.postgres
@pytest.mark.parametrize("password", [None, "s3cret-pw"], ids=["no-password", "password"])
def test_hints_on_postgres_carry_the_dsn_but_never_its_password(
    workspace: Workspace, pg_url: str, password: str | None
) -> None:
    dsn = pg_url if password is None else pg_url.replace("postgres@", f"postgres:{password}@")
    assert dsn != pg_url or password is None
    clean = dict(workspace.env)
    # with a password, the hints say --dsn "$CHONGMING_DSN": the shell they are pasted into
    # holds it there (and only there)
    env = clean if password is None else dict(clean, CHONGMING_DSN=dsn)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = workspace.cli("--dsn", dsn, *args)
        if password is not None:
            assert password not in done.stdout + done.stderr
        return done

    made = cli("run", "add", *TASKS, "--arg", "a=1", "--task-id", "seed")
    assert made.returncode == 0, made.stderr
    expected = '--dsn "$CHONGMING_DSN"' if password else f"--dsn {dsn}"
    assert expected in made.stderr

    def wait(task_id: str, status: TaskStatus) -> object:
        with PostgresTaskStore(dsn, min_size=0, max_size=1) as store:
            deadline = time.monotonic() + 20
            while (found := store.get(task_id)) is None or found.status is not status:
                assert time.monotonic() < deadline, f"{task_id} never became {status.value}"
                time.sleep(0.02)
        return found

    runner = workspace.spawn("--dsn", dsn, "run", "spin", *TASKS, "--task-id", "h-1")
    _controls_of_a_running_task(workspace, cli, runner, env, wait)

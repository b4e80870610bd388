"""Every command and every exit code of ``chongming-task``, through a real subprocess."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from cli_support import Workspace, make_workspace

TASKS = ("--tasks", "cli_tasks")


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    assert "Traceback" not in stderr
    assert lines[0].startswith("chongming-task: error: ")
    return lines[0]


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """A store holding a succeeded, a failed and a bucketed task."""
    ws = make_workspace(tmp_path_factory.mktemp("cli") / "ws")
    db = str(ws.db)
    ok = ws.cli(
        "--db",
        db,
        "run",
        "add",
        *TASKS,
        "--arg",
        "a=2",
        "--arg",
        "b=3",
        "--task-id",
        "ok-1",
        "--label",
        "加法",
        "--tag",
        "demo",
    )
    assert ok.returncode == 0, ok.stderr
    bad = ws.cli("--db", db, "run", "boom", *TASKS, "--task-id", "bad-1", "--retries", "1")
    assert bad.returncode == 3, bad.stderr
    keyed = ws.cli(
        "--db",
        db,
        "--num-buckets",
        "8",
        "run",
        "echo",
        *TASKS,
        "--task-id",
        "keyed-1",
        "--bucket-key",
        "tenant-a",
        "--arg",
        "value=x",
    )
    assert keyed.returncode == 0, keyed.stderr
    return ws


# ------------------------------------------------------------------ help and usage
def test_help_documents_options_environment_and_exit_codes(shared: Workspace) -> None:
    done = shared.cli("--help")
    assert done.returncode == 0
    for text in (
        "CHONGMING_DB",
        "CHONGMING_DSN",
        "CHONGMING_NUM_BUCKETS",
        "CHONGMING_OWNED_BUCKETS",
        "CHONGMING_OWNER",
        "./chongming.db",
        "exit codes",
        "dashboard",
        "reconcile",
        "prune",
    ):
        assert text in done.stdout, text
    run_help = shared.cli("run", "--help")
    assert run_help.returncode == 0
    assert "parsed as JSON" in run_help.stdout
    assert "--arg flag=true -> True" in run_help.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param([], "required: COMMAND", id="no-command"),
        pytest.param(["run", "add"], "--tasks", id="missing-tasks"),
        pytest.param(["ps", "--limit", "zero"], "--limit", id="bad-limit"),
        pytest.param(["frobnicate"], "invalid choice", id="unknown-command"),
    ],
)
def test_usage_errors_exit_1_with_one_line(
    shared: Workspace, args: list[str], expected: str
) -> None:
    done = shared.cli(*args)
    assert done.returncode == 1
    assert expected in _one_error_line(done.stderr)


# ------------------------------------------------------------------ tasks
def test_tasks_lists_the_registered_definitions(shared: Workspace) -> None:
    table = shared.cli("tasks", *TASKS)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == [
        "NAME",
        "TAGS",
        "ATTEMPTS",
        "TIMEOUT",
        "DESCRIPTION",
    ]
    assert "Add two numbers." in table.stdout
    document = json.loads(shared.cli("tasks", *TASKS, "--json").stdout)
    assert [d["name"] for d in document] == ["add", "boom", "echo", "graceful", "spin"]
    assert document[0]["tags"] == ["math"]
    assert not shared.db.exists(), "listing definitions must not create a store"


def test_a_module_register_function_decides_what_may_run(shared: Workspace) -> None:
    (shared.root / "only_add.py").write_text(
        "from cli_tasks import add, boom\n\n"
        "def register(controller):\n    controller.register('sum', add)\n",
        encoding="utf-8",
    )
    listed = json.loads(shared.cli("tasks", "--tasks", "only_add", "--json").stdout)
    assert [d["name"] for d in listed] == ["sum"]
    refused = shared.cli("--db", str(shared.root / "r.db"), "run", "boom", "--tasks", "only_add")
    assert refused.returncode == 1
    assert "unknown task name 'boom'" in _one_error_line(refused.stderr)


# ------------------------------------------------------------------ run
def test_run_parses_args_as_json_else_text_and_prints_the_value(workspace: Workspace) -> None:
    done = workspace.cli(
        "--db",
        str(workspace.db),
        "run",
        "echo",
        *TASKS,
        "--json",
        "--arg",
        "value=3",
        "--arg",
        "flag=true",
        "--arg",
        "url=kafka://x",
        "--arg",
        'items=["a", 1]',
        "--arg",
        "text=not json",
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["ok"] is True
    assert document["status"] == "succeeded"
    assert document["value"] == {
        "value": 3,
        "flag": True,
        "url": "kafka://x",
        "items": ["a", 1],
        "text": "not json",
    }
    assert document["snapshot"]["task_id"] == document["task_id"]
    human = workspace.cli(
        "--db",
        str(workspace.db),
        "run",
        "add",
        *TASKS,
        "--arg",
        "a=40",
        "--arg",
        "b=2",
        "--task-id",
        "answer",
    )
    assert human.returncode == 0
    assert "status:  succeeded" in human.stdout
    assert "value:   42" in human.stdout
    assert "--db" in human.stderr
    assert "stop answer" in human.stderr


def test_run_passes_a_parameter_called_name(workspace: Workspace) -> None:
    """The task's name is positional only in `Controller.submit`, so ``--arg name=...``
    reaches a task parameter called ``name`` instead of being refused."""
    (workspace.root / "named_run.py").write_text(
        textwrap.dedent(
            """
            from typing import Any

            from chongming_core import task


            @task
            def hello(ctx: Any, name: str) -> str:
                return f"hello {name}"
            """
        ),
        encoding="utf-8",
    )
    done = workspace.cli(
        "--db", str(workspace.db), "run", "hello", "--tasks", "named_run", "--json",
        "--arg", "name=ann",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == "hello ann"


def test_run_of_a_failing_task_exits_3_with_kind_and_message(workspace: Workspace) -> None:
    done = workspace.cli(
        "--db",
        str(workspace.db),
        "run",
        "boom",
        *TASKS,
        "--arg",
        "message=disk full",
        "--retries",
        "1",
    )
    assert done.returncode == 3
    assert "status:  failed" in done.stdout
    assert "attempt: 2/2" in done.stdout
    assert "failure: exception: ValueError: disk full" in done.stdout


_HOSTILE_TASKS = """
from typing import Any

from chongming_core import task


@task
def huge(ctx: Any) -> int:
    return 10**5000


@task
def pair(ctx: Any) -> tuple[int, str]:
    return (1, "x")


@task
def endless(ctx: Any) -> None:
    ctx.progress(1, total=float("inf"))
"""


def test_run_of_a_result_no_store_can_keep_exits_3_and_the_store_agrees(
    workspace: Workspace,
) -> None:
    """It printed "unexpected error: ValueError" and exited 1, and ``status`` said running."""
    (workspace.root / "hostile_tasks.py").write_text(_HOSTILE_TASKS, encoding="utf-8")
    db = str(workspace.db)
    tasks = ("--tasks", "hostile_tasks")
    huge = workspace.cli("--db", db, "run", "huge", *tasks, "--task-id", "huge-1")
    assert huge.returncode == 3, huge.stderr
    assert "unexpected error" not in huge.stderr
    assert "status:  failed" in huge.stdout
    assert (
        "failure: result_invalid: task 'huge-1' returned an int that cannot be stored"
        in huge.stdout
    )
    assert "an int of 5001 digits" in huge.stdout
    stored = json.loads(workspace.cli("--db", db, "status", "huge-1", "--json").stdout)
    assert (stored["status"], stored["failure"]["kind"]) == ("failed", "result_invalid")
    endless = workspace.cli("--db", db, "run", "endless", *tasks, "--task-id", "endless-1")
    assert endless.returncode == 3, endless.stderr
    assert "progress total must be a finite number, got inf" in endless.stdout
    assert (
        json.loads(workspace.cli("--db", db, "status", "endless-1", "--json").stdout)["status"]
        == "failed"
    )
    pair = workspace.cli("--db", db, "run", "pair", *tasks, "--json", "--task-id", "pair-1")
    assert pair.returncode == 0, pair.stderr
    assert json.loads(pair.stdout)["value"] == [1, "x"]
    assert json.loads(workspace.cli("--db", db, "status", "pair-1", "--json").stdout)[
        "outcome"
    ] == [1, "x"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["run", "nope", *TASKS], "unknown task name 'nope'", id="unknown-name"),
        pytest.param(
            ["run", "nope", *TASKS],
            "defines no task of that name (its tasks: ",
            id="unknown-name-lists-the-modules-tasks",
        ),
        pytest.param(
            ["run", "add", *TASKS, "--arg", "aa=1"],
            "task 'add' has no parameter 'aa'; its parameters are (",
            id="misspelt-argument-named",
        ),
        pytest.param(
            ["run", "add", "--tasks", "no_such_mod"],
            "no module named 'no_such_mod'",
            id="missing-module",
        ),
        pytest.param(
            ["run", "add", "--tasks", "tasks.py"], "--tasks takes a module name", id="file-path"
        ),
        pytest.param(["run", "add", *TASKS, "--arg", "a"], "has no '='", id="arg-without-equals"),
        pytest.param(
            ["run", "add", *TASKS, "--arg", "task_id=3"],
            "option of the run itself",
            id="reserved-arg",
        ),
        pytest.param(
            ["run", "add", *TASKS], "cannot take these arguments", id="missing-task-argument"
        ),
        pytest.param(
            ["--owned-buckets", "0-3", "run", "add", *TASKS, "--arg", "a=1"],
            "bucket_key is required on this node",
            id="owned-buckets-without-key",
        ),
        pytest.param(["--owned-buckets", "0-x", "ps"], "bucket spec", id="bad-bucket-spec"),
        pytest.param(["--num-buckets", "many", "ps"], "--num-buckets", id="bad-num-buckets"),
        pytest.param(
            ["--db", "a.db", "--dsn", "sqlite:///b.db", "ps"], "only one", id="db-and-dsn"
        ),
        pytest.param(
            ["--dsn", "nosuch://x", "ps"],
            "no store backend handles nosuch://",
            id="unknown-backend",
        ),
        # bytes that are not UTF-8 (here Latin-1 'é'): no store keeps them, so the task
        # would run without ever being recorded
        pytest.param(
            ["run", "add", *TASKS, "--arg", "a=1", "--label", "caf\udce9"],
            "--label $'caf\\xe9' holds byte 0xe9 at position 3, which is not UTF-8",
            id="label-not-utf8",
        ),
        pytest.param(
            ["run", "add", *TASKS, "--arg", "a=1", "--tag", "caf\udce9"],
            "which is not UTF-8",
            id="tag-not-utf8",
        ),
        pytest.param(
            ["run", "add", *TASKS, "--arg", "a=1", "--priority", str(10**30)],
            "64-bit integer",
            id="priority-out-of-range",
        ),
    ],
)
def test_bad_input_exits_1_with_one_clear_line(
    workspace: Workspace, args: list[str], expected: str
) -> None:
    (workspace.root / "tasks.py").write_text("", encoding="utf-8")
    names_store = "--db" in args or "--dsn" in args
    done = workspace.cli(*args) if names_store else workspace.cli("--db", str(workspace.db), *args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert expected in _one_error_line(done.stderr)


def test_a_task_in_an_owned_bucket_runs(workspace: Workspace) -> None:
    # with 4 buckets the key lands in one of them; owning all four is "not partial"
    done = workspace.cli(
        "--db",
        str(workspace.db),
        "--num-buckets",
        "4",
        "--owned-buckets",
        "0-3",
        "run",
        "add",
        *TASKS,
        "--arg",
        "a=1",
        "--bucket-key",
        "k",
    )
    assert done.returncode == 0, done.stderr


def test_debug_shows_the_traceback(shared: Workspace) -> None:
    done = shared.cli(
        "--debug", "--db", str(shared.root / "x.db"), "run", "add", "--tasks", "no_such_mod"
    )
    assert done.returncode == 1
    assert "Traceback" in done.stderr
    assert done.stderr.rstrip().splitlines()[-1].startswith("chongming-task: error: ")


# ------------------------------------------------------------------ queries
def test_ps_lists_and_filters(populated: Workspace) -> None:
    db = str(populated.db)
    table = populated.cli("--db", db, "ps")
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["TASK_ID", "NAME", "STATUS"]
    assert [line.split()[0] for line in lines[2:]] == ["ok-1", "bad-1", "keyed-1"]
    assert "加法" in table.stdout
    failed = json.loads(populated.cli("--db", db, "ps", "--status", "failed", "--json").stdout)
    assert [t["task_id"] for t in failed] == ["bad-1"]
    assert failed[0]["failure"]["kind"] == "exception"
    several = populated.cli(
        "--db", db, "ps", "--status", "failed,succeeded", "--tag", "demo", "--json"
    )
    assert [t["task_id"] for t in json.loads(several.stdout)] == ["ok-1"]
    named = json.loads(populated.cli("--db", db, "ps", "--name-prefix", "ec", "--json").stdout)
    assert [t["task_id"] for t in named] == ["keyed-1"]
    bucket = named[0]["bucket"]
    in_bucket = populated.cli("--db", db, "ps", "--bucket", str(bucket), "--limit", "1", "--json")
    assert [t["task_id"] for t in json.loads(in_bucket.stdout)] == ["keyed-1"]
    bad = populated.cli("--db", db, "ps", "--status", "sleeping")
    assert bad.returncode == 1
    assert "not a status" in _one_error_line(bad.stderr)


def test_status_and_history(populated: Workspace) -> None:
    db = str(populated.db)
    human = populated.cli("--db", db, "status", "ok-1")
    assert human.returncode == 0
    fields = {
        k: v.strip() for k, _, v in (line.partition(":") for line in human.stdout.splitlines())
    }
    assert (fields["label"], fields["value"]) == ("加法", "5")
    assert fields["description"] == "Add two numbers."  # the registration's docstring
    document = json.loads(populated.cli("--db", db, "status", "bad-1", "--json").stdout)
    assert document["status"] == "failed"
    assert document["attempt"] == 2
    history = populated.cli("--db", db, "history", "ok-1")
    assert history.returncode == 0
    assert history.stdout.splitlines()[0].split() == [
        "VERSION",
        "AT",
        "FROM",
        "TO",
        "TRIGGER",
        "ACTOR",
        "REASON",
    ]
    transitions = json.loads(populated.cli("--db", db, "history", "ok-1", "--json").stdout)
    assert [t["to_status"] for t in transitions] == ["queued", "starting", "running", "succeeded"]
    assert [t["status_version"] for t in transitions] == [1, 2, 3, 4]


def test_stats_and_buckets(populated: Workspace) -> None:
    db = str(populated.db)
    stats = json.loads(populated.cli("--db", db, "stats", "--json").stdout)
    assert stats["succeeded"] == 2
    assert stats["failed"] == 1
    assert stats["total"] == 3
    assert stats["unfinished"] == 0
    human = populated.cli("--db", db, "stats")
    assert "succeeded   2" in human.stdout
    buckets = json.loads(
        populated.cli("--db", db, "--num-buckets", "8", "buckets", "--json").stdout
    )
    assert buckets["num_buckets"] == 8
    assert [(b["tasks"], b["owned"]) for b in buckets["buckets"]] == [(1, True)]
    owned_elsewhere = populated.cli(
        "--db",
        db,
        "--num-buckets",
        "8",
        "--owned-buckets",
        ",".join(str(b) for b in range(8) if b != buckets["buckets"][0]["bucket"]),
        "buckets",
    )
    assert owned_elsewhere.returncode == 0
    assert owned_elsewhere.stdout.splitlines()[2].split()[1:] == ["1", "no"]


@pytest.mark.parametrize("command", ["status", "history", "stop", "pause", "resume"])
def test_unknown_task_id_exits_1(populated: Workspace, command: str) -> None:
    done = populated.cli("--db", str(populated.db), command, "ghost")
    assert done.returncode == 1
    assert "no task 'ghost'" in _one_error_line(done.stderr)


@pytest.mark.parametrize("command", ["stop", "pause", "resume"])
def test_controls_of_a_finished_task_exit_1(populated: Workspace, command: str) -> None:
    done = populated.cli("--db", str(populated.db), command, "ok-1")
    assert done.returncode == 1
    assert "already ended succeeded" in _one_error_line(done.stderr)


def test_a_missing_database_is_reported_not_created(shared: Workspace) -> None:
    missing = shared.root / "typo.db"
    done = shared.cli("--db", str(missing), "ps")
    assert done.returncode == 1
    assert "no task database" in _one_error_line(done.stderr)
    assert not missing.exists()


def test_environment_chooses_the_store(populated: Workspace, tmp_path: Path) -> None:
    env = dict(populated.env, CHONGMING_DB=str(populated.db))
    from_env = populated.cli("ps", "--json", env=env, cwd=tmp_path)
    assert len(json.loads(from_env.stdout)) == 3
    default = populated.cli("ps", cwd=populated.db.parent, env=dict(populated.env))
    assert default.returncode == 1
    assert "chongming.db" in default.stderr  # R21: ./chongming.db by default
    (tmp_path / "chongming.db").write_bytes(populated.db.read_bytes())
    local = populated.cli("ps", "--json", cwd=tmp_path, env=dict(populated.env))
    assert local.returncode == 0, local.stderr


# ------------------------------------------------------------------ housekeeping
def test_reconcile_and_prune(populated: Workspace, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    copy.write_bytes(populated.db.read_bytes())
    dry = populated.cli("--db", str(copy), "reconcile", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout) == {"dry_run": True, "lost": [], "adoptable": [], "skipped": []}
    human = populated.cli("--db", str(copy), "reconcile")
    assert human.stdout.startswith("reconcile: marked 0 lost, 0 adoptable, 0 skipped")
    pruned = populated.cli("--db", str(copy), "prune", "--keep-terminal", "1")
    assert pruned.returncode == 0
    assert pruned.stdout.startswith("pruned 2 finished task(s)")
    left = json.loads(populated.cli("--db", str(copy), "ps", "--json").stdout)
    assert [t["task_id"] for t in left] == ["keyed-1"]


# ------------------------------------------------------------------ dashboard
@pytest.mark.parametrize(
    ("module", "code", "expected"),
    [
        pytest.param(
            "raise ImportError('no textual')",
            1,
            'pip install "chongming-task[tui]"',
            id="not-installed",
        ),
        pytest.param("", 1, 'pip install -U "chongming-task[tui]"', id="no-dashboard"),
        pytest.param(
            "def run_dashboard(*, controller, store_label, reconcile_command):\n"
            "    print('dashboard on', store_label, controller.stats().total)\n"
            "    print(reconcile_command)\n"
            "    return 0\n",
            0,
            "dashboard on",
            id="dashboard",
        ),
    ],
)
def test_dashboard_needs_the_tui_extra(
    populated: Workspace, tmp_path: Path, module: str, code: int, expected: str
) -> None:
    fake = tmp_path / "fake" / "chongming_tui"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(module, encoding="utf-8")
    env = make_workspace(tmp_path / "ws", extra_path=[fake.parent]).env
    done = populated.cli("--db", str(populated.db), "dashboard", env=env)
    assert done.returncode == code, done.stderr
    if code:
        assert expected in _one_error_line(done.stderr)
    else:
        # the reconcile view's command reaches this store when pasted
        assert done.stdout.splitlines() == [
            f"dashboard on {populated.db} 3",
            f"chongming-task --db {populated.db} reconcile",
        ]


# ------------------------------------------------------------------ secrets
@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://app:Sup3rSecret@127.0.0.1:1/tasks",
        # not percent-encoded: a URL parser cuts the password at "/" or "@"
        "postgresql://app:ab/Sup3rSecret@127.0.0.1:1/tasks",
        "postgresql://app:Sup3r@Secret@127.0.0.1:1/tasks",
        "postgres://app:Sup3rSecret@[::1:1/tasks",
    ],
)
def test_a_dsn_password_never_appears(shared: Workspace, dsn: str) -> None:
    for args in (["--dsn", dsn, "ps"], ["--debug", "--dsn", dsn, "status", "x"]):
        done = shared.cli(*args)
        assert done.returncode == 1
        for part in ("Sup3r", "Secret", "ab/"):
            assert part not in done.stdout + done.stderr
        assert "unexpected error" not in done.stderr
        assert "****" in done.stderr or "127.0.0.1" in done.stderr
    env = dict(shared.env, CHONGMING_DSN=dsn)
    done = shared.cli("ps", env=env)
    assert done.returncode == 1
    assert "Secret" not in done.stderr
    _one_error_line(done.stderr)


# ------------------------------------------------------------------ hostile stored text
def test_stored_text_never_drives_the_terminal(workspace: Workspace) -> None:
    """Labels, ids and reasons come from whoever submitted the task: ps, status and history
    show their control characters escaped, so none reaches the terminal as it is."""
    hostile = "evil\x1b]0;pwned\x07\x1b[2J"
    db = str(workspace.db)
    refused = workspace.cli(
        "--db", db, "run", "add", *TASKS, "--arg", "a=1", "--task-id", "h\x1b[31m1",
    )  # fmt: skip
    assert refused.returncode == 1  # the console gives no such id (D196)
    assert "holds the control character '\\x1b'" in refused.stderr
    assert "\x1b" not in refused.stderr
    # another producer may: written through the library
    from chongming_runtime import Controller
    from chongming_store_sqlite import SqliteTaskStore

    with Controller(store=SqliteTaskStore(db)) as producer:
        producer.register("add", lambda ctx, a: a)
        run = producer.submit("add", 1, task_id="h\x1b[31m1", label=hostile)
        assert run.wait(30).ok
    for args in (["ps"], ["status", "h\x1b[31m1"], ["history", "h\x1b[31m1"]):
        shown = workspace.cli("--db", db, *args)
        assert shown.returncode == 0, shown.stderr
        assert "\x1b" not in shown.stdout
        assert "\x07" not in shown.stdout
        assert args[0] == "history" or "\\x1b" in shown.stdout  # shown, escaped
    table = workspace.cli("--db", db, "ps").stdout.splitlines()
    assert len(table) == 3  # header, rule, one row: nothing forged


def test_a_mistyped_sqlite_url_is_reported_not_created(shared: Workspace) -> None:
    missing = shared.root / "typo.db"
    done = shared.cli("--dsn", f"sqlite:///{missing}", "ps")
    assert done.returncode == 1
    assert "no task database at" in _one_error_line(done.stderr)
    assert "point --dsn at an existing file" in done.stderr
    assert not missing.exists()


def test_a_limit_below_one_names_the_bound(shared: Workspace) -> None:
    done = shared.cli("--db", str(shared.root / "x.db"), "ps", "--limit", "-1")
    assert done.returncode == 1
    assert "must be >= 1" in _one_error_line(done.stderr)


def test_an_arg_that_does_not_convert_is_refused_before_the_task_exists(
    workspace: Workspace,
) -> None:
    """``add(ctx, a: int, ...)`` with ``a=abc`` used to start and fail with a TypeError
    (exit 3); it is refused in one line (exit 1) and no task is written."""
    db = str(workspace.db)
    done = workspace.cli("--db", db, "run", "add", *TASKS, "--arg", "a=abc", "--task-id", "t")
    assert done.returncode == 1, done.stdout + done.stderr
    line = _one_error_line(done.stderr)
    assert "--arg a='abc': task 'add' takes a as int, and 'abc' is not one" in line
    assert "e.g. --arg a=3" in line
    if workspace.db.exists():
        assert json.loads(workspace.cli("--db", db, "ps", "--json").stdout) == []


def test_a_str_parameter_keeps_the_text(workspace: Workspace) -> None:
    """``boom(ctx, message: str)`` with ``message=true`` gets "true", not the JSON True."""
    done = workspace.cli(
        "--db", str(workspace.db), "run", "boom", *TASKS, "--arg", "message=true", "--json"
    )
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["failure"]["message"] == "ValueError: true"

"""Console input and output in any encoding, through the real CLI as a subprocess.

Out: with an ASCII-only stdout and stderr (``PYTHONIOENCODING=ascii``, also with the
strict error handler, and a C locale without UTF-8 mode) every command renders, tables
aligned, what the stream cannot hold written as escapes and JSON as ``\\u`` escapes
that parse back to the very text. In: bytes that are not UTF-8 in ``--db``,
``CHONGMING_DB``, ``--dsn`` and ``CHONGMING_DSN`` never give a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from cli_support import Workspace, make_workspace

from chongming_core import TaskStatus
from chongming_runtime import Controller
from chongming_runtime.testing import spin
from chongming_store_sqlite import SqliteTaskStore

LABEL = "加法😀"
VALUE = "值😀"
FAILURE = "失败 😀 e\u0301"
UNIT = "行"
MESSAGE = "进度😀"
REASON = "发布窗口😀"
OWNER = "节点-a"
TAG = "标签"
#: A byte that is not UTF-8, as Python sees it in argv and the environment.
NOT_UTF8 = os.fsdecode(b"\xff")

NARROW = {
    "ascii": {"PYTHONIOENCODING": "ascii"},
    "ascii-strict": {"PYTHONIOENCODING": "ascii:strict"},
    "c-locale": {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""},
}


def _succeed(ctx: Any) -> str:
    ctx.progress(1, total=2, unit=UNIT, message=MESSAGE)
    return VALUE


def _fail(ctx: Any) -> None:
    raise ValueError(FAILURE)


def _wait_for_stop(ctx: Any, started: threading.Event) -> None:
    started.set()
    spin(ctx)  # its checkpoint raises TaskCancelled once stopped


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """A store whose tasks hold CJK, emoji and combining marks in every field shown."""
    ws = make_workspace(tmp_path_factory.mktemp("cli") / "ws")
    started = threading.Event()
    with SqliteTaskStore(ws.db) as sqlite, Controller(store=sqlite, owner=OWNER) as controller:
        controller.register("succeed", _succeed)
        controller.register("fail", _fail)
        controller.register("wait_for_stop", _wait_for_stop)
        ok = controller.submit("succeed", task_id="任务-1", label=LABEL, tags={TAG})
        bad = controller.submit("fail", task_id="任务-2", label=LABEL)
        held = controller.submit("wait_for_stop", started, task_id="任务-3")
        assert ok.wait(timeout=20).status is TaskStatus.SUCCEEDED
        assert bad.wait(timeout=20).status is TaskStatus.FAILED
        assert started.wait(20)
        assert controller.stop("任务-3", reason=REASON)
        assert held.wait(timeout=20).status is TaskStatus.STOPPED
    return ws


def _cli(ws: Workspace, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    """The CLI with `env` on top of the workspace's; output kept as bytes."""
    merged = {**ws.env, **env}
    merged = {k: v for k, v in merged.items() if v != ""}
    return subprocess.run(
        [sys.executable, "-m", "chongming_cli", *args],
        cwd=ws.root,
        env=merged,
        capture_output=True,
        timeout=60,
        check=False,
    )


def _ascii(data: bytes) -> str:
    assert data.isascii(), data
    return data.decode("ascii")


def _no_traceback(done: subprocess.CompletedProcess[bytes]) -> None:
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert b"UnicodeEncodeError" not in done.stdout + done.stderr


def _one_error_line(done: subprocess.CompletedProcess[bytes]) -> str:
    _no_traceback(done)
    assert done.returncode == 1
    lines = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line]
    assert len(lines) == 1, lines
    assert lines[0].startswith("chongming-task: error: ")
    return lines[0]


@pytest.mark.parametrize("narrow", sorted(NARROW))
@pytest.mark.parametrize(
    "command",
    [
        ("ps",),
        ("status", "任务-1"),
        ("status", "任务-2"),
        ("history", "任务-3"),
        ("stats",),
        ("buckets",),
        ("reconcile", "--dry-run"),
    ],
    ids=" ".join,
)
def test_every_command_renders_on_an_ascii_only_stdout(
    store: Workspace, narrow: str, command: tuple[str, ...]
) -> None:
    done = _cli(store, "--db", str(store.db), *command, **NARROW[narrow])
    _no_traceback(done)
    assert done.returncode == 0, done.stderr
    text = _ascii(done.stdout)
    _ascii(done.stderr)
    if command == ("ps",):
        assert "\\u52a0\\u6cd5\\U0001f600" in text  # the label, escaped
        assert "\\u884c" in text  # the progress unit
    if command == ("status", "任务-1"):
        assert "\\u8282\\u70b9-a" in text  # the owner
        assert "\\u6807\\u7b7e" in text  # the tag
    if command == ("status", "任务-2"):
        assert "\\u5931\\u8d25 \\U0001f600 e\\u0301" in text
    if command == ("history", "任务-3"):
        assert "\\u53d1\\u5e03\\u7a97\\u53e3\\U0001f600" in text


@pytest.mark.parametrize("narrow", sorted(NARROW))
def test_tables_stay_aligned_where_the_text_is_escaped(store: Workspace, narrow: str) -> None:
    for command, column in ((("ps",), "STATUS"), (("history", "任务-3"), "TRIGGER")):
        done = _cli(store, "--db", str(store.db), *command, **NARROW[narrow])
        lines = _ascii(done.stdout).splitlines()
        start = lines[0].index(column)
        rule = lines[1].split("  ")
        for line in lines[2:]:
            assert line[start - 2 : start] == "  ", (line, start)
            assert line[start] != " ", (line, start)
        # the rule is as wide as the widest cell of each column
        assert len("  ".join(rule)) >= max(len(line) for line in lines[2:])


@pytest.mark.parametrize("narrow", sorted(NARROW))
@pytest.mark.parametrize(
    "command", [("ps",), ("status", "任务-2"), ("history", "任务-3"), ("stats",)], ids=" ".join
)
def test_json_is_ascii_escaped_and_parses_back_to_the_text(
    store: Workspace, narrow: str, command: tuple[str, ...]
) -> None:
    done = _cli(store, "--db", str(store.db), *command, "--json", **NARROW[narrow])
    _no_traceback(done)
    assert done.returncode == 0, done.stderr
    document = json.loads(_ascii(done.stdout))
    if command == ("ps",):
        assert [t["label"] for t in document] == [LABEL, LABEL, None]
        assert document[0]["progress"]["message"] == MESSAGE
    if command == ("status", "任务-2"):
        assert document["failure"]["message"] == f"ValueError: {FAILURE}"
    if command == ("history", "任务-3"):
        assert REASON in [t["reason"] for t in document]


def test_json_keeps_text_as_is_on_a_utf8_stdout(store: Workspace) -> None:
    done = _cli(store, "--db", str(store.db), "ps", "--json", PYTHONIOENCODING="utf-8")
    assert LABEL.encode("utf-8") in done.stdout


@pytest.mark.parametrize("narrow", sorted(NARROW))
def test_errors_and_run_render_on_an_ascii_only_console(store: Workspace, narrow: str) -> None:
    env = NARROW[narrow]
    line = _one_error_line(_cli(store, "--db", str(store.db), "status", "无此任务", **env))
    assert "\\u65e0\\u6b64\\u4efb\\u52a1" in line
    _one_error_line(_cli(store, "--db", str(store.db), "no-such-命令", **env))
    run = _cli(
        store,
        "--db",
        str(store.db),
        "run",
        "boom",
        "--tasks",
        "cli_tasks",
        "--arg",
        f"message={FAILURE}",
        "--label",
        LABEL,
        "--task-id",
        f"任务-run-{narrow}",
        **env,
    )
    _no_traceback(run)
    assert run.returncode == 3, run.stderr
    assert "\\u5931\\u8d25" in _ascii(run.stdout)
    assert "running task" in _ascii(run.stderr)
    as_json = _cli(
        store, "--db", str(store.db), "run", "echo", "--tasks", "cli_tasks", "--json",
        "--arg", f"value={VALUE}", "--task-id", f"任务-json-{narrow}", **env,
    )  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(_ascii(as_json.stdout))["value"] == VALUE


# ---------------------------------------------------------------- bytes that are not UTF-8
def test_a_db_path_that_is_not_utf8_is_a_usable_file(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    name = f"{NOT_UTF8}.db"  # the file b"\xff.db"
    missing = _one_error_line(_cli(ws, "--db", name, "ps"))
    assert "chongming-task --db $'\\xff.db' run" in missing  # a hint the shell gives back
    assert "no task database" in _one_error_line(_cli(ws, "ps", CHONGMING_DB=name))
    assert "no task database" in _one_error_line(_cli(ws, "--db", name, "dashboard"))

    run = _cli(ws, "--db", name, "run", "add", "--tasks", "cli_tasks", "--arg", "a=1",
               "--task-id", "t-1")  # fmt: skip
    _no_traceback(run)
    assert run.returncode == 0, run.stderr
    assert b"--db $'\\xff.db' stop t-1" in run.stderr
    assert b"\xff.db" in os.listdir(os.fsencode(ws.root))
    for done in (
        _cli(ws, "--db", name, "ps"),
        _cli(ws, "ps", CHONGMING_DB=name),
        _cli(ws, "ps", PYTHONIOENCODING="ascii", CHONGMING_DB=name),
        _cli(ws, "--dsn", "sqlite:///%FF.db", "ps"),  # the byte, percent-encoded
    ):
        _no_traceback(done)
        assert done.returncode == 0, done.stderr
        assert b"t-1" in done.stdout


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("status", f"t{NOT_UTF8}"), "TASK_ID"),
        (("ps", "--tag", NOT_UTF8), "--tag"),
        (("stop", "t-1", "--reason", f"r{NOT_UTF8}"), "--reason"),
        (("submit", "add", "--arg", f"a={NOT_UTF8}"), "--arg"),
    ],
)
def test_text_that_is_not_utf8_is_refused_in_one_line_before_the_store(
    tmp_path: Path, args: tuple[str, ...], named: str
) -> None:
    ws = make_workspace(tmp_path / "ws")
    run = _cli(ws, "--db", "t.db", "run", "add", "--tasks", "cli_tasks", "--arg", "a=1",
               "--task-id", "t-1")  # fmt: skip
    assert run.returncode == 0, run.stderr
    history = _cli(ws, "--db", "t.db", "history", "t-1", "--json").stdout
    line = _one_error_line(_cli(ws, "--db", "t.db", *args))
    assert line.startswith(f"chongming-task: error: {named} ")
    assert "holds byte 0xff" in line
    assert "UTF-8" in line
    assert _cli(ws, "--db", "t.db", "history", "t-1", "--json").stdout == history
    listed = _cli(ws, "--db", "t.db", "ps", "--json")
    assert [task["task_id"] for task in json.loads(listed.stdout)] == ["t-1"]  # nothing new


@pytest.mark.parametrize(
    ("where", "dsn"),
    [
        ("--dsn", f"postgresql://app:pa{NOT_UTF8}ss@127.0.0.1:1/db"),
        ("--dsn", f"sqlite:///{NOT_UTF8}.db"),
        ("CHONGMING_DSN", f"postgresql://app:pa{NOT_UTF8}ss@127.0.0.1:1/db"),
        ("CHONGMING_DSN", f"sqlite:///{NOT_UTF8}.db"),
    ],
)
def test_a_dsn_that_is_not_utf8_is_refused_in_one_line(
    tmp_path: Path, where: str, dsn: str
) -> None:
    ws = make_workspace(tmp_path / "ws")
    done = _cli(ws, "--dsn", dsn, "ps") if where == "--dsn" else _cli(ws, "ps", CHONGMING_DSN=dsn)
    line = _one_error_line(done)
    assert f"{where} holds a byte 0xff" in line
    assert "percent-encode" in line
    assert "app:" not in line  # the URL is never echoed
    assert "127.0.0.1" not in line

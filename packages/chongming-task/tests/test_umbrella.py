"""The umbrella package provides every import path the guide shows."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

GUIDE_PATHS = [
    ("chongming_task.core.state_machine", "StateMachine"),
    ("chongming_task.states", "TaskStatus"),
    ("chongming_task.states", "FailureKind"),
    ("chongming_task.policies", "ExponentialBackoff"),
    ("chongming_task.policies", "RetryPolicy"),
    ("chongming_task.policies", "Timeout"),
    ("chongming_task.policies", "AggregationPolicy"),
    ("chongming_task.policies", "JoinMode"),
    ("chongming_task.policies", "FixedBackoff"),
    ("chongming_task.policies", "Jitter"),
    ("chongming_task.policies", "ConcurrencyPolicy"),
    ("chongming_task.policies", "BucketPolicy"),
    ("chongming_task.testing", "FakeClock"),
    ("chongming_task.testing", "wait_until"),
    ("chongming_task.testing", "Gate"),
    ("chongming_task.testing", "spin"),
    ("chongming_task.testing", "checkpoint_until"),
    ("chongming_task.testing", "Closer"),
    ("chongming_task.testing.store_contract", "StoreContract"),
    ("chongming_task.errors", "TaskCancelled"),
    ("chongming_task.errors", "InvalidTransition"),
    ("chongming_task", "ConcurrencyPolicy"),
    ("chongming_task", "RetryPolicy"),
    ("chongming_task", "Timeout"),
    ("chongming_task", "task"),
    ("chongming_task", "Progress"),
    ("chongming_task", "TaskQuery"),
    ("chongming_task", "TaskStatus"),
    ("chongming_task", "InMemoryTaskStore"),
    ("chongming_task.run", "run_task"),
    ("chongming_task.run", "TaskRun"),
    ("chongming_task.controller", "Controller"),
    ("chongming_task.controller", "render_table"),
    ("chongming_task.runtime.executors.thread", "ThreadExecutor"),
    ("chongming_task.runtime.executors.inline", "InlineExecutor"),
    ("chongming_task", "ProcessExecutor"),
    ("chongming_task", "run_task"),
    ("chongming_task", "Controller"),
    ("chongming_task", "SqliteTaskStore"),
    ("chongming_task", "Pipeline"),
    ("chongming_task", "TaskContext"),
]


@pytest.mark.parametrize(("module", "name"), GUIDE_PATHS)
def test_guide_import_path(module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name)


def test_task_context_is_the_runtime_context() -> None:
    import chongming_task

    assert chongming_task.TaskContext is chongming_task.RuntimeContext


def test_every_public_name_resolves() -> None:
    import chongming_task

    missing = []
    for name in chongming_task.__all__:
        try:
            getattr(chongming_task, name)
        except ImportError:
            missing.append(name)  # optional extras are tested separately
    assert set(missing) <= {"PostgresTaskStore", "redact_dsn"}


def test_guide_state_machine_example() -> None:
    from chongming_task.core.state_machine import StateMachine
    from chongming_task.errors import InvalidTransition
    from chongming_task.states import TaskStatus

    machine = StateMachine.create("t1", "抽取", max_attempts=3)
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    machine.mark_succeeded(outcome={"rows": 42})
    with pytest.raises(InvalidTransition) as refused:
        machine.mark_running()
    text = str(refused.value)
    assert "succeeded -> running" in text
    assert "'executor:launched'" in text
    assert "none (terminal)" in text
    assert machine.status is TaskStatus.SUCCEEDED
    assert [r.to_status for r in machine.transitions] == [
        TaskStatus.QUEUED,
        TaskStatus.STARTING,
        TaskStatus.RUNNING,
        TaskStatus.SUCCEEDED,
    ]


_BLOCK_PSYCOPG = textwrap.dedent(
    """
    import importlib.abc, sys

    class _NoPsycopg(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"psycopg", "psycopg_pool", "psycopg_binary"}:
                raise ImportError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, _NoPsycopg())
    """
)


def test_umbrella_imports_without_the_postgres_driver() -> None:
    script = _BLOCK_PSYCOPG + textwrap.dedent(
        """
        import chongming_task
        assert "psycopg" not in sys.modules
        try:
            chongming_task.PostgresTaskStore
        except ImportError as exc:
            print(exc)
        else:
            raise SystemExit("PostgresTaskStore resolved without psycopg")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert 'pip install "chongming-task[postgres]"' in done.stdout


def test_umbrella_import_does_not_load_postgres_or_textual() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, chongming_task; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'psycopg', 'psycopg_pool', 'textual'}))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

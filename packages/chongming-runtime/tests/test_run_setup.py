"""`RunSetup`: what runs made the same way share, checked once (D167)."""

from __future__ import annotations

import pytest

from chongming_core import ConfigurationError, FakeClock, RetryPolicy, TaskStatus, Timeout
from chongming_runtime import Controller, RunSetup, TaskContext, TaskRun, ThreadExecutor


def body(ctx: TaskContext) -> str:
    return "done"


def other(ctx: TaskContext) -> None:
    return None


def test_a_setup_checks_its_values_as_a_run_does() -> None:
    with pytest.raises(ConfigurationError, match="graceful_stop must be >= 0 seconds"):
        RunSetup.make(body, graceful_stop=-1)
    with pytest.raises(ConfigurationError, match="pause_timeout must be > 0 seconds"):
        RunSetup.make(body, pause_timeout=0)
    with pytest.raises(ConfigurationError, match="retry must be a RetryPolicy"):
        RunSetup.make(body, retry=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs a callable task body"):
        RunSetup.make("body")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="graceful_stop must be >= 0 seconds"):
        TaskRun(body, graceful_stop=-1)


def test_a_run_takes_a_setup_or_its_settings_not_both() -> None:
    setup = RunSetup.make(body, executor=ThreadExecutor())
    with pytest.raises(ConfigurationError, match="either a setup or the settings"):
        TaskRun(body, setup=setup, retry=RetryPolicy(max_attempts=2))
    with pytest.raises(ConfigurationError, match="either a setup or the settings"):
        TaskRun(body, setup=setup, graceful_stop=1.0)
    with pytest.raises(ConfigurationError, match="made for its own task body"):
        TaskRun(other, setup=setup)


def test_a_run_made_with_a_setup_runs_under_it() -> None:
    clock = FakeClock()
    setup = RunSetup.make(
        body, retry=RetryPolicy(max_attempts=3), timeout=Timeout(idle=9), clock=clock, actor="me"
    )
    run = TaskRun(body, task_id="with-setup", setup=setup)
    assert run.snapshot.max_attempts == 3  # the machine is made with the setup's policy
    run.start()
    outcome = run.wait(timeout=10)
    assert outcome.status is TaskStatus.SUCCEEDED
    assert outcome.value == "done"
    assert {t.actor for t in run.transitions} == {"me"}


def test_a_controller_shares_one_setup_between_runs_made_the_same_way() -> None:
    with Controller(max_parallel=2) as controller:
        controller.register("body", body)
        first = controller.submit("body")
        second = controller.submit("body")
        own_retry = controller.submit("body", retry=RetryPolicy(max_attempts=2))
        controller.wait_all(timeout=30)
        assert first._setup is second._setup
        assert own_retry._setup is not first._setup
        assert own_retry.snapshot.max_attempts == 2
        assert [r.status for r in (first, second, own_retry)] == [TaskStatus.SUCCEEDED] * 3

"""Shared test configuration for the whole workspace.

Postgres tests take the `postgres_dsn` fixture. Without `CHONGMING_TEST_POSTGRES`
they are skipped locally; with `CHONGMING_REQUIRE_POSTGRES=1` (set by CI) a
skipped Postgres test is a failure.

Every `Controller` and `StoreWriter` a test makes comes from `make_controller` /
`make_writer` (or `closer`): they are closed at teardown even when the test failed, and a
close that hangs fails the test instead of the suite. The runtime is imported only when
one of these fixtures is used, so core's tests still run where only core is installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from chongming_runtime import Controller
    from chongming_runtime.persistence._writer import StoreWriter
    from chongming_runtime.testing import Closer

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def _postgres_required() -> bool:
    return os.environ.get("CHONGMING_REQUIRE_POSTGRES", "") not in {"", "0", "false", "no"}


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The DSN of the test PostgreSQL server (CHONGMING_TEST_POSTGRES)."""
    dsn = os.environ.get("CHONGMING_TEST_POSTGRES", "")
    if not dsn:
        message = "CHONGMING_TEST_POSTGRES is not set (a DSN such as postgresql://postgres@127.0.0.1/test)"
        if _postgres_required():
            pytest.fail(f"Postgres tests are required here but {message}")
        pytest.skip(message)
    return dsn


@pytest.fixture
def closer() -> Iterator[Closer]:
    """A `Closer`: what it makes (or is given) is closed at teardown, each close bounded."""
    from chongming_runtime.testing import Closer  # noqa: PLC0415 (core-only environments)

    made = Closer()
    yield made
    made.close()


@pytest.fixture
def make_controller(closer: Closer) -> Callable[..., Controller]:
    """Makes a `Controller` from keyword arguments; each is closed at teardown."""
    return closer.controller


@pytest.fixture
def make_writer(closer: Closer) -> Callable[..., StoreWriter]:
    """Makes a `StoreWriter` (store, then keyword arguments); each is closed at teardown."""
    return closer.writer


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """With CHONGMING_REQUIRE_POSTGRES, a Postgres test skipped for want of a server fails.

    A test skipped on purpose for another reason (a soak-only scenario) stays skipped.
    """
    report = yield
    if (
        report.skipped
        and _postgres_required()
        and item.get_closest_marker("postgres")
        and "CHONGMING_TEST_POSTGRES" in str(report.longrepr)
    ):
        report.outcome = "failed"
        report.longrepr = f"Postgres test {item.nodeid} was skipped, but CI requires it to run"
    return report

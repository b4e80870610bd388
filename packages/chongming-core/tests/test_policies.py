"""Policies: retry and backoff (§5), timeouts (§6), concurrency (§8.4), pipelines (§8.12)."""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any, cast

import pytest

from chongming_core import (
    AggregationPolicy,
    Backoff,
    ConcurrencyPolicy,
    ConfigurationError,
    ExponentialBackoff,
    FixedBackoff,
    Jitter,
    JoinMode,
    RetryPolicy,
    TaskCancelled,
    Timeout,
)


class _Draw(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


# ---------------------------------------------------------------- RetryPolicy
def test_retry_policy_defaults_do_not_retry() -> None:
    policy = RetryPolicy()
    assert policy.max_attempts == 1
    assert not policy.has_attempt_left(1)
    assert policy.retry_on == (Exception,)
    assert policy.give_up_on == ()
    assert isinstance(policy.backoff, ExponentialBackoff)


def test_max_attempts_counts_the_first_try() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert [policy.has_attempt_left(n) for n in (1, 2, 3)] == [True, True, False]


def test_the_guide_example_of_section_5() -> None:
    policy = RetryPolicy(
        max_attempts=5,
        backoff=ExponentialBackoff(base=1, factor=2, max_delay=300),
        retry_on=(Exception,),
        give_up_on=(ValueError, KeyError),
    )
    assert policy.should_retry(OSError("disk"))
    assert policy.should_retry(RuntimeError("flaky"))
    assert not policy.should_retry(ValueError("bad input"))
    assert not policy.should_retry(KeyError("missing"))


def test_give_up_on_wins_over_retry_on() -> None:
    policy = RetryPolicy(max_attempts=3, retry_on=(LookupError,), give_up_on=(KeyError,))
    assert policy.should_retry(IndexError("i"))
    assert not policy.should_retry(KeyError("k"))
    # not listed at all: not retried
    assert not policy.should_retry(OSError("o"))


def test_retry_on_accepts_a_single_class() -> None:
    policy = RetryPolicy(max_attempts=2, retry_on=OSError)  # type: ignore[arg-type]
    assert policy.retry_on == (OSError,)
    assert policy.should_retry(TimeoutError())
    assert not policy.should_retry(ValueError())


def test_cancellation_is_never_retried() -> None:
    """§5.1: even a policy that retries every BaseException must not retry a stop."""
    policy = RetryPolicy(max_attempts=10, retry_on=(BaseException,))
    assert not policy.should_retry(TaskCancelled("发布窗口"))
    assert policy.should_retry(KeyboardInterrupt())
    default = RetryPolicy(max_attempts=10)
    assert not default.should_retry(TaskCancelled())


def test_delay_after_uses_the_backoff() -> None:
    policy = RetryPolicy(max_attempts=3, backoff=FixedBackoff(2.5))
    assert policy.delay_after(1) == 2.5
    policy = RetryPolicy(
        max_attempts=3, backoff=ExponentialBackoff(base=1, factor=3, jitter=Jitter.NONE)
    )
    assert [policy.delay_after(n) for n in (1, 2, 3)] == [1.0, 3.0, 9.0]


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"max_attempts": 0}, ["max_attempts must be an integer >= 1", "counts the first try"]),
        ({"max_attempts": -1}, ["max_attempts must be an integer >= 1", "-1"]),
        ({"max_attempts": True}, ["max_attempts must be an integer >= 1", "True"]),
        ({"max_attempts": 2.5}, ["max_attempts must be an integer >= 1", "2.5"]),
        # a snapshot field PostgreSQL keeps as a bigint: its create failed at every flush
        ({"max_attempts": 2**63}, ["max_attempts must be below 2**63", "9223372036854775808"]),
        ({"max_attempts": 10**5000}, ["stores keep it as a 64-bit integer", "of 5001 digits"]),
        ({"backoff": 5}, ["backoff must be FixedBackoff(...) or ExponentialBackoff(...)", "5"]),
        ({"retry_on": (ValueError, "OSError")}, ["retry_on must hold exception classes"]),
        ({"retry_on": 3}, ["retry_on must be an exception class or a tuple of them"]),
        ({"give_up_on": (int,)}, ["give_up_on must hold exception classes", "int"]),
    ],
)
def test_retry_policy_validation(kwargs: dict[str, Any], fragments: list[str]) -> None:
    assert RetryPolicy(max_attempts=2**63 - 1).max_attempts == 2**63 - 1
    with pytest.raises(ConfigurationError) as info:
        RetryPolicy(**kwargs)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_policies_are_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RetryPolicy().max_attempts = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Timeout(idle=3).idle = 5  # type: ignore[misc]


# ---------------------------------------------------------------- backoff
def test_exponential_backoff_defaults_to_full_jitter() -> None:
    backoff = ExponentialBackoff()
    assert backoff.jitter is Jitter.FULL
    assert (backoff.base, backoff.factor, backoff.max_delay) == (1.0, 2.0, 300.0)
    assert isinstance(backoff, Backoff)
    assert isinstance(FixedBackoff(1), Backoff)


def test_exponential_ceiling_grows_then_caps() -> None:
    backoff = ExponentialBackoff(base=1, factor=2, max_delay=10)
    assert [backoff.ceiling(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff.ceiling(10_000) == 10.0


def test_exponential_ceiling_with_zero_base_stays_zero_even_when_the_power_overflows() -> None:
    assert ExponentialBackoff(base=0, factor=10.0, max_delay=60).ceiling(5_000) == 0.0
    assert ExponentialBackoff(base=0.0, factor=2, max_delay=60).ceiling(5_000) == 0.0


def test_full_jitter_spans_zero_to_the_ceiling() -> None:
    backoff = ExponentialBackoff(base=4, factor=2, max_delay=300)
    assert backoff.delay(1, _Draw(0.0)) == 0.0
    assert backoff.delay(1, _Draw(0.5)) == 2.0
    assert backoff.delay(1, _Draw(1.0 - 2**-53)) < 4.0


def test_equal_jitter_spans_half_to_the_ceiling() -> None:
    backoff = ExponentialBackoff(base=4, factor=2, max_delay=300, jitter=Jitter.EQUAL)
    assert backoff.delay(1, _Draw(0.0)) == 2.0
    assert backoff.delay(2, _Draw(0.5)) == 6.0
    assert 2.0 <= backoff.delay(1, _Draw(1.0 - 2**-53)) < 4.0
    # 0.5 + 0.5 * (1 - 2**-53) rounds up to 1.0 in floating point: the range must stay open
    assert ExponentialBackoff(base=1, jitter=Jitter.EQUAL).delay(1, _Draw(1.0 - 2**-53)) < 1.0


def test_jitter_accepts_its_string_value() -> None:
    assert ExponentialBackoff(jitter="none").jitter is Jitter.NONE  # type: ignore[arg-type]
    assert [j.value for j in Jitter] == ["none", "full", "equal"]


def test_fixed_backoff() -> None:
    assert FixedBackoff().delay(1) == 0.0
    assert FixedBackoff(0).delay(7) == 0.0
    assert FixedBackoff(3).delay(1) == 3.0
    assert FixedBackoff(3).delay_seconds == 3.0
    assert FixedBackoff(3, jitter=Jitter.FULL).delay(1, _Draw(0.5)) == 1.5


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: FixedBackoff(-1), "FixedBackoff delay must be >= 0 seconds"),
        (lambda: FixedBackoff(cast(Any, "3")), "FixedBackoff delay must be a number of seconds"),
        (lambda: FixedBackoff(math.nan), "FixedBackoff delay must be >= 0 seconds"),
        (lambda: ExponentialBackoff(base=-1), "ExponentialBackoff base must be >= 0"),
        (lambda: ExponentialBackoff(max_delay=-5), "ExponentialBackoff max_delay must be >= 0"),
        (lambda: ExponentialBackoff(factor=0.5), "factor must be >= 1 (delays must not shrink)"),
        (lambda: ExponentialBackoff(factor=cast(Any, "2")), "factor must be a number >= 1"),
        (lambda: ExponentialBackoff(jitter=cast(Any, "wild")), "'wild' is not a valid Jitter"),
    ],
)
def test_backoff_validation(make: Any, fragment: str) -> None:
    with pytest.raises((ConfigurationError, ValueError)) as info:
        make()
    assert fragment in str(info.value)


# ---------------------------------------------------------------- Timeout
def test_timeout_holds_three_independent_deadlines() -> None:
    timeout = Timeout(start=30, per_attempt=600, idle=60)
    assert (timeout.start, timeout.per_attempt, timeout.idle) == (30.0, 600.0, 60.0)
    assert not timeout.is_unbounded
    assert Timeout().is_unbounded
    assert Timeout(idle=5).per_attempt is None


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"start": 0}, "Timeout.start must be > 0 seconds, got 0; use None for no limit"),
        ({"per_attempt": -1}, "Timeout.per_attempt must be > 0 seconds, got -1"),
        ({"idle": "60"}, "Timeout.idle must be a number of seconds, got '60'"),
        ({"idle": True}, "Timeout.idle must be a number of seconds, got True"),
        ({"start": math.nan}, "Timeout.start must be > 0 seconds"),
    ],
)
def test_timeout_validation(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Timeout(**kwargs)
    assert fragment in str(info.value)


# ---------------------------------------------------------------- ConcurrencyPolicy
def test_concurrency_policy_limits_only_the_listed_tags() -> None:
    policy = ConcurrencyPolicy(max_parallel=20, limits={"db": 4, "gpu": 1})
    assert policy.max_parallel == 20
    assert dict(policy.limits) == {"db": 4, "gpu": 1}
    assert policy.limited_tags({"db", "io", "gpu"}) == frozenset({"db", "gpu"})
    assert policy.limited_tags(["io", "网络"]) == frozenset()
    assert ConcurrencyPolicy().limited_tags({"db"}) == frozenset()
    assert ConcurrencyPolicy().priority == 0


def test_concurrency_limits_cannot_be_changed_after_validation() -> None:
    limits = {"db": 4}
    policy = ConcurrencyPolicy(limits=limits)
    limits["db"] = 400
    assert policy.limits["db"] == 4
    with pytest.raises(TypeError):
        policy.limits["db"] = 5  # type: ignore[index]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"max_parallel": 0}, "max_parallel must be an integer >= 1, got 0"),
        ({"max_parallel": 1.5}, "max_parallel must be an integer >= 1, got 1.5"),
        ({"max_parallel": True}, "max_parallel must be an integer >= 1, got True"),
        ({"limits": [("db", 4)]}, "limits must map tag -> units"),
        ({"limits": {1: 4}}, "limits keys must be tag strings, got 1"),
        ({"limits": {"db": 0}}, "limits['db'] must be an integer >= 1, got 0"),
        ({"limits": {"gpu": "1"}}, "limits['gpu'] must be an integer >= 1, got '1'"),
        ({"priority": "high"}, "priority must be an integer, got 'high'"),
    ],
)
def test_concurrency_policy_validation(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        ConcurrencyPolicy(**kwargs)
    assert fragment in str(info.value)


# ---------------------------------------------------------------- pipelines
def test_aggregation_policies() -> None:
    assert AggregationPolicy().is_fail_fast
    assert AggregationPolicy.fail_fast().is_fail_fast
    assert AggregationPolicy.fail_fast() == AggregationPolicy()
    settled = AggregationPolicy.all_settled()
    assert not settled.is_fail_fast
    assert settled.mode == "all_settled"


def test_quorum_is_refused_with_the_reason() -> None:
    """§8.12, R16: quorum belongs to fan-out groups, not to a DAG of distinct nodes."""
    with pytest.raises(ConfigurationError) as info:
        AggregationPolicy.quorum(2)
    message = str(info.value)
    assert "quorum" in message
    assert "fan-out" in message
    assert "AggregationPolicy.all_settled()" in message
    with pytest.raises(ConfigurationError):
        AggregationPolicy.quorum(k=2, n=3)


def test_unknown_aggregation_mode_is_refused() -> None:
    with pytest.raises(ConfigurationError) as info:
        AggregationPolicy("quorum")
    assert "unknown aggregation mode 'quorum'" in str(info.value)
    assert "AggregationPolicy.fail_fast()" in str(info.value)


def test_join_modes() -> None:
    assert [m.value for m in JoinMode] == ["all_succeeded", "all_settled", "any_succeeded"]
    assert JoinMode("all_settled") is JoinMode.ALL_SETTLED

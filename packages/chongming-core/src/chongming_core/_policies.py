"""Policies: retries and backoff (§5), timeouts (§6), concurrency (§8.4) and pipelines (§8.12).

Policies are immutable values validated at construction: a policy that cannot
work is refused with a `ConfigurationError` that says what to pass instead.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from chongming_core._errors import ConfigurationError, TaskCancelled
from chongming_core._json import safe_repr

__all__ = [
    "AggregationPolicy",
    "Backoff",
    "ConcurrencyPolicy",
    "ExponentialBackoff",
    "FixedBackoff",
    "Jitter",
    "JoinMode",
    "RetryPolicy",
    "Timeout",
]


def _non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}")
    if value < 0 or math.isnan(value):
        raise ConfigurationError(f"{name} must be >= 0 seconds, got {value!r}")
    return float(value)


class Jitter(StrEnum):
    """How a backoff delay is randomised so that failed tasks do not retry in lockstep."""

    NONE = "none"
    #: uniform in [0, delay) — the default for exponential backoff
    FULL = "full"
    #: uniform in [delay/2, delay)
    EQUAL = "equal"

    def apply(self, delay: float, rng: random.Random | None = None) -> float:
        """Randomise `delay` according to this jitter."""
        if delay <= 0 or self is Jitter.NONE:
            return max(0.0, delay)
        draw = (rng or random).random()
        if self is Jitter.FULL:
            return delay * draw
        # the sum can round up to `delay` itself for draws close to 1; keep the range half-open
        return min(delay / 2 + (delay / 2) * draw, math.nextafter(delay, 0.0))


@runtime_checkable
class Backoff(Protocol):
    """Computes the wait before the next attempt."""

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        ...


@dataclass(frozen=True, slots=True)
class FixedBackoff:
    """The same wait after every failure; `FixedBackoff(0)` retries at once (handy in tests)."""

    delay_seconds: float = 0.0
    jitter: Jitter = Jitter.NONE

    def __init__(self, delay: float = 0.0, jitter: Jitter = Jitter.NONE) -> None:
        object.__setattr__(self, "delay_seconds", _non_negative("FixedBackoff delay", delay))
        object.__setattr__(self, "jitter", Jitter(jitter))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """The fixed delay (jittered if asked)."""
        return self.jitter.apply(self.delay_seconds, rng)


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """``base * factor ** (attempt - 1)`` capped at `max_delay`, with full jitter by default.

    Without jitter, a batch of tasks that failed together would retry together,
    and keep failing together.
    """

    base: float = 1.0
    factor: float = 2.0
    max_delay: float = 300.0
    jitter: Jitter = Jitter.FULL

    def __post_init__(self) -> None:
        _non_negative("ExponentialBackoff base", self.base)
        _non_negative("ExponentialBackoff max_delay", self.max_delay)
        if isinstance(self.factor, bool) or not isinstance(self.factor, int | float):
            raise ConfigurationError(f"factor must be a number >= 1, got {self.factor!r}")
        if self.factor < 1:
            raise ConfigurationError(
                f"factor must be >= 1 (delays must not shrink), got {self.factor!r}"
            )
        object.__setattr__(self, "jitter", Jitter(self.jitter))

    def ceiling(self, attempt: int) -> float:
        """The un-jittered delay after attempt `attempt`."""
        exponent = max(0, attempt - 1)
        try:
            raw = self.base * self.factor**exponent
        except OverflowError:
            # factor ** exponent left the float range; zero times it is still zero
            return 0.0 if self.base == 0 else float(self.max_delay)
        return float(min(raw, self.max_delay))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """The jittered delay after attempt `attempt`."""
        return self.jitter.apply(self.ceiling(attempt), rng)


def _exception_types(name: str, value: Any) -> tuple[type[BaseException], ...]:
    if isinstance(value, type):
        value = (value,)
    try:
        types = tuple(value)
    except TypeError:
        raise ConfigurationError(
            f"{name} must be an exception class or a tuple of them, got {value!r}"
        ) from None
    for item in types:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise ConfigurationError(
                f"{name} must hold exception classes, got {item!r}; e.g. {name}=(OSError,)"
            )
    return types


#: The first int a 64-bit column cannot hold.
_INT64_END = 2**63


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many attempts a task gets and which failures deserve another one.

    `max_attempts` counts the first try (1 = no retry); `give_up_on` wins over
    `retry_on`; a `TaskCancelled` is never retried.
    """

    max_attempts: int = 1
    backoff: Backoff = field(default_factory=ExponentialBackoff)
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    give_up_on: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ConfigurationError(
                f"max_attempts must be an integer >= 1 (it counts the first try), "
                f"got {safe_repr(attempts)}"
            )
        if attempts >= _INT64_END:  # a snapshot field: PostgreSQL keeps it as a bigint
            raise ConfigurationError(
                f"max_attempts must be below 2**63 (stores keep it as a 64-bit integer), got "
                f"{safe_repr(attempts)}"
            )
        if not isinstance(self.backoff, Backoff):
            raise ConfigurationError(
                f"backoff must be FixedBackoff(...) or ExponentialBackoff(...), "
                f"got {self.backoff!r}"
            )
        object.__setattr__(self, "retry_on", _exception_types("retry_on", self.retry_on))
        object.__setattr__(self, "give_up_on", _exception_types("give_up_on", self.give_up_on))

    def should_retry(self, exc: BaseException) -> bool:
        """Whether `exc` deserves another attempt (ignoring the budget)."""
        if isinstance(exc, TaskCancelled):
            return False
        if isinstance(exc, self.give_up_on):
            return False
        return isinstance(exc, self.retry_on)

    def should_retry_named(self, type_names: Collection[str]) -> bool:
        """`should_retry` for an exception known only by the qualified names
        (``module.QualName``) of its classes: one raised in another process whose pickle
        does not round-trip."""
        names = set(type_names)

        def named(classes: tuple[type[BaseException], ...]) -> bool:
            return any(f"{c.__module__}.{c.__qualname__}" in names for c in classes)

        if named((TaskCancelled,)) or named(self.give_up_on):
            return False
        return named(self.retry_on)

    def has_attempt_left(self, attempt: int) -> bool:
        """Whether an attempt after attempt number `attempt` is within the budget."""
        return attempt < self.max_attempts

    def delay_after(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt `attempt`."""
        return self.backoff.delay(attempt, rng)


@dataclass(frozen=True, slots=True)
class Timeout:
    """Three independent deadlines; the earliest wins (guide §6).

    Args:
        start: from submission until the attempt really starts (stops counting once it starts).
        per_attempt: the whole duration of one attempt.
        idle: silence since the last ``checkpoint()`` or ``heartbeat.beat()`` within an attempt.
    """

    start: float | None = None
    per_attempt: float | None = None
    idle: float | None = None

    def __post_init__(self) -> None:
        for name in ("start", "per_attempt", "idle"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigurationError(
                    f"Timeout.{name} must be a number of seconds, got {value!r}"
                )
            if not value > 0:  # a NaN too
                raise ConfigurationError(
                    f"Timeout.{name} must be > 0 seconds, got {value!r}; use None for no limit"
                )
            seconds = float(value)
            object.__setattr__(self, name, seconds)

    @property
    def is_unbounded(self) -> bool:
        """True when no deadline is set."""
        return self.start is None and self.per_attempt is None and self.idle is None


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an integer >= 1, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ConcurrencyPolicy:
    """The global execution budget, per-tag named resources, and the default priority.

    Example::

        ConcurrencyPolicy(max_parallel=20, limits={"db": 4, "gpu": 1})
    """

    max_parallel: int = 4
    limits: Mapping[str, int] = field(default_factory=dict)
    priority: int = 0

    def __post_init__(self) -> None:
        _positive_int("max_parallel", self.max_parallel)
        if not isinstance(self.limits, Mapping):
            raise ConfigurationError(
                f"limits must map tag -> units, e.g. {{'db': 4}}, got {self.limits!r}"
            )
        checked: dict[str, int] = {}
        for tag, units in self.limits.items():
            if not isinstance(tag, str):
                raise ConfigurationError(f"limits keys must be tag strings, got {tag!r}")
            checked[tag] = _positive_int(f"limits[{tag!r}]", units)
        object.__setattr__(self, "limits", MappingProxyType(checked))
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise ConfigurationError(f"priority must be an integer, got {self.priority!r}")

    def limited_tags(self, tags: Iterable[str]) -> frozenset[str]:
        """The subset of `tags` that names a limited resource."""
        return frozenset(t for t in tags if t in self.limits)


class JoinMode(StrEnum):
    """When a pipeline node is released, given its upstream nodes (per node)."""

    ALL_SUCCEEDED = "all_succeeded"
    ALL_SETTLED = "all_settled"
    ANY_SUCCEEDED = "any_succeeded"


@dataclass(frozen=True, slots=True)
class AggregationPolicy:
    """How a whole pipeline settles: `fail_fast()` (default) or `all_settled()`."""

    mode: str = "fail_fast"

    def __post_init__(self) -> None:
        if self.mode not in {"fail_fast", "all_settled"}:
            raise ConfigurationError(
                f"unknown aggregation mode {self.mode!r}; use AggregationPolicy.fail_fast() "
                "or AggregationPolicy.all_settled()"
            )

    @classmethod
    def fail_fast(cls) -> AggregationPolicy:
        """The first real failure cancels every node already released."""
        return cls("fail_fast")

    @classmethod
    def all_settled(cls) -> AggregationPolicy:
        """Wait until every node is terminal, then judge."""
        return cls("all_settled")

    @classmethod
    def quorum(cls, *args: Any, **kwargs: Any) -> AggregationPolicy:
        """Refused: quorum describes k of N copies of one job, not a DAG of distinct nodes."""
        raise ConfigurationError(
            "quorum aggregation is not supported: it describes 'k of N copies of the same job "
            "succeeded', which is a fan-out group, not a pipeline of distinct nodes; use "
            "AggregationPolicy.all_settled() and judge the node outcomes yourself"
        )

    @property
    def is_fail_fast(self) -> bool:
        """True for `fail_fast()`."""
        return self.mode == "fail_fast"

"""`TaskOptions`: a submission's options, checked and resolved against its registered task.

Per-call options override the registered task's (R12): ``tags`` replace its tags,
``priority`` defaults to the controller's `ConcurrencyPolicy.priority` (D25), the
bucket comes from the ``bucket_key`` and must be this node's (R13). Whatever no store
can keep is refused here, before anything runs (D33, D48). A pipeline node's options
are checked by the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chongming_core import ConfigurationError, RetryPolicy, TaskSnapshot, Timeout, validate_tags
from chongming_core.backend import safe_repr
from chongming_runtime.controller._ownership import BucketOwnership
from chongming_runtime.controller._registry import RegisteredTask
from chongming_runtime.executors._base import Executor
from chongming_runtime.support._text import refuse_unstorable

__all__ = ["TaskOptions"]

_ONE_ATTEMPT = RetryPolicy(max_attempts=1)


class TaskOptions:
    """Resolves a submission's options; one per controller.

    Example::

        options = TaskOptions(priority=0, ownership=ownership, executor=ThreadExecutor())
        options.resolve(registered, label="转换-1", tags=None, priority=None, ...)

    Args:
        priority: the priority of a task submitted without one.
        ownership: the buckets this node owns (a task's bucket must be one).
        executor: the executor of a task submitted without one.
    """

    __slots__ = ("_executor", "_ownership", "_priority")

    def __init__(self, *, priority: int, ownership: BucketOwnership, executor: Executor) -> None:
        self._priority = priority
        self._ownership = ownership
        self._executor = executor

    @property
    def executor(self) -> Executor:
        """The executor of a task submitted without one, and of every claimed task."""
        return self._executor

    def resolve(
        self,
        registered: RegisteredTask,
        *,
        label: str | None,
        tags: Iterable[str] | None,
        priority: int | None,
        bucket_key: str | None,
        retry: RetryPolicy | None,
        timeout: Timeout | None,
        executor: Executor | None,
    ) -> dict[str, Any]:
        """``tags``, ``priority``, ``bucket``, ``retry``, ``timeout`` and ``executor`` of a
        task of `registered` submitted with these options.

        Raises:
            ConfigurationError: an option of the wrong type, text no store can keep, a
                priority beyond 64 bits, a bucket of another node, an `InlineExecutor`.
        """
        if label is not None and not isinstance(label, str):
            raise ConfigurationError(f"label must be a string, got {label!r}")
        refuse_unstorable("label", label)
        refuse_unstorable("bucket_key", bucket_key)
        for tag in tags if tags is not None and not isinstance(tags, str) else ():
            refuse_unstorable("tag", tag)
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise ConfigurationError(f"priority must be an integer, got {priority!r}")
        if priority is not None and not -(2**63) <= priority < 2**63:
            raise ConfigurationError(
                f"priority is out of range ({safe_repr(priority)}): stores keep it as a 64-bit "
                f"integer ({-(2**63)} to {2**63 - 1})"
            )
        if bucket_key is not None and not isinstance(bucket_key, str):
            raise ConfigurationError(
                f"bucket_key must be a string, got {bucket_key!r} ({type(bucket_key).__name__})"
            )
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
        if timeout is not None and not isinstance(timeout, Timeout):
            raise ConfigurationError(f"timeout must be a Timeout, got {timeout!r}")
        if executor is not None and getattr(executor, "inline", False):
            raise ConfigurationError(
                "a Controller cannot use InlineExecutor (it would block submit()); "
                "use ThreadExecutor() or ProcessExecutor()"
            )
        return {
            "tags": validate_tags(tags) if tags is not None else registered.tags,
            "priority": self._priority if priority is None else priority,
            "bucket": self._ownership.bucket_for_submit(bucket_key),
            "retry": retry or registered.retry or _ONE_ATTEMPT,
            "timeout": timeout or registered.timeout,
            "executor": executor or self._executor,
        }

    def for_claimed(self, registered: RegisteredTask, snapshot: TaskSnapshot) -> dict[str, Any]:
        """The options of a durable task this controller claimed: its stored priority,
        bucket and tags (the registered tags when it was enqueued with none), and this
        registration's retry policy, timeouts and the controller's executor."""
        return {
            "tags": snapshot.tags or registered.tags,
            "priority": snapshot.priority,
            "bucket": snapshot.bucket,
            "retry": registered.retry or _ONE_ATTEMPT,
            "timeout": registered.timeout,
            "executor": self._executor,
        }

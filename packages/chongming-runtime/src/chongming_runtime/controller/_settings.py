"""The checks of a `Controller`'s settings, one per setting or pair of settings that must
agree; each names the offending value and what to pass instead."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Mapping

from chongming_core import BucketPolicy, ConcurrencyPolicy, ConfigurationError, TaskStore
from chongming_runtime.controller._lease_keeper import RENEWALS_PER_LEASE, default_touch_interval
from chongming_runtime.executors._base import Executor
from chongming_runtime.run._setup import pause_window
from chongming_runtime.support._text import refuse_unstorable

__all__ = [
    "check_artifact_dir",
    "check_bucket_limit",
    "check_executor",
    "check_owner",
    "check_store",
    "concurrency_of",
    "policy_of",
    "refuse_while_a_child_imports_main",
    "touch_interval_of",
]


def refuse_while_a_child_imports_main() -> None:
    """Refuse to make a controller while a spawned child process is importing the parent's
    main module (`ProcessExecutor` starts children with ``spawn``, which re-imports the
    script): a script that makes and serves its controller at module level would do so
    again in every child, which then claims and holds tasks under the parent's owner, and
    never runs the attempt it was started for. ``multiprocessing`` itself refuses to start
    a process in that phase. Only the main module's own code is refused (a task module
    imported by the child may make a controller at import, as in any process)."""
    if not getattr(multiprocessing.current_process(), "_inheriting", False):
        return
    frame = sys._getframe(1)
    while frame.f_globals.get("__name__") != "__mp_main__":  # spawn's name for the script
        if frame.f_back is None:
            return
        frame = frame.f_back
    raise ConfigurationError(
        "a Controller is being created while a child process of the process executor "
        "imports the main module (spawn runs the script's module-level code again): put "
        "the code that creates and runs the controller under "
        '`if __name__ == "__main__":`'
    )


def check_store(store: object) -> None:
    """Refuse a store that is not a `TaskStore`."""
    if store is not None and not isinstance(store, TaskStore):
        raise ConfigurationError(
            f"store must be a TaskStore (InMemoryTaskStore, SqliteTaskStore, "
            f"PostgresTaskStore, ...), got {store!r}"
        )


def concurrency_of(
    concurrency: ConcurrencyPolicy | None, max_parallel: int | None
) -> ConcurrencyPolicy:
    """The policy given, or one of `max_parallel` (4 by default); never two that disagree."""
    if concurrency is None:
        return ConcurrencyPolicy(max_parallel=4 if max_parallel is None else max_parallel)
    if not isinstance(concurrency, ConcurrencyPolicy):
        raise ConfigurationError(f"concurrency must be a ConcurrencyPolicy, got {concurrency!r}")
    if max_parallel is not None and max_parallel != concurrency.max_parallel:
        raise ConfigurationError(
            f"max_parallel={max_parallel} contradicts concurrency.max_parallel="
            f"{concurrency.max_parallel}; pass one of them"
        )
    return concurrency


def check_bucket_limit(max_parallel_per_bucket: int | None) -> None:
    """Refuse a per-bucket limit that is not an integer >= 1."""
    if max_parallel_per_bucket is not None and (
        isinstance(max_parallel_per_bucket, bool)
        or not isinstance(max_parallel_per_bucket, int)
        or max_parallel_per_bucket < 1
    ):
        raise ConfigurationError(
            f"max_parallel_per_bucket must be an integer >= 1, got {max_parallel_per_bucket!r}"
        )


def policy_of(bucket_policy: BucketPolicy | None, num_buckets: int | None) -> BucketPolicy:
    """The bucket policy given, or one of `num_buckets`; never two that disagree."""
    if bucket_policy is None:
        return BucketPolicy() if num_buckets is None else BucketPolicy(num_buckets)
    if num_buckets is not None and num_buckets != bucket_policy.num_buckets:
        raise ConfigurationError(
            f"num_buckets={num_buckets} contradicts bucket_policy.num_buckets="
            f"{bucket_policy.num_buckets}; pass one of them"
        )
    return bucket_policy


def touch_interval_of(
    lease_ttl: float, touch_interval: float | None, poll_interval: float
) -> float:
    """The touch interval, after checking every interval is > 0: the one given, which must
    let the lease be renewed in time, or the default that follows `lease_ttl` (D85)."""
    for name, value in (
        ("lease_ttl", lease_ttl),
        ("touch_interval", touch_interval),
        ("poll_interval", poll_interval),
    ):
        if value is None and name == "touch_interval":
            continue
        pause_window(value, name)  # the same rule: a finite number of seconds > 0
    if touch_interval is None:
        return default_touch_interval(lease_ttl)
    if touch_interval * RENEWALS_PER_LEASE > lease_ttl:
        raise ConfigurationError(
            f"lease_ttl ({lease_ttl:g} s) must be at least 3 x touch_interval "
            f"({touch_interval:g} s): leases are renewed on the touch timer, so a shorter "
            "lease could expire while its holder is alive, and reconcile() would call its "
            f"tasks lost; raise lease_ttl, lower touch_interval to at most "
            f"{lease_ttl / RENEWALS_PER_LEASE:g} s, or leave touch_interval out (its "
            "default follows lease_ttl)"
        )
    return float(touch_interval)


def check_executor(executor: Executor | None) -> None:
    """Refuse what is not an executor (a class, a name) and `InlineExecutor` (D22)."""
    if executor is None:
        return
    if isinstance(executor, type):
        raise ConfigurationError(
            f"executor must be an executor, not its class: write executor={executor.__name__}()"
        )
    if not (callable(getattr(executor, "launch", None)) and hasattr(executor, "name")):
        raise ConfigurationError(
            f"executor must be an executor such as ThreadExecutor() or ProcessExecutor(), "
            f"got {executor!r}"
        )
    if getattr(executor, "inline", False):
        raise ConfigurationError(
            "a Controller cannot use InlineExecutor: it runs the task in the caller's "
            "thread, so submit() would block until the task ends and no scheduling is "
            "possible; use ThreadExecutor() or ProcessExecutor()"
        )


def check_owner(owner: object, given: object) -> str:
    """`owner` if it is a non-empty string any store can keep (`given`: what was passed)."""
    if not isinstance(owner, str) or not owner.strip():
        raise ConfigurationError(f"owner must be a non-empty string, got {given!r}")
    refuse_unstorable("owner", owner)  # written in every lease, transition, command
    if any(ord(char) < 32 or ord(char) == 127 for char in owner):
        raise ConfigurationError(
            f"owner {owner!r} holds a control character (a newline, a tab, an escape): it is "
            "shown by every view and typed back as --owner; use letters, digits and - _ . :"
        )
    return owner


def check_artifact_dir(artifact_dir: object) -> None:
    """`artifact_dir` is None, a str or a path."""
    if artifact_dir is not None and not isinstance(artifact_dir, str | os.PathLike):
        raise ConfigurationError(
            f"artifact_dir must be a folder's path (a str or a pathlib.Path), got {artifact_dir!r}"
        )


def fleet_limits_of(limits: object) -> dict[str, int]:
    """`Controller(fleet_limits=...)` checked: a mapping of tag to a count >= 0."""
    if limits is None:
        return {}
    if not isinstance(limits, Mapping):
        raise ConfigurationError(
            f"fleet_limits must be a mapping of tag to count, e.g. {{'gpu': 4}}, got {limits!r}"
        )
    checked: dict[str, int] = {}
    for tag, count in limits.items():
        if not isinstance(tag, str) or not tag:
            raise ConfigurationError(f"a tag of fleet_limits must be a non-empty str, got {tag!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ConfigurationError(
                f"fleet_limits[{tag!r}] must be an integer >= 0, got {count!r}"
            )
        checked[tag] = count
    return checked

"""The `ConcurrencyConflict` of a write a store did not apply, worded alike by every store.

A caller that meets a conflict reads its message to know what to do (submit under
a new id, reload and retry, repair a damaged row), so every backend words the
same situation the same way; `version_conflict` is that wording.
"""

from __future__ import annotations

from chongming_core._errors import ConcurrencyConflict

__all__ = ["version_conflict"]


def version_conflict(
    task_id: str,
    *,
    expected: int | None,
    actual: int | None,
    unreadable: str | None = None,
) -> ConcurrencyConflict:
    """The conflict of a create or compare-and-set save of `task_id` that was not applied.

    Args:
        task_id: the task that was written.
        expected: the version the writer based its change on; None for a create,
            which conflicts because the task already exists.
        actual: the version found in the store; None when the task does not exist
            (it was never created or has been pruned), or when its row cannot be read.
        unreadable: what is wrong with the stored row, when it cannot be read: it
            has no version to compare with, so it is not replaced.

    Returns:
        The `ConcurrencyConflict` to raise (or to return from `save_many`).

    Example::

        raise version_conflict("t1", expected=3, actual=4)
        # ConcurrencyConflict: task 't1' is at version 4, not 3: another writer ...
    """
    if expected is None:
        message = (
            f"task {task_id!r} already exists; task ids are never reused, submit under a new id"
        )
    elif unreadable is not None:
        message = (
            f"task {task_id!r} cannot be read: {unreadable}; it cannot be compared with "
            f"version {expected} and is not replaced"
        )
    elif actual is None:
        message = (
            f"task {task_id!r} does not exist in the store (it was never created "
            "or has been pruned)"
        )
    else:
        message = (
            f"task {task_id!r} is at version {actual}, not {expected}: "
            "another writer changed it; reload and retry"
        )
    return ConcurrencyConflict(message, task_id=task_id, expected=expected, actual=actual)

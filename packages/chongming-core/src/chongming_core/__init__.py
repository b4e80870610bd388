"""chongming-core: the state model, policies, errors and store protocol. Standard library only.

Everything a library that only *defines* tasks needs, and everything the runtime
and the stores agree on.
"""

from __future__ import annotations

from chongming_core._arguments import durable_arguments as durable_arguments
from chongming_core._buckets import (
    DEFAULT_NUM_BUCKETS as DEFAULT_NUM_BUCKETS,
)
from chongming_core._buckets import (
    BucketPolicy as BucketPolicy,
)
from chongming_core._buckets import (
    buckets_for_node as buckets_for_node,
)
from chongming_core._buckets import (
    parse_bucket_spec as parse_bucket_spec,
)
from chongming_core._clock import (
    SYSTEM_CLOCK as SYSTEM_CLOCK,
)
from chongming_core._clock import (
    Clock as Clock,
)
from chongming_core._clock import (
    FakeClock as FakeClock,
)
from chongming_core._clock import (
    SystemClock as SystemClock,
)
from chongming_core._clock import (
    TimerHandle as TimerHandle,
)
from chongming_core._command_row import (
    Undecodable as Undecodable,
)
from chongming_core._command_row import (
    read_command as read_command,
)
from chongming_core._context import Heartbeat as Heartbeat
from chongming_core._context import TaskContext as TaskContext
from chongming_core._errors import (
    AttemptsExhausted as AttemptsExhausted,
)
from chongming_core._errors import (
    CircularDependency as CircularDependency,
)
from chongming_core._errors import (
    ConcurrencyConflict as ConcurrencyConflict,
)
from chongming_core._errors import (
    ConfigurationError as ConfigurationError,
)
from chongming_core._errors import (
    DependencyFailed as DependencyFailed,
)
from chongming_core._errors import (
    InvalidTransition as InvalidTransition,
)
from chongming_core._errors import (
    StoreError as StoreError,
)
from chongming_core._errors import (
    StoreNotFound as StoreNotFound,
)
from chongming_core._errors import (
    TaskCancelled as TaskCancelled,
)
from chongming_core._errors import (
    TaskError as TaskError,
)
from chongming_core._errors import (
    TaskExecutionError as TaskExecutionError,
)
from chongming_core._errors import (
    TaskTimeout as TaskTimeout,
)
from chongming_core._failure import Failure as Failure
from chongming_core._failure import FailureKind as FailureKind
from chongming_core._failure import storable_text as storable_text
from chongming_core._json import progress_problem as progress_problem
from chongming_core._memory_store import InMemoryTaskStore as InMemoryTaskStore
from chongming_core._policies import (
    AggregationPolicy as AggregationPolicy,
)
from chongming_core._policies import (
    Backoff as Backoff,
)
from chongming_core._policies import (
    ConcurrencyPolicy as ConcurrencyPolicy,
)
from chongming_core._policies import (
    ExponentialBackoff as ExponentialBackoff,
)
from chongming_core._policies import (
    FixedBackoff as FixedBackoff,
)
from chongming_core._policies import (
    Jitter as Jitter,
)
from chongming_core._policies import (
    JoinMode as JoinMode,
)
from chongming_core._policies import (
    RetryPolicy as RetryPolicy,
)
from chongming_core._policies import (
    Timeout as Timeout,
)
from chongming_core._records import (
    AttemptRecord as AttemptRecord,
)
from chongming_core._records import (
    Progress as Progress,
)
from chongming_core._records import (
    TaskSnapshot as TaskSnapshot,
)
from chongming_core._records import (
    Transition as Transition,
)
from chongming_core._state_machine import StateMachine as StateMachine
from chongming_core._status import (
    ACTIVE_STATUSES as ACTIVE_STATUSES,
)
from chongming_core._status import (
    NON_TERMINAL_STATUSES as NON_TERMINAL_STATUSES,
)
from chongming_core._status import (
    TERMINAL_STATUSES as TERMINAL_STATUSES,
)
from chongming_core._status import (
    TRANSITIONS as TRANSITIONS,
)
from chongming_core._status import (
    TaskStatus as TaskStatus,
)
from chongming_core._store import (
    UNSET as UNSET,
)
from chongming_core._store import (
    Command as Command,
)
from chongming_core._store import (
    CommandAction as CommandAction,
)
from chongming_core._store import (
    SnapshotWrite as SnapshotWrite,
)
from chongming_core._store import (
    TaskQuery as TaskQuery,
)
from chongming_core._store import (
    TaskStore as TaskStore,
)
from chongming_core._store import (
    TouchUpdate as TouchUpdate,
)
from chongming_core._task_spec import (
    TASK_SPEC_ATTRIBUTE as TASK_SPEC_ATTRIBUTE,
)
from chongming_core._task_spec import (
    TaskSpec as TaskSpec,
)
from chongming_core._task_spec import (
    get_task_spec as get_task_spec,
)
from chongming_core._task_spec import (
    task as task,
)
from chongming_core._task_spec import (
    validate_tags as validate_tags,
)
from chongming_core._unreadable import Counts as Counts
from chongming_core._unreadable import Listing as Listing
from chongming_core._unreadable import UnreadableRow as UnreadableRow
from chongming_core._unreadable import decode_row as decode_row
from chongming_core._unreadable import unreadable_in as unreadable_in
from chongming_core._work import ClaimRequest as ClaimRequest
from chongming_core._work import ClaimStart as ClaimStart
from chongming_core._work import StartPlan as StartPlan
from chongming_core._work import WorkerRecord as WorkerRecord

__version__ = "0.1.0"

__all__ = [
    "ACTIVE_STATUSES",
    "DEFAULT_NUM_BUCKETS",
    "NON_TERMINAL_STATUSES",
    "SYSTEM_CLOCK",
    "TASK_SPEC_ATTRIBUTE",
    "TERMINAL_STATUSES",
    "TRANSITIONS",
    "UNSET",
    "AggregationPolicy",
    "AttemptRecord",
    "AttemptsExhausted",
    "Backoff",
    "BucketPolicy",
    "CircularDependency",
    "ClaimRequest",
    "ClaimStart",
    "Clock",
    "Command",
    "CommandAction",
    "ConcurrencyConflict",
    "ConcurrencyPolicy",
    "ConfigurationError",
    "Counts",
    "DependencyFailed",
    "ExponentialBackoff",
    "Failure",
    "FailureKind",
    "FakeClock",
    "FixedBackoff",
    "Heartbeat",
    "InMemoryTaskStore",
    "InvalidTransition",
    "Jitter",
    "JoinMode",
    "Listing",
    "Progress",
    "RetryPolicy",
    "SnapshotWrite",
    "StartPlan",
    "StateMachine",
    "StoreError",
    "StoreNotFound",
    "SystemClock",
    "TaskCancelled",
    "TaskContext",
    "TaskError",
    "TaskExecutionError",
    "TaskQuery",
    "TaskSnapshot",
    "TaskSpec",
    "TaskStatus",
    "TaskStore",
    "TaskTimeout",
    "TimerHandle",
    "TouchUpdate",
    "Transition",
    "Undecodable",
    "UnreadableRow",
    "WorkerRecord",
    "buckets_for_node",
    "decode_row",
    "durable_arguments",
    "get_task_spec",
    "parse_bucket_spec",
    "progress_problem",
    "read_command",
    "storable_text",
    "task",
    "unreadable_in",
    "validate_tags",
]

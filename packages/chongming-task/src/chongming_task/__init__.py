"""chongming: honest task supervision and control.

Every task is an append-only trajectory of lifecycle states that can be observed
and acted on (stop, pause, resume, retry). This umbrella package re-exports the
public API of the chongming distributions and provides every import path the
user guide shows. `PostgresTaskStore` is resolved lazily: without the
``postgres`` extra, ``import chongming_task`` works and touching the name
raises an ImportError that says what to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chongming_core import ACTIVE_STATUSES as ACTIVE_STATUSES
from chongming_core import DEFAULT_NUM_BUCKETS as DEFAULT_NUM_BUCKETS
from chongming_core import NON_TERMINAL_STATUSES as NON_TERMINAL_STATUSES
from chongming_core import TERMINAL_STATUSES as TERMINAL_STATUSES
from chongming_core import TRANSITIONS as TRANSITIONS
from chongming_core import AggregationPolicy as AggregationPolicy
from chongming_core import AttemptRecord as AttemptRecord
from chongming_core import AttemptsExhausted as AttemptsExhausted
from chongming_core import BucketPolicy as BucketPolicy
from chongming_core import CircularDependency as CircularDependency
from chongming_core import Clock as Clock
from chongming_core import Command as Command
from chongming_core import CommandAction as CommandAction
from chongming_core import ConcurrencyConflict as ConcurrencyConflict
from chongming_core import ConcurrencyPolicy as ConcurrencyPolicy
from chongming_core import ConfigurationError as ConfigurationError
from chongming_core import DependencyFailed as DependencyFailed
from chongming_core import ExponentialBackoff as ExponentialBackoff
from chongming_core import Failure as Failure
from chongming_core import FailureKind as FailureKind
from chongming_core import FakeClock as FakeClock
from chongming_core import FixedBackoff as FixedBackoff
from chongming_core import InMemoryTaskStore as InMemoryTaskStore
from chongming_core import InvalidTransition as InvalidTransition
from chongming_core import Jitter as Jitter
from chongming_core import JoinMode as JoinMode
from chongming_core import Progress as Progress
from chongming_core import RetryPolicy as RetryPolicy
from chongming_core import SnapshotWrite as SnapshotWrite
from chongming_core import StateMachine as StateMachine
from chongming_core import StoreError as StoreError
from chongming_core import StoreNotFound as StoreNotFound
from chongming_core import TaskCancelled as TaskCancelled
from chongming_core import TaskError as TaskError
from chongming_core import TaskExecutionError as TaskExecutionError
from chongming_core import TaskQuery as TaskQuery
from chongming_core import TaskSnapshot as TaskSnapshot
from chongming_core import TaskSpec as TaskSpec
from chongming_core import TaskStatus as TaskStatus
from chongming_core import TaskStore as TaskStore
from chongming_core import TaskTimeout as TaskTimeout
from chongming_core import Timeout as Timeout
from chongming_core import TouchUpdate as TouchUpdate
from chongming_core import Transition as Transition
from chongming_core import buckets_for_node as buckets_for_node
from chongming_core import get_task_spec as get_task_spec
from chongming_core import parse_bucket_spec as parse_bucket_spec
from chongming_core import task as task
from chongming_runtime import Controller as Controller
from chongming_runtime import ControllerStats as ControllerStats
from chongming_runtime import InlineExecutor as InlineExecutor
from chongming_runtime import Job as Job
from chongming_runtime import PersistFailure as PersistFailure
from chongming_runtime import Pipeline as Pipeline
from chongming_runtime import PipelineOutcome as PipelineOutcome
from chongming_runtime import PipelineRun as PipelineRun
from chongming_runtime import ProcessExecutor as ProcessExecutor
from chongming_runtime import ReconcileReport as ReconcileReport
from chongming_runtime import RuntimeContext as RuntimeContext
from chongming_runtime import TaskContext as TaskContext
from chongming_runtime import TaskOutcome as TaskOutcome
from chongming_runtime import TaskRun as TaskRun
from chongming_runtime import ThreadExecutor as ThreadExecutor
from chongming_runtime import render_table as render_table
from chongming_runtime import run_command as run_command
from chongming_runtime import run_task as run_task
from chongming_store_sqlite import SqliteTaskStore as SqliteTaskStore
from chongming_task import _lazy

if TYPE_CHECKING:
    from chongming_store_postgres import PostgresTaskStore as PostgresTaskStore
    from chongming_store_postgres import redact_dsn as redact_dsn

__version__ = "0.1.0"

__all__ = [
    "ACTIVE_STATUSES",
    "DEFAULT_NUM_BUCKETS",
    "NON_TERMINAL_STATUSES",
    "TERMINAL_STATUSES",
    "TRANSITIONS",
    "AggregationPolicy",
    "AttemptRecord",
    "AttemptsExhausted",
    "BucketPolicy",
    "CircularDependency",
    "Clock",
    "Command",
    "CommandAction",
    "ConcurrencyConflict",
    "ConcurrencyPolicy",
    "ConfigurationError",
    "Controller",
    "ControllerStats",
    "DependencyFailed",
    "ExponentialBackoff",
    "Failure",
    "FailureKind",
    "FakeClock",
    "FixedBackoff",
    "InMemoryTaskStore",
    "InlineExecutor",
    "InvalidTransition",
    "Jitter",
    "Job",
    "JoinMode",
    "PersistFailure",
    "Pipeline",
    "PipelineOutcome",
    "PipelineRun",
    "PostgresTaskStore",
    "ProcessExecutor",
    "Progress",
    "ReconcileReport",
    "RetryPolicy",
    "RuntimeContext",
    "SnapshotWrite",
    "SqliteTaskStore",
    "StateMachine",
    "StoreError",
    "StoreNotFound",
    "TaskCancelled",
    "TaskContext",
    "TaskError",
    "TaskExecutionError",
    "TaskOutcome",
    "TaskQuery",
    "TaskRun",
    "TaskSnapshot",
    "TaskSpec",
    "TaskStatus",
    "TaskStore",
    "TaskTimeout",
    "ThreadExecutor",
    "Timeout",
    "TouchUpdate",
    "Transition",
    "buckets_for_node",
    "get_task_spec",
    "parse_bucket_spec",
    "redact_dsn",
    "render_table",
    "run_command",
    "run_task",
    "task",
]


def __getattr__(name: str) -> Any:
    if name in _lazy.OPTIONAL:
        value = _lazy.resolve(name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'chongming_task' has no attribute {name!r}")

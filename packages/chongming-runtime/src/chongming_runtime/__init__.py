"""chongming-runtime: supervised execution of chongming tasks.

`TaskRun` / `run_task` run one task under supervision (stop, pause, retries,
timeouts) on an executor (`ThreadExecutor` by default, `InlineExecutor`,
`ProcessExecutor`). The body receives a `TaskContext` (the same class as
`RuntimeContext`) as its first argument.
"""

from __future__ import annotations

from chongming_runtime._table import TABLE_COLUMNS as TABLE_COLUMNS
from chongming_runtime._table import display_width as display_width
from chongming_runtime._table import encodable as encodable
from chongming_runtime._table import format_elapsed as format_elapsed
from chongming_runtime._table import name_cell as name_cell
from chongming_runtime._table import printable as printable
from chongming_runtime._table import render_table as render_table
from chongming_runtime.body._command import CommandFailed as CommandFailed
from chongming_runtime.body._command import run_command as run_command
from chongming_runtime.body._context import RuntimeContext as RuntimeContext
from chongming_runtime.body._context import RuntimeContext as TaskContext
from chongming_runtime.controller._controller import Controller as Controller
from chongming_runtime.controller._controller import default_owner as default_owner
from chongming_runtime.controller._enqueue import Job as Job
from chongming_runtime.controller._ownership import describe_buckets as describe_buckets
from chongming_runtime.controller._reconcile import ReconcileReport as ReconcileReport
from chongming_runtime.controller._registry import RegisteredTask as RegisteredTask
from chongming_runtime.controller._stats import ControllerStats as ControllerStats
from chongming_runtime.controller._waiting_reason import active_by_worker as active_by_worker
from chongming_runtime.controller._waiting_reason import fleet_held_for as fleet_held_for
from chongming_runtime.controller._waiting_reason import waiting_reason as waiting_reason
from chongming_runtime.controller._worker_liveness import (
    worker_process_gone as worker_process_gone,
)
from chongming_runtime.executors import AttemptHandle as AttemptHandle
from chongming_runtime.executors import Executor as Executor
from chongming_runtime.executors import InlineExecutor as InlineExecutor
from chongming_runtime.executors import ProcessExecutor as ProcessExecutor
from chongming_runtime.executors import ThreadExecutor as ThreadExecutor
from chongming_runtime.executors._attempt import Attempt as Attempt
from chongming_runtime.executors._attempt import AttemptResult as AttemptResult
from chongming_runtime.persistence._writer import PersistFailure as PersistFailure
from chongming_runtime.pipeline._coordinator import PipelineOutcome as PipelineOutcome
from chongming_runtime.pipeline._coordinator import PipelineRun as PipelineRun
from chongming_runtime.pipeline._definition import Pipeline as Pipeline
from chongming_runtime.pipeline._definition import PipelineNode as PipelineNode
from chongming_runtime.run._outcome import TaskOutcome as TaskOutcome
from chongming_runtime.run._run_task import run_task as run_task
from chongming_runtime.run._setup import RunSetup as RunSetup
from chongming_runtime.run._task_run import RunListener as RunListener
from chongming_runtime.run._task_run import TaskRun as TaskRun

__version__ = "0.1.0"

__all__ = [
    "TABLE_COLUMNS",
    "Attempt",
    "AttemptHandle",
    "AttemptResult",
    "CommandFailed",
    "Controller",
    "ControllerStats",
    "Executor",
    "InlineExecutor",
    "Job",
    "PersistFailure",
    "Pipeline",
    "PipelineNode",
    "PipelineOutcome",
    "PipelineRun",
    "ProcessExecutor",
    "ReconcileReport",
    "RegisteredTask",
    "RunListener",
    "RunSetup",
    "RuntimeContext",
    "TaskContext",
    "TaskOutcome",
    "TaskRun",
    "ThreadExecutor",
    "active_by_worker",
    "default_owner",
    "describe_buckets",
    "display_width",
    "encodable",
    "fleet_held_for",
    "format_elapsed",
    "name_cell",
    "printable",
    "render_table",
    "run_command",
    "run_task",
    "waiting_reason",
    "worker_process_gone",
]

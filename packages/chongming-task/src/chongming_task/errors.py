"""The error hierarchy (guide §10); see `chongming_core.TaskError` for the tree."""

from __future__ import annotations

from chongming_core import AttemptsExhausted as AttemptsExhausted
from chongming_core import CircularDependency as CircularDependency
from chongming_core import ConcurrencyConflict as ConcurrencyConflict
from chongming_core import ConfigurationError as ConfigurationError
from chongming_core import DependencyFailed as DependencyFailed
from chongming_core import InvalidTransition as InvalidTransition
from chongming_core import StoreError as StoreError
from chongming_core import StoreNotFound as StoreNotFound
from chongming_core import TaskCancelled as TaskCancelled
from chongming_core import TaskError as TaskError
from chongming_core import TaskExecutionError as TaskExecutionError
from chongming_core import TaskTimeout as TaskTimeout

__all__ = [
    "AttemptsExhausted",
    "CircularDependency",
    "ConcurrencyConflict",
    "ConfigurationError",
    "DependencyFailed",
    "InvalidTransition",
    "StoreError",
    "StoreNotFound",
    "TaskCancelled",
    "TaskError",
    "TaskExecutionError",
    "TaskTimeout",
]

"""Manage many tasks (guide §8): `Controller`, `render_table`, pipelines and reports."""

from __future__ import annotations

from chongming_runtime import Controller as Controller
from chongming_runtime import ControllerStats as ControllerStats
from chongming_runtime import Job as Job
from chongming_runtime import PersistFailure as PersistFailure
from chongming_runtime import Pipeline as Pipeline
from chongming_runtime import PipelineOutcome as PipelineOutcome
from chongming_runtime import PipelineRun as PipelineRun
from chongming_runtime import ReconcileReport as ReconcileReport
from chongming_runtime import render_table as render_table

__all__ = [
    "Controller",
    "ControllerStats",
    "Job",
    "PersistFailure",
    "Pipeline",
    "PipelineOutcome",
    "PipelineRun",
    "ReconcileReport",
    "render_table",
]

"""One supervised task: `TaskRun` (its state machine, attempts, retries, deadlines, pause and
stop), the pure decision of what an attempt's end means, what a run tells its listeners, and
`run_task`.

Internal: import the public names from `chongming_runtime`.
"""

"""One supervised task: `TaskRun` (its lifecycle: start, attempts, retries, stop, and what it
tells its listeners), the objects it owns for its deadlines (`RunDeadlines`) and for pausing its
body (`PauseControl`), the pure decision of what an attempt's end means (`decide`), and
`run_task`.

Internal: import the public names from `chongming_runtime`.
"""

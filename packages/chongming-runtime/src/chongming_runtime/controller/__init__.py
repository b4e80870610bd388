"""`Controller` (guide §8) and the collaborators it composes: the whitelist of names
(`TaskRegistry`), the runs held here (`HeldRuns`), the scheduler (ready queue, capacity,
named resources, bucket limits; `Scheduler`, typed against `SchedulableRun`), the lease
and its touch timer (`Lease`, `LeaseKeeper`), controls and queries (`Controls`,
`Queries`), the host it hands its pipeline coordinator (`ControllerHost`), bucket
ownership and recovery (`reconcile_store`).

Internal: import the public names from `chongming_runtime`.
"""

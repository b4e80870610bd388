"""`Controller` (guide §8): the whitelist of names, scheduling (capacity, ready queue, named
resources, bucket limits and ownership), leases, controls, queries and recovery.

Internal: import the public names from `chongming_runtime`.
"""

"""The runtime's side of the store: the `StoreWriter` (the only code that writes task state, batched
with group commit) and the `CommandPoller` (claims the control commands addressed to this node).

Internal: import the public names from `chongming_runtime`.
"""

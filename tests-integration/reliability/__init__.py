"""The reliability suite: faults injected, invariants checked (see docs/reliability.md)."""

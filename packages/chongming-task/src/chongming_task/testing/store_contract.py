"""The store contract suite (guide §8.7): subclass `StoreContract` and implement `make_store`.

A backend that keeps its tasks in an `InMemoryTaskStore` underneath (a wrapper) plants
the contract's damaged rows with `damage_memory_task` and `damage_memory_transition`.
"""

from __future__ import annotations

from chongming_store_contract import StoreContract as StoreContract
from chongming_store_contract import damage_memory_task as damage_memory_task
from chongming_store_contract import damage_memory_transition as damage_memory_transition

__all__ = ["StoreContract", "damage_memory_task", "damage_memory_transition"]

"""The store contract suite (guide §8.7): subclass `StoreContract` and implement `make_store`."""

from __future__ import annotations

from chongming_store_contract import StoreContract as StoreContract

__all__ = ["StoreContract"]

"""chongming-store-contract: the executable specification every chongming task store runs.

Example::

    from chongming_store_contract import StoreContract

    class TestMyStore(StoreContract):
        def make_store(self):
            return MyStore(...)

        def write_malformed_command(self, command, column, bad):
            ...  # a command row holding `bad` in `column`, written as another program could

The suite ships in a runtime distribution and never imports pytest; pytest
collects it through the backend's ``Test...`` subclass.
"""

from __future__ import annotations

from chongming_store_contract._builders import BASE_TIME as BASE_TIME
from chongming_store_contract._builders import BuiltTask as BuiltTask
from chongming_store_contract._builders import advance as advance
from chongming_store_contract._builders import build_command as build_command
from chongming_store_contract._builders import build_task as build_task
from chongming_store_contract._builders import build_versions as build_versions
from chongming_store_contract._builders import next_version as next_version
from chongming_store_contract._checks import expect as expect
from chongming_store_contract._checks import expect_equal as expect_equal
from chongming_store_contract._checks import present as present
from chongming_store_contract._checks import raises as raises
from chongming_store_contract._concurrency import run_concurrently as run_concurrently
from chongming_store_contract._contract import StoreContract as StoreContract
from chongming_store_contract._contract import (
    check_contract_complete as check_contract_complete,
)
from chongming_store_contract._fidelity import SQL_TEXTS as SQL_TEXTS
from chongming_store_contract._fidelity import UNICODE_TEXTS as UNICODE_TEXTS
from chongming_store_contract._fidelity import expect_same_snapshot as expect_same_snapshot
from chongming_store_contract._fidelity import rich_snapshot as rich_snapshot
from chongming_store_contract._malformed import MALFORMED_CASES as MALFORMED_CASES
from chongming_store_contract._malformed_values import Malformed as Malformed
from chongming_store_contract._unreadable import damage_memory_task as damage_memory_task
from chongming_store_contract._unreadable import (
    damage_memory_transition as damage_memory_transition,
)
from chongming_store_contract._values import hostile_outcomes as hostile_outcomes
from chongming_store_contract._values import hostile_progress as hostile_progress
from chongming_store_contract._values import renamed_outcomes as renamed_outcomes

__version__ = "0.1.0"

__all__ = [
    "BASE_TIME",
    "MALFORMED_CASES",
    "SQL_TEXTS",
    "UNICODE_TEXTS",
    "BuiltTask",
    "Malformed",
    "StoreContract",
    "advance",
    "build_command",
    "build_task",
    "build_versions",
    "check_contract_complete",
    "damage_memory_task",
    "damage_memory_transition",
    "expect",
    "expect_equal",
    "expect_same_snapshot",
    "hostile_outcomes",
    "hostile_progress",
    "next_version",
    "present",
    "raises",
    "renamed_outcomes",
    "rich_snapshot",
    "run_concurrently",
]

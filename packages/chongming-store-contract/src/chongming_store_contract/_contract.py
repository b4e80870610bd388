"""`StoreContract`: the executable specification every `TaskStore` backend runs."""

from __future__ import annotations

import inspect

from chongming_store_contract._checks import expect
from chongming_store_contract._commands import CommandsContract
from chongming_store_contract._concurrency import ConcurrencyContract
from chongming_store_contract._durable import DurableWorkContract
from chongming_store_contract._fidelity import FidelityContract
from chongming_store_contract._guard import contract_problems, contract_test_names
from chongming_store_contract._history import HistoryContract
from chongming_store_contract._housekeeping import HousekeepingContract
from chongming_store_contract._malformed import MalformedCommandsContract
from chongming_store_contract._queries import QueriesContract
from chongming_store_contract._side_path import SidePathContract
from chongming_store_contract._snapshots import SnapshotsContract
from chongming_store_contract._unreadable import UnreadableContract
from chongming_store_contract._values import ValuesContract

__all__ = ["StoreContract", "check_contract_complete"]


class StoreContract(
    SnapshotsContract,
    QueriesContract,
    HistoryContract,
    SidePathContract,
    CommandsContract,
    MalformedCommandsContract,
    HousekeepingContract,
    FidelityContract,
    ValuesContract,
    ConcurrencyContract,
    UnreadableContract,
    DurableWorkContract,
):
    """The contract suite. Subclass it once per backend; pytest collects the subclass.

    Example::

        class TestMyStore(StoreContract):
            def make_store(self) -> TaskStore:
                return MyStore(...)

            def open_same_store(self, store: TaskStore) -> TaskStore:
                return MyStore(...)  # a second connection on the same data

            def write_malformed_command(self, command, column, bad) -> bool:
                ...  # write the row with `column` holding `bad`, as another program could

    Each test gets ``self.store`` from `make_store` (fresh and empty) and the
    contract closes it afterwards. A backend other than `InMemoryTaskStore` also
    implements `plant_unreadable_task` and `plant_unreadable_transition` (raw SQL,
    say), which write rows of the wrong shape for the cases of damaged rows. A
    backend that cannot pass a case yet overrides it with
    ``@pytest.mark.xfail(reason="...")``; dropping a case or overriding it without
    that mark fails `test_contract_is_complete`.
    """

    def setup_method(self, method: object) -> None:
        """Refuse to run when the completeness guard itself was replaced, then set up."""
        guard = inspect.getattr_static(type(self), "test_contract_is_complete", None)
        expect(
            guard is StoreContract.__dict__["test_contract_is_complete"],
            f"{type(self).__name__} replaces test_contract_is_complete, the guard that keeps "
            f"the contract whole; found {guard!r}. Remove that override.",
        )
        super().setup_method(method)

    def test_contract_is_complete(self) -> None:
        """Every contract test still runs here, or is marked xfail with a reason."""
        problems = check_contract_complete(type(self))
        expect(
            not problems,
            f"{type(self).__name__} does not run the whole store contract:\n  "
            + "\n  ".join(problems),
        )


def check_contract_complete(backend: type) -> list[str]:
    """Why `backend` (a `StoreContract` subclass) does not run the whole contract.

    Also reports a contract test whose shared function was given pytest marks
    (marking ``StoreContract.test_x`` itself would change it for every backend).

    Returns:
        One sentence per problem; empty when the contract is complete.
    """
    problems = contract_problems(backend, StoreContract)
    for name in contract_test_names(StoreContract):
        for klass in StoreContract.__mro__:
            if name in vars(klass):
                marks = getattr(vars(klass)[name], "pytestmark", None)
                if marks:
                    problems.append(
                        f"the shared contract test {klass.__name__}.{name} carries marks "
                        f"{marks!r}; mark an override in the backend's class instead of the "
                        "contract's own function"
                    )
                break
    return problems

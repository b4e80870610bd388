"""The contract against the reference store, `InMemoryTaskStore`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from chongming_core import InMemoryTaskStore, TaskStore
from chongming_store_contract import StoreContract
from chongming_store_contract._guard import contract_test_names


class TestInMemoryStoreContract(StoreContract):
    def make_store(self) -> TaskStore:
        return InMemoryTaskStore()


def test_importing_the_contract_does_not_load_pytest() -> None:
    code = (
        "import sys\n"
        "import chongming_store_contract\n"
        "assert 'pytest' not in sys.modules, sorted(m for m in sys.modules if 'pytest' in m)\n"
        "assert '_pytest' not in sys.modules\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


_BACKEND_MODULE = """
import pytest

from chongming_core import InMemoryTaskStore
from chongming_store_contract import StoreContract
from chongming_store_contract._guard import contract_test_names


class TestThirdPartyStore(StoreContract):
    def make_store(self):
        return InMemoryTaskStore()

    @pytest.mark.xfail(reason="pretend this backend cannot list commands yet", strict=True)
    def test_commands_lists_oldest_first_with_filters(self):
        raise AssertionError("not implemented")
"""


def test_a_backend_subclass_is_collected_with_its_xfail_override(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "test_third_party.py").write_text(_BACKEND_MODULE, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    expected = len(contract_test_names(StoreContract)) - 1
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{expected} passed, 1 xfailed" in result.stdout, result.stdout

"""Fixtures of the CLI tests (the helpers live in `cli_support`, importable from the tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_support import Workspace, make_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A fresh workspace per test."""
    return make_workspace(tmp_path / "ws")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """One workspace per module, for tests that only read."""
    return make_workspace(tmp_path_factory.mktemp("cli") / "ws")

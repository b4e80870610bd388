"""The package's edges: the CLI's entry point, and headless packages that never load Textual."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import chongming_tui
from chongming_runtime import Controller
from chongming_tui import DashboardApp, run_dashboard


def test_headless_packages_do_not_import_textual() -> None:
    code = (
        "import sys\n"
        "import chongming_core, chongming_runtime, chongming_store_sqlite\n"
        "import chongming_store_contract\n"
        "loaded = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "assert not loaded, loaded\n"
        "import chongming_tui\n"
        "assert 'textual' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_the_public_names() -> None:
    assert chongming_tui.__all__ == ["DashboardApp", "run_dashboard"]


def test_run_dashboard_runs_the_app_with_the_cli_arguments(
    console: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake_run(self: DashboardApp, **kwargs: Any) -> int | None:
        seen.update(label=self.store_label, owner=self.controller.owner, kwargs=kwargs)
        return None

    monkeypatch.setattr(DashboardApp, "run", fake_run)
    code = run_dashboard(controller=console, store_label="postgresql://ops:****@db/tasks")
    assert code == 0
    assert seen == {"label": "postgresql://ops:****@db/tasks", "owner": "console-1", "kwargs": {}}


def test_bad_options_are_refused(console: Controller) -> None:
    with pytest.raises(ValueError, match="refresh_interval"):
        DashboardApp(console, store_label="x", refresh_interval=0)
    with pytest.raises(ValueError, match="idle_threshold"):
        DashboardApp(console, store_label="x", idle_threshold=-1)
    with pytest.raises(ValueError, match="limit"):
        DashboardApp(console, store_label="x", row_limit=0)

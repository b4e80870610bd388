"""The built wheels alone give a working ``chongming-task`` command (slow: builds and installs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    if not uv:
        pytest.skip("uv is not installed")
    return uv


def _run(args: list[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_wheels_install_a_working_command(tmp_path: Path) -> None:
    uv = _uv()
    dist = tmp_path / "dist"
    _run([uv, "build", "--all-packages", "--out-dir", str(dist)], cwd=ROOT, timeout=300)
    assert sorted(dist.glob("chongming_cli-*.whl")), "no chongming-cli wheel was built"
    venv = tmp_path / "venv"
    _run([uv, "venv", "--python", sys.executable, str(venv)], cwd=tmp_path, timeout=60)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    install = [uv, "pip", "install", "--python", str(python), "--find-links", str(dist)]
    try:
        _run([*install, "--offline", "chongming-task[cli]"], cwd=tmp_path, timeout=300)
    except AssertionError:  # a dependency is not in the uv cache: let uv download it
        _run([*install, "chongming-task[cli]"], cwd=tmp_path, timeout=300)
    command = venv / ("Scripts/chongming-task.exe" if os.name == "nt" else "bin/chongming-task")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHONGMING_", "PYTHON"))}
    assert "exit codes" in _run([str(command), "--help"], cwd=tmp_path, timeout=60, env=env)
    out = _run(
        [str(command), "--db", "bundle.db", "run", "extract", "--tasks",
         "chongming_cli.demo_tasks", "--arg", "day=2026-10-02", "--task-id", "b-1"],
        cwd=tmp_path, timeout=60, env=env,
    )  # fmt: skip
    assert "status:  succeeded" in out
    listed = _run([str(command), "--db", "bundle.db", "ps"], cwd=tmp_path, timeout=60, env=env)
    assert "b-1" in listed

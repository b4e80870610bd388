"""`uv build --all-packages` builds a wheel and an sdist of every distribution."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMPORT_NAMES = {
    "chongming_core",
    "chongming_runtime",
    "chongming_store_contract",
    "chongming_store_sqlite",
    "chongming_store_postgres",
    "chongming_cli",
    "chongming_tui",
    "chongming_task",
}


@pytest.mark.slow
def test_every_distribution_builds_a_wheel_and_an_sdist(tmp_path: Path) -> None:
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is needed to build the distributions (make installs it)"
    done = subprocess.run(
        [uv, "build", "--all-packages", "--out-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    wheels = sorted(tmp_path.glob("*.whl"))
    sdists = sorted(tmp_path.glob("*.tar.gz"))
    assert {w.name.split("-")[0] for w in wheels} == IMPORT_NAMES
    assert {s.name.split("-")[0] for s in sdists} == IMPORT_NAMES
    for wheel in wheels:
        import_name = wheel.name.split("-")[0]
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            assert f"{import_name}/py.typed" in names, wheel.name
            metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
            text = archive.read(metadata).decode()
        if import_name == "chongming_core":
            assert "Requires-Dist" not in text, "chongming-core must declare no dependency"

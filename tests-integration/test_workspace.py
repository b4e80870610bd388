"""The workspace itself: eight distributions, released in lockstep, with the declared layout."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"
DISTRIBUTIONS = {
    "chongming-core": "chongming_core",
    "chongming-runtime": "chongming_runtime",
    "chongming-store-contract": "chongming_store_contract",
    "chongming-store-sqlite": "chongming_store_sqlite",
    "chongming-store-postgres": "chongming_store_postgres",
    "chongming-cli": "chongming_cli",
    "chongming-tui": "chongming_tui",
    "chongming-task": "chongming_task",
}


def _project(dist: str) -> dict[str, object]:
    data = tomllib.loads((PACKAGES / dist / "pyproject.toml").read_text(encoding="utf-8"))
    project = data["project"]
    assert isinstance(project, dict)
    return project


def _requirements(project: dict[str, object]) -> list[str]:
    deps = project.get("dependencies", [])
    extras = project.get("optional-dependencies", {})
    assert isinstance(deps, list)
    assert isinstance(extras, dict)
    reqs = [str(d) for d in deps]
    for items in extras.values():
        reqs.extend(str(i) for i in items)
    return reqs


def test_eight_distributions_with_the_declared_layout() -> None:
    found = {p.name for p in PACKAGES.iterdir() if (p / "pyproject.toml").exists()}
    assert found == set(DISTRIBUTIONS)
    for dist, import_name in DISTRIBUTIONS.items():
        base = PACKAGES / dist
        assert (base / "src" / import_name / "py.typed").is_file(), dist
        assert (base / "tests").is_dir(), dist
        assert _project(dist)["name"] == dist


def test_one_version_and_exact_sibling_pins() -> None:
    versions = {dist: _project(dist)["version"] for dist in DISTRIBUTIONS}
    assert len(set(versions.values())) == 1, versions
    (version,) = set(versions.values())
    for dist in DISTRIBUTIONS:
        for requirement in _requirements(_project(dist)):
            name = requirement.split("==")[0].split(">")[0].split("[")[0].strip()
            if name in DISTRIBUTIONS:
                assert requirement == f"{name}=={version}", (dist, requirement)


def test_core_declares_no_runtime_dependency() -> None:
    assert _project("chongming-core").get("dependencies") == []
    assert "optional-dependencies" not in _project("chongming-core")


def test_sibling_dependencies_come_from_the_workspace() -> None:
    for dist in DISTRIBUTIONS:
        data = tomllib.loads((PACKAGES / dist / "pyproject.toml").read_text(encoding="utf-8"))
        sources = data.get("tool", {}).get("uv", {}).get("sources", {})
        for requirement in _requirements(_project(dist)):
            name = requirement.split("==")[0].strip()
            if name in DISTRIBUTIONS:
                assert sources.get(name) == {"workspace": True}, (dist, name)


def _make_python(bin_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``make -s python`` with only `bin_dir` on PATH."""
    return subprocess.run(
        [str(bin_dir / "make"), "-s", "-C", str(ROOT), "python"],
        env={"PATH": str(bin_dir), "HOME": str(bin_dir), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_makefile_finds_a_python_of_at_least_3_11(tmp_path: Path) -> None:
    """Not only python3.11: the first of python3.11 ... python3 on PATH that is >= 3.11."""
    make = shutil.which("make")
    assert make is not None
    (tmp_path / "make").symlink_to(make)

    def fake(name: str, suitable: bool) -> None:  # answers the Makefile's version check
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\nexit {0 if suitable else 1}\n", encoding="utf-8")
        path.chmod(0o755)

    fake("python3", suitable=False)
    refused = _make_python(tmp_path)
    assert refused.returncode != 0
    assert "no Python >= 3.11 on PATH (tried: python3.11 python3.12" in refused.stderr
    assert "make UV_PYTHON=/path/to/python3.12" in refused.stderr
    fake("python3.13", suitable=True)
    found = _make_python(tmp_path)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "python3.13"
    fake("python3.11", suitable=True)
    assert _make_python(tmp_path).stdout.strip() == "python3.11"  # the first one wins
    chosen = _make_python(tmp_path, UV_PYTHON="/opt/py/bin/python3")
    assert chosen.stdout.strip() == "/opt/py/bin/python3"

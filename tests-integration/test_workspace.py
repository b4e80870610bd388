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


#: Private modules that code outside their distribution still imports, each for a reason
#: no public name serves: a fault injected where the store opens its connection, the
#: internals a stress test or a benchmark measures, a store of an old schema built byte
#: for byte. Anything else uses public names (a distribution's own tests may use its
#: private modules freely).
PRIVATE_IMPORTS_ALLOWED = {
    (
        "packages/chongming-cli/tests/test_no_create.py",
        "chongming_store_sqlite._schema",
    ): "builds a store of schema 1 to see the console refuse to migrate it",
    (
        "tests-integration/reliability/test_outage.py",
        "chongming_store_sqlite._store",
    ): "replaces the connection the store opens with a faulty one",
    (
        "tests-integration/reliability/test_unstorable_values.py",
        "chongming_store_sqlite._opening",
    ): "wraps the connection the store opens to lower SQLite's length limit",
    (
        "tests-integration/reliability/test_unstorable_values.py",
        "chongming_store_contract._checks",
    ): "compares JSON as every store must hand it back",
    (
        "tests-integration/reliability/test_pipeline_storm.py",
        "chongming_runtime.pipeline._definition",
    ): "checks each node's release against the pure join decision",
    (
        "benchmarks/bench_runtime.py",
        "chongming_runtime.body._control",
    ): "times checkpoint() on the attempt's control word alone",
    (
        "benchmarks/bench_dashboard.py",
        "chongming_tui._data",
    ): "times the dashboard's fetch without drawing",
    (
        "benchmarks/bench_dashboard.py",
        "chongming_tui._filters",
    ): "times the dashboard's filters without drawing",
    (
        "conftest.py",
        "chongming_runtime.persistence._writer",
    ): "types the make_writer fixture (the writer is not public)",
}


def _imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (functions, TYPE_CHECKING blocks)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _is_private(module: str) -> bool:
    top, *rest = module.split(".")
    return top in DISTRIBUTIONS.values() and any(
        part.startswith("_") and not part.startswith("__") for part in rest
    )


def test_code_outside_a_distribution_imports_only_its_public_names() -> None:
    """A distribution's private modules are its own: the import-linter contract holds its
    siblings to that, and this test holds everything else in the repository (other
    distributions' tests, the integration tests, benchmarks, examples, conftest)."""
    own_package = {f"packages/{dist}": package for dist, package in DISTRIBUTIONS.items()}
    paths = [
        *ROOT.glob("packages/*/tests/**/*.py"),
        *ROOT.glob("tests-integration/**/*.py"),
        *ROOT.glob("benchmarks/**/*.py"),
        *ROOT.glob("examples/**/*.py"),
        ROOT / "conftest.py",
    ]
    found: set[tuple[str, str]] = set()
    for path in paths:
        relative = path.relative_to(ROOT).as_posix()
        own = own_package.get("/".join(relative.split("/")[:2]))
        for module in _imported_modules(path):
            if _is_private(module) and module.split(".")[0] != own:
                found.add((relative, module))
    unexplained = sorted(found - PRIVATE_IMPORTS_ALLOWED.keys())
    assert not unexplained, f"private modules imported from outside: {unexplained}"
    stale = sorted(PRIVATE_IMPORTS_ALLOWED.keys() - found)
    assert not stale, f"listed as allowed but no longer imported: {stale}"

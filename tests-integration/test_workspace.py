"""The workspace itself: eight distributions, released in lockstep, with the declared layout."""

from __future__ import annotations

import tomllib
from pathlib import Path

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

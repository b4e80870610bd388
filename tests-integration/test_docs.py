"""Every Python code block in README.md and docs/ runs, so the docs cannot rot.

A block is fenced as ```python. The blocks of one file run in order, in one
namespace, in a fresh subprocess whose working directory is a temporary folder.
A block that must not run is preceded by ``<!-- not-runnable: <reason> -->``;
the reason is required.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(
    r"(?P<marker><!--\s*not-runnable:(?P<reason>[^>]*)-->\s*\n)?```python\n(?P<code>.*?)```",
    re.DOTALL,
)


def _documents() -> list[Path]:
    docs = sorted((ROOT / "docs").rglob("*.md")) if (ROOT / "docs").is_dir() else []
    readme = ROOT / "README.md"
    return ([readme] if readme.exists() else []) + docs


def _blocks(path: Path) -> list[str]:
    runnable = []
    for match in _FENCE.finditer(path.read_text(encoding="utf-8")):
        if match.group("marker"):
            assert match.group("reason").strip(), f"{path}: not-runnable needs a reason"
            continue
        runnable.append(match.group("code"))
    return runnable


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(path: Path, tmp_path: Path) -> None:
    blocks = _blocks(path)
    if not blocks:
        return
    script = tmp_path / "doc_blocks.py"
    script.write_text(
        "\n\n".join(f"# --- block {i + 1}\n{code}" for i, code in enumerate(blocks)),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{path.name}:\n{done.stdout}\n{done.stderr}"


def test_the_readme_tour_runs_twice_in_a_row(tmp_path: Path) -> None:
    """The front door: a second run of the tour, in the same folder, works as the first
    (its store and fixed task ids used to stay and make it fail with a traceback)."""
    script = tmp_path / "tour.py"
    script.write_text("\n\n".join(_blocks(ROOT / "README.md")), encoding="utf-8")
    for run in (1, 2):
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"run {run}:\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr
    assert (tmp_path / "tour.db").exists()  # left for `chongming-task --db tour.db ps`


def test_fence_parser_honours_not_runnable_markers(tmp_path: Path) -> None:
    sample = tmp_path / "sample.md"
    sample.write_text(
        "```python\nx = 1\n```\n<!-- not-runnable: needs a real Kafka -->\n"
        "```python\nconnect()\n```\n```text\nnot python\n```\n",
        encoding="utf-8",
    )
    assert _blocks(sample) == ["x = 1\n"]


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.MULTILINE)}


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in _LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{path.name}: broken links: {broken}"


def test_the_store_guide_names_every_shared_part_of_a_backend() -> None:
    """docs/store-guide.md section 11 is where a backend author finds `chongming_core.backend`:
    a part exported there and not named in the guide is one nobody finds."""
    from chongming_core import backend

    guide = (ROOT / "docs" / "store-guide.md").read_text(encoding="utf-8")
    missing = [name for name in backend.__all__ if f"`{name}" not in guide]
    assert not missing, f"docs/store-guide.md does not name {missing}"

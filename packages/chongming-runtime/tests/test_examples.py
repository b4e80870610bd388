"""Every runtime example runs as ``python examples/NN_x.py`` from the repository root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(
    p
    for p in (ROOT / "examples").glob("0[1-9]_*.py")
    if p.name[:2] in {"01", "02", "03", "04", "05", "06", "07", "09"}
)


def test_the_examples_are_there() -> None:
    assert [p.name[:2] for p in EXAMPLES] == ["01", "02", "03", "04", "05", "06", "07", "09"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(example: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(example.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip()

"""Run every benchmark (``make bench``): each ``bench_*.py`` here exposes ``main()``.

Benchmarks report ratios against a baseline measured in the same run, so the
figures mean the same on a fast and a slow machine. Pass names to run a subset:
``python benchmarks/run.py core runtime``.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load benchmark {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    """Run the selected benchmarks (all by default)."""
    wanted = set(argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    for path in scripts:
        name = path.stem.removeprefix("bench_")
        if wanted and name not in wanted:
            continue
        print(f"== {name} ==", flush=True)
        started = time.perf_counter()
        module = _load(path)
        module.main()  # type: ignore[attr-defined]
        print(f"   ({time.perf_counter() - started:.1f}s)\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

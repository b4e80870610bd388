"""The core is stdlib-only: importing it loads nothing but the standard library and itself."""

from __future__ import annotations

import json
import subprocess
import sys

_CHILD = """
import json, sys
import chongming_core
chongming_core.StateMachine.create("t1", "抽取").mark_queued()
print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules})))
"""


def test_importing_the_core_loads_only_the_standard_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout)
    assert "chongming_core" in loaded
    allowed = set(sys.stdlib_module_names) | {"chongming_core", "__main__"}
    outside = [name for name in loaded if name not in allowed]
    assert outside == [], f"chongming_core pulled in non-stdlib modules: {outside}"

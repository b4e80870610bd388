"""``make demo`` (``python -m chongming_task.demo``) runs the main job through the CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from chongming_core import TaskStatus
from chongming_store_sqlite import SqliteTaskStore


def test_the_demo_runs_and_leaves_its_database(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
    done = subprocess.run(
        [sys.executable, "-m", "chongming_task.demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "pipeline succeeded" in out
    assert "pause requested for task 'orders-worker' but not confirmed" in out
    assert re.search(r"^status: +paused \(in place\)$", out, re.MULTILINE)
    assert re.search(r"^heartbeat: +\d{4}-.* ago\)$", out, re.MULTILINE)  # is it moving?
    assert "chongming-task --db .demo/tasks.db dashboard" in out
    assert "(exit code 3)" in out  # the failing task
    # step 3 reads as step 2 does: the "running task" note first, then the outcome
    step3 = out[out.index("\n3. ") : out.index("\n4. ")]
    # step 4: one process enqueues, two worker processes share the work and leave cleanly
    step4 = out[out.index("\n4. ") : out.index("\n5. ")]
    assert re.findall(r"^   worker-[ab] ran \d+: ", step4, re.MULTILINE), step4
    assert step4.count("(exit code 0)") >= 9, step4  # 7 submits, nodes, and both workers
    assert step3.index("running task 'flaky-source'") < step3.index("status:  failed"), step3
    db = tmp_path / ".demo" / "tasks.db"
    with SqliteTaskStore(db) as store:
        worker = store.get("orders-worker")
        assert worker is not None
        assert worker.status is TaskStatus.SUCCEEDED
        steps = [t.to_status for t in store.history("orders-worker")]
    assert TaskStatus.PAUSED in steps
    assert steps[-2:] == [TaskStatus.STOPPING, TaskStatus.SUCCEEDED]

"""Artifact folders (§2.4): one per task id and attempt, whatever the id, owner-only."""

from __future__ import annotations

import os
import stat
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

import runtime_proc_tasks
from chongming_runtime import InlineExecutor, ProcessExecutor, TaskContext, run_task
from chongming_runtime.body._artifacts import folder_name

#: Ids that share a folder or cannot have one when the id is used as a path: separators,
#: names that are paths, ids equal but for case or Unicode normalisation, device names,
#: a trailing dot, NUL, a lone surrogate, and ids too long for one file name.
HOSTILE_IDS = (
    "x/y",
    "x\\y",
    "x_y",
    "..",
    "_.._",
    ".",
    "_._",
    "/",
    "x/../y",
    "a" * 300,
    "a" * 301,
    "任务" * 150,
    "任务/1",
    "任务_1",
    "Job",
    "job",
    "JOB",
    "con",
    "CON",
    "con.txt",
    "trailing.",
    "trailing",
    "a:b",
    "a b",
    "a\x00b",
    "a\nb",
    "\udcff",
    unicodedata.normalize("NFC", "café"),
    unicodedata.normalize("NFD", "café"),
    "😀",
    "~",
    "x_y~0123456789abcdef",
)


@pytest.fixture
def umask_022() -> Iterator[None]:
    """A common permissive umask: folders would be 0o755 without an explicit mode."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def write_own_id(ctx: TaskContext) -> str:
    folder = ctx.artifact_dir
    (folder / "id.txt").write_text(repr(ctx.task_id), encoding="utf-8")
    return str(folder)


def test_every_distinct_id_gets_a_folder_of_its_own(tmp_path: Path) -> None:
    folders: dict[str, Path] = {}
    for task_id in HOSTILE_IDS:
        outcome = run_task(
            write_own_id, task_id=task_id, executor=InlineExecutor(), artifact_dir=tmp_path
        )
        assert outcome.ok, (task_id, outcome.failure)
        folders[task_id] = Path(outcome.value)
    # a later task never overwrote an earlier one's file: each folder holds its own id
    for task_id, folder in folders.items():
        assert (folder / "id.txt").read_text(encoding="utf-8") == repr(task_id)
        assert [p.name for p in folder.parent.rglob("*")] == ["attempt-1", "id.txt"]
        assert folder.parent.parent == tmp_path  # inside the root, never above or beside it
        assert folder.name == "attempt-1"
    names = [folder.parent.name for folder in folders.values()]
    # distinct even where case or normalisation is ignored (macOS, Windows)
    folded = {unicodedata.normalize("NFD", name).casefold() for name in names}
    assert len(folded) == len(HOSTILE_IDS)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


@pytest.mark.parametrize("task_id", HOSTILE_IDS)
def test_a_folder_name_is_one_portable_name_within_the_length_limit(task_id: str) -> None:
    name = folder_name(task_id)
    assert 0 < len(name.encode("utf-8")) <= 140  # far below 255 bytes, beside attempt-<n>
    assert name not in {".", ".."}
    assert not set(name) & set('/\\:*?"<>|\x00 \n')
    assert not name.endswith(".")
    assert name.split(".")[0].lower() not in {"con", "prn", "aux", "nul"}
    name.encode("utf-8")  # no lone surrogate: every file system can hold it


@pytest.mark.parametrize("task_id", ["export-1", "job-a", "task-0123456789ab", "etl.v2_nightly"])
def test_a_plain_lower_case_id_is_its_own_folder_name(tmp_path: Path, task_id: str) -> None:
    outcome = run_task(
        write_own_id, task_id=task_id, executor=InlineExecutor(), artifact_dir=tmp_path
    )
    assert Path(outcome.value) == tmp_path / task_id / "attempt-1"


def test_other_ids_keep_a_readable_prefix_and_a_hash_of_the_exact_id() -> None:
    assert folder_name("x/y").startswith("x_y~")
    assert folder_name("..").startswith("__~")
    assert folder_name("任务/1").startswith("任务_1~")
    assert folder_name("Job").startswith("Job~")
    assert folder_name("x/y") != folder_name("x\\y")
    assert folder_name("x/y") == folder_name("x/y")  # stable: every attempt finds it


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_folders_are_created_owner_only_and_an_existing_root_is_left_alone(
    tmp_path: Path,
) -> None:
    root = tmp_path / "new" / "artifacts"
    outcome = run_task(write_own_id, task_id="x/y", executor=InlineExecutor(), artifact_dir=root)
    attempt = Path(outcome.value)
    for folder in (attempt, attempt.parent, root, root.parent):
        assert _mode(folder) == 0o700, folder
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    outcome = run_task(write_own_id, task_id="job", executor=InlineExecutor(), artifact_dir=shared)
    assert _mode(shared) == 0o755  # the operator's folder keeps the mode they chose
    assert _mode(Path(outcome.value)) == _mode(Path(outcome.value).parent) == 0o700


@pytest.mark.usefixtures("umask_022")
def test_a_child_process_uses_the_same_owner_only_folder(tmp_path: Path) -> None:
    outcome = run_task(
        runtime_proc_tasks.write_artifact,
        "from the child",
        task_id="x/y",
        executor=ProcessExecutor(),
        artifact_dir=tmp_path,
    )
    assert outcome.ok, outcome.failure
    folder = Path(outcome.value)
    assert folder == tmp_path / folder_name("x/y") / "attempt-1"
    assert (folder / "out.txt").read_text(encoding="utf-8") == "from the child"
    assert _mode(folder) == _mode(folder.parent) == 0o700

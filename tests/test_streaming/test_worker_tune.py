"""streaming.pipeline.worker_tune: PySpark's per-task importlib.invalidate_caches() must stop re-reading
zip archives already read, and archives added later must still import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import importlib, sys, zipimport
    first, later = sys.argv[1], sys.argv[2]
    reads = []
    real_read = zipimport._read_directory
    zipimport._read_directory = lambda path: reads.append(path) or real_read(path)
    sys.path.insert(0, first)
    import mod_first
    importlib.invalidate_caches()
    before = reads.count(first)

    from streaming.pipeline import worker_tune
    worker_tune.apply()
    worker_tune.apply()  # idempotent
    for _ in range(5):
        importlib.invalidate_caches()
    after = reads.count(first)

    sys.path.insert(0, later)  # an archive added later (addPyFile) still imports
    importlib.invalidate_caches()
    import mod_later
    print(before, after, mod_first.VALUE, mod_later.VALUE)
    """
)


def _archive(path: Path, module: str, value: int) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{module}.py", f"VALUE = {value}\n")
        for i in range(200):  # a directory worth reading
            zf.writestr(f"pkg{i}/__init__.py", "")
    return str(path)


def test_invalidate_caches_no_longer_rereads_known_archives(tmp_path: Path) -> None:
    first = _archive(tmp_path / "first.zip", "mod_first", 1)
    later = _archive(tmp_path / "later.zip", "mod_later", 2)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, first, later],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout.split()
    before, after, v1, v2 = (int(x) for x in out)
    assert before >= 2  # unpatched: the import read it, and invalidate_caches read it again
    assert after == before  # patched: five more invalidations, no re-read
    assert (v1, v2) == (1, 2)


GC_SCRIPT = textwrap.dedent(
    """
    import gc
    from streaming.pipeline import worker_tune
    worker_tune.apply()
    frozen = gc.get_freeze_count()
    tracked_after = len(gc.get_objects())  # what a per-task gc.collect() still walks

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle made by a task after the freeze
    del a, b
    print(frozen, tracked_after, gc.collect())
    """
)


def test_long_lived_objects_are_frozen_and_task_cycles_still_collected() -> None:
    out = subprocess.run(
        [sys.executable, "-c", GC_SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout.split()
    frozen, tracked, collected = (int(x) for x in out)
    assert frozen > 20_000  # pandas, pyarrow, numpy and our modules left the collected generations
    assert tracked < frozen // 10  # a per-task collection walks a small fraction of the heap
    assert collected >= 2  # the task's cyclic garbage (two objects, their dicts) is still freed

"""The Spark driver JVM's class-data-sharing archive (AppCDS): the classes a mirror loads, made once.

Why: a fresh driver JVM loads and verifies ~20k classes of Spark, Scala and Hadoop before the first
micro-batch runs, on the critical path of every start.  An application CDS archive holds them
parsed and verified; the JVM maps it instead.  Measured on 2 cores (a busy machine): the CPU of the
JVM until the session is up 5.5-6.3 s with the archive against 10.0-12.0 s without, and until the
Python workers are warm 9.8-11.5 s against 17.1-20.9 s (bench/readiness.py has the whole start).

Made by ``make setup`` / the image build (``python -m streaming.app.class_archive_cmd``): a mirror
replays a small capture file (a few real offset-commit records, the capture source) through the
whole query -- decode, ``applyInPandasWithState`` on RocksDB, the sink -- in a JVM started with
``-XX:ArchiveClassesAtExit``; its classes are dumped when that JVM exits.  The Kafka connector's
classes are not in it (Spark loads ``spark.jars`` through a class loader of its own, which a
dynamic archive on JDK 17 does not cover).

Used when present (`java_options`): ``-XX:SharedArchiveFile`` with ``-Xshare:auto`` and the CDS
log off, so a missing, unreadable or stale archive (another JDK build, another class path --
another pyspark, a changed ``spark.driver.extraClassPath``) is skipped by the JVM without a word,
and the JVM starts as it would without it.  It never fails a start.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from streaming.jars import jars_root, pyspark_version

#: the environment variable that points the mirror at another archive (or at none: ``off``)
ARCHIVE_ENV = "COORDINATOR_MIRROR_CLASS_ARCHIVE"

#: the JVM's CDS messages off: a stale archive is then skipped silently (-Xshare:auto)
QUIET: tuple[str, ...] = ("-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off", "-Xlog:class+path=off")


def default_path() -> Path:
    """Where ``make setup`` puts the archive: beside the jars, one per pyspark version."""
    return jars_root() / "cds" / f"spark-driver-{pyspark_version()}.jsa"


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".size")


def archive_path() -> Path | None:
    """The archive to use: ``$COORDINATOR_MIRROR_CLASS_ARCHIVE`` (``off``: none) or the default --
    if it is readable and as large as when it was made (its ``.size`` stamp, written last by
    `build`).  The JVM checks the rest (its build, the class path) and skips a stale archive; a
    truncated one it would map and crash on (SIGBUS), hence the stamp."""
    given = os.environ.get(ARCHIVE_ENV)
    if given is not None and given.strip().lower() in {"", "off", "none", "false", "0"}:
        return None
    path = Path(given) if given else default_path()
    try:
        size = path.stat().st_size
        return (
            path
            if size > 0 and _stamp(path).read_text().strip() == str(size) and os.access(path, os.R_OK)
            else None
        )
    except (OSError, ValueError):
        return None


def java_options() -> list[str]:
    """The driver JVM's options to map the archive, or none when there is no usable archive."""
    path = archive_path()
    return [f"-XX:SharedArchiveFile={path}", *QUIET] if path is not None else []


def keep(partial: Path, output: Path) -> Path:
    """``partial`` (a JVM's ``-XX:ArchiveClassesAtExit`` output) checked and moved to ``output``,
    its size stamp written last: `archive_path` uses only an archive whose stamp matches."""
    if not partial.is_file() or partial.stat().st_size == 0:
        raise RuntimeError(f"the JVM wrote no class archive at {partial}")
    _check(partial)
    _stamp(output).unlink(missing_ok=True)
    partial.replace(output)
    _stamp(output).write_text(f"{output.stat().st_size}\n")
    return output


def _check(path: Path) -> None:
    """A JVM maps the archive and starts (``-version``), or the archive is not kept."""
    import shutil
    import subprocess

    home = os.environ.get("JAVA_HOME")
    java = shutil.which("java", path=os.path.join(home, "bin")) if home else None
    java = java or shutil.which("java") or "java"
    with tempfile.TemporaryDirectory(prefix="cm-class-archive-check-") as tmp:
        done = subprocess.run(  # in a directory of its own: a JVM that crashes leaves hs_err_pid*.log
            [java, f"-XX:SharedArchiveFile={path}", *QUIET, "-version"],
            check=False,
            capture_output=True,
            timeout=120,
            cwd=tmp,
        )
    if done.returncode != 0:
        path.unlink(missing_ok=True)
        raise RuntimeError(f"a JVM does not start with the class archive: {done.stderr.decode()[-500:]}")

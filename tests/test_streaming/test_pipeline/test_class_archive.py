"""The driver JVM's class-data-sharing archive: used only when whole, never a reason to fail a start.

A real JVM makes a small dynamic archive (``-XX:ArchiveClassesAtExit`` of ``java -version``) and
maps it; a truncated archive -- which a JVM maps and dies on with SIGBUS -- is refused before any
JVM sees it (its size stamp disagrees), and `class_archive._check` refuses one that does not start.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from streaming.pipeline import class_archive
from streaming.pipeline.session import class_archive_conf


def _java() -> str:
    java = shutil.which("java")
    assert java is not None, "java (17+) is required"
    return java


@pytest.fixture(scope="module")
def real_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cds") / "tiny.jsa"
    subprocess.run([_java(), f"-XX:ArchiveClassesAtExit={path}", "-version"], check=True, capture_output=True)
    assert path.stat().st_size > 0
    return path


def _stamped(path: Path, size: int | None = None) -> Path:
    path.with_name(path.name + ".size").write_text(f"{path.stat().st_size if size is None else size}\n")
    return path


@pytest.mark.parametrize(
    ("env", "stamp", "used"),
    [
        ("{path}", "right", True),
        ("{path}", "absent", False),  # no stamp: not made (or not finished) by `build`
        ("{path}", "wrong", False),  # truncated or rewritten since
        ("off", "right", False),
        ("OFF", "right", False),
        ("", "right", False),
        ("{missing}", "right", False),
    ],
)
def test_archive_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str, stamp: str, used: bool
) -> None:
    path = tmp_path / "a.jsa"
    path.write_bytes(b"x" * 100)
    if stamp == "right":
        _stamped(path)
    elif stamp == "wrong":
        _stamped(path, 99)
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, env.format(path=path, missing=tmp_path / "none.jsa"))
    assert class_archive.archive_path() == (path if used else None)
    assert bool(class_archive.java_options()) is used


def test_default_path_is_per_pyspark_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    monkeypatch.setenv("COORDINATOR_MIRROR_JARS", str(tmp_path))
    import pyspark

    assert class_archive.default_path() == tmp_path / "cds" / f"spark-driver-{pyspark.__version__}.jsa"
    assert class_archive.archive_path() is None  # none made: the JVM starts as before


def test_session_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.jsa"
    path.write_bytes(b"x")
    _stamped(path)
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, str(path))
    conf = class_archive_conf({})["spark.driver.extraJavaOptions"]
    assert conf.split()[0] == f"-XX:SharedArchiveFile={path}"
    assert "-Xshare:auto" in conf  # a stale archive is skipped, never fatal
    given = {"spark.driver.extraJavaOptions": "-Dx=1"}
    assert class_archive_conf(given)["spark.driver.extraJavaOptions"].endswith(" -Dx=1")
    # the options name an archive already (the training run, a user's own) or sharing is off
    for own in ("-XX:ArchiveClassesAtExit=/t.jsa", "-XX:SharedArchiveFile=/u.jsa", "-Xshare:off"):
        assert class_archive_conf({"spark.driver.extraJavaOptions": own}) == {}
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, "off")
    assert class_archive_conf(given) == {}


def test_a_real_jvm_maps_the_archive(real_archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stamped(real_archive)
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, str(real_archive))
    class_archive._check(real_archive)  # starts, quietly
    done = subprocess.run(
        [_java(), *class_archive.java_options(), "-version"], check=True, capture_output=True, text=True
    )
    assert "sharing" in done.stderr
    assert "cds" not in done.stderr.replace("-Xlog", "")  # no CDS messages


def test_a_truncated_archive_never_reaches_a_jvm(
    real_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cut = tmp_path / "cut.jsa"
    cut.write_bytes(real_archive.read_bytes()[: real_archive.stat().st_size // 2])
    # stamped when whole, truncated later: refused without starting a JVM
    _stamped(cut, real_archive.stat().st_size)
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, str(cut))
    assert class_archive.java_options() == []
    # what the stamp protects from: a JVM mapping it does not start -- `_check` (run by `build`
    # before the archive is kept) refuses it and removes it
    with pytest.raises(RuntimeError, match="does not start with the class archive"):
        class_archive._check(cut)
    assert not cut.exists()


def test_make_and_the_image_make_it_alike() -> None:
    """``make test-tools`` (what ``make test`` installs) and the image build run the same command
    (and neither fails on it); ``make setup`` does not wait for it (tests/test_docs/test_make.py)."""
    root = Path(__file__).resolve().parents[3]
    makefile = (root / "Makefile").read_text()
    tools = next(line for line in makefile.splitlines() if line.startswith("test-tools:"))
    assert "class-archive" in tools.split("##")[0]
    recipe = makefile.split("$(CLASS_ARCHIVE):", 1)[1].split("\n\n", 1)[0]
    dockerfile = (root / "Dockerfile").read_text()
    command = "-m streaming.app.class_archive_cmd"
    assert command in recipe and command in dockerfile
    assert "|| echo" in recipe and "|| echo" in dockerfile.split(command, 1)[1].split("\n\n")[0]


_SESSION_MAPS = """
import sys
from streaming.pipeline.session import build_session
spark = build_session(conf={"spark.ui.enabled": "false"})
pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
print(sys.argv[1] in open(f"/proc/{pid}/maps").read(), spark.range(3).count())
"""


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("whole", [True, False])
def test_a_mirror_session_maps_the_archive_when_whole(
    real_archive: Path, tmp_path: Path, whole: bool
) -> None:
    """The driver JVM `build_session` starts maps the archive it is given (a dynamic archive
    whose class path is a prefix of Spark's: here, none) -- and starts without it, quietly, when
    the archive is not whole."""
    import os
    import sys

    path = tmp_path / "a.jsa"
    data = real_archive.read_bytes()
    path.write_bytes(data if whole else data[: len(data) // 2])
    _stamped(path, len(data))
    env = dict(os.environ, **{class_archive.ARCHIVE_ENV: str(path)})
    done = subprocess.run(
        [sys.executable, "-c", _SESSION_MAPS, str(path)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.stdout.split() == [str(whole), "3"], done.stderr[-2000:]
    assert "cds" not in done.stderr.lower()
    assert not list(tmp_path.glob("hs_err*"))

"""Where the JVM artifacts live (`streaming.jars`): a folder counts only with the ``.complete`` stamp
``make jars`` writes last, a missing one names the folder and the make command that fills it, the
classpaths in the order the JVMs need them, versions from the environment -- over folders laid out
here in a temporary root (``COORDINATOR_MIRROR_JARS``), and over the real ``make jars`` output."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest

from streaming import jars


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COORDINATOR_MIRROR_JARS", str(tmp_path))
    for name in (
        "COORDINATOR_MIRROR_KAFKA_VERSION",
        "COORDINATOR_MIRROR_KAFKA_CLIENTS_VERSION",
        "COORDINATOR_MIRROR_KAFKA_OLD_VERSION",
    ):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _folder(root: Path, name: str, *files: str, complete: bool = True) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for f in files:
        (folder / f).write_bytes(b"PK")
    if complete:
        (folder / ".complete").write_text("")
    return folder


def test_versions_default_and_come_from_the_environment(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (jars.kafka_version(), jars.kafka_clients_version(), jars.kafka_old_version()) == (
        jars.DEFAULT_KAFKA_VERSION,
        jars.DEFAULT_KAFKA_CLIENTS_VERSION,
        jars.DEFAULT_KAFKA_OLD_VERSION,
    )
    monkeypatch.setenv("COORDINATOR_MIRROR_KAFKA_VERSION", "9.9.9")
    monkeypatch.setenv("COORDINATOR_MIRROR_KAFKA_CLIENTS_VERSION", "8.8.8")
    assert (jars.kafka_version(), jars.kafka_clients_version()) == ("9.9.9", "8.8.8")
    assert jars.jars_root() == root
    monkeypatch.delenv("COORDINATOR_MIRROR_JARS")
    assert jars.jars_root() == jars.repo_root() / "jvm" / "lib"
    assert jars.pyspark_version() == importlib.metadata.version("pyspark")


def test_a_folder_without_its_stamp_is_not_there(root: Path) -> None:
    _folder(root, "kafka-4.3.1", "kafka_2.13-4.3.1.jar", complete=False)  # a download cut short
    with pytest.raises(jars.MissingArtifactsError) as err:
        jars.kafka_dir("4.3.1")
    assert f"{root / 'kafka-4.3.1'} (no .complete stamp)" in str(err.value)
    assert "make jars KAFKA_VERSION=4.3.1" in str(err.value) and "COORDINATOR_MIRROR_JARS" in str(err.value)
    (root / "kafka-4.3.1" / ".complete").write_text("")
    assert jars.kafka_classpath("4.3.1") == f"{root / 'kafka-4.3.1'}/*"


def test_the_connectors_jars_need_the_connector(root: Path) -> None:
    _folder(root, "spark-kafka-4.2.0", "kafka-clients-3.9.1.jar", "commons-pool2-2.12.0.jar")
    with pytest.raises(jars.MissingArtifactsError, match="holds no spark-sql-kafka-0-10 jar"):
        jars.spark_kafka_jars("4.2.0")
    (root / "spark-kafka-4.2.0" / "spark-sql-kafka-0-10_2.13-4.2.0.jar").write_bytes(b"PK")
    assert [Path(j).name for j in jars.spark_kafka_jars("4.2.0")] == [
        "commons-pool2-2.12.0.jar",
        "kafka-clients-3.9.1.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
    ]
    with pytest.raises(jars.MissingArtifactsError, match=re.escape("make jars SPARK_VERSION=9.9.9")):
        jars.spark_kafka_jars("9.9.9")


def test_the_drivers_clients_bridge_first_then_kafka_clients(root: Path) -> None:
    _folder(root, "clients-4.3.1", "coordinator-mirror-kafka.jar", "jose4j-0.9.6.jar")
    with pytest.raises(jars.MissingArtifactsError, match=re.escape("holds no kafka-clients-4.3.1.jar")):
        jars.driver_client_jars("4.3.1")
    (root / "clients-4.3.1" / "kafka-clients-4.3.1.jar").write_bytes(b"PK")
    assert [Path(j).name for j in jars.driver_client_jars("4.3.1")] == [
        "coordinator-mirror-kafka.jar",
        "kafka-clients-4.3.1.jar",
        "jose4j-0.9.6.jar",
    ]


def test_localfs_and_the_probes_classpath(root: Path) -> None:
    _folder(root, "localfs-4.2.0", "coordinator-mirror-localfs.jar")
    assert jars.localfs_jar("4.2.0") == str(root / "localfs-4.2.0" / "coordinator-mirror-localfs.jar")
    _folder(root, "kafka-4.3.1", "k.jar")
    tools = _folder(root, "tools-4.3.1", "GroupProbe.class")
    assert jars.probe_classpath("4.3.1") == f"{root / 'kafka-4.3.1'}/*:{tools}"


def test_the_real_artifacts_are_complete() -> None:
    """What ``make jars`` made for this checkout (the session broker's and Spark's jars)."""
    assert Path(jars.kafka_classpath().removesuffix("/*")).is_dir()
    assert any("spark-sql-kafka-0-10_" in j for j in jars.spark_kafka_jars())
    assert Path(jars.driver_client_jars()[0]).name == "coordinator-mirror-kafka.jar"

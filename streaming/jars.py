"""Where the JVM artifacts resolved by `make jars` live, and the classpaths built from them.

Layout (default ``<repo>/jvm/lib``, or ``$COORDINATOR_MIRROR_JARS``)::

    kafka-<version>/*.jar          a broker, its tools jar and a log4j2 backend
    spark-kafka-<version>/*.jar    spark-sql-kafka-0-10 and its runtime dependencies
    localfs-<version>/*.jar        our Hadoop local file system without a process per call (jvm/localfs)
    clients-<version>/*.jar        the driver's Kafka clients: kafka-clients <version> and our bridge
                                   to them (jvm/bridge), loaded apart from Spark's (`streaming.cluster.jvm`)

Each folder is complete only if it holds the ``.complete`` stamp that the Makefile writes last, so
a half-finished download is never mistaken for a usable classpath.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

DEFAULT_KAFKA_VERSION = "4.3.1"
DEFAULT_KAFKA_OLD_VERSION = "3.9.2"
#: kafka-clients of the driver's own reads (4.x: Admin.listGroups lists share and streams groups)
DEFAULT_KAFKA_CLIENTS_VERSION = "4.3.1"


class MissingArtifactsError(RuntimeError):
    """A JVM artifact folder is missing; the message says which and how to get it."""


def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def jars_root() -> Path:
    env = os.environ.get("COORDINATOR_MIRROR_JARS")
    return Path(env) if env else repo_root() / "jvm" / "lib"


def kafka_version() -> str:
    return os.environ.get("COORDINATOR_MIRROR_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION


def kafka_clients_version() -> str:
    return os.environ.get("COORDINATOR_MIRROR_KAFKA_CLIENTS_VERSION") or DEFAULT_KAFKA_CLIENTS_VERSION


def kafka_old_version() -> str:
    return os.environ.get("COORDINATOR_MIRROR_KAFKA_OLD_VERSION") or DEFAULT_KAFKA_OLD_VERSION


def _complete_dir(name: str, make_hint: str) -> Path:
    folder = jars_root() / name
    if not (folder / ".complete").is_file():
        raise MissingArtifactsError(
            f"JVM artifacts not found in {folder} (no .complete stamp). Resolve them with `{make_hint}` "
            "(needs Maven and access to Maven Central), or point COORDINATOR_MIRROR_JARS at a folder "
            "that holds them."
        )
    return folder


def kafka_dir(version: str | None = None) -> Path:
    version = version or kafka_version()
    return _complete_dir(f"kafka-{version}", f"make jars KAFKA_VERSION={version}")


def kafka_classpath(version: str | None = None) -> str:
    """A java ``-cp`` value for the broker/tools of ``version``."""
    return str(kafka_dir(version) / "*")


def pyspark_version() -> str:
    """The installed pyspark's version, read from its metadata (importing pyspark is not needed)."""
    return importlib.metadata.version("pyspark")


def spark_kafka_jars(spark_version: str | None = None) -> list[str]:
    """The connector jars for ``spark_version`` (default: the installed pyspark's version)."""
    spark_version = spark_version or pyspark_version()
    folder = _complete_dir(f"spark-kafka-{spark_version}", f"make jars SPARK_VERSION={spark_version}")
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    connector = [j for j in jars if Path(j).name.startswith("spark-sql-kafka-0-10_")]
    if not connector:
        raise MissingArtifactsError(f"{folder} holds no spark-sql-kafka-0-10 jar")
    return jars


def localfs_jar(spark_version: str | None = None) -> str:
    """Our Hadoop local file system (jvm/localfs), built against ``spark_version``'s Hadoop API."""
    spark_version = spark_version or pyspark_version()
    folder = _complete_dir(f"localfs-{spark_version}", f"make jars SPARK_VERSION={spark_version}")
    return str(folder / "coordinator-mirror-localfs.jar")


def driver_client_jars(version: str | None = None) -> list[str]:
    """The driver's Kafka clients: our bridge jar (jvm/bridge) first, then kafka-clients ``version``
    and what it needs beyond Spark's jars (jose4j) -- the jars of the class loader
    `streaming.cluster.jvm` opens them in."""
    version = version or kafka_clients_version()
    folder = _complete_dir(f"clients-{version}", f"make jars KAFKA_CLIENTS_VERSION={version}")
    bridge = folder / "coordinator-mirror-kafka.jar"
    clients = folder / f"kafka-clients-{version}.jar"
    for jar in (bridge, clients):
        if not jar.is_file():
            raise MissingArtifactsError(f"{folder} holds no {jar.name}; run `make jars`")
    others = sorted(str(p) for p in folder.glob("*.jar") if p not in (bridge, clients))
    return [str(bridge), str(clients), *others]


def probe_classpath(version: str | None = None) -> str:
    """Classpath of GroupProbe (jvm/tools/src), compiled against the Kafka ``version`` clients."""
    version = version or kafka_version()
    tools = _complete_dir(f"tools-{version}", f"make jars KAFKA_VERSION={version}")
    return f"{kafka_dir(version) / '*'}:{tools}"

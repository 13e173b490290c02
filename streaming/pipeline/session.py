"""The Spark session the mirror runs in: Kafka connector jars, state store and the settings that matter.

Two Spark behaviours are settled here, on the real broker (see README "How Spark reads
__consumer_offsets"):

* Spark's default offset reader (AdminClient based, Spark >= 3.1) drops internal topics when it lists
  partitions, so ``subscribe=__consumer_offsets`` silently reads nothing.  The consumer-based reader
  (``spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true``) lists them.  Verified with
  spark-sql-kafka 4.0.0 and 4.2.0 against Kafka 4.3.1: 0 rows with the default, all rows with the flag
  (tests/test_streaming/test_spark_kafka.py keeps both facts under test).
* The connector must be the same Spark version as pyspark: connector classes use Spark internals.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.jars import localfs_jar, spark_kafka_jars
from streaming.pipeline import worker_tune

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: settings every mirror session needs, whatever the deployment
BASE_CONF: dict[str, str] = {
    # Lists internal topics (see module docstring).
    "spark.sql.streaming.kafka.useDeprecatedOffsetFetching": "true",
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    # Stable metric names (without it Dropwizard names carry the app id).
    "spark.metrics.namespace": "coordinator_mirror",
    # A Python worker killed by a fatal signal (a segfault in pyarrow or our decoder's C
    # dependencies) fails its task with the worker's Python stack in the error, which the
    # supervisor logs -- instead of only "Python worker exited unexpectedly (crashed)".
    "spark.python.worker.faulthandler.enabled": "true",
}


#: Hadoop's ``file:`` file system for both of its APIs: ours (jvm/localfs) does without the child
#: process Hadoop's own spawns for every file it creates (``chmod``) and every FileContext rename
#: (``readlink``) when its native library is absent -- ~12 ms each in a JVM this size, ~40-60 ms
#: per checkpoint file, several files per micro-batch (`bench/checkpoint_fs.py`).  Only ``file:``
#: paths are affected (a volume-backed checkpoint); object stores keep their own.
LOCALFS_CONF: dict[str, str] = {
    "spark.hadoop.fs.file.impl": "io.github.coordinatormirror.fs.NoForkLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "io.github.coordinatormirror.fs.NoForkLocalFileSystem$Fs",
}


def localfs_conf(settings: Mapping[str, str]) -> dict[str, str]:
    """`LOCALFS_CONF` and our jar on the driver's and executors' class path (ahead of any given in
    ``settings``).  Only for a session whose JVM starts here: Hadoop loads file system classes from
    the JVM's own class path (not spark.jars), which is fixed when the JVM starts -- a JVM started
    elsewhere (a SparkApplication's driver) keeps Hadoop's own file system."""
    fs_jar = localfs_jar()
    out = dict(LOCALFS_CONF)
    for key in ("spark.driver.extraClassPath", "spark.executor.extraClassPath"):
        given = settings.get(key)
        out[key] = f"{fs_jar}:{given}" if given else fs_jar
    return out


def _localfs_settings(settings: Mapping[str, str], context: Any) -> dict[str, str]:
    """`localfs_conf` when the JVM starts with this session; for a JVM already running (started by
    spark-submit -- a SparkApplication's driver --, or by an earlier session of this process), only
    the file system settings, and only if that JVM can load our class: Hadoop would fail on every
    ``file:`` path otherwise."""
    gateway = context._gateway
    if gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        return localfs_conf(settings)
    if gateway is None:
        return {}  # spark-submit's JVM, not reachable before the context exists: Hadoop's own
    try:
        gateway.jvm.java.lang.Class.forName(LOCALFS_CONF["spark.hadoop.fs.file.impl"])
    except Exception:
        return {}
    return dict(LOCALFS_CONF)


class ConnectorVersionError(RuntimeError):
    """The spark-sql-kafka jar on the classpath does not match the running pyspark."""


def connector_version(jars: Sequence[str]) -> str | None:
    for jar in jars:
        m = re.match(r"spark-sql-kafka-0-10_2\.\d+-(.+)\.jar$", Path(jar).name)
        if m:
            return m.group(1)
    return None


def check_connector(jars: Sequence[str]) -> None:
    import pyspark

    found = connector_version(jars)
    if found is None:
        raise ConnectorVersionError(f"no spark-sql-kafka-0-10 jar among spark.jars: {list(jars)}")
    if found != pyspark.__version__:
        raise ConnectorVersionError(
            f"spark-sql-kafka-0-10 {found} does not match pyspark {pyspark.__version__}; resolve the "
            f"matching connector with `make jars SPARK_VERSION={pyspark.__version__}`"
        )


def build_session(
    *,
    master: str = "local[2]",
    app_name: str = "coordinator-mirror",
    jars: Sequence[str] | None = None,
    packages: str | None = None,
    conf: Mapping[str, str] | None = None,
    log_level: str = "WARN",
    plugin_jars: Sequence[str] = (),
) -> SparkSession:
    """Create (or return the active) SparkSession with the connector and the mirror's settings.

    ``jars`` are local connector jars (default: the ones `make jars` resolved for this pyspark);
    ``packages`` is the ``spark.jars.packages`` alternative that resolves through Ivy instead;
    ``plugin_jars`` hold Kafka client plugins the source's options name (added either way).
    """
    # Python workers must run this interpreter (same venv, same pandas/pyarrow).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    settings = dict(BASE_CONF)
    if packages:
        settings["spark.jars.packages"] = packages
        if plugin_jars:
            settings["spark.jars"] = ",".join(plugin_jars)
    else:
        if jars is None:
            jars = spark_kafka_jars()
        check_connector(jars)
        settings["spark.jars"] = ",".join([*jars, *plugin_jars])
    settings.update(conf or {})
    if SparkContext._active_spark_context is None:
        own = _localfs_settings(settings, SparkContext)
        # a file system class given in ``conf`` wins; class paths add up
        settings.update({k: v for k, v in own.items() if k.endswith(".extraClassPath") or k not in settings})
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    _quiet_loggers(session)
    return session


#: Spark loggers whose warnings describe the mirror's normal operation, raised to ERROR:
#: ``ProcessingTimeExecutor`` warns "Current batch is falling behind" for every micro-batch longer
#: than the trigger -- with the 0.5 s default, most of them on a busy cluster; the next batch then
#: simply starts at once.  Batch durations are exported (coordinator_mirror_batch_duration_seconds).
QUIET_LOGGERS: tuple[str, ...] = ("org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor",)


def _quiet_loggers(session: SparkSession) -> None:
    jvm = session._jvm
    assert jvm is not None
    error = jvm.org.apache.logging.log4j.Level.ERROR
    for name in QUIET_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, error)


def _warm(batches: Iterator[Any]) -> Iterator[Any]:
    worker_tune.apply()  # imports what the query's tasks use (decoders, state, pandas, pyarrow)
    yield from batches


def warm_python_workers(spark: SparkSession) -> None:
    """Start the Python workers before the query needs them: one tiny job with a task per core
    that imports what the query's tasks use.

    Why: the first micro-batch of a new session otherwise starts Spark's Python daemon, forks its
    workers and imports pandas/pyarrow/our modules inside the tasks that also read Kafka and
    decode.  Measured on 2 cores (1M-record backfill): the first Python query of a session took
    23.6 s, the same query 4.0 s once a trivial Python job (2.6 s) had run.  The mirror runs this
    in a thread while the driver talks to the cluster, so the cost overlaps the startup."""
    n = max(1, spark.sparkContext.defaultParallelism)
    spark.range(0, n, 1, n).mapInArrow(_warm, "id long").collect()

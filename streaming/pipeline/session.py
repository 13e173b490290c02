"""The Spark session the mirror runs in: Kafka connector jars, state store and the settings that matter.

Two Spark behaviours are settled here, on the real broker (see docs/development.md "How Spark reads
__consumer_offsets"):

* Spark's default offset reader (AdminClient based, Spark >= 3.1) drops internal topics when it lists
  partitions, so ``subscribe=__consumer_offsets`` silently reads nothing.  The consumer-based reader
  (``spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true``) lists them.  Verified with
  spark-sql-kafka 4.0.0 and 4.2.0 against Kafka 4.3.1: 0 rows with the default, all rows with the flag
  (tests/test_streaming/test_pipeline/test_source.py keeps both facts under test).
* The connector must be the same Spark version as pyspark: connector classes use Spark internals.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from streaming.jars import localfs_jar, spark_kafka_jars
from streaming.pipeline import class_archive, worker_tune
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("coordinator_mirror")

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
    # No console progress bar ("[Stage 0:>  (0 + 2) / 2]"): it interleaves the service log; the
    # mirror logs its catch-up progress and exports batch durations.
    "spark.ui.showConsoleProgress": "false",
    # Adaptive query execution does not apply to streaming queries (Spark disables it for them,
    # with a warning at every start).
    "spark.sql.adaptive.enabled": "false",
    # ``query.stop()`` waits this long for the stream thread, then gives up on it (Spark's default,
    # 0, waits for ever): a thread held in a call no interrupt reaches -- a Python sink's socket
    # read, a Kafka consumer call under `UninterruptibleThread` while the cluster is away -- must not
    # hold a stopping mirror until the pod is killed (`query.stop_quietly` says so in the log)
    "spark.sql.streaming.stopTimeout": "60s",
}

#: log4j2 configurations of the driver JVM, one per `log_format` (files next to this module): the
#: same line format (or JSON fields) as the application's own log, WARN and above, and the
#: start-up lines a user cannot act on left out (each file says which and why)
LOG4J_CONFIGS: dict[str, str] = {"text": "log4j2-text.properties", "json": "log4j2-json.properties"}


def log4j_conf(settings: Mapping[str, str], log_format: str, master: str) -> dict[str, str]:
    """The driver JVM's log4j2 configuration, ahead of any given in ``settings``'s
    ``spark.driver.extraJavaOptions`` (a ``-Dlog4j2.configurationFile`` there wins)."""
    path = Path(__file__).with_name(LOG4J_CONFIGS[log_format])
    # Spark's "your hostname resolves to a loopback address; set SPARK_LOCAL_IP": in local mode
    # the driver talks to itself only, so only a cluster's driver needs to hear it
    hostname = "error" if master.startswith("local") else "warn"
    option = f"-Dlog4j2.configurationFile={path.as_uri()} -Dcoordinator.mirror.hostname.level={hostname}"
    given = settings.get("spark.driver.extraJavaOptions")
    return {"spark.driver.extraJavaOptions": f"{option} {given}" if given else option}


def class_archive_conf(settings: Mapping[str, str]) -> dict[str, str]:
    """The driver JVM mapping the class-data-sharing archive (`streaming.pipeline.class_archive`)
    when one is present, ahead of the options in ``settings``; nothing when there is none, or when
    the options already name an archive (its training run, or a user's own)."""
    given = settings.get("spark.driver.extraJavaOptions", "")
    if "SharedArchiveFile" in given or "ArchiveClassesAtExit" in given or "-Xshare:off" in given:
        return {}
    options = " ".join(class_archive.java_options())
    if not options:
        return {}
    return {"spark.driver.extraJavaOptions": f"{options} {given}" if given else options}


#: the garbage collector of a local-mode driver JVM, where no option names one (`gc_conf`)
LOCAL_GC: Final = "-XX:+UseSerialGC"
#: its heap: a small floor (the default initial heap, 1/64 of the machine's memory -- 384 MB on
#: 24 GiB -- is also the least a heap shrinks to, and the mirror's live heap at 10k groups x 50 is
#: ~130 MB), shrunk in one step at a full collection, where no option sets an initial heap
LOCAL_HEAP: Final = "-Xms32m -XX:-ShrinkHeapInSteps"
#: how often Spark's context cleaner asks for a full collection (Spark's default: 30min), which is
#: when a serial heap shrinks
LOCAL_PERIODIC_GC: Final = "4min"
PERIODIC_GC_KEY: Final = "spark.cleaner.periodicGC.interval"


def gc_conf(settings: Mapping[str, str], master: str) -> dict[str, str]:
    """A local-mode driver JVM (which runs the tasks too) on the serial collector with a small
    heap floor, and a full collection every `LOCAL_PERIODIC_GC`, ahead of the options in
    ``settings``; nothing on a cluster, or when the options already name a collector (a user
    tuning the JVM gets only what they give).

    Why the collector: in local mode the JVM shares its cores with Spark's Python workers and the
    driver's Python, and G1's concurrent threads compete with them for nothing a heap of this
    size needs.  Measured (`bench/readiness.py`-style starts, 10k groups x 50 partitions, a 1 M-record
    backfill, two runs each, alternated): the JVM's peak RSS 635 / 659 MB against 723 / 832 MB
    with G1, its CPU to 25 s past ready 37.5 / 37.8 s against 41.4 / 41.9 s, ready 13.1 / 12.6 s
    against 14.6 / 14.1 s.  Why the heap: the committed heap never went below its 384 MB
    initial size, ~130 MB of it live; `bench/idle.py` (10k x 50, two alternated pairs, 2026-11-29)
    measured the JVM at 536 / 541 MB RSS ~6.5 minutes after ready against 604 / 603 MB, ready
    30.6 / 17.1 s against 19.3 / 16.2 s (the 30.6 s a first run after the preload, as the before's
    in the pair before it).  The price: a full collection every 4 minutes (0.21 s, 110 -> 75 MB, at
    this size: ``-Xlog:gc``), and four in the first 15 s while the heap grows (0.47 s in all).
    A user's ``-XX:+UseG1GC`` (or any other ``-XX:+Use...GC``) wins, and so does a ``-Xms`` or
    their own ``spark.cleaner.periodicGC.interval``."""
    given = settings.get("spark.driver.extraJavaOptions", "")
    if not master.startswith("local") or re.search(r"-XX:\+Use\w*GC\b", given):
        return {}
    options = [LOCAL_GC]
    if not re.search(r"-Xms|InitialHeapSize", given):
        options.append(LOCAL_HEAP)
    if given:
        options.append(given)
    out = {"spark.driver.extraJavaOptions": " ".join(options)}
    if PERIODIC_GC_KEY not in settings:
        out[PERIODIC_GC_KEY] = LOCAL_PERIODIC_GC
    return out


#: lines the driver JVM writes to stderr outside log4j that say nothing a user can act on
JVM_STDERR_DROPPED: tuple[str, ...] = (
    # the JVM's own notice for the jdk.incubator.vector module Spark's launcher adds (no switch
    # turns it off)
    "WARNING: Using incubator modules:",
)


def _forward_jvm_stderr(stream: Any, log_format: str) -> None:
    """Copy the driver JVM's stderr (log4j's lines, and what Spark's Python workers print) to ours,
    without `JVM_STDERR_DROPPED`; with ``log_format`` json, a line that is not a JSON object
    (a Python worker's warning or traceback, the JVM's own notices) becomes one."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        if not line or line.startswith(JVM_STDERR_DROPPED):
            continue
        if log_format == "json" and not line.startswith("{"):
            now = time.time()
            ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
            line = json.dumps(
                {
                    "ts": ts,
                    "level": "WARN",
                    "logger": "spark.stderr",
                    "msg": line,
                },
                ensure_ascii=False,
            )
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # our stderr is gone (closed at exit)
            return


@contextlib.contextmanager
def _launching_jvm(log_format: str) -> Iterator[None]:
    """Start the driver JVM with SIGTERM ignored, as PySpark starts it with SIGINT ignored, and
    with its stderr passed through `_forward_jvm_stderr`.

    A stop signal sent to the whole process group -- ``kill -TERM -<pgid>``, a terminal's job
    control -- reaches the JVM together with the driver; a JVM that acts on it runs its shutdown
    hooks and stops SparkContext under the running micro-batch, while the driver is still
    stopping the query between two batches (a "stopping the query failed ... NullPointerException
    ... dagScheduler()" traceback and exit 1).  The driver stops the query, then Spark; the JVM
    exits when the driver does (PySpark's gateway ends on its stdin's end).  HotSpot leaves a
    signal that is ignored at its start ignored (how ``nohup java`` works), so the child's
    disposition is all it takes.  PySpark exposes no hook for either: its launcher's ``Popen`` is
    wrapped while the gateway starts (tests/test_streaming/test_app/test_run_cmd_stop_signals.py checks
    the JVM's ignored-signal mask and the stop)."""
    from pyspark import java_gateway

    original = java_gateway.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        inner = kwargs.get("preexec_fn")

        def preexec() -> None:
            if inner is not None:
                inner()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        kwargs["stderr"] = subprocess.PIPE
        proc = original(*args, **kwargs)
        threading.Thread(
            target=_forward_jvm_stderr, args=(proc.stderr, log_format), name="jvm-stderr", daemon=True
        ).start()
        return proc

    java_gateway.Popen = popen
    try:
        yield
    finally:
        java_gateway.Popen = original


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
    log_format: str = "text",
) -> SparkSession:
    """Create (or return the active) SparkSession with the connector and the mirror's settings.

    ``jars`` are local connector jars (default: the ones `make jars` resolved for this pyspark);
    ``packages`` is the ``spark.jars.packages`` alternative that resolves through Ivy instead.
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
    else:
        if jars is None:
            jars = spark_kafka_jars()
        check_connector(jars)
        settings["spark.jars"] = ",".join(jars)
    settings.update(conf or {})
    starts_jvm = SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    if SparkContext._active_spark_context is None:
        own = _localfs_settings(settings, SparkContext)
        # a file system class given in ``conf`` wins; class paths add up
        settings.update({k: v for k, v in own.items() if k.endswith(".extraClassPath") or k not in settings})
        if starts_jvm:
            settings.update(log4j_conf(settings, log_format, master))
            settings.update(class_archive_conf(settings))
            settings.update(gc_conf(settings, master))
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _launching_jvm(log_format) if starts_jvm else contextlib.nullcontext():
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


def mirror_session(
    settings: Settings, java_options: Sequence[str], extra: Mapping[str, str] | None = None
) -> SparkSession:
    """The mirror's own session: shuffle partitions, no UI, ``extra`` (the FAIR scheduler of a
    process mirroring several clusters), ``spark_conf`` on top, and what the Kafka clients of
    Spark's source need of their JVMs (``java_options``: the OAUTHBEARER token endpoint allowed, a
    krb5.conf ...), on executors started elsewhere too."""
    s = settings
    conf = {
        "spark.sql.shuffle.partitions": str(s.shuffle_partitions),
        "spark.ui.enabled": "false",
        **(extra or {}),
        **s.spark_conf,
    }
    flags = " ".join(java_options)
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        if flags:
            conf[key] = f"{conf[key]} {flags}" if conf.get(key) else flags
    return build_session(
        master=s.spark_master,
        jars=s.spark_jars,
        packages=s.spark_packages,
        conf=conf,
        log_format=s.log_format,
    )


def add_plugin_jars(spark: SparkSession, jars: Sequence[str]) -> None:
    """ADD JAR: into the session's class loader, through which the source's driver-side consumer
    loads the classes its options name, and to the executors (spark.jars would reach only the
    executors)."""
    for jar in jars:
        spark.sql(f"ADD JAR '{jar}'")


def warm_in_background(spark: SparkSession) -> threading.Thread:
    """Python workers started while the driver talks to the cluster (`warm_python_workers`), on
    the ``mirror-warm-up`` thread (joined before the query's first start); a failure here only
    costs the first batch its warm start."""

    def warm() -> None:
        try:
            warm_python_workers(spark)
        except Exception:
            log.debug("warming the Python workers failed", exc_info=True)

    thread = threading.Thread(target=warm, name="mirror-warm-up", daemon=True)
    thread.start()
    return thread


class SessionPart:
    """The mirror's Spark session as a part of its lifecycle.  Made on the ``mirror-session``
    thread, so that what comes after it in the start order runs meanwhile (the driver's Kafka
    client and its backfill read overlap the Spark JVM's start); `get` waits for it and raises what
    its start raised.  Given a session (tests, an embedding process): that one, never stopped here.

    Once up: the plugin jars added, and -- unless ``warm`` says the first batch comes after ready
    anyway (the driver folds the backfill) -- the Python workers warmed on ``mirror-warm-up``
    (`wait_warm` before the query's first start)."""

    name = "spark"

    def __init__(
        self,
        settings: Settings,
        java_options: Sequence[str],
        spark: SparkSession | None = None,
        *,
        warm: Callable[[], bool] = lambda: True,
        conf: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.java_options = list(java_options)
        #: Spark settings of this process's own session, under ``spark_conf``
        self.conf = dict(conf or {})
        self.owned = spark is None
        self._spark = spark
        self.warm = warm
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._warming: threading.Thread | None = None
        self._up = threading.Event()
        self._stopped = False

    def start(self) -> None:
        if self._thread is not None or self._up.is_set():
            return
        if self._spark is not None:
            self._spark.conf.set("spark.sql.shuffle.partitions", str(self.settings.shuffle_partitions))
            self._ready(self._spark)
            return
        self._thread = threading.Thread(target=self._make, name="mirror-session", daemon=True)
        self._thread.start()

    def _make(self) -> None:
        try:
            began = time.monotonic()
            spark = mirror_session(self.settings, self.java_options, self.conf)
            log.info("Spark session up in %.1fs", time.monotonic() - began)
            self._spark = spark
            self._ready(spark)
        except BaseException as exc:  # raised by get(), in the thread that needs the session
            self._error = exc
            self._up.set()

    def _ready(self, spark: SparkSession) -> None:
        try:
            add_plugin_jars(spark, self.settings.kafka_plugin_jars)
            if self.warm():
                self._warming = warm_in_background(spark)
        finally:
            self._up.set()

    def get(self) -> SparkSession:
        """The session, once up (raises what its start raised)."""
        if self._thread is None and not self._up.is_set():
            raise RuntimeError("the Spark session part was not started")
        self._up.wait()
        if self._error is not None:
            raise self._error
        assert self._spark is not None
        return self._spark

    @property
    def session(self) -> SparkSession | None:
        """The session if it is up (None: not yet, or it failed)."""
        return self._spark if self._up.is_set() else None

    def wait_warm(self, timeout_s: float) -> None:
        """The Python workers' warm-up, if one runs (the query's first batch is faster warm)."""
        if self._warming is not None:
            self._warming.join(timeout_s)

    def stop(self) -> None:
        """The session, if this part made it -- after its start ended (a stop during the start)."""
        if self._thread is not None:
            self._thread.join()
        if self.owned and self._spark is not None and not self._stopped:
            self._stopped = True
            self._spark.stop()

    def pin_pool(self) -> None:
        """One cluster, one session: its queries run in Spark's default pool."""


class ClusterSession:
    """A cluster's own SQL session on the process's Spark, when one process mirrors several
    clusters: its queries' names, its shuffle partitions and its scheduler pool are its own (two
    queries of one name cannot run in one session); the SparkContext, its JVM and its Python
    workers are shared.  ``pool``: the FAIR scheduler pool its queries' jobs run in (`pin_pool`, on
    the thread that starts a query: Spark's stream thread inherits the local property), so that a
    big cluster's backfill does not hold up a small cluster's micro-batches."""

    owned = False  # the process's session part stops the SparkContext, never a cluster

    def __init__(self, base: SessionPart, settings: Settings, pool: str | None) -> None:
        self.base = base
        self.settings = settings
        self.pool = pool
        self._spark: SparkSession | None = None
        self._lock = threading.Lock()

    def get(self) -> SparkSession:
        with self._lock:
            if self._spark is None:
                spark = self.base.get().newSession()
                spark.conf.set("spark.sql.shuffle.partitions", str(self.settings.shuffle_partitions))
                self._spark = spark
            return self._spark

    @property
    def session(self) -> SparkSession | None:
        return self._spark

    def wait_warm(self, timeout_s: float) -> None:
        self.base.wait_warm(timeout_s)

    def pin_pool(self) -> None:
        if self.pool is not None:
            self.get().sparkContext.setLocalProperty("spark.scheduler.pool", self.pool)

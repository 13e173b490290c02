"""The driver's Kafka client: Kafka's own Java clients, in a JVM of their own reached through py4j.

One client dialect from end to end.  Spark's Kafka source runs Java kafka-clients with the mirror's
``kafka_options`` verbatim; the driver's own reads (cluster id, topics, log offsets, the
coordinators' group list, output topics) and ``capture`` run Java kafka-clients with the same
options verbatim -- every key store type (JKS, PKCS12, PEM), every SASL mechanism (SCRAM, PLAIN,
OAUTHBEARER with an OIDC token endpoint, GSSAPI, a vendor's login module from
``kafka_plugin_jars``) and config providers (``${file:...}``, ``${env:...}``) work wherever they
work for Spark.  No option is translated.

Which JVM: one started for the client (`Jvm.launch`, ~0.3-1 s, ~150-300 MB), with kafka-clients
4.x (`streaming.jars.driver_client_jars`): Spark 4.2's connector cannot run on 4.x (its
consumer-based offset reader calls ``Consumer.poll(long)``, removed in Kafka 4.0), and 3.9's
``Admin.listConsumerGroups`` leaves share and streams groups out where 4.x's ``listGroups`` lists
them (both checked on the 4.3.1 broker).  Not Spark's JVM: two kafka-clients versions in one JVM
share its global state -- a SASL mechanism's JCA provider is registered once per JVM, by whichever
version logs in first, and the other version's logins then fail (seen: Spark's 3.9 consumer never
authenticated over OAUTHBEARER after the 4.x Admin had, in a class loader of its own).

Answers cross as one byte array or JSON string per call (`FrameReader`); a failed call raises
`KafkaCallError` carrying the Java exception chain as text (``Class: message``), which
`streaming.app.errors` classifies like the Spark source's failures.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import os
import shutil
import signal
import struct
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
from py4j.protocol import Py4JError, Py4JJavaError

from streaming.jars import MissingArtifactsError, driver_client_jars

CLUSTER_READS: Final = "io.github.coordinatormirror.kafka.ClusterReads"
TOPIC_DUMP: Final = "io.github.coordinatormirror.kafka.TopicDump"

#: what kafka-clients needs of a JVM started for it, taken from Spark's jars (the same versions the
#: Spark driver gives it): py4j's gateway, slf4j (no provider: the client's log lines are dropped;
#: failures arrive as exceptions), Jackson (an OAUTHBEARER token endpoint's JSON answer) and the
#: compression codecs (capture reads what the coordinator wrote, compressed or not).
_LAUNCH_JARS: Final = (
    "py4j-",
    "slf4j-api-",
    "jackson-core-",
    "jackson-databind-",
    "jackson-annotations-",
    "lz4-java-",
    "snappy-java-",
    "zstd-jni-",
)


class KafkaCallError(RuntimeError):
    """A Kafka client call failed in the JVM.  ``str()`` is the exception chain as ``Class: message``
    lines, outermost first; ``classes`` are the simple class names along it."""

    def __init__(self, chain: Sequence[tuple[str, str]]) -> None:
        self.chain = list(chain)
        super().__init__("\n".join(f"{cls}: {msg}" if msg else cls for cls, msg in self.chain))

    @property
    def classes(self) -> list[str]:
        return [cls.rsplit(".", 1)[-1] for cls, _ in self.chain]

    def has(self, *names: str) -> bool:
        """Whether any exception along the chain is of one of these (simple) class names."""
        return any(c in names for c in self.classes)

    @property
    def innermost(self) -> str:
        cls, msg = self.chain[-1] if self.chain else ("", "")
        return f"{cls.rsplit('.', 1)[-1]}: {msg}" if msg else cls.rsplit(".", 1)[-1]


def _chain(exc: Py4JJavaError) -> KafkaCallError:
    out: list[tuple[str, str]] = []
    cur: Any = exc.java_exception
    try:
        while cur is not None and len(out) < 10:
            msg = cur.getMessage()
            out.append((str(cur.getClass().getName()), str(msg) if msg is not None else ""))
            nxt = cur.getCause()
            cur = None if nxt is None or nxt.equals(cur) else nxt
    except Py4JError:  # the JVM went away while we read the chain
        pass
    if not out:
        out.append(("java.lang.RuntimeException", str(exc).strip()))
    return KafkaCallError(out)


class Remote:
    """A bridge object in the JVM (``ClusterReads``, ``TopicDump``): `call` turns a Java failure
    into `KafkaCallError`."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._obj, method)(*args)
        except Py4JJavaError as exc:
            raise _chain(exc) from None

    def close(self) -> None:
        with contextlib.suppress(Py4JError):  # best effort: the JVM may be gone already
            self._obj.close()


#: the client JVM's memory: the serial collector (one thread, the smallest footprint); a small
#: initial heap, so that a full collection shrinks the heap back to its live data in one step
#: (the default initial heap, 1/64 of the machine's memory, is also the floor a heap shrinks to).
#: (Capping the per-thread cache of direct buffers socket reads go through, ~50 MB after a
#: backfill, made the read twice as slow: -Djdk.nio.maxCachedBufferSize=1m, 10.0 s against 5.3 s.)
_MEMORY_OPTIONS: Final = (
    "-XX:+UseSerialGC",
    "-Xms32m",
    "-XX:-ShrinkHeapInSteps",
    "-Xss1m",
)


class Jvm:
    """A JVM with the driver's Kafka clients (see the module docstring)."""

    def __init__(
        self, gateway: Any, *, stderr: collections.deque[str] | None = None, proc: Any | None = None
    ) -> None:
        self.gateway = gateway
        self._stderr = stderr
        self._proc = proc  # the JVM's process, when this object started it

    @classmethod
    def launch(
        cls,
        *,
        plugin_jars: Sequence[str] = (),
        java_options: Sequence[str] = (),
        heap: str = "512m",
        quick_start: bool = True,
    ) -> Jvm:
        """Start the JVM (it ends with this process: py4j's die-on-exit).  ``plugin_jars``: Kafka
        client plugins the options name; ``java_options``: e.g. ``-D`` system properties the
        clients need (`streaming.settings.Settings.kafka_java_options`); ``quick_start``: the
        JIT's first tier only (a short-lived command: ~2x faster to its first answer) -- off for
        the mirror's long-lived client, which then runs at full speed."""
        home = os.environ.get("JAVA_HOME")
        java = shutil.which("java", path=os.path.join(home, "bin")) if home else None
        java = java or shutil.which("java")
        if java is None:
            raise MissingArtifactsError("`java` (17+) is not on PATH: the Kafka client runs in a JVM")
        jars = _spark_jars()
        py4j_jar = next(j for j in jars if Path(j).name.startswith("py4j-"))
        classpath = [*driver_client_jars(), *plugin_jars, *jars]
        stderr: collections.deque[str] = collections.deque(maxlen=50)
        with _stop_signals_ignored():
            port, token, proc = launch_gateway(
                jarpath=py4j_jar,
                classpath=os.pathsep.join(classpath),
                javaopts=[f"-Xmx{heap}", *_MEMORY_OPTIONS, *java_options]
                + (["-XX:TieredStopAtLevel=1"] if quick_start else []),
                java_path=java,
                die_on_exit=True,
                enable_auth=True,
                redirect_stderr=stderr,
                return_proc=True,
            )
        params = GatewayParameters(port=port, auth_token=token, auto_convert=True)
        return cls(JavaGateway(gateway_parameters=params), stderr=stderr, proc=proc)

    def open(self, class_name: str, options: Mapping[str, str], timeout_s: float) -> Remote:
        """A new ``class_name`` of the bridge with ``options`` (Java client options, verbatim)."""
        props = self.gateway.jvm.java.util.HashMap()
        for key, value in options.items():
            props.put(str(key), str(value))
        cls: Any = self.gateway.jvm
        for part in class_name.split("."):
            cls = getattr(cls, part)
        try:
            return Remote(cls(props, int(timeout_s * 1000)))
        except Py4JJavaError as exc:
            raise _chain(exc) from None

    @property
    def pid(self) -> int:
        return int(self.gateway.jvm.java.lang.ProcessHandle.current().pid())

    def release_memory(self) -> None:
        """Hand the heap a large read grew back to the system (a full collection, which shrinks
        the heap to its live data with `_MEMORY_OPTIONS`): the driver's backfill read leaves
        ~340 MB resident, ~160 MB after this."""
        with contextlib.suppress(Py4JError):
            self.gateway.jvm.java.lang.System.gc()

    def stderr_tail(self, n: int = 5) -> str:
        """The newest lines the JVM printed."""
        return " | ".join(list(self._stderr or ())[-n:])

    def close(self) -> None:
        """Shut the JVM down (idempotent).  The gateway's shutdown alone leaves the process running
        while a client's non-daemon threads live; closing its stdin makes it exit (py4j's
        die-on-broken-pipe), and it is killed if it has not within 10 s -- a mirror started and
        stopped many times in one process (the tests) must not leave a JVM behind each time."""
        with contextlib.suppress(Py4JError):
            self.gateway.shutdown()
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def _stop_signals_ignored() -> Iterator[None]:
    """The client JVM starts with SIGTERM and SIGINT ignored (HotSpot keeps an ignored signal
    ignored), as Spark's does (`streaming.pipeline.session`): a stop signal sent to the whole
    process group -- ``kill -TERM -<pgid>``, systemd's ``KillMode=control-group`` -- must not end
    it under the driver's orderly stop; it ends when the driver closes it or exits (py4j's
    die-on-exit: its stdin's end).  py4j has no hook for the child's signals, so its ``Popen`` is
    wrapped while the gateway starts."""
    from py4j import java_gateway

    original = java_gateway.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        def preexec() -> None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        return original(*args, **kwargs)

    java_gateway.Popen = popen
    try:
        yield
    finally:
        java_gateway.Popen = original


def _spark_jars_dir() -> Path:
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    spec = importlib.util.find_spec("pyspark")  # located, not imported: no Spark in this room
    if spec is None or not spec.submodule_search_locations:
        raise MissingArtifactsError("pyspark is not installed: its jars carry the JVM's libraries")
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def _spark_jars() -> list[str]:
    folder = _spark_jars_dir()
    names = sorted(p.name for p in folder.glob("*.jar"))
    found = [str(folder / n) for prefix in _LAUNCH_JARS for n in names if n.startswith(prefix)]
    missing = [p.rstrip("-") for p in _LAUNCH_JARS if not any(Path(j).name.startswith(p) for j in found)]
    if missing:
        raise MissingArtifactsError(f"{folder} lacks {', '.join(missing)}: is it Spark's jars folder?")
    return found


# -- Frames: the bridge's wire (jvm/bridge Frames.java) --------------------------------------------
class FrameReader:
    """Reads what the bridge wrote: big-endian i16/i32/i64, strings and bytes as i32 length + data."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def i16(self) -> int:
        (v,) = struct.unpack_from(">h", self.data, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        (v,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return int(v)

    def i64(self) -> int:
        (v,) = struct.unpack_from(">q", self.data, self.pos)
        self.pos += 8
        return int(v)

    def bin(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def text(self) -> str | None:
        b = self.bin()
        return None if b is None else b.decode("utf-8")

    def strings(self) -> Iterator[str | None]:
        for _ in range(self.i32()):
            yield self.text()


def frame_strings(values: Sequence[str]) -> bytes:
    """i32 count, then each string (the request layout of ``topicIds``)."""
    parts = [struct.pack(">i", len(values))]
    for v in values:
        b = v.encode("utf-8")
        parts.append(struct.pack(">i", len(b)) + b)
    return b"".join(parts)


def frame_partitions(by_topic: Mapping[str, Sequence[int]]) -> bytes:
    """Repeated: topic, i32 count, partitions (the request layout of ``listOffsets``)."""
    parts = []
    for topic, ps in by_topic.items():
        b = topic.encode("utf-8")
        parts.append(struct.pack(f">i{len(b)}si{len(ps)}i", len(b), b, len(ps), *ps))
    return b"".join(parts)

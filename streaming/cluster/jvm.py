"""The driver's Kafka client: Kafka's own Java clients, in a JVM reached through py4j.

One client dialect from end to end.  Spark's Kafka source runs Java kafka-clients with the mirror's
``kafka_options`` verbatim; the driver's own reads (cluster id, topics, log offsets, the
coordinators' group list, output topics) and ``capture`` run Java kafka-clients with the same
options verbatim -- every key store type (JKS, PKCS12, PEM), every SASL mechanism (SCRAM, PLAIN,
OAUTHBEARER with an OIDC token endpoint, GSSAPI, a vendor's login module on the class path) and
config providers (``${file:...}``, ``${env:...}``) work wherever they work for Spark.  No option is
translated.

Which JVM: ``run`` uses the Spark driver's (`Jvm.attach` to its py4j gateway: no second JVM);
``capture`` and other commands start a small one (`Jvm.launch`: ~0.1-0.5 s).  Which clients:
kafka-clients 4.x (`streaming.jars.driver_client_jars`) in a class loader of their own
(jvm/bridge ``Isolation``), beside the connector's 3.9 -- Spark 4.2's connector cannot run on 4.x
(its consumer-based offset reader calls ``Consumer.poll(long)``, removed in Kafka 4.0), and 3.9's
``Admin.listConsumerGroups`` leaves share and streams groups out where 4.x's ``listGroups`` lists
them (both checked on the 4.3.1 broker).

Answers cross as one byte array per call (`Frames`); a failed call raises `KafkaCallError`
carrying the Java exception chain as text (``Class: message``), which `streaming.app.errors`
classifies like the Spark source's failures.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import os
import shutil
import struct
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
from py4j.protocol import Py4JError, Py4JJavaError

from streaming.jars import MissingArtifactsError, driver_client_jars
from streaming.settings import OAUTH_ALLOWED_URLS, oauth_urls

ISOLATION: Final = "io.github.coordinatormirror.kafka.Isolation"
CLUSTER_READS: Final = "io.github.coordinatormirror.kafka.ClusterReads"
TOPIC_DUMP: Final = "io.github.coordinatormirror.kafka.TopicDump"
_ISOLATION_LOCK = threading.Lock()
#: per py4j gateway (one JVM): its ``Isolation`` and the OAUTHBEARER URLs allowed in it.  Not
#: attributes of the gateway: py4j reads an unknown attribute as a Java entry-point member.
_PER_JVM: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()

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


class Jvm:
    """A JVM with kafka-clients 4.x reachable (see the module docstring)."""

    def __init__(
        self,
        gateway: Any,
        *,
        owned: bool = False,
        stderr: collections.deque[str] | None = None,
        plugin_jars: Sequence[str] = (),
    ) -> None:
        self.gateway = gateway
        #: jars of Kafka client plugins (login modules, callback handlers, config providers): loaded
        #: with the clients, so that they link to the same kafka-clients
        self.plugin_jars = list(plugin_jars)
        self._owned = owned
        self._stderr = stderr

    @classmethod
    def attach(cls, gateway: Any, plugin_jars: Sequence[str] = ()) -> Jvm:
        """The JVM behind an existing py4j gateway (the Spark driver's: ``SparkContext._gateway``)."""
        return cls(gateway, plugin_jars=plugin_jars)

    @classmethod
    def launch(cls, heap: str = "512m", plugin_jars: Sequence[str] = (), *, quick_start: bool = True) -> Jvm:
        """Start a JVM for the client alone (it ends with this process: py4j's die-on-exit).
        ``quick_start``: the JIT's first tier only (a short-lived command: ~2x faster to its first
        answer); off for a long-lived client, which then runs at full speed."""
        home = os.environ.get("JAVA_HOME")
        java = (shutil.which("java", path=os.path.join(home, "bin")) if home else None) or shutil.which(
            "java"
        )
        if java is None:
            raise MissingArtifactsError("`java` (17+) is not on PATH: the Kafka client runs in a JVM")
        jars = _spark_jars()
        py4j_jar = next((j for j in jars if Path(j).name.startswith("py4j-")), None)
        if py4j_jar is None:
            raise MissingArtifactsError(f"no py4j jar among Spark's jars ({_spark_jars_dir()})")
        stderr: collections.deque[str] = collections.deque(maxlen=50)
        port, token = launch_gateway(
            jarpath=py4j_jar,
            classpath=os.pathsep.join(jars),
            javaopts=[f"-Xmx{heap}", "-XX:+UseSerialGC", "-Xss1m"]
            + (["-XX:TieredStopAtLevel=1"] if quick_start else []),
            java_path=java,
            die_on_exit=True,
            enable_auth=True,
            redirect_stderr=stderr,
        )
        params = GatewayParameters(port=port, auth_token=token, auto_convert=True)
        return cls(JavaGateway(gateway_parameters=params), owned=True, stderr=stderr, plugin_jars=plugin_jars)

    def open(self, class_name: str, options: Mapping[str, str], timeout_s: float) -> Remote:
        """A new ``class_name`` of the bridge with ``options`` (Java client options, verbatim)."""
        jars = [*driver_client_jars(), *self.plugin_jars]
        self._allow_urls(dict(options))
        props = self.gateway.jvm.java.util.HashMap()
        for key, value in options.items():
            props.put(str(key), str(value))
        try:
            obj = self._isolated(jars[0]).open(jars, class_name, props, int(timeout_s * 1000))
        except Py4JJavaError as exc:
            raise _chain(exc) from None
        return Remote(obj)

    def _allow_urls(self, options: dict[str, str]) -> None:
        """List the options' OAUTHBEARER token and JWKS URLs in the JVM's `OAUTH_ALLOWED_URLS`
        (Kafka 4 refuses any other): the operator configured them.  A value set by someone else
        (``-D`` in ``spark_conf``'s extraJavaOptions) is theirs and left as it is."""
        urls = set(oauth_urls(options))
        if not urls:
            return
        gw = self.gateway
        system = gw.jvm.java.lang.System
        with _ISOLATION_LOCK:  # what every `Jvm` of this gateway allowed so far
            state = _PER_JVM.setdefault(gw, {})
            allowed: set[str] = state.get("allowed_urls", set())
            if urls <= allowed:
                return
            current = system.getProperty(OAUTH_ALLOWED_URLS)
            if current is not None and set(str(current).split(",")) != allowed:
                return
            allowed = allowed | urls
            state["allowed_urls"] = allowed
            system.setProperty(OAUTH_ALLOWED_URLS, ",".join(sorted(allowed)))

    def _isolated(self, bridge_jar: str) -> Any:
        """The JVM's one ``Isolation`` (kept per gateway: every `Jvm` of that gateway shares it --
        py4j caches reflected methods by class name, so a second copy of the bridge's classes in
        one JVM would be called through the first one's methods)."""
        gw = self.gateway
        with _ISOLATION_LOCK:
            state = _PER_JVM.setdefault(gw, {})
            found = state.get("isolation")
            if found is None:
                jvm = gw.jvm
                urls = gw.new_array(jvm.java.net.URL, 1)
                urls[0] = jvm.java.io.File(bridge_jar).toURI().toURL()
                parent = jvm.java.lang.Thread.currentThread().getContextClassLoader()
                loader = jvm.java.net.URLClassLoader(urls, parent)
                ctor = loader.loadClass(ISOLATION).getConstructor(gw.new_array(jvm.java.lang.Class, 0))
                found = ctor.newInstance(gw.new_array(jvm.java.lang.Object, 0))
                state["isolation"] = found
            return found

    def stderr_tail(self, n: int = 5) -> str:
        """The newest lines the JVM printed (a launched JVM only)."""
        return " | ".join(list(self._stderr or ())[-n:])

    def close(self) -> None:
        """Shut a launched JVM down (an attached one belongs to Spark)."""
        if self._owned:
            with contextlib.suppress(Py4JError):
                self.gateway.shutdown()


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

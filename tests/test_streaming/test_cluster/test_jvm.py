"""The driver's Kafka client in a JVM (`streaming.cluster.jvm`): kafka-clients 4.x beside Spark's
3.9 in one JVM, the bridge's byte frames both ways, Java failures as `KafkaCallError` and the
one-line errors made of them."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from streaming.cluster.jvm import CLUSTER_READS, FrameReader, KafkaCallError, frame_partitions, frame_strings
from streaming.jars import kafka_clients_version

#: names over the whole range a topic or group name can take on the wire: empty, separators the
#: frames must not rely on, multi-byte UTF-8, a surrogate pair, and long
ODD_NAMES = ["", "a\tb", "line\nbreak", "  ", "ünïcødé-Ω", "emoji-\U0001f600", "x" * 40_000, "é" * 20_000]


def test_frames_round_trip_in_python() -> None:
    r = FrameReader(frame_strings(ODD_NAMES))
    assert list(r.strings()) == ODD_NAMES
    raw = frame_partitions({"t": [0, 7, 2**31 - 1], "": [], "ü": [3]})
    r = FrameReader(raw)
    assert (r.text(), r.i32(), r.i32(), r.i32(), r.i32()) == ("t", 3, 0, 7, 2**31 - 1)
    assert (r.text(), r.i32(), r.text(), r.i32(), r.i32()) == ("", 0, "ü", 1, 3)
    assert r.pos == len(raw)
    nulls = FrameReader(struct.pack(">i", -1) + struct.pack(">q", -5) + struct.pack(">h", 29))
    assert (nulls.text(), nulls.i64(), nulls.i16()) == (None, -5, 29)


@pytest.mark.broker
def test_frames_cross_to_java_and_back(driver_jvm: Any, kafka: Any) -> None:
    """Names Java reads from our frames come back the same (topics that do not exist: no id)."""
    reads = driver_jvm.open(CLUSTER_READS, {"bootstrap.servers": kafka.bootstrap}, 30)
    try:
        answer = FrameReader(reads.call("topicIds", frame_strings(ODD_NAMES)))
        assert answer.i32() == len(ODD_NAMES)
        back = [(answer.text(), answer.text(), answer.i16()) for _ in ODD_NAMES]
        assert back == [(n, None, 17) for n in ODD_NAMES]  # INVALID_TOPIC_EXCEPTION, never asked
    finally:
        reads.close()


@pytest.mark.broker
@pytest.mark.spark
def test_the_driver_clients_are_4x_in_their_own_jvm_beside_sparks_3x(
    spark: Any, kafka: Any, driver_jvm: Any
) -> None:
    """Spark's connector keeps its kafka-clients (it cannot run on 4.x); the driver's reads run on
    kafka-clients 4.x in a JVM of their own (two versions in one JVM share its SASL providers)."""
    reads = driver_jvm.open(CLUSTER_READS, {"bootstrap.servers": kafka.bootstrap}, 30)
    try:
        sparks = str(spark._jvm.org.apache.kafka.common.utils.AppInfoParser.getVersion())
        ours = str(reads.call("clientVersion"))
        assert ours == kafka_clients_version() and ours.startswith("4.")
        assert sparks.startswith("3.") and sparks != ours
        assert driver_jvm.pid != int(spark._jvm.java.lang.ProcessHandle.current().pid())
        assert reads.call("clusterId") == kafka.cluster_id
    finally:
        reads.close()


@pytest.mark.broker  # a JVM with the resolved jars
def test_a_bad_option_is_a_kafka_call_error_naming_it(driver_jvm: Any) -> None:
    from streaming.app.errors import EXIT_CONFIG, client_options_error

    options = {"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": "soon", "sasl.jaas.config": "x"}
    with pytest.raises(KafkaCallError) as info:
        driver_jvm.open(CLUSTER_READS, options, 5)
    assert info.value.has("ConfigException")
    err = client_options_error("kafka_options", info.value, options)
    assert err.exit_code == EXIT_CONFIG
    assert err.message.startswith("kafka_options: request.timeout.ms: invalid value soon")


@pytest.mark.broker  # a JVM with the resolved jars
def test_a_class_not_on_the_class_path_is_named(driver_jvm: Any) -> None:
    from streaming.app.errors import EXIT_CONFIG, client_options_error

    options = {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "AWS_MSK_IAM",
        "sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
        "sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
    }
    with pytest.raises(KafkaCallError) as info:
        driver_jvm.open(CLUSTER_READS, options, 5)
    err = client_options_error("kafka_options", info.value, options)
    assert err.exit_code == EXIT_CONFIG
    assert "sasl.client.callback.handler.class" in err.message
    assert "software.amazon.msk.auth.iam.IAMClientCallbackHandler is not on the class path" in err.message


@pytest.mark.broker  # a JVM with the resolved jars
def test_an_unreachable_cluster_is_an_error_not_an_empty_answer(driver_jvm: Any) -> None:
    """ListGroups that no broker answered is a partial answer (the reconciliation skips the round):
    never an empty list that would make every mirrored group look deleted."""
    from streaming.cluster.groups import BrokerUnreachableError, ClusterClient

    c = ClusterClient(driver_jvm, "127.0.0.1:1", {}, timeout_s=2)
    try:
        listing = c.list_groups()
        assert not listing.complete and listing.groups == {}
        assert "Failed to find brokers" in listing.errors[0]
        with pytest.raises(BrokerUnreachableError, match="no broker answered DescribeCluster within 2s"):
            c.cluster_id()
    finally:
        c.close()


@pytest.mark.broker  # a JVM with the resolved jars
def test_close_ends_the_jvm_even_with_a_client_open(kafka: Any) -> None:
    """A mirror started and stopped many times in one process leaves no JVM behind: the gateway's
    shutdown alone left the process running while an Admin client's non-daemon threads lived."""
    import time
    from pathlib import Path

    from streaming.cluster.jvm import Jvm

    jvm = Jvm.launch()
    pid = jvm.pid
    jvm.open(CLUSTER_READS, {"bootstrap.servers": kafka.bootstrap}, 30.0)  # never closed
    jvm.close()
    deadline = time.monotonic() + 15
    while Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text():
        assert time.monotonic() < deadline, "the JVM outlived close()"
        time.sleep(0.2)
    jvm.close()  # idempotent


@pytest.mark.broker  # a JVM with the resolved jars
def test_release_memory_shrinks_the_heap_a_large_read_grew(driver_jvm: Any) -> None:
    """The driver's backfill read grows the client JVM's heap to a few hundred MB; once it is
    over, `Jvm.release_memory` shrinks the heap back to its live data (it never shrank below
    the default initial heap, 1/64 of the machine's memory, before)."""
    gw = driver_jvm.gateway.jvm
    runtime = gw.java.lang.Runtime.getRuntime()
    held = gw.java.util.concurrent.ConcurrentLinkedQueue()  # not a List: py4j passes its calls through
    for _ in range(40):  # 200 MB, alive until dropped
        held.add(gw.java.lang.reflect.Array.newInstance(gw.java.lang.Byte.TYPE, 5 * 2**20))
    grown = int(runtime.totalMemory())
    assert grown >= 200 * 2**20
    held.clear()
    driver_jvm.release_memory()
    # ~80 MB here (the young generation stays); the default initial heap alone is 384 MB on 24 GB
    assert int(runtime.totalMemory()) < 128 * 2**20 < grown

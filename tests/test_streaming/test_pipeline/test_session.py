"""`streaming.pipeline.session.gc_conf`: a local-mode driver JVM runs the serial collector unless
its options name one -- in the options, and in the test run's own Spark JVM."""

from __future__ import annotations

from typing import Any

from streaming.pipeline.session import LOCAL_GC, gc_conf

KEY = "spark.driver.extraJavaOptions"


def test_local_mode_gets_the_serial_collector_ahead_of_the_given_options() -> None:
    assert gc_conf({}, "local[2]") == {KEY: LOCAL_GC}
    assert gc_conf({KEY: "-Dx=1"}, "local[*]") == {KEY: f"{LOCAL_GC} -Dx=1"}


def test_a_named_collector_or_a_cluster_is_left_alone() -> None:
    for own in ("-XX:+UseG1GC", "-Dx=1 -XX:+UseParallelGC", "-XX:+UseZGC -Xmx4g", "-XX:+UseShenandoahGC"):
        assert gc_conf({KEY: own}, "local[2]") == {}
    assert gc_conf({}, "spark://master:7077") == {}
    assert gc_conf({}, "k8s://https://api:6443") == {}
    # an option that only mentions GC is not a collector
    assert gc_conf({KEY: "-Xlog:gc:file=/tmp/gc.log"}, "local[2]") == {
        KEY: f"{LOCAL_GC} -Xlog:gc:file=/tmp/gc.log"
    }


def test_the_session_jvm_runs_the_serial_collector(spark: Any) -> None:
    """The test run's session, made by `build_session` in local mode with its own extra options
    (a krb5.conf), collects with the serial collector's two collectors."""
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = sorted(str(b.getName()) for b in beans)
    assert names == ["Copy", "MarkSweepCompact"], names

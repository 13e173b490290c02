"""`streaming.pipeline.session.gc_conf`: a local-mode driver JVM runs the serial collector unless
its options name one -- in the options, and in the test run's own Spark JVM."""

from __future__ import annotations

from typing import Any

from streaming.pipeline.session import LOCAL_GC, LOCAL_HEAP, LOCAL_PERIODIC_GC, PERIODIC_GC_KEY, gc_conf

KEY = "spark.driver.extraJavaOptions"


def test_local_mode_gets_the_serial_collector_ahead_of_the_given_options() -> None:
    cleaner = {PERIODIC_GC_KEY: LOCAL_PERIODIC_GC}
    assert gc_conf({}, "local[2]") == {KEY: f"{LOCAL_GC} {LOCAL_HEAP}", **cleaner}
    assert gc_conf({KEY: "-Dx=1"}, "local[*]") == {KEY: f"{LOCAL_GC} {LOCAL_HEAP} -Dx=1", **cleaner}
    # a heap floor or a cleaner interval of the user's own wins
    assert gc_conf({KEY: "-Xms1g"}, "local[2]") == {KEY: f"{LOCAL_GC} -Xms1g", **cleaner}
    assert (
        gc_conf({KEY: "-XX:InitialHeapSize=512m"}, "local[2]")[KEY] == f"{LOCAL_GC} -XX:InitialHeapSize=512m"
    )
    assert gc_conf({PERIODIC_GC_KEY: "30min"}, "local[2]") == {KEY: f"{LOCAL_GC} {LOCAL_HEAP}"}


def test_a_named_collector_or_a_cluster_is_left_alone() -> None:
    for own in ("-XX:+UseG1GC", "-Dx=1 -XX:+UseParallelGC", "-XX:+UseZGC -Xmx4g", "-XX:+UseShenandoahGC"):
        assert gc_conf({KEY: own}, "local[2]") == {}
    assert gc_conf({}, "spark://master:7077") == {}
    assert gc_conf({}, "k8s://https://api:6443") == {}
    # an option that only mentions GC is not a collector
    assert gc_conf({KEY: "-Xlog:gc:file=/tmp/gc.log"}, "local[2]")[KEY] == (
        f"{LOCAL_GC} {LOCAL_HEAP} -Xlog:gc:file=/tmp/gc.log"
    )


def test_the_session_jvm_runs_the_serial_collector(spark: Any) -> None:
    """The test run's session, made by `build_session` in local mode with its own extra options
    (a krb5.conf), collects with the serial collector's two collectors."""
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = sorted(str(b.getName()) for b in beans)
    assert names == ["Copy", "MarkSweepCompact"], names
    # its heap starts at the small floor, and the context cleaner collects every few minutes
    init = spark._jvm.java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getInit()
    assert init == 32 * 2**20, init
    assert spark.sparkContext.getConf().get(PERIODIC_GC_KEY) == LOCAL_PERIODIC_GC

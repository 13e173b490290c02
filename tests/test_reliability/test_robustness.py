"""Bad input and crashes: the mirror counts and keeps what it cannot read, and survives kill -9."""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.mirror_process import wake_local_checkpoint
from streaming.pipeline.capture_format import CapturedRecord, CaptureHeader, read_capture, write_capture
from tests.support.http import get
from tests.support.processes import free_port, wait_process_ready

pytestmark = [pytest.mark.broker, pytest.mark.spark]


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def hostile_records(start_offset: int) -> list[CapturedRecord]:
    """What a newer broker or a damaged log could put in front of the mirror."""
    t = 1_800_000_000_000
    unknown_type = CapturedRecord(
        0, start_offset, t, struct.pack(">h", 99) + _s("from-the-future"), b"\x00\x00\x01"
    )
    # K=1 key with a value version nobody knows yet
    future_version = CapturedRecord(
        0,
        start_offset + 1,
        t,
        struct.pack(">h", 1) + _s("g-bad") + _s("t") + struct.pack(">i", 0),
        struct.pack(">h", 42) + b"\x00" * 20,
    )
    # a GroupMetadataValue v3 cut off after protocol and leader (both null): no currentStateTimestamp
    truncated = CapturedRecord(
        0,
        start_offset + 2,
        t,
        struct.pack(">h", 2) + _s("g-bad"),
        struct.pack(">h", 3) + _s("consumer") + struct.pack(">i", 1) + b"\xff\xff\xff\xff",
    )
    garbage_key = CapturedRecord(0, start_offset + 3, t, b"\x00", b"zz")
    # and a perfectly good commit for the same group afterwards: the stream must go on
    good = CapturedRecord(
        0,
        start_offset + 4,
        t,
        struct.pack(">h", 1) + _s("g-bad") + _s("t") + struct.pack(">i", 0),
        struct.pack(">hqi", 3, 42, -1) + _s("") + struct.pack(">q", t),
    )
    return [unknown_type, future_version, truncated, garbage_key, good]


def test_undecodable_records_are_counted_kept_and_skipped(
    mirrors: Any, capture_file: Path, scenarios: dict[str, Any], tmp_path: Path
) -> None:
    from streaming.settings import load_settings

    records = list(read_capture(capture_file))
    hostile = hostile_records(max(r.offset for r in records if r.partition == 0) + 1000)
    capture = tmp_path / "in" / "hostile.jsonl"
    write_capture(capture, CaptureHeader(source="test"), [*records, *hostile])
    settings = load_settings(
        source="capture",
        capture_path=capture,
        checkpoint_location=str(tmp_path / "ckpt"),
        trigger_interval_s=1.0,
        shuffle_partitions=2,
        http_port=0,
    )
    mirror = mirrors.start(settings)
    assert mirror.wait_ready(240)
    mirror.wait_batches(1, 60)
    status, errors = get(f"{mirror.http.url}/errors")
    assert status == 200
    bad = {(e["source_partition"], e["source_offset"]): e for e in errors["errors"]}
    assert set(bad) == {(r.partition, r.offset) for r in hostile[:4]}
    assert bad[(0, hostile[0].offset)]["status"] == "unknown"
    assert bad[(0, hostile[0].offset)]["record_type"] == 99
    assert bad[(0, hostile[1].offset)]["status"] == "error"
    assert "version" in bad[(0, hostile[1].offset)]["error_reason"].lower()
    assert bad[(0, hostile[2].offset)]["error_field"] == "currentStateTimestamp"
    assert bad[(0, hostile[3].offset)]["group_id"] is None
    assert mirror.observed["errors"] == 3 and mirror.observed["unknown"] == 1
    # the query went on: the good commit after the bad records landed, and every scenario
    # group is there as in the live run
    status, g = get(f"{mirror.http.url}/groups/g-bad")
    assert status == 200 and [o["offset"] for o in g["offsets"]] == [42]
    crange = next(iter(scenarios["classic_range"].groups))
    status, snap = get(f"{mirror.http.url}/groups/{urllib.parse.quote(crange)}")
    assert status == 200 and snap["state"] == "Stable"
    assert mirror.health()[0]


def _run_mirror(
    bootstrap: str, checkpoint: Path, port: int, log: Path, *extra: str
) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "streaming.app.cli",
        "run",
        "--bootstrap-servers",
        bootstrap,
        "--checkpoint-location",
        str(checkpoint),
        "--http-port",
        str(port),
        "--max-offsets-per-trigger",
        "400",  # a backfill of many small batches, to crash in the middle of
        "--trigger-interval-s",
        "0.5",
        "--shuffle-partitions",
        "2",
        "--spark-conf",
        "spark.driver.memory=1g",
        *extra,
    ]
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def _all_snapshots(base: str) -> dict[str, Any]:
    _, listing = get(f"{base}/groups")
    return {
        g["group_id"]: get(f"{base}/groups/{urllib.parse.quote(g['group_id'], safe='')}")[1]
        for g in listing["groups"]
    }


@pytest.fixture(scope="module")
def quiet_kafka(tmp_path_factory: pytest.TempPathFactory, kafka_version: str) -> Iterator[Any]:
    """A broker whose `__consumer_offsets` stops changing: groups of every kind whose members
    all left, plus bulk commits.  Two mirror runs at different times then read the same log (the
    session broker's live groups may legitimately change between two runs under load)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    from lab.broker import BrokerSettings, LocalKafka
    from lab.lab import Lab
    from lab.scenarios import run_scenarios

    broker = LocalKafka(BrokerSettings(kafka_version=kafka_version), tmp_path_factory.mktemp("quiet")).start()
    lab = Lab(broker.bootstrap, kafka_version, run_id="q")
    run_scenarios(
        lab,
        [
            "classic_range",
            "kip848_consumer",
            "kafka_python_empty",
            "assign_only",
            "txn_commit",
            "txn_abort",
            "delete_group",
            "delete_offsets",
            "explicit_retention",
        ],
    )
    lab.close()  # every member leaves: the log gets its last membership records now
    topic = lab.topic("bulk", partitions=10)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    futures = []
    for rnd in range(5):
        for g in range(200):
            req = ConsumerGroupTopicPartitions(
                f"bulk-{g}", [TopicPartition(topic, p, 1 + rnd * 10 + p) for p in range(10)]
            )
            futures.extend(admin.alter_consumer_group_offsets([req]).values())
    for fut in futures:
        fut.result(60)
    lab.close()
    yield broker
    broker.stop()


def _end_offsets(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "log_level": 0})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition("__consumer_offsets", p), timeout=10)[1]
            for p in range(5)
        }
    finally:
        c.close()


def test_kill_9_mid_backfill_then_restart_ends_in_the_same_state(
    mirrors: Any, quiet_kafka: Any, tmp_path: Path
) -> None:
    expected = _uninterrupted(mirrors, quiet_kafka, tmp_path)

    checkpoint = tmp_path / "crashing"
    port = free_port()
    log = tmp_path / "mirror.log"
    # the query folds the backfill, in many small micro-batches (the driver's fold: the next test)
    proc = _run_mirror(quiet_kafka.bootstrap, checkpoint, port, log, "--backfill", "query")
    try:
        deadline = time.monotonic() + 300
        while _committed_batches(checkpoint) < 3:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no progress before the crash"
            time.sleep(0.1)
        status, ready = get(f"http://127.0.0.1:{port}/ready")
        assert status == 503 and not ready["ready"], "the crash must hit the middle of the backfill"
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, no shutdown hooks
        proc.wait(30)
        crashed_at = _committed_batches(checkpoint)

        proc = _run_mirror(quiet_kafka.bootstrap, checkpoint, port, log, "--backfill", "query")
        wait_process_ready(port, proc, 300)
        time.sleep(2)  # one more trigger after readiness
        assert _committed_batches(checkpoint) > crashed_at  # resumed, not restarted
        _assert_snapshots(port, expected)
    finally:
        _stop_quietly(proc, log)


def _assert_snapshots(port: int, expected: dict[str, Any]) -> None:
    """The mirror on ``port`` serves exactly the ``expected`` groups, each the same snapshot."""
    got = _all_snapshots(f"http://127.0.0.1:{port}")
    assert got.keys() == expected.keys()
    for group_id, snap in expected.items():
        assert got[group_id] == snap, group_id


def _stop_quietly(proc: subprocess.Popen[bytes], log: Path) -> None:
    """SIGTERM (SIGKILL after 60 s); no traceback logged after the SIGTERM."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "Traceback" not in log.read_text().split("received SIGTERM")[-1], log.read_text()[-3000:]


def _uninterrupted(mirrors: Any, kafka: Any, tmp_path: Path) -> dict[str, Any]:
    """Every group's snapshot after an uninterrupted run (the reference), once the log is quiet."""
    from streaming.settings import load_settings

    deadline = time.monotonic() + 60
    ends = _end_offsets(kafka.bootstrap)
    while True:  # the last leave/commit records are in: the log is quiet
        time.sleep(3)
        now = _end_offsets(kafka.bootstrap)
        if now == ends:
            break
        assert time.monotonic() < deadline, "the quiet broker's log keeps changing"
        ends = now
    assert sum(ends.values()) > 10_000

    reference = mirrors.start(
        load_settings(
            bootstrap_servers=kafka.bootstrap,
            checkpoint_location=str(tmp_path / "reference"),
            trigger_interval_s=1.0,
            shuffle_partitions=2,
            http_port=0,
        )
    )
    assert reference.wait_ready(300)
    reference.wait_batches(1, 60)
    expected = _all_snapshots(reference.http.url)
    reference.stop()
    assert len(expected) > 200
    return expected


@pytest.mark.parametrize("crash_at", ["seed written", "first batch planned"])
def test_kill_9_around_the_driver_backfill_hand_over_then_restart_ends_in_the_same_state(
    mirrors: Any, quiet_kafka: Any, tmp_path: Path, crash_at: str
) -> None:
    """``backfill: driver``: killed (the driver and its JVMs, no shutdown hooks) once the seed is
    written -- before or just as the query starts -- or once batch 0 is planned but not committed:
    the restart makes the seed again or runs batch 0 again from it, and ends where an
    uninterrupted run ends."""
    expected = _uninterrupted(mirrors, quiet_kafka, tmp_path)
    checkpoint = tmp_path / "crashing"
    port = free_port()
    log = tmp_path / "mirror.log"
    proc = _run_mirror(quiet_kafka.bootstrap, checkpoint, port, log)
    mark = checkpoint / ("seed/seed.parquet" if crash_at == "seed written" else "offsets/0")
    try:
        deadline = time.monotonic() + 300
        while not mark.exists():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"no {mark}"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        uncommitted = crash_at == "first batch planned" and _committed_batches(checkpoint) == 0
        first_log = log.read_text()
        proc = _run_mirror(quiet_kafka.bootstrap, checkpoint, port, log)
        wait_process_ready(port, proc, 300)
        if uncommitted:  # batch 0 emits nothing for a seeded group: the restart read the seed
            assert "the groups come from the seed" in log.read_text()[len(first_log) :]
        # batch 0 (the seed) and one after it: a quiet log gives the query no new data, so the
        # test wakes it as the mirror's expiry wake would (the batch must change nothing)
        deadline = time.monotonic() + 120
        while _committed_batches(checkpoint) < 1:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        assert wake_local_checkpoint(checkpoint)
        while _committed_batches(checkpoint) < 2:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        _assert_snapshots(port, expected)
    finally:
        _stop_quietly(proc, log)


def test_sigterm_mid_backfill_stops_cleanly(quiet_kafka: Any, tmp_path: Path) -> None:
    """SIGTERM in the middle of a backfill of small micro-batches: the running batch drains, the
    query stops (interrupting the next batch when it has started), exit 0, no ERROR, no traceback,
    nothing printed by a dying JVM thread.  Whether the stop lands inside the next batch's sink
    depends on timing; test_session_crash_traces.py pins that case deterministically (the sink's
    `BatchInterruptedError`, which keeps Spark's regex from overflowing the stream thread's stack
    -- seen as "Exception in thread ... StackOverflowError" on a SIGTERM after a 1M-record
    backfill)."""
    port = free_port()
    log = tmp_path / "mirror.log"
    checkpoint = tmp_path / "ckpt"
    proc = _run_mirror(quiet_kafka.bootstrap, checkpoint, port, log, "--backfill", "query")
    try:
        deadline = time.monotonic() + 300
        while _committed_batches(checkpoint) < 3:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    _assert_quiet_after_sigterm(log.read_text())


def test_sigterm_stops_cleanly(kafka: Any, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "mirror.log"
    proc = _run_mirror(kafka.bootstrap, tmp_path / "ckpt", port, log)
    wait_process_ready(port, proc, 300)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(90) == 0
    text = log.read_text()
    assert "Traceback" not in text and "ERROR" not in text, text[-3000:]
    _assert_quiet_after_sigterm(text)


_LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) coordinator_mirror: ")


def _assert_quiet_after_sigterm(text: str) -> None:
    """The stop says one line; what follows it is only the mirror's own records of the batch the
    stop let finish (a records-lost warning, say: a run on the session broker logged one after
    the stop's line), never a trace, an error or a JVM's noise."""
    _, sep, after = text.partition("received SIGTERM: stopping between two micro-batches")
    assert sep, text[-3000:]
    for bad in ("Traceback", "ERROR", "Exception in thread", "StackOverflowError"):
        assert bad not in after, after[-3000:]
    assert all(_LOG_RECORD.match(line) for line in after.strip().splitlines()), after[-3000:]

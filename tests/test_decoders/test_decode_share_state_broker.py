"""`__share_group_state` from a real 4.3.1 broker, with Kafka's own code as the oracle.

* the stored vectors (tests/vectors/kafka-4.3.1-share-state.json, `make vectors`: every captured
  record agreed with ``ShareGroupStateMessageFormatter``, the share coordinator's serde + converters
  and ``kafka-dump-log --share-group-state-decoder`` before it was stored) decode to their
  expectation and cover what a 4.3.1 broker writes: snapshots, updates (tag 0
  DeliveryCompleteCount), tombstones, every persisted delivery state, delivery counts above 1;
* live: the session broker after `share_acks` (a share consumer that accepts, releases and
  rejects), captured with ``capture --topic __share_group_state``: every record decodes ok and
  agrees with the oracle, and the ``decode`` command reads the capture by its header.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from decoders import SHARE_GROUP_STATE_TOPIC, decode_share_state_record, record_json
from decoders.records import Record, ShareSnapshotValue, ShareUpdateValue
from decoders.tables import SHARE_STATE_RECORD_TYPES
from streaming.pipeline.capture_format import read_capture
from tests.support.decoders_oracle import OracleUnavailableError, check_all, run_oracle
from tests.support.require import require

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "kafka-4.3.1-share-state.json"
DOC = json.loads(VECTORS.read_text(encoding="utf-8"))


def _bytes(v: dict[str, Any]) -> tuple[bytes, bytes | None]:
    return bytes.fromhex(v["key"]), None if v["value"] is None else bytes.fromhex(v["value"])


def test_stored_vectors_are_share_state_from_4_3_1() -> None:
    assert DOC["topic"] == SHARE_GROUP_STATE_TOPIC and DOC["kafka_version"] == "4.3.1"
    assert DOC["compare"] == "full" and len(DOC["vectors"]) >= 8
    # what a 4.3.1 broker writes: snapshots and updates in the 4.1+ layout, and tombstones
    assert set(DOC["capture_counts"]) == {"K=0 V0 4.1+", "K=0 tombstone", "K=1 V0 4.1+"}
    for v in DOC["vectors"]:
        got, status = record_json(*_bytes(v), registry=SHARE_STATE_RECORD_TYPES)
        assert status == v["expect_status"] == "ok" and got == v["expect"], v["name"]


def test_stored_vectors_cover_every_persisted_delivery_state() -> None:
    states: set[int] = set()
    counts: set[int] = set()
    dcc = start_unknown = False
    for v in DOC["vectors"]:
        rec = decode_share_state_record(*_bytes(v))
        assert isinstance(rec, Record), v["name"]
        if isinstance(rec.value, ShareSnapshotValue | ShareUpdateValue):
            states |= {b.delivery_state for b in rec.value.state_batches}
            counts |= {b.delivery_count for b in rec.value.state_batches}
            dcc |= rec.value.delivery_complete_count is not None
            start_unknown |= rec.value.start_offset is None
    assert states == {0, 2, 4}  # Available (released), Acknowledged, Archived (rejected)
    assert max(counts) >= 2  # a released record delivered again
    assert dcc and start_unknown  # KIP-1226's tag 0; a freshly initialised share-partition


@pytest.mark.broker
def test_oracle_agrees_on_the_stored_vectors() -> None:
    records = [(0, i, *_bytes(v)) for i, v in enumerate(DOC["vectors"])]
    try:
        oracle = run_oracle(records, topic=SHARE_GROUP_STATE_TOPIC)
    except OracleUnavailableError as exc:
        require(False, str(exc))
        raise
    assert {o.kafka_json()[0] for o in oracle} == {"ShareGroupStateMessageFormatter"}
    problems = check_all(records, oracle, topic=SHARE_GROUP_STATE_TOPIC)
    assert not problems, "\n".join(problems[:30])


@pytest.mark.broker
def test_live_share_state_decodes_and_agrees_with_kafka(
    kafka: Any, lab: Any, tmp_path: Path, share_acks_result: Any
) -> None:
    from streaming.app.capture_cmd import capture

    out = tmp_path / "share_state.jsonl"
    assert capture(kafka.bootstrap, str(out), topic=SHARE_GROUP_STATE_TOPIC) > 0
    records = [(r.partition, r.offset, r.key, r.value) for r in read_capture(out)]
    group = share_acks_result.group.group_id
    mine = [r for r in records if (rec := decode_share_state_record(r[2], r[3])) and _group(rec) == group]
    assert {int.from_bytes(k[:2], "big") for _, _, k, _ in mine} == {0, 1}  # snapshots and updates
    for _, _, k, v in records:
        assert record_json(k, v, registry=SHARE_STATE_RECORD_TYPES)[1] == "ok"
    try:
        oracle = run_oracle(records, topic=SHARE_GROUP_STATE_TOPIC)
    except OracleUnavailableError as exc:
        require(False, str(exc))
        raise
    problems = check_all(records, oracle, topic=SHARE_GROUP_STATE_TOPIC)
    assert not problems, "\n".join(problems[:30])
    # the decode command picks the registry from the capture's header
    proc = subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", "decode", "--capture", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"{len(records)} ok" in proc.stderr


def _group(rec: Any) -> str | None:
    return rec.key.group_id if isinstance(rec, Record) else None

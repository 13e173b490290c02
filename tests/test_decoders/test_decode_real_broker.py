"""Phase 2: real bytes from real brokers, with Kafka's own code as the oracle.

* the stored golden vectors (tests/vectors/kafka-*.json, made by `make vectors` from 4.3.1 and
  3.9.2 brokers) decode with status ok to their stored expectation, through the per-record and
  the batch decoders -- no JVM, fast;
* what they cover, record type by record type and version by version, per broker;
* FormatterOracle (Kafka's console formatters, coordinator serde + generated JSON converters,
  dump-log's consumer-protocol expansion) agrees with our ``record_json`` on every stored vector
  (4.3.1 jars; for 3.9.2 brokers' bytes also 3.9.2's own classes) -- needs java + jars;
* live: the test session's broker, after every default scenario, captured: every record decodes
  with status ok and agrees with the oracle;
* the ``decode`` command on a real vector of each record family.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from decoders import decode_arrow, decode_record, payload_to_record, record_json
from streaming.pipeline.capture_format import read_capture
from tests.support.decoders_oracle import OracleRecord, OracleUnavailableError, check_all, run_oracle
from tests.support.require import require

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors"
REAL_FILES = {
    "kafka-4.3.1": "4.3.1",
    "kafka-3.9.2": "3.9.2",
    "kafka-3.9.2-kip848-preview": "3.9.2",
}
Rec = tuple[int, int, bytes, bytes | None]


def _load(name: str) -> dict[str, Any]:
    return dict(json.loads((VECTORS_DIR / f"{name}.json").read_text(encoding="utf-8")))


DOCS = {name: _load(name) for name in REAL_FILES}
VECTORS = [v for doc in DOCS.values() for v in doc["vectors"]]


def _bytes(v: dict[str, Any]) -> tuple[bytes, bytes | None]:
    return bytes.fromhex(v["key"]), None if v["value"] is None else bytes.fromhex(v["value"])


def _records(vectors: Sequence[dict[str, Any]]) -> list[Rec]:
    # the oracle only needs a unique (partition, offset) per line: number the vectors
    return [(0, i, *_bytes(v)) for i, v in enumerate(vectors)]


def _oracle(
    records: list[Rec], jars: str | None = None, topic: str = "__consumer_offsets"
) -> list[OracleRecord]:
    try:
        return run_oracle(records, kafka_jars_version=jars, topic=topic)
    except OracleUnavailableError as exc:
        require(False, str(exc))
        raise  # unreachable: require() fails the test


def _combo(v: dict[str, Any]) -> tuple[int, int | None, str | None]:
    """(K, V or None for a tombstone, layout) of a stored vector's expectation."""
    value = v["expect"]["value"]
    if value is None:
        return v["expect"]["key"]["type"], None, None
    return v["expect"]["key"]["type"], value["version"], (value.get("extra") or {}).get("layout")


# ------------------------------------------------------------------------------- stored vectors
def test_real_vector_files_and_provenance() -> None:
    for name, version in REAL_FILES.items():
        doc = DOCS[name]
        assert doc["kafka_version"] == version and doc["compare"] == "full"
        assert len(doc["vectors"]) >= 20, name
        scenarios = {v["scenario"] for v in doc["vectors"]}
        assert scenarios == set(doc["scenarios"]), f"{name}: scenarios without a vector"
        for v in doc["vectors"]:
            assert v["kafka_version"] == version and v["broker"] == name
            assert v["expect_status"] == "ok"
            assert v["oracle"] in {
                "OffsetsMessageFormatter",
                "GroupMetadataMessageFormatter",
                "ShareGroupMessageFormatter",
                "serde",
            }
            group = v["expect"]["key"]["data"].get("group", v["expect"]["key"]["data"].get("groupId"))
            assert group == v["group"] and group.endswith("-vec")


def test_stored_vectors_decode_ok_to_their_expectation() -> None:
    bad = []
    for v in VECTORS:
        got, status = record_json(*_bytes(v))
        if status != "ok" or got != v["expect"]:
            bad.append((v["broker"], v["name"], status))
    assert not bad, bad[:10]


def test_batch_decoder_on_real_bytes() -> None:
    rows = [_bytes(v) for v in VECTORS]
    batch = pa.record_batch(
        {
            "key": pa.array([k for k, _ in rows], pa.binary()),
            "value": pa.array([x for _, x in rows], pa.binary()),
            "partition": pa.array([v["partition"] for v in VECTORS], pa.int32()),
            "offset": pa.array([v["offset"] for v in VECTORS], pa.int64()),
            "timestamp": pa.array([v["timestamp"] for v in VECTORS], pa.int64()),
        }
    )
    fast = decode_arrow(batch).to_pylist()
    assert fast == decode_arrow(batch, fast_path=False).to_pylist()
    for v, row, (k, val) in zip(VECTORS, fast, rows, strict=True):
        assert row["status"] == "ok" and row["error_reason"] is None, (v["name"], row)
        assert row["record_type"] == v["expect"]["key"]["type"]
        assert row["is_tombstone"] == (val is None)
        assert not row["ambiguous_layout"], v["name"]  # real bytes always fit exactly one layout
        if row["record_type"] in (0, 1):
            data = v["expect"]["key"]["data"]
            assert (row["group_id"], row["topic"], row["partition_num"]) == (
                data["group"],
                data["topic"],
                data["partition"],
            )
            if val is not None:
                value = v["expect"]["value"]["data"]
                assert row["committed_offset"] == value["offset"]
                assert row["commit_timestamp_ms"] == value["commitTimestamp"]
                assert row["expire_timestamp_ms"] == value.get("expireTimestamp")
                epoch = row["leader_epoch"]
                assert (-1 if epoch is None else epoch) == value.get("leaderEpoch", -1)
                assert row["metadata"] == (value["metadata"] or None)
        else:
            assert payload_to_record(row["payload"], _source(row)) == decode_record(k, val, _source(row))


def _source(row: dict[str, Any]) -> Any:
    from decoders import Source

    return Source(row["source_partition"], row["source_offset"], row["source_timestamp_ms"])


# -------------------------------------------------------------------------------------- coverage
#: what our scenarios make each broker write: K -> value versions (None = tombstone)
EXPECTED_WRITTEN = {
    "4.3.1": {
        1: {1, 4, None},  # V1: explicit retention; V4: every other commit; tombstones: deletes
        2: {3, None},  # GroupMetadata V3 (4.x never writes V4 -- see below)
        3: {0, None},
        4: {None},  # 4.1+ writes only tombstones of K=4 (KIP-1101 replaced it by MetadataHash)
        5: {0, None},
        6: {0, None},
        7: {0, None},
        8: {0, None},
        10: {0, None},
        11: {0, None},
        12: {0, None},
        13: {0, None},
        14: {0, None},
        15: {0, None},
        16: {0, None},
        17: {0, None},
        19: {0, None},
        20: {0, None},
        21: {0, None},
        22: {0, None},
        23: {0, None},
    },
    "3.9.2": {
        1: {1, 3, None},  # V3 from both coordinators; V1: explicit retention
        2: {3, None},
        3: {0},
        4: {0},  # a real K=4 value: only <= 4.0 writes them
        5: {0, None},
        6: {0},
        7: {0, None},
        8: {0, None},
    },
}
#: never written by any broker we run, so covered by synthetic vectors only (test_decode_sweep.py,
#: test_tables_oracle_sweep.py, spec-section9.json):
#: K=0 (0.8.2 only); K=9 (share groups of 4.0 only -- 3.9.2 cannot even load K>=9, 4.1+ drops K=9);
#: K=18 (never released); OffsetCommit V0 (< 0.10.1 / old IBP) and V2 (KIP-211 2.1 only with an old
#: IBP); GroupMetadata V0-V2 (old IBPs) and V4 (never written by 3.9/4.3 -- spec section 3.3);
#: the 3.7 early-access K=4/5/7/8 layouts and the 4.0 K=11/K=15 layouts.
NEVER_WRITTEN = {0, 9, 18}


def test_coverage_per_broker_version() -> None:
    seen: dict[str, dict[int, set[int | None]]] = {"4.3.1": {}, "3.9.2": {}}
    for v in VECTORS:
        k, ver, _ = _combo(v)
        seen[v["kafka_version"]].setdefault(k, set()).add(ver)
    assert seen == EXPECTED_WRITTEN
    # every (K, V, layout, tombstone) a capture held is among the stored vectors
    for name, doc in DOCS.items():
        stored = set()
        for v in doc["vectors"]:
            k, ver, layout = _combo(v)
            what = "tombstone" if ver is None else f"V{ver}" + (f" {layout}" if layout else "")
            stored.add(f"K={k} {what}")
        assert stored == set(doc["capture_counts"]), name


def test_coverage_union_and_layouts() -> None:
    types = {_combo(v)[0] for v in VECTORS}
    assert types == set(range(1, 24)) - NEVER_WRITTEN
    layouts = {(k, layout) for k, _, layout in map(_combo, VECTORS) if layout}
    # multi-layout families: real bytes pick the current layout (and exactly one fits: no
    # ambiguity -- checked in test_batch_decoder_on_real_bytes)
    assert layouts == {(4, "3.8+"), (5, "3.8+"), (7, "3.8+"), (8, "3.8+"), (11, "4.1+"), (15, "4.1+")}
    # value versions the issue names
    versions = {(k, ver, v["kafka_version"]) for v in VECTORS for k, ver, _ in [_combo(v)]}
    assert {(1, 1, "4.3.1"), (1, 1, "3.9.2"), (1, 3, "3.9.2"), (1, 4, "4.3.1")} <= versions
    assert {(2, 3, "4.3.1"), (2, 3, "3.9.2")} <= versions
    # aborted transactional offset commits are stored too (read_uncommitted capture)
    assert {v["kafka_version"] for v in VECTORS if v["transaction"] == "aborted"} == {"4.3.1", "3.9.2"}


# ------------------------------------------------------------------------------ oracle, stored
@pytest.mark.broker
def test_oracle_agrees_on_every_stored_vector() -> None:
    """Kafka 4.3.1's formatters/serde vs ours on every vector file: the real-broker vectors and
    the hand-derived spec section 9 ones -- each file's records as records of its topic
    (``__share_group_state`` files through the share coordinator's classes)."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(VECTORS_DIR.glob("*.json")):
        doc = _load(path.stem)
        by_topic.setdefault(doc.get("topic", "__consumer_offsets"), []).extend(doc["vectors"])
    assert set(by_topic) == {"__consumer_offsets", "__share_group_state"}
    for topic, found in by_topic.items():
        records = _records([v for v in found if v.get("expect_status", "ok") == "ok"])
        problems = check_all(records, _oracle(records, topic=topic), topic=topic)
        assert not problems, "\n".join(problems[:30])


@pytest.mark.broker
def test_kafka_3_9_agrees_on_its_own_bytes() -> None:
    """3.9.2's own serde/converters/formatters vs ours on what 3.9.2 brokers wrote."""
    vectors = [v for v in VECTORS if v["kafka_version"] == "3.9.2"]
    records = _records(vectors)
    problems = check_all(records, _oracle(records, "3.9.2"), legacy_3_9=True)
    assert not problems, "\n".join(problems[:30])


# ----------------------------------------------------------------------------------------- live
#: record types the default scenarios make a 4.x broker write
LIVE_TYPES = {1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 17, 19, 20, 21, 22, 23}


@pytest.mark.broker
def test_live_capture_decodes_and_agrees_with_kafka(capture_file: Path, scenarios: dict[str, Any]) -> None:
    records: list[Rec] = [(r.partition, r.offset, r.key, r.value) for r in read_capture(capture_file)]
    assert len(records) > 50
    for _, _, k, v in records:
        obj, status = record_json(k, v)
        assert status == "ok", obj  # no errors, no unknown types
    assert {int.from_bytes(k[:2], "big") for _, _, k, _ in records} >= LIVE_TYPES
    batch = pa.record_batch(
        {
            "key": pa.array([k for _, _, k, _ in records], pa.binary()),
            "value": pa.array([v for _, _, _, v in records], pa.binary()),
            "partition": pa.array([p for p, _, _, _ in records], pa.int32()),
            "offset": pa.array([o for _, o, _, _ in records], pa.int64()),
            "timestamp": pa.array([0] * len(records), pa.int64()),
        }
    )
    assert set(decode_arrow(batch).column("status").to_pylist()) == {"ok"}
    problems = check_all(records, _oracle(records))
    assert not problems, "\n".join(problems[:30])


# ------------------------------------------------------------------------------------------ CLI
EXE = Path(sys.executable).with_name("coordinator-mirror")
FAMILIES = {
    "offset commit": {1},
    "classic group": {2},
    "consumer group": {3, 4, 5, 6, 7, 8, 16},
    "share group": {10, 11, 12, 13, 14, 15},
    "streams group": {17, 19, 20, 21, 22, 23},
}


def _cli_cases() -> list[Any]:
    cases = []
    for family, types in FAMILIES.items():
        live = [v for v in VECTORS if _combo(v)[0] in types and v["value"] is not None]
        dead = [v for v in VECTORS if _combo(v)[0] in types and v["value"] is None]
        biggest = max(live, key=lambda v: len(v["value"]))
        cases.append(pytest.param(biggest, id=f"{family}-K{_combo(biggest)[0]}"))
        cases.append(pytest.param(dead[0], id=f"{family}-K{_combo(dead[0])[0]}-tombstone"))
    return cases


@pytest.mark.parametrize("vec", _cli_cases())
def test_decode_command_on_real_vectors(vec: dict[str, Any]) -> None:
    args = [str(EXE), "decode", "--key", vec["key"]]
    if vec["value"] is not None:
        args += ["--value", vec["value"]]
    proc = subprocess.run(args, capture_output=True, text=True, encoding="utf-8", timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0]) == vec["expect"]

"""KIP-848 assignments name topics by id only; the cluster's id -> name map must be keyed by
Kafka's text of the id (`decoders.uuids`) for the names to show -- whatever form the client hands
the id over in -- and ids no one can name (or a client's malformed ones) are shown as ids, counted,
never a server error.  A real HTTP server over a real store, lag tracker and Burrow window; the
cluster's answer is what `streaming.cluster.offsets` builds from a client's ``topic_id``.
(tests/test_live/test_parity_live.py does the same against the session broker.)"""

from __future__ import annotations

import json
import struct
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Uuid

from decoders.uuids import canonical_uuid, kafka_uuid
from lab.records import Log, tip
from lab.synthetic import RENDERER, settings, to_store_row
from state.model import Group
from state.replay import fold
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.serving.api import MirrorHTTPServer
from streaming.serving.burrow import Burrow, lag_route
from streaming.serving.lag_metrics import LagExporter
from streaming.serving.store import SnapshotStore

#: ids whose Kafka text holds "-" and "_" (librdkafka's text has "+" and "/" there)
RAW_A = b"\xfb\xef\xbe" * 5 + b"\xff"
RAW_B = b"\xff" * 8 + b"\x00" * 8
#: an id the cluster does not have (a deleted topic)
RAW_GONE = bytes(range(16))


def _uuid(raw: bytes) -> Uuid:
    return Uuid(*struct.unpack(">qq", raw))


def kip848_by_id(group_id: str, assigned: dict[bytes, str]) -> Group:
    """A KIP-848 group whose member is assigned partitions 0 and 1 of each topic by id only (no
    record names the ids) and commits to each topic by name (the commit records carry names)."""
    log = Log()
    parts = [tip(kafka_uuid(raw), 0, 1) for raw in assigned]
    log.k848_stable_group(group_id, {"m1": (list(assigned.values()), parts)})
    log.k848_current(group_id, "m1", 1, parts)
    for name in assigned.values():
        for p in (0, 1):
            log.commit(group_id, name, p, 10 + p)
    g = fold(None, log.records, group_id=group_id).group
    assert g is not None
    return g


class Served:
    def __init__(self, groups: list[Group], names: dict[str, str], sampled: list[str]) -> None:
        self.store = SnapshotStore(renderer=RENDERER)
        self.store.apply(0, [to_store_row(g) for g in groups])
        self.tracker = LagTracker()
        self.burrow = Burrow(self.tracker, "c", 10, 0)
        self.exporter = LagExporter(self.tracker, self.burrow, settings(cluster_name="c"))
        views = self.tracker.apply_groups((g.group_id, g) for g in groups)
        self.burrow.history.record(views, self.tracker)
        now = int(time.time() * 1000)
        for k, at in enumerate((now - 2000, now - 1000)):
            ends = {(t, p): PartitionEnds(0, 20 + k, 20 + k) for t in sampled for p in (0, 1)}
            self.tracker.apply_round(LogOffsets(at, ends, names))
        self.burrow.evaluate_all(now)
        self.server = MirrorHTTPServer(
            ("127.0.0.1", 0),
            self.store,
            metrics=lambda: (self.exporter.exposition(), "text/plain"),
            lag_route=lambda path: lag_route(self.tracker, self.burrow, path, int(time.time() * 1000)),
            topic_names=lambda: self.tracker.topic_names,
        ).start()

    def get(self, path: str) -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(self.server.url + path, timeout=30) as resp:
                body = resp.read()
                status = resp.status
        except urllib.error.HTTPError as err:
            body, status = err.read(), err.code
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body.decode()


@pytest.fixture
def served() -> Iterator[Any]:
    made: list[Served] = []

    def make(groups: list[Group], names: dict[str, str], sampled: list[str]) -> Served:
        s = Served(groups, names, sampled)
        made.append(s)
        return s

    yield make
    for s in made:
        s.server.stop()


def _assigned(snapshot: dict[str, Any]) -> set[str]:
    return {a["topic"] for m in snapshot["members"] for a in m["assignment"]}


FORMS = {
    "confluent-kafka Uuid (what offsets.py gets)": _uuid,
    "standard base64 str(Uuid)": lambda raw: str(_uuid(raw)),
    "Kafka's text (Java's Uuid.toString())": kafka_uuid,
    "hex": lambda raw: str(uuid.UUID(bytes=raw)),
}


@pytest.mark.parametrize("form", FORMS)
def test_assignment_by_id_shows_names_and_lag_owners(served: Any, form: str) -> None:
    assert {"-", "_"} <= set(kafka_uuid(RAW_A) + kafka_uuid(RAW_B))
    assert str(_uuid(RAW_A)) != kafka_uuid(RAW_A)  # the bug: the two alphabets differ for this id
    g = kip848_by_id("k848", {RAW_A: "orders", RAW_B: "payments"})
    # the cluster's map as offsets.py keys it: canonical_uuid(the client's topic_id) -> name
    names = {canonical_uuid(FORMS[form](raw)): name for raw, name in ((RAW_A, "orders"), (RAW_B, "payments"))}
    s = served([g], names, ["orders", "payments"])

    status, snap = s.get("/groups/k848")
    assert status == 200 and _assigned(snap) == {"orders", "payments"}
    status, lag = s.get("/groups/k848/lag")
    assert status == 200
    rows = {(r["topic"], r["partition"]): r for r in lag["partitions"]}
    assert set(rows) == {(t, p) for t in ("orders", "payments") for p in (0, 1)}
    assert all(r["consumer_id"] == "m1" and r["client_id"] == "client-m1" for r in rows.values())
    assert all(r["lag"] == 21 - r["committed_offset"] for r in rows.values())
    assert lag["deleted_topics"] == []
    status, burrow = s.get("/v3/kafka/c/consumer/k848/lag")
    assert status == 200
    assert {(p["topic"], p["owner"]) for p in burrow["status"]["partitions"]} == {
        ("orders", "/10.0.0.2"),
        ("payments", "/10.0.0.2"),
    }
    text = s.exporter.exposition().decode()
    assert 'coordinator_mirror_topic_ids_unresolved{cluster_name="c",reason="unnamed"} 0' in text
    assert 'coordinator_mirror_topic_ids_unresolved{cluster_name="c",reason="malformed"} 0' in text
    lag_lines = [x for x in text.splitlines() if x.startswith("kafka_consumergroup_group_lag{")]
    assert len(lag_lines) == 4 and not any("unknown" in x for x in lag_lines)


def test_the_standard_alphabet_key_was_the_bug(served: Any) -> None:
    """Keyed by librdkafka's text (``str(Uuid)``, what offsets.py did), the same cluster answer
    leaves the id in the assignment and the owners unknown -- and the id is counted as unnamed."""
    g = kip848_by_id("k848-old", {RAW_A: "orders"})
    s = served([g], {str(_uuid(RAW_A)): "orders"}, ["orders"])
    _, snap = s.get("/groups/k848-old")
    assert _assigned(snap) == {kafka_uuid(RAW_A)}
    _, lag = s.get("/groups/k848-old/lag")
    assert {r["member_host"] for r in lag["partitions"] if r["topic"] == "orders"} == {"unknown"}
    text = s.exporter.exposition().decode()
    assert 'coordinator_mirror_topic_ids_unresolved{cluster_name="c",reason="unnamed"} 1' in text


def test_unnamed_and_malformed_ids_are_shown_as_ids_and_counted(served: Any) -> None:
    g = kip848_by_id("k848-bad", {RAW_A: "orders", RAW_GONE: "gone"})
    gone = kafka_uuid(RAW_GONE)
    names = {
        canonical_uuid(_uuid(RAW_A)): "orders",
        canonical_uuid("not an id!"): "weird",  # a client's malformed id: kept as given
        canonical_uuid(b"\x01\x02"): "short",
        canonical_uuid("+AAAAAAAAAAAAAAAAAAA-A"): "mixed",
    }
    s = served([g], names, ["orders"])
    status, snap = s.get("/groups/k848-bad")
    assert status == 200 and _assigned(snap) == {"orders", gone}
    status, lag = s.get("/groups/k848-bad/lag")
    assert status == 200
    gone_rows = [r for r in lag["partitions"] if r["topic"] == gone]
    assert len(gone_rows) == 2 and all(r["topic_deleted"] and r["end_offset"] is None for r in gone_rows)
    assert gone in lag["deleted_topics"]
    for path in ("/v3/kafka/c/consumer/k848-bad", "/v3/kafka/c/consumer/k848-bad/lag", "/groups"):
        status, _ = s.get(path)
        assert status == 200, path
    text = s.exporter.exposition().decode()
    assert 'coordinator_mirror_topic_ids_unresolved{cluster_name="c",reason="unnamed"} 1' in text
    assert 'coordinator_mirror_topic_ids_unresolved{cluster_name="c",reason="malformed"} 3' in text
    status, _ = s.get("/groups/" + urllib.parse.quote("not an id!", safe=""))
    assert status == 404

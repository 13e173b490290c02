"""Share-partition delivery state (`state.share`): the share coordinator's fold of ShareSnapshot /
ShareUpdate records, its batch combiner, the exported figures, the codec.  Real bytes: the
share_acks records of a 4.3.1 broker (tests/vectors/kafka-4.3.1-share-state.json) folded to what
Kafka's kafka-share-groups --describe --offsets printed for them; live: test_share_live.py."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoders import decode_share_state_record
from decoders.records import (
    DecodeError,
    ErrorKind,
    Source,
    UnknownRecord,
)
from state.share import (
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    ShareCodecError,
    ShareGroupState,
    combine_batches,
    decode,
    encode,
    fold,
    partition_figures,
)
from tests.support.share import T0, ShareLog

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "kafka-4.3.1-share-state.json"


# ------------------------------------------------------------------------------- the combiner
A, K, X = AVAILABLE, ACKNOWLEDGED, ARCHIVED


@pytest.mark.parametrize(
    ("held", "new", "start", "want"),
    [
        # contiguous batches with the same state and count merge (the combiner's "contiguous" case)
        ([(1, 3, K, 1)], [(4, 6, K, 1)], None, [(1, 6, K, 1)]),
        # a released record (available, count 1) acknowledged on its redelivery (count 2) wins
        ([(6, 6, A, 1), (7, 9, K, 1)], [(6, 6, K, 2)], 6, [(6, 6, K, 2), (7, 9, K, 1)]),
        # same count: the higher state wins -- archived over acknowledged over available
        ([(10, 20, A, 1)], [(12, 14, X, 1)], None, [(10, 11, A, 1), (12, 14, X, 1), (15, 20, A, 1)]),
        ([(10, 20, X, 1)], [(12, 14, A, 1)], None, [(10, 20, X, 1)]),
        # pruned below the start offset, a batch across it cut at it
        ([(1, 5, K, 1), (6, 9, A, 1)], [], 7, [(7, 9, A, 1)]),
        # gaps stay gaps
        ([(1, 2, K, 1)], [(5, 6, K, 1)], None, [(1, 2, K, 1), (5, 6, K, 1)]),
        ([], [], 3, []),
    ],
)
def test_combine_batches_table(
    held: list[tuple[int, int, int, int]],
    new: list[tuple[int, int, int, int]],
    start: int | None,
    want: list[tuple[int, int, int, int]],
) -> None:
    assert list(combine_batches(held, new, start)) == want


_batch = st.tuples(st.integers(0, 30), st.integers(0, 6), st.sampled_from([A, K, X]), st.integers(1, 4)).map(
    lambda t: (t[0], t[0] + t[1], t[2], t[3])
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_batch, max_size=6), st.lists(_batch, max_size=6), st.one_of(st.none(), st.integers(0, 35)))
def test_combine_is_the_per_offset_highest_priority(
    held: list[tuple[int, int, int, int]], new: list[tuple[int, int, int, int]], start: int | None
) -> None:
    """The combiner's outcome, offset by offset: the highest (delivery count, state) among the
    batches covering it, nothing below the start offset, equal neighbours merged."""
    got = combine_batches(held, new, start)
    best: dict[int, tuple[int, int]] = {}
    for f, la, s, c in (*held, *new):
        for o in range(f, la + 1):
            if start is None or o >= start:
                best[o] = max(best.get(o, (0, -1)), (c, s))
    expanded = {o: (c, s) for f, la, s, c in got for o in range(f, la + 1)}
    assert expanded == best
    for (_, la1, s1, c1), (f2, _, s2, c2) in itertools.pairwise(got):
        assert f2 > la1 and not (f2 == la1 + 1 and (s1, c1) == (s2, c2))  # sorted, disjoint, merged


# ------------------------------------------------------------------------------------- the fold
def test_snapshot_then_updates_then_tombstone() -> None:
    log = ShareLog()
    log.snapshot(0, None)  # initialised, no start offset yet
    log.update(0, 1, (1, 1, A, 1), (2, 2, K, 1), dcc=1)
    log.update(0, None, (1, 1, K, 2), (3, 4, K, 1), (5, 5, X, 1), dcc=4)  # start unchanged
    g = fold(None, log.records, "sg")
    assert g is not None
    sp = g.partitions[("TID", 0)]
    assert sp.start_offset == 1 and sp.delivery_complete_count == 4
    assert sp.batches == ((1, 1, K, 2), (2, 4, K, 1), (5, 5, X, 1))
    fig = partition_figures(sp, end_offset=9)
    assert (fig["acknowledged"], fig["archived"], fig["available"]) == (4, 1, 0)
    assert fig["in_flight"] == 5 and fig["delivery_attempts"] == 6 and fig["max_delivery_count"] == 2
    assert fig["lag"] == 9 - 1 - 4  # Kafka: end - start offset - delivery complete count
    log.tombstone(0)
    assert fold(g, log.records[-1:], "sg") is None  # nothing left: the state row goes
    assert g.counters == {"records": 4, "snapshots": 1, "updates": 2, "tombstones": 1,
                          "unknown_records": 0, "decode_errors": 0}  # fmt: skip


def test_an_update_without_a_snapshot_is_the_state_and_a_4_1_broker_has_no_complete_count() -> None:
    log = ShareLog()
    log.update(3, 10, (10, 11, K, 1), (12, 12, A, 1))
    g = fold(None, log.records, "sg")
    assert g is not None
    fig = partition_figures(g.partitions[("TID", 3)], end_offset=20)
    assert fig["delivery_complete_count"] is None and fig["complete_in_state"] == 2
    assert fig["lag"] == 20 - 10 - 2  # the acknowledged/archived records the state holds


def test_replays_and_errors() -> None:
    log = ShareLog(partition=2)
    log.snapshot(0, 5, (5, 6, K, 1), dcc=2)
    g = fold(None, log.records, "sg")
    again = fold(g, log.records, "sg")  # a replay after a restart: no-op
    assert again is not None and again.counters["records"] == 1
    src = Source(2, 99, T0)
    bad = DecodeError(src, 1, 0, "value", "StateBatches", 40, ErrorKind.TRUNCATED, "truncated: ...")
    unknown = UnknownRecord(Source(2, 100, T0), 7, b"\x00\x07", b"")
    g = fold(again, [bad, unknown], "sg")
    assert g is not None and g.counters["decode_errors"] == 1 and g.counters["unknown_records"] == 1
    assert [(e["kind"], e["partition"], e["offset"]) for e in g.errors] == [
        ("error", 2, 99),
        ("unknown", 2, 100),
    ]
    assert decode(encode(g)) == g
    with pytest.raises(ShareCodecError):
        decode(b"\x09junk")


def _vectors(group_prefix: str) -> list[Any]:
    doc = json.loads(VECTORS.read_text())
    out = []
    for v in doc["vectors"]:
        if not v["group"].startswith(group_prefix):
            continue
        rec = decode_share_state_record(
            bytes.fromhex(v["key"]),
            None if v["value"] is None else bytes.fromhex(v["value"]),
            Source(v["partition"], v["offset"], v["timestamp"]),
        )
        out.append(rec)
    return sorted(out, key=lambda r: (r.source.partition, r.source.offset))


def test_the_deleted_share_group_s_real_records_end_in_nothing() -> None:
    recs = _vectors("share-del")
    assert recs and recs[-1].value is None  # the tombstone DeleteShareGroups wrote
    assert fold(None, recs, recs[0].key.group_id) is None


def test_real_records_fold_to_a_state_with_every_delivery_state() -> None:
    recs = _vectors("share-acks")
    g = fold(None, recs, recs[0].key.group_id)
    assert isinstance(g, ShareGroupState) and g.partitions
    states = {b[2] for sp in g.partitions.values() for b in sp.batches}
    assert states <= {A, K, X} and all(sp.start_offset is not None for sp in g.partitions.values())

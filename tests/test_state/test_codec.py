"""The state codec: round trips, the frozen v0 blob's migration, version errors, size."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.records import DAY, Log, cm, tip
from state.codec import CURRENT_VERSION, StateCodecError, blob_version, committed_offsets, decode, encode
from state.expiry import expire
from state.model import COUNTERS, Group
from state.replay import fold

V0_BLOB = Path(__file__).with_name("state_v0.bin")  # written by the first format; never regenerate


def _rich_group() -> Group:
    log = Log(partition=7, start_offset=1_000_000)
    log.classic("g", 1, [cm("a", ["t"], {"t": [0, 1]}, instance_id="ia"), cm("b", ["t"], {"t": [2]})])
    for p in range(3):
        log.commit("g", "t", p, 100 + p, leader_epoch=3, metadata="m" if p else None, topic_id="TID")
    log.commit("g", "u", 0, 5, expire_ts=log.now_ms + DAY)
    log.unknown()
    return fold(None, log.records, group_id="g").group  # type: ignore[return-value]


def test_round_trip_classic_and_pending() -> None:
    g = _rich_group()
    blob = encode(g)
    assert blob_version(blob) == CURRENT_VERSION
    assert decode(blob) == g
    g2, _ = expire(g.copy(), 10**15)  # everything expired and pending confirmation
    assert g2 is not None and g2.pending
    assert decode(encode(g2)) == g2


def test_round_trip_modern_kinds() -> None:
    log = Log()
    log.k848_stable_group("k", {"m1": (["t"], [tip("T", 0)]), "m2": (["t"], [tip("T", 1)])})
    log.k848_member("k", "m3", ["t"], protocols=["range"], regex="t.*", instance_id="x")
    log.k848_regex("k", "t.*", ["t1"])
    log.commit("k", "t", 0, 1, topic_id="T")
    log.commit("k", "t", 1, 1)  # an irregular entry: no topic id where its topic has one
    log.streams_member("s", "m")
    log.streams_topology("s", 0, ["in"])
    log.streams_current("s", "m", 1, [0, 1])
    log.share_member("sh", "m")
    log.share_state("sh", {"SID": "share-t"})
    for gid in ("k", "s", "sh"):
        g = fold(None, [r for r in log.records if r.key.group_id == gid]).group
        assert g is not None
        assert decode(encode(g)) == g


def test_frozen_v0_blob_migrates() -> None:
    blob = V0_BLOB.read_bytes()
    assert blob_version(blob) == 0
    g = decode(blob)
    assert (g.group_id, g.kind, g.state, g.generation, g.protocol, g.leader) == (
        "payments-etl.prod-eu-west-1",
        "classic",
        "Stable",
        7,
        "cooperative-sticky",
        "consumer-1-6b3c",
    )
    assert g.last_protocol == "cooperative-sticky" and g.last_leader == "consumer-1-6b3c"
    assert sorted(g.members) == ["consumer-1-6b3c", "pod-b-91aa"]
    assert g.members["pod-b-91aa"].instance_id == "pod-b"
    assert g.members["pod-b-91aa"].assignment == (("payments.events", (3, 4, 5)),)
    assert g.offsets[("payments.events", 1)] == (1300, 5, "checkpoint-1", 1790000300000, None, None, 12, 9002)
    assert g.offsets[("payments.audit", 0)][4] == 1790090000000
    assert g.last_position == (12, 9002)
    # counters: v0's kept, unknown ones dropped, new ones defaulted
    assert g.counters["rebalances"] == 7 and g.counters["expiries_confirmed"] == 0
    assert set(g.counters) == set(COUNTERS)
    # and it lives on in the current version
    assert blob_version(encode(g)) == CURRENT_VERSION
    assert decode(encode(g)) == g
    # replay continues from the migrated position (idempotent before, applied after)
    log = Log(partition=12, start_offset=9002)
    log.commit("payments-etl.prod-eu-west-1", "payments.events", 0, 9)  # @9002: already applied
    log.commit("payments-etl.prod-eu-west-1", "payments.events", 0, 1500)  # @9003
    g = fold(g, log.records).group
    assert g is not None and g.offsets[("payments.events", 0)][0] == 1500 and g.counters["commits"] == 101


@pytest.mark.parametrize(
    ("blob", "match"),
    [
        (b"", "empty"),
        (b"\x09abc", "newer"),
        (b"\x01\xc1", "does not decode"),
        (b"\x01\x93\x01\x02\x03", "does not decode"),
        (b"\x00{not json", "does not decode"),
    ],
)
def test_bad_blobs_raise_the_codec_error(blob: bytes, match: str) -> None:
    with pytest.raises(StateCodecError, match=match):
        decode(blob)


def test_size_per_offset_is_compact() -> None:
    log = Log(partition=3, start_offset=10**9)
    for p in range(50):
        log.commit("g", f"topic-{p % 5}", p, 10**9 + p, topic_id=f"ID{p % 5:020d}")
    g = fold(None, log.records).group
    assert g is not None
    blob = encode(g)
    assert len(blob) / 50 < 20.5, len(blob)  # ~16 bytes per committed offset, ~200 a group


V1_BLOB = Path(__file__).with_name("state_v1.bin")  # `_rich_group()` written by codec v1; never regenerate


def test_frozen_v1_blob_migrates() -> None:
    """v1 -> v2: everything v1 held survives; the fields v2 added get their 'unknown' defaults."""
    blob = V1_BLOB.read_bytes()
    assert blob_version(blob) == 1
    migrated = decode(blob)
    assert migrated.last_rebalance_ms is None  # v1 did not record it: unknown until the next one
    assert migrated.counters["emptied"] == 0
    fresh = _rich_group()
    assert fresh.last_rebalance_ms is not None
    fresh.last_rebalance_ms = None
    fresh.timing, fresh.last_timing, fresh.commit_window = None, None, b""  # v3's (issue 26)
    assert migrated == fresh
    assert set(migrated.counters) == set(COUNTERS)
    assert decode(encode(migrated)) == migrated


def test_v2_keeps_last_rebalance_and_emptied() -> None:
    log = Log(partition=1)
    log.classic("g", 1, [cm("a")])
    log.tick(5_000).classic("g", 2, [cm("a"), cm("b")])
    log.tick(5_000).classic("g", 2, [])
    g = fold(None, log.records).group
    assert g is not None
    assert g.last_rebalance_ms == log.now_ms - 5_000 and g.counters["emptied"] == 1
    blob = encode(g)
    assert blob_version(blob) == CURRENT_VERSION
    assert decode(blob) == g


V2_BLOB = Path(__file__).with_name("state_v2.bin")  # `_rich_group()` written by codec v2; never regenerate


def test_frozen_v2_blob_migrates() -> None:
    """v2 -> v3: everything v2 held survives; timing and rhythm start empty (the mirror times the
    group's rebalances again once it saw the group settle)."""
    blob = V2_BLOB.read_bytes()
    assert blob_version(blob) == 2
    migrated = decode(blob)
    assert migrated.timing is None and migrated.last_timing is None and not migrated.commit_window
    fresh = _rich_group()
    assert fresh.timing is not None and fresh.last_timing is not None and fresh.commit_window
    fresh.timing, fresh.last_timing, fresh.commit_window = None, None, b""
    assert migrated == fresh
    assert decode(encode(migrated)) == migrated


def test_v3_keeps_timing_and_commit_rhythm() -> None:
    g = _rich_group()
    assert g.timing is not None and g.last_timing is not None and g.commit_window
    blob = encode(g)
    assert blob_version(blob) == CURRENT_VERSION
    back = decode(blob)
    assert back == g
    assert back.timing == g.timing and back.last_timing == g.last_timing
    assert back.commit_window == g.commit_window


V3_BLOB = Path(__file__).with_name("state_v3.bin")  # `_rich_group()` written by codec v3; never regenerate


def test_frozen_v3_blob_migrates() -> None:
    """v3 -> v4 (issue 38): everything v3 held survives; the two bump counters start at 0 and no
    bump flags are known (the next bump is classified by what happens from then on)."""
    blob = V3_BLOB.read_bytes()
    assert blob_version(blob) == 3
    migrated = decode(blob)
    assert migrated.counters["static_rejoins"] == migrated.counters["share_initializations"] == 0
    assert migrated.bump_flags == 0
    assert migrated == _rich_group()  # a classic group: nothing of v4's to lose
    assert decode(encode(migrated)) == migrated
    assert set(migrated.counters) == set(COUNTERS)


def test_v4_keeps_bump_counters_and_flags() -> None:
    log = Log()
    log.share_member("sh", "m")
    log.share_state("sh", {"SID": "share-t"})
    g = fold(None, log.records).group
    assert g is not None
    g.counters["static_rejoins"], g.counters["share_initializations"] = 3, 4
    assert g.bump_flags  # the member joined, the share-partitions were initialised since a bump
    blob = encode(g)
    assert blob_version(blob) == 4 == CURRENT_VERSION
    assert decode(blob) == g and decode(blob).bump_flags == g.bump_flags


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_committed_offsets_read_without_the_rest(version: int) -> None:
    """`committed_offsets` (the offset history's read of every changed group) agrees with a full
    decode for every version ever written, and for each kind's display name."""
    blob = _rich_group_blob(version)
    g = decode(blob)
    kind, offsets = committed_offsets(blob)
    assert kind == g.display_kind
    assert offsets == {tp: (e[0], e[3]) for tp, e in g.offsets.items()}
    assert offsets  # the frozen blobs hold offsets


def _rich_group_blob(version: int) -> bytes:
    if version == CURRENT_VERSION:
        return encode(_rich_group())
    return Path(__file__).with_name(f"state_v{version}.bin").read_bytes()


def test_committed_offsets_of_every_kind() -> None:
    log = Log()
    log.k848_stable_group("k", {"m1": (["t"], [tip("T", 0)])})
    log.commit("k", "t", 0, 11, topic_id="T")
    log.commit("simple", "t", 3, 4)
    log.streams_member("s", "m")
    log.commit("s", "in", 1, 9)
    log.share_member("sh", "m")
    for gid, kind in (("k", "consumer"), ("simple", "simple"), ("s", "streams"), ("sh", "share")):
        g = fold(None, [r for r in log.records if r.key.group_id == gid]).group
        assert g is not None
        assert committed_offsets(encode(g)) == (kind, {tp: (e[0], e[3]) for tp, e in g.offsets.items()})
    with pytest.raises(StateCodecError):
        committed_offsets(b"\x03\x91")


def _streams_group() -> Group:
    """A streams group whose topology carries ``source_topics_of`` (subtopology -> topics it
    reads), with topic names from both base64 alphabets, '-', '/', unicode and HTML."""
    log = Log()
    log.streams_member("s/ü<b>", "m")
    log.streams_topology("s/ü<b>", 3, ["in-a+/b", "in_a-_b", "ünï/<i>", "x" * 249])
    log.streams_current("s/ü<b>", "m", 1, [0, 1])
    log.commit("s/ü<b>", "in-a+/b", 1, 9)
    g = fold(None, log.records).group
    assert g is not None and g.topology is not None
    return g


@pytest.mark.parametrize("writer", ["_encode_v1", "_encode_v2", "_encode_v3", "_encode_v4"])
def test_streams_topology_source_topics_of_survives_every_version(writer: str) -> None:
    """Main's ``source_topics_of`` (state.replay.modern) is a field of the topology dict, which
    every msgpack version (v1 to v4) carries whole: written by each, read back by `decode`."""
    from state import codec

    g = _streams_group()
    assert g.topology is not None
    want = g.topology["source_topics_of"]
    assert want == {"0": sorted(["in-a+/b", "in_a-_b", "ünï/<i>", "x" * 249])}
    back = decode(getattr(codec, writer)(g))
    assert back.topology == g.topology and back.topology is not None
    assert back.topology["source_topics_of"] == want
    assert committed_offsets(getattr(codec, writer)(g)) == committed_offsets(encode(g))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_frozen_blob_still_decodes_and_rewrites_as_current(version: int) -> None:
    g = decode(Path(__file__).with_name(f"state_v{version}.bin").read_bytes())
    assert set(g.counters) == set(COUNTERS)
    again = encode(g)
    assert blob_version(again) == CURRENT_VERSION and decode(again) == g

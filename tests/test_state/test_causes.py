"""What is and is not a rebalance (`state.causes`, issue 38): the records a real Kafka 4.4.0 broker
wrote for static members rejoining and for share groups initialising their partitions
(data/epoch_bumps-4.4.0.jsonl, `about` says how they were made), folded as the mirror folds them;
and the rules on record lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decoders.decode import decode_record
from decoders.records import Source
from lab.records import Log, cm, tip
from state import causes
from state import events as ev
from state.model import Group
from state.replay import fold

DATA = Path(__file__).with_name("data") / "epoch_bumps-4.4.0.jsonl"


def _folded() -> dict[str, tuple[Group, list[ev.Event]]]:
    lines = DATA.read_text().splitlines()
    by_group: dict[str, list[Any]] = {}
    for line in lines[1:]:
        r = json.loads(line)
        value = None if r["value"] is None else bytes.fromhex(r["value"])
        rec = decode_record(
            bytes.fromhex(r["key"]), value, Source(r["partition"], r["offset"], r["timestamp"])
        )
        by_group.setdefault(rec.key.group_id, []).append(rec)  # type: ignore[union-attr]
    out = {}
    for gid, recs in by_group.items():
        recs.sort(key=lambda x: (x.source.partition, x.source.offset))
        res = fold(None, recs)
        assert res.group is not None
        out[gid] = (res.group, res.events)
    return out


@pytest.fixture(scope="module")
def folded() -> dict[str, tuple[Group, list[ev.Event]]]:
    return _folded()


def _bumps(events: list[ev.Event]) -> list[tuple[int | None, str]]:
    return [(e.after, e.cause) for e in events if isinstance(e, ev.RebalanceCompleted)]


def test_a_share_groups_partition_initialisation_is_no_rebalance(folded: Any) -> None:
    g, events = folded["sh2-g-1795887692"]
    # join (2), initialised (3), leave (4), [reset: no bump], join (5), leave (6), [delete], join (7),
    # initialised again (8), leave (9)
    assert _bumps(events) == [
        (2, "rebalance"), (3, "share_initialization"), (4, "rebalance"), (5, "rebalance"),
        (6, "rebalance"), (7, "rebalance"), (8, "share_initialization"), (9, "rebalance"),
    ]  # fmt: skip
    counts = (g.counters["rebalances"], g.counters["share_initializations"], g.counters["static_rejoins"])
    assert counts == (6, 2, 0)


def test_a_streams_static_member_rejoining_is_no_rebalance(folded: Any) -> None:
    g, events = folded["ss-app-1795888084"]
    assert _bumps(events) == [(3, "rebalance"), (4, "static_rejoin")]
    assert g.counters["rebalances"] == 1 and g.counters["static_rejoins"] == 1
    assert any(isinstance(e, ev.MemberReplaced) and e.instance_id == "s2-1" for e in events)


@pytest.mark.parametrize(
    ("gid", "epochs"),
    [("st-g-classic-1795887797", [1, 2, 3]), ("st-g-consumer-1795887914", [2, 3, 5])],
)
def test_classic_and_kip848_static_rejoins_bump_nothing(folded: Any, gid: str, epochs: list[int]) -> None:
    """Two members join, one rejoins (no bump: the same generation, or no epoch written), both
    leave at the end (a rebalance)."""
    g, events = folded[gid]
    assert g.counters["member_replacements"] == 1
    assert _bumps(events) == [(e, "rebalance") for e in epochs] and g.counters["static_rejoins"] == 0
    rejoined = next(e.source_timestamp_ms for e in events if isinstance(e, ev.MemberReplaced))
    assert not any(isinstance(e, ev.RebalanceCompleted) and e.source_timestamp_ms == rejoined for e in events)


# ---------------------------------------------------------------------------------- the rules
def _share_group(log: Log) -> None:
    log.share_member("sh", "m1")
    log.share_epoch("sh", 1)
    log.share_target_epoch("sh", 1)


def test_a_static_member_fenced_for_good_is_a_rebalance() -> None:
    """A static member that leaves and is not replaced: its leave counts until a replacement."""
    log = Log()
    log.k848_stable_group("k", {"m1": (["t"], [tip("T", 0)]), "m2": (["t"], [tip("T", 1)])})
    g = fold(None, log.records).group
    assert g is not None
    g.members["m2"].instance_id = "i2"
    log.records = []
    log.tick(1000)
    log.k848_leave("k", "m2")  # fenced: removed
    log.k848_epoch("k", 5)
    log.k848_target_epoch("k", 5)
    res = fold(g, log.records)
    assert _bumps(res.events)[-1][1] == "rebalance"


@pytest.mark.parametrize(
    ("flags", "cause"),
    [
        (0, "rebalance"),
        (causes.JOINED, "rebalance"),
        (causes.LEFT | causes.REPLACED, "rebalance"),
        (causes.REPLACED, "static_rejoin"),
        (causes.REPLACED | causes.STATIC_LEAVE, "rebalance"),  # one left and was not replaced
        (causes.SHARE_INIT, "share_initialization"),
        (causes.SHARE_INIT | causes.METADATA, "rebalance"),
        (causes.SHARE_INIT | causes.REPLACED, "static_rejoin"),
    ],
)
def test_cause_table(flags: int, cause: str) -> None:
    assert causes.cause(flags) == cause


def test_classic_groups_are_not_flagged() -> None:
    log = Log()
    log.classic("c", 1, [cm("a"), cm("b")])
    log.tick(1000).classic("c", 2, [cm("a")])
    g = fold(None, log.records).group
    assert g is not None and g.bump_flags == 0 and g.counters["rebalances"] == 2


def test_share_initialisation_after_a_join_counts_apart() -> None:
    log = Log()
    _share_group(log)
    log.share_state("sh", {"SID": "t"})
    log.share_epoch("sh", 2)
    log.share_target_epoch("sh", 2)
    res = fold(None, log.records)
    assert _bumps(res.events) == [(1, "rebalance"), (2, "share_initialization")]

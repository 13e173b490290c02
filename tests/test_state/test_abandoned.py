"""Abandoned offsets (`state.abandoned`): a group's committed offsets on topics none of its members
subscribes to any more -- classic subscriptions, KIP-848 names and resolved regexes, streams
source topics -- and the groups that have none."""

from __future__ import annotations

import pytest

from lab.records import Log, cm, tip
from state.abandoned import abandoned_partitions, abandoned_topics, subscribed_topics
from state.expiry import all_deadlines
from state.replay import fold
from state.snapshot import snapshot


def test_a_classic_group_that_left_a_topic() -> None:
    log = Log()
    log.classic("g", 1, [cm("a", ["t", "old"], {"t": [0], "old": [0]})])
    log.commit("g", "t", 0, 5)
    log.commit("g", "old", 0, 5)
    log.tick(1_000).classic("g", 2, [cm("a", ["t"], {"t": [0]})])  # unsubscribed from "old"
    g = fold(None, log.records).group
    assert g is not None
    assert subscribed_topics(g) == {"t"}
    assert abandoned_partitions(g) == {("old", 0)}
    assert abandoned_topics(g) == {"old": 1}
    snap = snapshot(g)
    # the broker already counts the abandoned offset down (Rule 3); the snapshot says when it goes
    deadline = all_deadlines(g)[("old", 0)]
    assert deadline is not None and snap["abandoned_topics"] == {
        "old": {"partitions": [0], "expires_at_ms": deadline}
    }
    assert {(o["topic"], o["abandoned"]) for o in snap["offsets"]} == {("t", False), ("old", True)}


def test_kip848_subscriptions_names_and_resolved_regexes() -> None:
    log = Log()
    log.k848_stable_group("k", {"m1": (["t"], [tip("T", 0)])})
    log.k848_member("k", "m2", [], regex="r.*")
    for topic in ("t", "r1", "gone"):
        log.commit("k", topic, 0, 1)
    g = fold(None, [r for r in log.records if r.key.group_id == "k"]).group
    assert g is not None
    assert abandoned_partitions(g) == frozenset()  # the regex is not resolved yet: unknown
    log.k848_regex("k", "r.*", ["r1"])
    g = fold(g, log.records[-1:]).group
    assert g is not None and abandoned_partitions(g) == {("gone", 0)}


@pytest.mark.parametrize(
    "case",
    ["empty classic group", "simple group", "subscription not decoded", "streams without topology", "share"],
)
def test_groups_without_abandoned_offsets(case: str) -> None:
    log = Log()
    gid = "g"
    if case == "empty classic group":
        log.classic(gid, 1, [])
    elif case == "subscription not decoded":
        member = cm("a", ["t"])
        object.__setattr__(member, "consumer_subscription", None)
        log.classic(gid, 1, [member])
    elif case == "streams without topology":
        log.streams_member(gid, "m")
    elif case == "share":
        log.share_member(gid, "m")
    log.commit(gid, "other", 0, 1) if case != "share" else None
    g = fold(None, log.records).group
    assert g is not None and abandoned_partitions(g) == frozenset(), case


def test_streams_source_topics() -> None:
    log = Log()
    log.streams_member("s", "m")
    log.streams_topology("s", 0, ["in"])
    log.commit("s", "in", 0, 1)
    log.commit("s", "old-in", 0, 1)
    g = fold(None, log.records).group
    assert g is not None and abandoned_partitions(g) == {("old-in", 0)}

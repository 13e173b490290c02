"""Abandoned offsets: committed offsets of a group that still has members, on topics none of them
subscribes to any more -- a consumer that left a topic, whose offsets Kafka's expiry sweep is
already counting down (Rules 3, 5, 6 of `state.expiry`: the same subscription test the broker
uses, ``Group.isSubscribedToTopic``).  Their lag is a ghost: nobody will consume it.

Known only where the log says what the members subscribe to:

* classic ``consumer`` groups whose members' subscriptions all decoded (`classic_subscribed_topics`);
* KIP-848 consumer groups: subscribed topic names and the topics their regexes resolved to (K=16)
  -- a regex the log has not resolved yet makes the group's subscription unknown (nothing flagged);
* streams groups with a topology: its source and repartition-source topics.

Empty groups (every offset of an Empty group ages towards expiry: Rule 2), simple groups, share
groups and groups whose subscriptions are unknown have no abandoned offsets.
"""

from __future__ import annotations

from state.expiry import classic_subscribed_topics, consumer_subscribed_topics, streams_source_topics
from state.model import CLASSIC, CONSUMER, STREAMS, Group, TopicPartition


def subscribed_topics(g: Group) -> frozenset[str] | None:
    """The topics the group's members subscribe to, or None when the log does not say."""
    if not g.members:
        return None
    if g.kind == CLASSIC:
        subs = classic_subscribed_topics(g)
        return subs if subs else None
    if g.kind == CONSUMER:
        regexes = {m.subscribed_regex for m in g.members.values() if m.subscribed_regex}
        if any(r not in g.regexes for r in regexes):
            return None  # a regex not resolved by the broker yet
        return consumer_subscribed_topics(g)
    if g.kind == STREAMS:
        return streams_source_topics(g) if g.topology is not None else None
    return None


def abandoned_partitions(g: Group) -> frozenset[TopicPartition]:
    """The group's committed partitions on topics no member subscribes to (see the module doc)."""
    subs = subscribed_topics(g)
    if subs is None:
        return frozenset()
    return frozenset(tp for tp in g.offsets if tp[0] not in subs)


def abandoned_topics(g: Group) -> dict[str, int]:
    """Topic -> number of abandoned partitions."""
    out: dict[str, int] = {}
    for topic, _ in abandoned_partitions(g):
        out[topic] = out.get(topic, 0) + 1
    return out

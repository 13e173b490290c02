"""The in-memory shape of a group (`state.model`): copies independent of their source, equality by
value over every field, what the API shows as a group's kind and type, the bounded error list, and
what a conversion forgets."""

from __future__ import annotations

import pytest

from lab.records import MIN, Log, cm, tip
from state.model import (
    CLASSIC,
    CONSUMER,
    COUNTERS,
    DEAD,
    MAX_KEPT_ERRORS,
    SHARE,
    SIMPLE,
    STREAMS,
    Group,
    Member,
    new_counters,
)
from state.replay import fold


def _rich_group() -> Group:
    """A group with every mutable part filled: members, targets, regexes, offsets, timing."""
    log = Log()
    log.k848_member("k", "m1", ["t"], regex="orders.*", instance_id="i1")
    log.k848_epoch("k", 1)
    log.k848_regex("k", "orders.*", ["orders.eu"])
    log.k848_target("k", "m1", [tip("TID", 0)])
    log.k848_target_epoch("k", 1)
    log.tick(MIN).k848_current("k", "m1", 1, [tip("TID", 0)])
    log.commit("k", "orders.eu", 0, 7, topic_id="TID")
    log.unknown(99)
    g = fold(None, log.records, group_id="k").group
    assert g is not None and g.members and g.targets and g.regexes and g.offsets and g.errors
    return g


def test_a_copy_is_equal_and_independent() -> None:
    g = _rich_group()
    c = g.copy()
    assert c == g and c is not g
    c.members["m1"].client_id = "changed"
    c.targets["m2"] = ()
    c.regexes["x"] = ()
    c.offsets[("t", 9)] = c.offsets[("orders.eu", 0)]
    c.topic_names["X"] = "x"
    c.counters["commits"] += 1
    c.errors[0]["offset"] = -5
    c.pending[("t", 0)] = 1
    assert g == _rich_group()  # the original is untouched
    assert c != g


def test_equality_is_by_value_over_every_field() -> None:
    a, b = _rich_group(), _rich_group()
    assert a == b
    for name in Group.__slots__:
        c = b.copy()
        if name == "members":
            c.members = {}
        elif name == "timing":  # a tracker, compared by its row (`state.timing`'s tests)
            continue
        else:
            setattr(c, name, object())
        assert c != a, name
    assert a != "k"
    with pytest.raises(TypeError):
        hash(a)  # mutable: never a dict key


def test_member_copy_and_equality() -> None:
    m = Member("m")
    m.extra = {"process_id": "p"}
    c = m.copy()
    assert c == m
    assert c.extra is not m.extra
    c.extra["process_id"] = "q"  # type: ignore[index]
    assert c != m


@pytest.mark.parametrize(
    ("kind", "protocol_type", "members", "display", "type_name"),
    [
        (None, None, False, None, None),
        (CLASSIC, None, False, SIMPLE, "Classic"),
        (CLASSIC, "consumer", False, CLASSIC, "Classic"),
        (CLASSIC, None, True, CLASSIC, "Classic"),  # members but no protocol type: not "simple"
        (CONSUMER, None, False, CONSUMER, "Consumer"),
        (SHARE, None, False, SHARE, "Share"),
        (STREAMS, None, False, STREAMS, "Streams"),
    ],
)
def test_kind_display_and_type(
    kind: str | None, protocol_type: str | None, members: bool, display: str | None, type_name: str | None
) -> None:
    g = Group("g")
    g.kind, g.protocol_type = kind, protocol_type
    if members:
        g.members["m"] = Member("m")
    assert g.display_kind == display and g.group_type == type_name
    assert g.exists is (kind is not None)


def test_a_new_group_is_dead_with_every_counter_at_zero() -> None:
    g = Group("g")
    assert (g.kind, g.state, g.offsets, g.members) == (None, DEAD, {}, {})
    assert g.counters == new_counters() == dict.fromkeys(COUNTERS, 0)
    assert new_counters() is not new_counters()


def test_only_the_newest_errors_are_kept() -> None:
    g = Group("g")
    for i in range(MAX_KEPT_ERRORS + 5):
        g.keep_error({"offset": i})
    assert [e["offset"] for e in g.errors] == list(range(5, MAX_KEPT_ERRORS + 5))


def test_a_topic_id_is_named_when_the_log_named_it() -> None:
    g = Group("g")
    g.topic_names["TID"] = "orders"
    assert g.topic_name("TID") == "orders" and g.topic_name("OTHER") == "OTHER"


def test_a_conversion_forgets_the_kinds_fields_and_keeps_offsets_and_counters() -> None:
    log = Log()
    log.classic("g", 4, [cm("a")], protocol="range")
    log.commit("g", "t", 0, 1)
    g = fold(None, log.records).group
    assert g is not None and g.generation == 4 and g.protocol == "range"
    offsets, counters = dict(g.offsets), dict(g.counters)
    g.reset_kind_fields()
    assert (g.generation, g.protocol, g.leader, g.protocol_type) == (None, None, None, None)
    assert (g.group_epoch, g.targets, g.regexes, g.topology) == (None, {}, {}, None)
    assert g.offsets == offsets and g.counters == counters
    assert "Group('g', kind=classic" in repr(g)

"""What must hold for every group the mirror keeps (`state.invariants`): a classic group with
members has its leader among them -- through every record boundary of real logs the coordinator
writes (joins, static replacements, leader moves, emptying), and broken by a record it never
writes."""

from __future__ import annotations

import pytest

from lab.records import Log, cm, tip
from state.invariants import InvariantError, check
from state.model import CLASSIC, Group, Member
from state.replay import fold


def _logs() -> list[Log]:
    classic = Log()
    classic.new_empty_group("g")
    classic.classic("g", 1, [cm("a"), cm("b")], leader="a")
    classic.classic("g", 1, [cm("a2", instance_id="sa"), cm("b")], leader="a2")  # static replacement
    classic.classic("g", 2, [cm("b")], leader="b")
    classic.classic("g", 3, [])
    classic.classic_tombstone("g")
    modern = Log()
    modern.k848_stable_group("g", {"m1": (["t"], [tip("T", 0)])})
    modern.k848_leave("g", "m1")
    return [classic, modern]


@pytest.mark.parametrize("log", _logs(), ids=["classic", "kip848"])
def test_every_record_boundary_of_a_coordinators_log_holds(log: Log) -> None:
    g = None
    for rec in log.records:
        g = fold(g, [rec]).group
        check(g)  # raises on a violation


def test_a_leader_who_is_not_a_member_is_refused_naming_it() -> None:
    g = Group("g")
    g.kind = CLASSIC
    g.members = {"a": Member("a"), "b": Member("b")}
    g.leader = "gone"
    with pytest.raises(InvariantError, match="classic group leader gone is not one of its 2 members"):
        check(g)


@pytest.mark.parametrize(
    "case", ["no group", "no leader yet", "no members", "leader among members", "not classic"]
)
def test_what_is_not_a_violation(case: str) -> None:
    if case == "no group":
        check(None)
        return
    g = Group("g")
    g.kind = CLASSIC if case != "not classic" else "consumer"
    g.members = {} if case == "no members" else {"a": Member("a")}
    g.leader = {"no leader yet": None, "leader among members": "a"}.get(case, "x")
    check(g)

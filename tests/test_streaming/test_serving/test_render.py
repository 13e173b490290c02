"""What the driver adds to a group's snapshot (`streaming.serving.render`): the assignor and where it
comes from (KIP-848: the members' most common server assignor, else the broker's default; classic:
the selected protocol), the snapshot rendered from state bytes -- the same whenever it is rendered --
and topic ids the log never named replaced by the cluster's names."""

from __future__ import annotations

import pytest

from lab.records import MIN, Log, cm, tip
from lab.synthetic import STATE_SETTINGS, kip848, to_store_row
from state.expiry import all_deadlines
from state.model import Group
from state.replay import fold
from state.snapshot import snapshot
from streaming.serving.render import assignor, resolve_topic_ids, snapshot_renderer


def _consumer(*assignors: str | None) -> Group:
    log = Log()
    for i, a in enumerate(assignors):
        log.k848_member("k", f"m{i}", ["t"], assignor=a)
    g = fold(None, log.records).group
    assert g is not None
    return g


@pytest.mark.parametrize(
    ("assignors", "expected"),
    [
        (("range", "uniform", "uniform"), ("uniform", "members")),
        (("uniform", "range"), ("range", "members")),  # a tie: by name, for a stable answer
        ((None, None), ("custom-default", "broker_default")),
        ((None, "range"), ("range", "members")),
    ],
)
def test_a_consumer_groups_assignor(assignors: tuple[str | None, ...], expected: tuple[str, str]) -> None:
    assert assignor(_consumer(*assignors), "custom-default") == expected


def test_a_classic_groups_assignor_is_its_protocol_and_other_kinds_have_none() -> None:
    log = Log()
    log.classic("c", 1, [cm("a")], protocol="cooperative-sticky")
    log.commit("s", "t", 0, 1)
    log.share_member("sh", "m")
    groups = {
        gid: fold(None, [r for r in log.records if r.key.group_id == gid]).group for gid in ("c", "s", "sh")
    }
    assert assignor(groups["c"], "uniform") == ("cooperative-sticky", "log")  # type: ignore[arg-type]
    assert assignor(groups["s"], "uniform") == (None, "log")  # type: ignore[arg-type]  # simple: no protocol
    assert assignor(groups["sh"], "uniform") == (None, None)  # type: ignore[arg-type]


def test_the_rendered_snapshot_is_the_folds_plus_the_assignor_whenever_rendered() -> None:
    g = kip848("k", 4)
    _, blob, _ = to_store_row(g)
    render = snapshot_renderer(STATE_SETTINGS, "uniform")
    out = render(blob)
    expected = snapshot(g, STATE_SETTINGS, all_deadlines(g, STATE_SETTINGS))
    assert {k: v for k, v in out.items() if not k.startswith("assignor")} == expected
    assert (out["assignor"], out["assignor_source"]) == assignor(g, "uniform")
    assert render(blob) == out  # deadlines are absolute: rendering later changes nothing


def test_topic_ids_the_log_never_named_get_the_clusters_names() -> None:
    log = Log()
    log.k848_stable_group("k", {"m1": (["orders"], [tip("OID", 0, 1)]), "m2": (["x"], [tip("XID", 2)])})
    log.tick(MIN).commit("k", "OID", 0, 5)  # a commit naming the topic by its id (as a client may)
    g = fold(None, log.records).group
    assert g is not None
    snap = snapshot(g)
    out = resolve_topic_ids(snap, {"OID": "orders"})
    assert [a["topic"] for m in out["members"] for a in m["assignment"]] == ["orders", "XID"]
    assert [o["topic"] for o in out["offsets"]] == ["orders"]
    assert snap["members"][0]["assignment"][0]["topic"] == "OID"  # the input is not changed
    assert resolve_topic_ids(snap, {}) is snap
    assert resolve_topic_ids({"group_id": "x"}, {"OID": "orders"}) == {"group_id": "x"}

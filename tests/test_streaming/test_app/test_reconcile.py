"""`streaming.app.reconcile.Reconciler` with a fake cluster: the two-round rule (a group missing on
one side counts only when it is missing in two rounds in a row), what does not count as a round,
and what a confirmed mismatch does (metric, event, ``exists: false``)."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.app.driver_events import DriverEvents
from streaming.app.reconcile import Reconciler
from streaming.cluster.groups import GroupListing
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore

NOW = 1_700_000_000_000


class FakeCluster:
    """The coordinators' answer, set per round; or an error; or a principal that may not Describe."""

    def __init__(self) -> None:
        self.groups: set[str] = set()
        self.errors: tuple[str, ...] = ()
        self.describe = True
        self.fail: Exception | None = None

    def may_list_every_group(self) -> bool:
        if self.fail is not None:
            raise self.fail
        return self.describe

    def list_groups(self) -> GroupListing:
        return GroupListing({g: ("classic", "stable") for g in self.groups}, self.errors)


class FakeSink:
    def __init__(self) -> None:
        self.written: list[tuple[list[dict[str, Any]], int, str]] = []

    def write_driver_events(self, events: list[dict[str, Any]], at_ms: int, name: str) -> None:
        self.written.append((events, at_ms, name))


def setup(mirrored: set[str]) -> tuple[Reconciler, FakeCluster, SnapshotStore, FakeSink]:
    store = SnapshotStore()
    store.load((gid, b"state", {"exists": True}) for gid in sorted(mirrored))
    events = DriverEvents()
    sink = FakeSink()
    events.attach(sink)  # type: ignore[arg-type]
    cluster = FakeCluster()
    return Reconciler(cluster, store, MirrorStatus(), events, lambda: NOW), cluster, store, sink


def test_a_group_missing_once_is_not_a_mismatch_twice_is() -> None:
    r, cluster, store, sink = setup({"a", "gone"})
    cluster.groups = {"a", "new"}
    assert r.round()
    assert r.status.view().mismatches == {"missing_in_coordinator": set(), "missing_in_mirror": set()}
    assert not store.gone and not sink.written
    assert r.round()  # the same answer again: now both sides are confirmed
    assert r.status.view().mismatches == {"missing_in_coordinator": {"gone"}, "missing_in_mirror": {"new"}}
    assert set(store.gone) == {"gone"}  # exists: false, with the reason
    assert "two rounds in a row" in store.gone["gone"]["reason"]
    [(events, at_ms, _name)] = sink.written
    assert {(e["group_id"], e["side"]) for e in events} == {
        ("gone", "missing_in_coordinator"),
        ("new", "missing_in_mirror"),
    }
    assert at_ms == NOW and r.status.tallies()[("event", "reconcile_mismatch")] == 2
    assert r.status.view().reconcile_rounds == {"ok": 2}


def test_a_group_that_comes_back_between_rounds_is_not_a_mismatch() -> None:
    """An in-flight commit or tombstone: missing in one round, there in the next."""
    r, cluster, store, sink = setup({"a", "b"})
    cluster.groups = {"a"}
    assert r.round()
    cluster.groups = {"a", "b"}
    assert r.round()
    cluster.groups = {"a"}
    assert r.round()  # missing again, but not in the previous round
    assert r.status.view().mismatches["missing_in_coordinator"] == set()
    assert not store.gone and not sink.written


def test_a_mismatch_is_reported_once() -> None:
    r, cluster, _store, sink = setup({"a"})
    cluster.groups = {"a", "x"}
    for _ in range(4):
        assert r.round()
    assert r.status.view().mismatches["missing_in_mirror"] == {"x"}
    assert len(sink.written) == 1  # the event once, the metric for as long as it lasts


@pytest.mark.parametrize(
    ("cluster_state", "outcome"),
    [
        ({"errors": ("COORDINATOR_LOAD_IN_PROGRESS",)}, "error"),  # a partial answer
        ({"fail": RuntimeError("timed out")}, "error"),
        ({"describe": False}, "not_authorized"),  # the list would leave groups out
    ],
)
def test_rounds_that_do_not_count_do_not_advance_the_rule(
    cluster_state: dict[str, Any], outcome: str
) -> None:
    r, cluster, store, _sink = setup({"a", "gone"})
    cluster.groups = {"a"}
    assert r.round()  # "gone" missing once
    for key, value in cluster_state.items():
        setattr(cluster, key, value)
    assert not r.round()
    assert r.status.view().reconcile_rounds[outcome] == 1
    assert not store.gone
    for key in cluster_state:
        setattr(cluster, key, FakeCluster().__dict__[key])
    assert r.round()  # the round that did not count left the suspects as they were
    assert set(store.gone) == {"gone"}

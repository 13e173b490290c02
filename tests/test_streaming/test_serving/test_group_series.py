"""The per-group and per-partition series (`streaming.serving.group_series`): a group's numbers
decoded from its state bytes (`GroupNumbers`), the clock-dependent ones (expiry countdown and
windows), and `write_groups` -- every group family in catalogue order, one header each, read back
by prometheus_client's parser: the info labels, one state series per state of the kind, the
per-partition offsets with their owners (or none, when per-partition series are off), awkward
group ids and topics escaped.  The whole exposition: test_metrics.py."""

from __future__ import annotations

from lab.records import MIN
from lab.synthetic import RENDERER, STATE_SETTINGS, empty_classic, kip848, stable_classic, to_store_row
from state.model import Group
from streaming.serving.catalogue import GROUP_METRICS, GROUP_STATES, PARTITION_METRICS
from streaming.serving.group_series import Body, GroupNumbers, write_groups
from tests.support.exposition import parse, series, value

NOW = 1_800_000_000_000


def _numbers(g: Group, per_partition: bool = True) -> GroupNumbers:
    group_id, blob, _ = to_store_row(g)
    return GroupNumbers(group_id, blob, STATE_SETTINGS, "uniform", per_partition)


def _written(views: list[GroupNumbers]) -> tuple[bytes, int]:
    body = Body(size_hint=1 << 16)
    write_groups(body, views, "east/1", NOW)
    return body.getvalue(), body.series


def test_expiry_countdown_and_windows_follow_the_clock() -> None:
    g = empty_classic("e", 3, idle_ms=0)
    _, blob, _ = to_store_row(g)
    snap = RENDERER(blob)
    deadline = snap["offsets"][0]["expires_at_ms"]
    assert all(o["expires_at_ms"] == deadline for o in snap["offsets"])
    v = GroupNumbers("e", blob, STATE_SETTINGS, "uniform", per_partition=True)
    assert v.next_expiry(deadline - 90 * MIN) == [((), 5400.0)]
    assert v.expiring(deadline - 90 * MIN) == [(("1h",), 0), (("24h",), 3)]
    assert v.expiring(deadline - 30 * MIN) == [(("1h",), 3), (("24h",), 3)]
    assert v.next_expiry(deadline + 1000) == [((), 0.0)]  # due: the next trigger expires them


def test_every_group_family_once_in_catalogue_order_and_the_series_counted() -> None:
    views = [
        _numbers(stable_classic('g "q"\\x', 4)),
        _numbers(kip848("k/ü", 3)),
        _numbers(empty_classic("e", 2, 0)),
    ]
    text, count = _written(views)
    helps = [line.split()[2] for line in text.decode().splitlines() if line.startswith("# HELP")]
    assert helps == [m.name for m in (*GROUP_METRICS, *PARTITION_METRICS)]
    samples = parse(text)
    assert len(samples) == count  # the body counts what it wrote
    assert all(dict(k[1])["cluster_name"] == "east/1" for k in samples)


def test_info_state_and_partitions_of_a_classic_group() -> None:
    g = stable_classic('g "q"\\x', 4, topics=2)
    samples = parse(_written([_numbers(g)])[0])
    gid = g.group_id
    info = series(samples, "coordinator_mirror_group_info", group=gid)
    assert [dict(k[1])["kind"] for k in info] == ["classic"] and list(info.values()) == [1.0]
    states = series(samples, "coordinator_mirror_group_state", group=gid)
    assert {dict(k[1])["state"]: v for k, v in states.items()} == {
        s: float(s == "Stable") for s in GROUP_STATES["classic"]
    }
    offsets = series(samples, "kafka_consumergroup_group_offset", group=gid)
    assert sorted(v for v in offsets.values()) == sorted(float(e[0]) for e in g.offsets.values())
    # no assignment decoded for these members: each partition's owner is the unknown owner
    assert {dict(k[1])["consumer_id"] for k in offsets} == {"unknown"}


def test_a_partitions_owner_is_the_member_assigned_it() -> None:
    g = kip848("k/ü", 3)
    offsets = series(parse(_written([_numbers(g)])[0]), "kafka_consumergroup_group_offset", group="k/ü")
    owners = {dict(k[1])["partition"]: dict(k[1])["consumer_id"] for k in offsets}
    assert owners == {"0": "m1", "1": "m2", "2": "m1"}
    assert {dict(k[1])["member_host"] for k in offsets} == {"/10.0.0.2"}


def test_no_partition_series_when_they_are_off() -> None:
    samples = parse(_written([_numbers(stable_classic("g", 4), per_partition=False)])[0])
    assert not series(samples, "kafka_consumergroup_group_offset")
    assert value(samples, "coordinator_mirror_group_info", group="g") == 1.0


def test_a_state_outside_the_kinds_list_is_still_exported() -> None:
    g = stable_classic("odd", 1)
    g.state = "SomethingNew"
    states = series(parse(_written([_numbers(g)])[0]), "coordinator_mirror_group_state", group="odd")
    assert {dict(k[1])["state"] for k, v in states.items() if v == 1.0} == {"SomethingNew"}


def test_the_numbers_are_those_of_the_bytes_the_store_holds() -> None:
    g = stable_classic("g", 2)
    group_id, blob, _ = to_store_row(g)
    v = GroupNumbers(group_id, blob, STATE_SETTINGS, "uniform", True)
    assert v.blob is blob and v.group_id == "g" and v.state == "Stable" and v.kind == "classic"
    assert RENDERER(blob)["state"] == v.state
    assert v.partitions is not None and list(v.partitions) == sorted(p for _, p in g.offsets)


def test_an_empty_body() -> None:
    body = Body(size_hint=4096)
    assert body.getvalue() == b"" and body.series == 0

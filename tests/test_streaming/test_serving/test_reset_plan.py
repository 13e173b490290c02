"""The reset plan (`streaming.serving.reset_plan`): ``at`` parsing, the CSV and the commands per
kind of group, quoting of any group id, warnings; the route's errors.  Executing a plan against the
real broker: tests/test_live/test_offsets_at_live.py."""

from __future__ import annotations

import shlex

import pytest

from streaming.serving.offset_history import GroupAt, HistoryError, PartitionAt
from streaming.serving.reset_plan import (
    CONSUMER_TOOL,
    SHARE_TOOL,
    STREAMS_TOOL,
    needs_command_config,
    offsets_route,
    parse_at,
    plan,
)

AT = 1_795_000_000_000  # 2026-11-18T11:06:40Z


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1795000000000", AT),
        ("2026-11-18T11:06:40Z", AT),
        ("2026-11-18T11:06:40.000Z", AT),
        ("2026-11-18T12:06:40+01:00", AT),
        ("2026-11-18t11:06:40z", AT),
        (" 2026-11-18T11:06:40.250Z ", AT + 250),
    ],
)
def test_at_is_rfc3339_or_epoch_ms(text: str, ms: int) -> None:
    assert parse_at(text) == ms


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (None, "at_missing"),
        ("", "at_missing"),
        ("yesterday", "at_invalid"),
        ("2026-11-18T11:06:40", "at_no_time_zone"),
    ],
)
def test_a_bad_at_is_a_400_saying_what_to_give(text: str | None, error: str) -> None:
    with pytest.raises(HistoryError) as err:
        parse_at(text)
    assert (err.value.status, err.value.error) == (400, error)


def found(kind: str, gid: str = "g") -> GroupAt:
    return GroupAt(
        gid,
        AT,
        kind,
        0,
        [
            PartitionAt("orders", 0, 100, AT - 5, 150, AT + 9),  # reset
            PartitionAt("orders", 1, 40, AT - 5, 40, AT - 5),  # unchanged
            PartitionAt("orders", 2, None, None, 7, AT + 9),  # no offset then: delete
            PartitionAt("audit.v2", 3, 9, AT - 1, 12, AT + 9),
        ],
    )


@pytest.mark.parametrize(
    ("kind", "tool", "delete_option"),
    [
        ("classic", CONSUMER_TOOL, "--topic"),
        ("simple", CONSUMER_TOOL, "--topic"),
        ("consumer", CONSUMER_TOOL, "--topic"),
        ("streams", STREAMS_TOOL, "--input-topic"),
        ("share", SHARE_TOOL, "--topic"),
    ],
)
def test_plan_per_kind(kind: str, tool: str, delete_option: str) -> None:
    p = plan(found(kind), "b1:9092,b2:9092")
    assert p["supported"] and p["tool"] == tool
    assert set(p["csv"].splitlines()) == {"orders,0,100", "audit.v2,3,9"}
    assert (p["partitions_to_reset"], p["partitions_to_delete"], p["partitions_unchanged"]) == (2, 1, 1)
    argv = p["argv"]
    assert argv["dry_run"] == [tool, "--bootstrap-server", "b1:9092,b2:9092", "--group", "g",
                               "--reset-offsets", "--from-file", p["file"], "--dry-run"]  # fmt: skip
    assert argv["execute"][-1] == "--execute" and argv["execute"][:-1] == argv["dry_run"][:-1]
    assert argv["delete_offsets"][-3:] == ["--delete-offsets", delete_option, "orders:2"]
    assert p["commands"]["dry_run"] == shlex.join(argv["dry_run"])
    assert "stop" in p["requires"] or "stopped" in p["requires"]


@pytest.mark.parametrize(
    "gid", ["a+b/c=", "a-b_c", "grüppe ✓", "<b>x</b>&amp;", 'it\'s "quoted"', "$(rm -rf /)"]
)
def test_any_group_id_is_quoted_for_the_shell(gid: str) -> None:
    p = plan(found("classic", gid), "localhost:9092")
    for line in p["commands"].values():
        if line is not None:
            assert shlex.split(line)[shlex.split(line).index("--group") + 1] == gid
    assert "/" not in p["file"] and " " not in p["file"] and p["file"].endswith(".csv")


def test_warnings_name_deleted_records_and_the_resolution() -> None:
    g = found("consumer")
    thinned = GroupAt(g.group_id, g.at_ms, g.kind, 300_000, g.partitions)
    p = plan(thinned, "b:1", log_starts={("orders", 0): 120})
    assert any("orders:0" in w and "log start offset 120" in w for w in p["warnings"])
    assert any("300 s" in w for w in p["warnings"])
    assert plan(g, "b:1")["warnings"] == []


def test_command_config_when_the_mirror_connects_securely() -> None:
    assert needs_command_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"})
    assert needs_command_config({"ssl.truststore.location": "/ca.pem"})
    assert not needs_command_config({"security.protocol": "PLAINTEXT", "client.id": "x"})
    p = plan(found("classic"), "b:1", command_config=True)
    assert p["argv"]["dry_run"][3:5] == ["--command-config", "client.properties"] and p["notes"]


def test_nothing_to_do_has_no_commands() -> None:
    same = GroupAt("g", AT, "classic", 0, [PartitionAt("t", 0, 5, AT, 5, AT)])
    p = plan(same, "b:1")
    assert p["argv"] == {"dry_run": None, "execute": None, "delete_offsets": None} and p["csv"] == ""


def test_the_route_without_a_history() -> None:
    status, body = offsets_route(None, "g", "0", AT, bootstrap="b:1")
    assert status == 404 and body["error"] == "offset_history_off"

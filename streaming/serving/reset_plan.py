"""``GET /groups/{id}/offsets?at=<time>``: a group's committed offsets as of a moment, and the reset
plan that puts them back -- the CSV Kafka's own tools take and the command lines a person runs
(issue 38).  The mirror never runs them: it reads, it does not write.

Which tool, per kind of group (checked against Kafka 4.3.1's and 4.4.0's tools, docs/insights.md):

* classic, simple and KIP-848 consumer groups -- ``kafka-consumer-groups.sh --reset-offsets
  --from-file F`` (``--dry-run``, then ``--execute``); partitions without a committed offset at that
  moment -- ``--delete-offsets --topic t:p,...``.  Kafka resets only a group without active
  members: stop every consumer first.
* streams groups (KIP-1071) -- ``kafka-streams-groups.sh --reset-offsets --from-file F`` and
  ``--delete-offsets --input-topic t:p,...``; the application's state (stores, changelogs) is not
  rewound with its input offsets.
* share groups (KIP-932) -- their start offsets (`OffsetHistory.on_share_state`):
  ``kafka-share-groups.sh --reset-offsets --from-file F``, which Kafka 4.4's tool takes (4.3's
  resets only to the earliest, the latest or a datetime); 4.4's tool resets a 4.3 broker's groups.

The CSV is ``topic,partition,offset`` per line, what ``--export`` prints and ``--from-file`` reads.
An offset below the partition's log start offset now names records retention deleted since: the
tools move it to the log start (a warning says which).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from streaming.serving.offset_history import GroupAt, HistoryError, OffsetHistory

TopicPartition = tuple[str, int]

CONSUMER_TOOL: Final = "kafka-consumer-groups.sh"
STREAMS_TOOL: Final = "kafka-streams-groups.sh"
SHARE_TOOL: Final = "kafka-share-groups.sh"
#: the tool per kind of group (`state.model` kinds, ``simple`` included)
TOOLS: Final = {
    "classic": CONSUMER_TOOL,
    "simple": CONSUMER_TOOL,
    "consumer": CONSUMER_TOOL,
    "streams": STREAMS_TOOL,
    "share": SHARE_TOOL,
}
#: the option naming the topic of a --delete-offsets, per tool
DELETE_TOPIC_OPTION: Final = {CONSUMER_TOOL: "--topic", STREAMS_TOOL: "--input-topic", SHARE_TOOL: "--topic"}
#: the Kafka options that mean a tool needs the mirror's client settings too (--command-config)
_SECURED = re.compile(r"^(security\.protocol|sasl\.|ssl\.)")


def parse_at(text: str | None) -> int:
    """``at`` as epoch ms: digits (epoch milliseconds) or RFC 3339 with a time zone
    (``2026-11-28T09:14:00Z``, ``...+01:00``).  `HistoryError` 400 otherwise."""
    if text is None or not text.strip():
        raise HistoryError(400, "at_missing", "give the moment: ?at=<RFC 3339 time, or epoch milliseconds>")
    s = text.strip()
    if s.isdigit():
        return int(s)
    try:
        dt = datetime.fromisoformat(s.replace("z", "Z"))
    except ValueError:
        raise HistoryError(
            400,
            "at_invalid",
            f"at={text!r} is neither RFC 3339 (2026-11-28T09:14:00Z) nor epoch milliseconds",
        ) from None
    if dt.tzinfo is None:
        raise HistoryError(400, "at_no_time_zone", f"at={text!r} has no time zone: add Z or +hh:mm")
    return int(dt.timestamp() * 1000)


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def file_name(group_id: str, at_ms: int) -> str:
    """A file name for the plan's CSV: the group id's safe characters and the moment."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", group_id).strip("_")[:60] or "group"
    stamp = datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y%m%dT%H%M%S")
    return f"offsets-{safe}-{stamp}Z.csv"


def plan(
    found: GroupAt,
    bootstrap: str,
    *,
    command_config: bool = False,
    log_starts: Mapping[TopicPartition, int] | None = None,
) -> dict[str, Any]:
    """The reset plan for ``found`` (the group's offsets at a moment): the CSV, the commands
    (``argv`` lists and shell lines), what must hold before running them, warnings."""
    kind = found.kind or "classic"
    tool = TOOLS.get(kind)
    if tool is None:
        return {"supported": False, "kind": kind, "reason": f"no Kafka tool resets offsets of {kind} groups"}
    starts = log_starts or {}
    reset = [x for x in found.partitions if x.offset is not None and x.offset != x.offset_now]
    gone = [x for x in found.partitions if x.offset is None and x.offset_now is not None]
    same = [x for x in found.partitions if x.offset is not None and x.offset == x.offset_now]
    path = file_name(found.group_id, found.at_ms)
    base = [tool, "--bootstrap-server", bootstrap]
    if command_config:
        base += ["--command-config", "client.properties"]
    base += ["--group", found.group_id]
    argv: dict[str, list[str] | None] = {"dry_run": None, "execute": None, "delete_offsets": None}
    if reset:
        argv["dry_run"] = [*base, "--reset-offsets", "--from-file", path, "--dry-run"]
        argv["execute"] = [*base, "--reset-offsets", "--from-file", path, "--execute"]
    if gone:
        by_topic: dict[str, list[int]] = {}
        for x in gone:
            by_topic.setdefault(x.topic, []).append(x.partition)
        option = DELETE_TOPIC_OPTION[tool]
        topics = [
            a for t, ps in sorted(by_topic.items()) for a in (option, f"{t}:{','.join(map(str, sorted(ps)))}")
        ]
        argv["delete_offsets"] = [*base, "--delete-offsets", *topics]
    warnings = []
    for x in reset:
        start = starts.get((x.topic, x.partition))
        if start is not None and x.offset is not None and x.offset < start:
            warnings.append(
                f"{x.topic}:{x.partition}: offset {x.offset} is below the log start offset {start} now "
                f"(retention deleted records {x.offset}..{start - 1} since): the tool resets it to {start}"
            )
    if found.resolution_ms:
        warnings.append(
            f"at falls where the history keeps one point per {found.resolution_ms // 1000} s: these are "
            "the offsets committed at or before it, at most that much older"
        )
    requires = {
        CONSUMER_TOOL: "the group has no active members: stop every consumer of the group first "
        "(Kafka resets only an Empty group)",
        STREAMS_TOOL: "every instance of the application is stopped (Kafka resets only an inactive "
        "streams group); its state stores and changelogs are not rewound with the input offsets",
        SHARE_TOOL: "every share consumer of the group is stopped; Kafka 4.4's kafka-share-groups.sh "
        "(4.3's takes no --from-file); records after the restored start offsets are delivered again",
    }[tool]
    notes = []
    if command_config:
        notes.append(
            "client.properties: the client options the mirror uses (kafka_options), secrets included"
        )
    return {
        "supported": True,
        "kind": kind,
        "tool": tool,
        "requires": requires,
        "file": path,
        "csv": "".join(f"{x.topic},{x.partition},{x.offset}\n" for x in reset),
        "partitions_to_reset": len(reset),
        "partitions_to_delete": len(gone),
        "partitions_unchanged": len(same),
        "argv": argv,
        "commands": {k: None if v is None else shlex.join(v) for k, v in argv.items()},
        "warnings": warnings,
        "notes": notes,
    }


def offsets_route(
    history: OffsetHistory | None,
    group_id: str,
    at_text: str | None,
    now_ms: int,
    *,
    bootstrap: str | None,
    command_config: bool = False,
    log_starts: Callable[[], Mapping[TopicPartition, int]] | None = None,
) -> tuple[int, dict[str, Any]]:
    """``GET /groups/{id}/offsets?at=``: (HTTP status, JSON body)."""
    if history is None:
        return 404, {
            "error": "offset_history_off",
            "group_id": group_id,
            "message": "the offset history is off (offset_history_enabled)",
        }
    try:
        at_ms = parse_at(at_text)
        found = history.at(group_id, at_ms, now_ms)
    except HistoryError as exc:
        return exc.status, {"error": exc.error, "group_id": group_id, "message": exc.message, **exc.fields}
    starts = log_starts() if log_starts is not None else {}
    return 200, {
        "group_id": group_id,
        "kind": found.kind,
        "at_ms": at_ms,
        "at": iso(at_ms),
        "resolution_ms": found.resolution_ms,
        "horizon_ms": history.horizon_ms_at(now_ms),
        "horizon": iso(history.horizon_ms_at(now_ms)),
        "partitions": [
            {
                "topic": x.topic,
                "partition": x.partition,
                "offset": x.offset,
                "committed_at_ms": x.committed_ms,
                "committed_at": iso(x.committed_ms),
                "offset_now": x.offset_now,
                "committed_now_ms": x.committed_now_ms,
                "log_start_offset": starts.get((x.topic, x.partition)),
            }
            for x in found.partitions
        ],
        "plan": plan(
            found, bootstrap or "<bootstrap servers>", command_config=command_config, log_starts=starts
        ),
    }


def needs_command_config(kafka_options: Mapping[str, str]) -> bool:
    """Do the mirror's client options secure the connection (so the tools need them too)?"""
    return any(_SECURED.match(k) and not (k == "security.protocol" and v.upper() == "PLAINTEXT")
               for k, v in kafka_options.items())  # fmt: skip

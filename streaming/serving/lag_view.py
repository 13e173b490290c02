"""What ``GET /groups/{id}/lag`` and the lag metrics add to the lag rows (issue 38): time to catch
up (`streaming.health.catch_up`), records lost to retention and the margin before it
(`streaming.health.retention`), and a share group's lag from its share-partitions.

* **Catch-up** per partition and for the group, from the partition's sampled log ends (the lag
  tracker's lookup table) and the group's window of commits (Burrow's), at the round's sample time.
* **Retention** per partition: the log start offset, the records the group lost to retention so
  far, the margin (records, seconds) before it loses more; for the group the sum lost and the
  nearest margin.
* **Share groups** have no committed offsets in ``__consumer_offsets``: their rows come from the
  share-partitions of ``__share_group_state`` (`streaming.serving.share.ShareStateStore`), every
  initialised one -- with or without members -- with the start offset in place of the committed
  offset and Kafka's share lag (high watermark - start offset - delivery complete count: what
  ``Admin.listShareGroupOffsets`` reports), so a lag client needs no special case.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from state.model import SHARE
from state.share import decode as decode_share
from state.share import partition_figures
from streaming.health.catch_up import CatchUp, group_estimate, partition_estimate
from streaming.health.lag import NO_OWNER, GroupOffsets, LagTracker, PartitionLag
from streaming.health.retention import Margin, RetentionWatch, margin
from streaming.health.window import CommitHistory
from streaming.serving.share import ShareStateStore

TopicPartition = tuple[str, int]


def share_rows(
    tracker: LagTracker, view: GroupOffsets, share: ShareStateStore | None, group_id: str
) -> list[PartitionLag] | None:
    """A share group's lag rows from its share-partitions (None: not a share group, or no share
    state read for it).  ``committed`` is the share-partition's start offset, ``lag`` Kafka's
    share lag against the high watermark, ``commit_ms`` when the share coordinator last wrote the
    share-partition's state."""
    if view.kind != SHARE or share is None:
        return None
    blob = share.blob(group_id)
    if blob is None:
        return None
    names = tracker.topic_names
    r = tracker.round
    parts = r.partitions if r is not None else {}
    owners = {(names.get(t, t), p): o for (t, p), o in view.owners.items()}
    rows = []
    for (tid, p), sp in decode_share(blob).partitions.items():
        topic = names.get(tid, tid)
        ends = parts.get((topic, p))
        end = None if ends is None else ends.high_watermark
        fig = partition_figures(sp, end)
        lag = math.nan if fig["lag"] is None else float(fig["lag"])
        rows.append(
            PartitionLag(
                topic,
                p,
                sp.start_offset,
                sp.updated_ms,
                owners.get((topic, p), NO_OWNER),
                end,
                lag,
                math.nan,  # no lag in seconds: the start offset's time is not sampled
                tracker.is_deleted(topic),
            )
        )
    return sorted(rows, key=lambda x: (x.topic, x.partition))


def catch_up(
    tracker: LagTracker, history: CommitHistory | None, group_id: str, rows: list[PartitionLag]
) -> list[CatchUp]:
    """Per row (same order) its catch-up estimate at the round's sample time."""
    r = tracker.round
    now_ms = r.sampled_at_ms if r is not None else 0
    spans = history.spans(group_id) if history is not None else {}
    tables = tracker.tables
    out = []
    for x in rows:
        table = tables.get((x.topic, x.partition))
        ends = table.points if table is not None else ()
        lag = None if x.committed is None else x.lag
        out.append(partition_estimate(lag, spans.get((x.topic, x.partition)), ends, now_ms))
    return out


def counted(x: PartitionLag) -> bool:
    """Does the row count in the group's figures (as in its lag): not abandoned, topic not deleted."""
    return not x.abandoned and not x.topic_deleted


def margins(tracker: LagTracker, rows: list[PartitionLag], estimates: list[CatchUp]) -> list[Margin | None]:
    """Per row the margin before retention deletes records the group has not read (None: the
    committed offset or the log start offset is unknown)."""
    r = tracker.round
    parts = r.partitions if r is not None else {}
    out: list[Margin | None] = []
    for x, est in zip(rows, estimates, strict=True):
        ends = parts.get((x.topic, x.partition))
        start = None if ends is None else ends.earliest
        if start is None or x.committed is None:
            out.append(None)
        else:
            out.append(margin(x.committed, start, est.consume_rate, est.produce_rate))
    return out


def group_margin(found: list[Margin | None]) -> Margin | None:
    """The group's nearest margin: the fewest records, the fewest seconds (each over the
    partitions that have one)."""
    known = [m for m in found if m is not None]
    if not known:
        return None
    secs = [m.seconds for m in known if m.seconds is not None]
    return Margin(min(m.records for m in known), min(secs) if secs else None)


def extend_body(
    body: dict[str, Any],
    tracker: LagTracker,
    history: CommitHistory | None,
    retention: RetentionWatch | None,
    *,
    group_id: str,
    rows: list[PartitionLag],
) -> None:
    """``body["partitions"]`` (the rows' JSON, same order) and the group's fields extended with
    catch-up, log start, retention margin and records lost (`lag_route`'s body)."""
    estimates = catch_up(tracker, history, group_id, rows)
    found = margins(tracker, rows, estimates)
    lost: Mapping[TopicPartition, int] = retention.lost_of(group_id) if retention is not None else {}
    r = tracker.round
    parts = r.partitions if r is not None else {}
    for x, js, est, m in zip(rows, body["partitions"], estimates, found, strict=True):
        ends = parts.get((x.topic, x.partition))
        js["log_start_offset"] = None if ends is None else ends.earliest
        js["catch_up"] = est.to_json()
        js["retention_margin"] = None if m is None else m.to_json()
        js["records_lost"] = lost.get((x.topic, x.partition), 0)
    mine = [i for i, x in enumerate(rows) if counted(x)]
    body["catch_up"] = group_estimate(estimates[i] for i in mine).to_json()
    gm = group_margin([found[i] for i in mine])
    body["retention_margin"] = None if gm is None else gm.to_json()
    body["records_lost"] = sum(lost.values())

"""The batch path: fold one group's micro-batch, given as column lists (`decoders.columns`).

This is what the streaming adapter calls from ``applyInPandasWithState``: the group's rows of one
micro-batch as ``{column name: list}`` (Python ints/strs/bytes, ``None`` for nulls; the packed
group unpacked, several chunks concatenated by the caller), rows sorted by ``(source_partition,
source_offset)``.  Offset commits are ~99% of ``__consumer_offsets``, so a run of offset-commit rows
is applied column-wise: one tuple and one dict store per row -- no typed record.  Every other row's
``payload`` cell becomes its typed record (``decoders.payload_to_record``) and goes through the same
`state.replay.apply_record` the per-record API uses; a hypothesis property
(tests/test_state/test_fold_properties.py) asserts batch fold == per-record fold.

**Order.**  Rows are applied in log order: the rows are cut into runs of offset commits and single
other rows, and the runs are applied in sequence.  Nothing is reordered across a group record,
because that is where order is observable:

* a commit before a group tombstone keeps the id alive as a simple group (offsets survive their
  group object), after it creates one -- different events, different expiry rule;
* a classic group's Empty time (``currentStateTimestamp``) versus commit times decides Rule 2's
  base; a commit applied after the group record instead of before it could change which rule
  applies to it at the next sweep (e.g. a simple group becoming a consumer group);
* an offset tombstone is classified (expiry / admin delete / disagreement) against the group's
  state *at that position*.

**What the caller may collapse** (and the fold supports it, with an optional ``n_commits`` column
= how many commit values a row stands for): keeping only the newest offset-commit row per
(group, topic, partition) in a micro-batch, moved to that row's own position.  Only the newest
commit of a partition can be its stored value (newest log position wins), and every dropped row
sits *earlier* in the log than the kept one, so no kept row moves across a group record.  What it
changes, knowingly: the ``group_created`` event of a simple group is stamped with the first *kept*
commit; a dropped commit/tombstone pair of the same partition disappears (no ``offsets_deleted``
event for it, no disagreement check).  Counters stay independent of batching: ``commits`` counts
``n_commits`` and ``records`` counts ``n_commits + n_tombstones`` (the records a row stands for)
when the caller provides those columns.  The Spark job (`streaming.pipeline.prepare`) collapses only runs
of consecutive commits and keeps each run's first and last row, so neither of the two changes
above occurs there: a restart at any batch boundary ends in the same state.
Commits must never be collapsed *across* a tombstone of the same partition into a row before it.
"""

from __future__ import annotations

from itertools import repeat
from operator import add
from typing import Any, NamedTuple

from decoders import payload_to_record
from decoders.records import DecodeError, ErrorKind, Source, UnknownRecord
from state.config import DEFAULT_CONFIG, OffsetConfig
from state.expiry import check_pending, expire_at, next_deadline_ms
from state.model import Group, OffsetEntry, TopicPartition
from state.replay import (
    FoldContext,
    FoldResult,
    apply_commit,
    apply_offset_tombstone,
    apply_record,
    create_simple,
    finish,
)
from state.rhythm import note_commits, note_run

_COMMIT_TYPES = frozenset({0, 1})


def _other_row(cols: dict[str, list[Any]], i: int, src: Source) -> Any:
    """A typed record (or an UnknownRecord / DecodeError stand-in) for a non-commit row."""
    status = cols["status"][i]
    rt = cols["record_type"][i]
    if status == "ok":
        return payload_to_record(cols["payload"][i], src)
    if status == "unknown":
        return UnknownRecord(src, rt if rt is not None else -1, b"", None)
    gid = cols["group_id"][i]
    pos = cols["error_position"][i]
    return DecodeError(
        src,
        rt,
        None,
        str(cols["error_part"][i]),
        str(cols["error_field"][i]),
        -1 if pos is None else int(pos),
        _KINDS.get(cols["error_kind"][i], ErrorKind.INTERNAL),
        str(cols["error_reason"][i]),
        key=_GroupIdKey(gid) if isinstance(gid, str) else None,
    )


_KINDS: dict[Any, ErrorKind] = {k.value: k for k in ErrorKind}


class _GroupIdKey:
    __slots__ = ("group_id",)

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id


class _Run:
    """Rows [lo, hi) of a group's column lists -- all offset commits (values or tombstones), their
    positions already filtered -- as slices (no copy when the run is the whole batch)."""

    __slots__ = ("cols", "counts", "hi", "lo", "parts", "so", "sp", "tomb", "tomb_counts", "topics", "whole")

    def __init__(self, cols: dict[str, list[Any]], lo: int, hi: int) -> None:
        self.cols, self.lo, self.hi = cols, lo, hi
        self.whole = lo == 0 and hi == len(cols["source_offset"])
        self.topics = self.col("topic")
        self.parts = self.col("partition_num")
        self.tomb = self.col("is_tombstone")
        self.sp = self.col("source_partition")
        self.so = self.col("source_offset")
        self.counts = self.col("n_commits") if "n_commits" in cols else None
        self.tomb_counts = self.col("n_tombstones") if "n_tombstones" in cols else None

    def col(self, name: str) -> list[Any]:
        c = self.cols[name]
        return c if self.whole else c[self.lo : self.hi]

    def records_at(self, i: int) -> int:
        """How many log records row ``i`` stands for (collapsed rows stand for several)."""
        if self.counts is None or self.tomb_counts is None:
            return 1
        c, t = self.counts[i] or 0, self.tomb_counts[i] or 0
        return max(1, c + t)

    def commits(self) -> int:
        n, counts = self.hi - self.lo, self.counts
        if counts is None:
            return n
        if None in counts:
            return sum(1 if c is None else c for c in counts)
        return sum(counts)

    def records(self) -> int:
        n, counts, tomb_counts = self.hi - self.lo, self.counts, self.tomb_counts
        if counts is None or tomb_counts is None:
            return n
        if None in counts or None in tomb_counts:
            return sum(map(self.records_at, range(n)))
        # max(1, commits + tombstones) per row, without a Python frame per row
        return sum(map(max, repeat(1, n), map(add, counts, tomb_counts)))


def _apply_commit_run(
    g: Group | None, cols: dict[str, list[Any]], lo: int, hi: int, ctx: FoldContext
) -> Group | None:
    """Apply rows [lo, hi) -- all offset commits (values or tombstones), positions already filtered."""
    run = _Run(cols, lo, hi)
    if (g is None or not g.pending) and True not in run.tomb:
        return _apply_commits_bulk(g, run, ctx)
    return _apply_commits_each(g, run, ctx)


def _apply_commits_bulk(g: Group | None, run: _Run, ctx: FoldContext) -> Group:
    """The hot path -- only commit values, nothing pending: no Python loop, dict.update over
    zipped columns runs in C."""
    cols, lo, hi, col = run.cols, run.lo, run.hi, run.col
    if g is None:
        g = Group(cols["group_id"][lo])
    if g.kind is None:
        create_simple(g, (run.sp[0], run.so[0], cols["source_timestamp_ms"][lo]), ctx)
    tids = col("topic_id")
    keys = list(zip(run.topics, run.parts, strict=True))
    entries = zip(
        col("committed_offset"),
        col("leader_epoch"),
        col("metadata"),
        col("commit_timestamp_ms"),
        col("expire_timestamp_ms"),
        tids,
        run.sp,
        run.so,
        strict=True,
    )
    g.offsets.update(zip(keys, entries, strict=True))
    if tids.count(None) != hi - lo:
        g.topic_names.update({tid: t for tid, t in zip(tids, run.topics, strict=True) if tid is not None})
    committed = run.commits()
    ctx.commits += committed
    g.counters["commits"] += committed
    g.commit_window = note_run(g.commit_window, col("source_timestamp_ms"), run.counts, g.counters["commits"])
    ctx.committed.update(keys)
    ctx.commit_topics.update(run.topics)
    last = (run.sp[-1], run.so[-1], cols["source_timestamp_ms"][hi - 1])
    ctx.last_src["commit"] = last
    g.counters["records"] += run.records()
    g.last_position = (last[0], last[1])
    g.last_change_ms = last[2]
    return g


def _apply_commits_each(g: Group | None, run: _Run, ctx: FoldContext) -> Group | None:
    """Row by row: tombstones, or a group with expiries pending the broker's confirmation."""
    col, counts, topics, parts, sp, so = run.col, run.counts, run.topics, run.parts, run.sp, run.so
    offs, les, mds = col("committed_offset"), col("leader_epoch"), col("metadata")
    cts, ets, tids = col("commit_timestamp_ms"), col("expire_timestamp_ms"), col("topic_id")
    st = col("source_timestamp_ms")
    for i in range(run.hi - run.lo):
        src = (sp[i], so[i], st[i])
        if g is None:
            g = Group(run.cols["group_id"][run.lo + i])
        if g.pending:
            check_pending(g, src[2], ctx.config, ctx.events, (src[0], src[1]))
        tp = (topics[i], parts[i])
        if run.tomb[i]:
            apply_offset_tombstone(g, tp, src, ctx)
        else:
            entry: OffsetEntry = (offs[i], les[i], mds[i], cts[i], ets[i], tids[i], src[0], src[1])
            if g.kind is None:
                create_simple(g, src, ctx)
            apply_commit(g, tp, entry, src, ctx)
            c = 1 if counts is None or counts[i] is None else counts[i]
            ctx.commits += c
            g.counters["commits"] += c
            g.commit_window = note_commits(g.commit_window, src[2], g.counters["commits"])
        if g.kind is None and not g.offsets and not g.pending:
            g = None  # as apply_record: nothing left for this id
            continue
        g.counters["records"] += run.records_at(i)
        g.last_position = (src[0], src[1])
        g.last_change_ms = src[2]
    return g


def fold_columns(
    group: Group | None,
    cols: dict[str, list[Any]],
    *,
    group_id: str | None = None,
    config: OffsetConfig = DEFAULT_CONFIG,
) -> FoldResult:
    """Fold one group's rows (column lists as the module docstring says; ``n_commits`` /
    ``n_tombstones`` optional) into ``group``.  Same result as `state.replay.fold` over the decoded
    records."""
    ctx = FoldContext(config)
    g = group
    sp = cols["source_partition"]
    so = cols["source_offset"]
    n = len(so)
    lo = 0
    if g is not None and g.last_position is not None:
        # idempotence: skip what the group already applied (rows are sorted)
        last = g.last_position
        while lo < n and (sp[lo], so[lo]) <= last:
            lo += 1
    if lo == n:
        return finish(g, ctx)
    rt = cols["record_type"]
    status = cols["status"]
    if status.count("ok") == n and set(rt[lo:]) <= _COMMIT_TYPES:
        return finish(_apply_commit_run(g, cols, lo, n, ctx), ctx)
    is_commit = [s == "ok" and r in _COMMIT_TYPES for s, r in zip(status, rt, strict=True)]
    st = cols["source_timestamp_ms"]
    i = lo
    while i < n:
        if is_commit[i]:
            j = i
            while j < n and is_commit[j]:
                j += 1
            g = _apply_commit_run(g, cols, i, j, ctx)
            i = j
        else:
            g = apply_record(g, _other_row(cols, i, Source(sp[i], so[i], st[i])), ctx, group_id)
            i += 1
    return finish(g, ctx)


class StepResult(NamedTuple):
    """`step_detail`'s answer."""

    group: Group | None
    events: list[Any]
    deadline: int | None
    #: `state.expiry.all_deadlines` of ``group`` after the step (``{}`` when it is ``None``)
    deadlines: dict[TopicPartition, int | None]


def step_detail(
    group: Group | None,
    cols: dict[str, list[Any]] | None,
    now_ms: int,
    *,
    group_id: str | None = None,
    config: OffsetConfig = DEFAULT_CONFIG,
) -> StepResult:
    """What the adapter calls per group and trigger: fold the rows (if any; column lists as
    `fold_columns` takes them), then apply the expiry rules at ``now_ms``.  ``group`` None in the
    result: remove the state row; ``deadline``: set the timeout to ``deadline - now_ms``; every
    remaining offset's deadline comes along, so the expiry rules are evaluated once per group and
    trigger and the adapter's summary and offsets feed reuse the figures."""
    events: list[Any] = []
    g = group
    res = fold_columns(g, cols, group_id=group_id, config=config) if cols and cols["source_offset"] else None
    if res is not None:
        g = res.group
        events.extend(res.events)
    if g is None:
        return StepResult(None, events, None, {})
    g, more, deadlines = expire_at(g, now_ms, config)
    events.extend(more)
    if g is None:
        return StepResult(None, events, None, {})
    return StepResult(g, events, next_deadline_ms(g, config, deadlines), deadlines)

"""The batch path: fold one group's micro-batch, a pandas frame shaped like ``decoders.OUTPUT_SCHEMA``.

This is what the streaming adapter calls from ``applyInPandasWithState``: one frame per group per
micro-batch (several chunks are concatenated by the caller), rows sorted by ``(source_partition,
source_offset)``.  Offset commits are ~99% of ``__consumer_offsets``, so a run of offset-commit rows
is applied column-wise: the columns are read once as Python lists and the loop does one tuple and
one dict store per row -- no typed record, no per-row pandas access.  Every other row goes through
``decoders.payload_to_record`` and the same `state.replay.apply_record` the per-record API uses;
a hypothesis property (tests/test_state/test_properties.py) asserts batch fold == per-record fold.

**Order.**  Rows are applied in log order: the frame is cut into runs of offset commits and single
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

from dataclasses import replace
from itertools import repeat
from operator import add
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from decoders import payload_to_record
from decoders.records import DecodeError, Source, UnknownRecord
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

_COMMIT_TYPES = frozenset({0, 1})


_INT_COLUMNS = (
    "record_type",
    "partition_num",
    "committed_offset",
    "leader_epoch",
    "commit_timestamp_ms",
    "expire_timestamp_ms",
    "source_partition",
    "source_offset",
    "source_timestamp_ms",
    "n_commits",
    "n_tombstones",
)
_STR_COLUMNS = ("status", "group_id", "topic", "metadata", "topic_id")
_STR_TYPES = frozenset({str, type(None)})
_INT_TYPES = frozenset({int, type(None)})


def _array_list(arr: Any) -> list[Any]:
    """One column's backing array (numpy, or a pandas masked ExtensionArray) as a Python list, with
    ``None`` for nulls -- masked values, and the NaN that PySpark's Arrow->pandas conversion puts in
    integer columns holding nulls (it makes them float64)."""
    mask = getattr(arr, "_mask", None)  # pandas BaseMaskedArray: Int64, Int32, boolean ...
    if mask is not None:
        out: list[Any] = arr._data.tolist()
        if mask.any():
            for i in np.flatnonzero(mask).tolist():
                out[i] = None
        return out
    values = np.asarray(arr)
    if values.dtype.kind == "f":
        return _float_row(values)
    return values.tolist()  # type: ignore[no-any-return]


def _float_row(values: np.ndarray[Any, Any]) -> list[Any]:
    nan = np.isnan(values)
    if not nan.any():
        return values.astype(np.int64).tolist()  # type: ignore[no-any-return]
    if nan.all():
        return [None] * len(values)
    out: list[Any] = np.where(nan, 0, values).astype(np.int64).tolist()
    for i in np.flatnonzero(nan).tolist():
        out[i] = None
    return out


def frame_lists(df: pd.DataFrame) -> dict[str, list[Any]]:
    """Every column of ``df`` as a Python list (``None`` for nulls), read block by block.

    ``df[name]`` builds a Series per access (~20 us on a fresh frame, times 15 columns = most of a
    50-row group's budget).  Walking pandas' block manager instead turns each 2-D block -- all the
    int64 columns, all the object columns ... -- into lists with one ``tolist()``.  The block
    manager is pandas-internal (stable through pandas 2.x, which pyproject pins); any surprise falls
    back to the public per-column path (`public_frame_lists`), and a test asserts both agree.
    """
    try:
        out, loose = _block_lists(df)
    except (AttributeError, IndexError, TypeError, ValueError):  # pragma: no cover - a future pandas
        out = public_frame_lists(df)
        loose = set(out)
    # Only object-dtype columns can hold odd nulls (NaN, pd.NA) or numpy scalars; numpy and masked
    # columns are converted exactly by tolist().  The checks are C-level (set of types).
    for name in _STR_COLUMNS:
        col = out.get(name)
        if name in loose and col is not None and not set(map(type, col)) <= _STR_TYPES:
            out[name] = [v if isinstance(v, str) else None for v in col]
    for name in _INT_COLUMNS:
        col = out.get(name)
        if name in loose and col is not None and not set(map(type, col)) <= _INT_TYPES:
            out[name] = [None if v is None or pd.isna(v) else int(v) for v in col]
    return out


def _block_lists(df: pd.DataFrame) -> tuple[dict[str, list[Any]], set[str]]:
    """Column lists, and the names of the columns that came from object-dtype blocks."""
    out: dict[str, list[Any]] = {}
    loose: set[str] = set()
    names = df.columns.tolist()
    for blk in df._mgr.blocks:
        vals = blk.values
        locs = blk.mgr_locs.as_array.tolist()
        if getattr(vals, "ndim", 1) == 2:
            kind = vals.dtype.kind
            rows = [_float_row(r) for r in vals] if kind == "f" else vals.tolist()
            for loc, row in zip(locs, rows, strict=True):
                out[names[loc]] = row
            if kind == "O":
                loose.update(names[loc] for loc in locs)
        else:
            out[names[locs[0]]] = _array_list(vals)
            if getattr(vals, "_mask", None) is None:  # string/object extension arrays: check them
                loose.add(names[locs[0]])
    if len(out) != len(names):
        raise ValueError("duplicate column names")
    return out, loose


def public_frame_lists(df: pd.DataFrame) -> dict[str, list[Any]]:
    """The same through pandas' public API (the fallback, and the reference in tests)."""
    return {name: _array_list(df[name].array) for name in df.columns}


def _other_row(cols: dict[str, list[Any]], i: int, src: Source) -> Any:
    """A typed record (or an UnknownRecord / DecodeError stand-in) for a non-commit row."""
    status = cols["status"][i]
    rt = cols["record_type"][i]
    if status == "ok":
        rec = payload_to_record(cols["payload"][i])
        # the payload carries its own source; the frame's columns are authoritative
        return rec if rec.source == src else replace(rec, source=src)
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
        str(cols["error_reason"][i]),
        key=_GroupIdKey(gid) if isinstance(gid, str) else None,
    )


class _GroupIdKey:
    __slots__ = ("group_id",)

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id


def _apply_commit_run(
    g: Group | None, cols: dict[str, list[Any]], lo: int, hi: int, ctx: FoldContext
) -> Group | None:
    """Apply rows [lo, hi) -- all offset commits (values or tombstones), positions already filtered."""
    whole = lo == 0 and hi == len(cols["source_offset"])

    def col(name: str) -> list[Any]:
        c = cols[name]
        return c if whole else c[lo:hi]

    topics = col("topic")
    parts = col("partition_num")
    tomb = col("is_tombstone")
    sp = col("source_partition")
    so = col("source_offset")
    counts = col("n_commits") if "n_commits" in cols else None
    tomb_counts = col("n_tombstones") if "n_tombstones" in cols else None

    def records_at(i: int) -> int:
        """How many log records row ``i`` stands for (collapsed rows stand for several)."""
        if counts is None or tomb_counts is None:
            return 1
        c, t = counts[i] or 0, tomb_counts[i] or 0
        return max(1, c + t)

    if (g is None or not g.pending) and True not in tomb:
        if g is None:
            g = Group(cols["group_id"][lo])
        if g.kind is None:
            create_simple(g, (sp[0], so[0], cols["source_timestamp_ms"][lo]), ctx)
        # The hot path: no Python loop -- dict.update over zipped columns runs in C.
        tids = col("topic_id")
        keys = list(zip(topics, parts, strict=True))
        g.offsets.update(
            zip(
                keys,
                zip(
                    col("committed_offset"),
                    col("leader_epoch"),
                    col("metadata"),
                    col("commit_timestamp_ms"),
                    col("expire_timestamp_ms"),
                    tids,
                    sp,
                    so,
                    strict=True,
                ),
                strict=True,
            )
        )
        n = hi - lo
        if tids.count(None) != n:
            g.topic_names.update({tid: t for tid, t in zip(tids, topics, strict=True) if tid is not None})
        if counts is None:
            committed = n
        elif None in counts:
            committed = sum(1 if c is None else c for c in counts)
        else:
            committed = sum(counts)
        ctx.commits += committed
        g.counters["commits"] += committed
        ctx.committed.update(keys)
        ctx.commit_topics.update(topics)
        last = (sp[-1], so[-1], cols["source_timestamp_ms"][hi - 1])
        ctx.last_src["commit"] = last
        if counts is None or tomb_counts is None:
            g.counters["records"] += n
        elif None in counts or None in tomb_counts:
            g.counters["records"] += sum(map(records_at, range(n)))
        else:  # max(1, commits + tombstones) per row, without a Python frame per row
            g.counters["records"] += sum(map(max, repeat(1, n), map(add, counts, tomb_counts)))
        g.last_position = (last[0], last[1])
        g.last_change_ms = last[2]
        return g
    offs, les, mds = col("committed_offset"), col("leader_epoch"), col("metadata")
    cts, ets, tids = col("commit_timestamp_ms"), col("expire_timestamp_ms"), col("topic_id")
    st = col("source_timestamp_ms")
    for i in range(hi - lo):
        src = (sp[i], so[i], st[i])
        if g is None:
            g = Group(cols["group_id"][lo + i])
        if g.pending:
            check_pending(g, src[2], ctx.config, ctx.events, (src[0], src[1]))
        tp = (topics[i], parts[i])
        if tomb[i]:
            apply_offset_tombstone(g, tp, src, ctx)
        else:
            entry: OffsetEntry = (offs[i], les[i], mds[i], cts[i], ets[i], tids[i], src[0], src[1])
            if g.kind is None:
                create_simple(g, src, ctx)
            apply_commit(g, tp, entry, src, ctx)
            c = 1 if counts is None or counts[i] is None else counts[i]
            ctx.commits += c
            g.counters["commits"] += c
        if g.kind is None and not g.offsets and not g.pending:
            g = None  # as apply_record: nothing left for this id
            continue
        g.counters["records"] += records_at(i)
        g.last_position = (src[0], src[1])
        g.last_change_ms = src[2]
    return g


def fold_frame(
    group: Group | None,
    df: pd.DataFrame,
    *,
    group_id: str | None = None,
    config: OffsetConfig = DEFAULT_CONFIG,
) -> FoldResult:
    """Fold one group's rows (OUTPUT_SCHEMA columns, sorted by source partition/offset; optional
    ``n_commits``) into ``group``.  Same result as `state.replay.fold` over the decoded records."""
    return fold_columns(group, frame_lists(df), group_id=group_id, config=config)


def fold_columns(
    group: Group | None,
    cols: dict[str, list[Any]],
    *,
    group_id: str | None = None,
    config: OffsetConfig = DEFAULT_CONFIG,
) -> FoldResult:
    """`fold_frame` over plain column lists (OUTPUT_SCHEMA names, ``None`` for nulls, Python ints
    and strs) -- what the streaming adapter has after unpacking a group's rows
    (`streaming.pipeline.prepare`), with no pandas in between."""
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
    """`step_detail`'s answer: `step`'s triple plus the remaining offsets' deadlines."""

    group: Group | None
    events: list[Any]
    deadline: int | None
    #: `state.expiry.all_deadlines` of ``group`` after the step (``{}`` when it is ``None``)
    deadlines: dict[TopicPartition, int | None]


def step(
    group: Group | None,
    df: pd.DataFrame | dict[str, list[Any]] | None,
    now_ms: int,
    *,
    group_id: str | None = None,
    config: OffsetConfig = DEFAULT_CONFIG,
) -> tuple[Group | None, list[Any], int | None]:
    """What the adapter calls per group and trigger: fold the rows (if any; a frame, or column lists
    as `fold_columns` takes them), then apply the expiry rules at ``now_ms``.  Returns ``(group or
    None, events, next deadline or None)`` -- ``None`` group: remove the state row; deadline: set
    the timeout to ``deadline - now_ms``."""
    res = step_detail(group, df, now_ms, group_id=group_id, config=config)
    return res.group, res.events, res.deadline


def step_detail(
    group: Group | None,
    df: pd.DataFrame | dict[str, list[Any]] | None,
    now_ms: int,
    *,
    group_id: str | None = None,
    config: OffsetConfig = DEFAULT_CONFIG,
) -> StepResult:
    """`step`, with every remaining offset's deadline: the expiry rules are evaluated once per
    group and trigger, and the adapter's summary and offsets feed reuse the figures."""
    events: list[Any] = []
    g = group
    if isinstance(df, dict):
        res = fold_columns(g, df, group_id=group_id, config=config) if df["source_offset"] else None
    elif df is not None and len(df):
        res = fold_frame(g, df, group_id=group_id, config=config)
    else:
        res = None
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

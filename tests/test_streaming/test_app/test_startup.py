"""`streaming.app.startup.Beginning` with fakes: the query's first start, and the readiness it
leaves behind when the driver folded the backfill (`streaming.app.backfill`)."""

from __future__ import annotations

from streaming.app.startup import Beginning
from streaming.serving.status import MirrorStatus
from streaming.settings import load_settings


class FakeCluster:
    def __init__(self, ends: dict[int, int]) -> None:
        self.ends = ends

    def topic_partitions(self, topic: str) -> list[int]:
        return sorted(self.ends)

    def partition_offsets(self, topic: str) -> tuple[dict[int, int], dict[int, int]]:
        return dict.fromkeys(self.ends, 0), dict(self.ends)


def _begin(ends_now: dict[int, int], seeded: dict[int, int] | None) -> tuple[MirrorStatus, list[str]]:
    status = MirrorStatus()
    calls: list[str] = []
    beginning = Beginning(
        load_settings(bootstrap_servers="127.0.0.1:9"),
        status,
        FakeCluster(ends_now),  # type: ignore[arg-type]
        recover=lambda: calls.append("recover") or 0,  # type: ignore[func-returns-value]
        start_query=lambda: calls.append("start") or "query",  # type: ignore[func-returns-value,return-value]
        hand_over_backfill=lambda: calls.append("hand over") or seeded,  # type: ignore[func-returns-value]
    )
    assert beginning.try_begin() == "query"
    return status, calls


def test_a_seeded_start_is_ready_at_the_ends_its_read_saw() -> None:
    """Commits arrived between the driver's read and the readiness targets (a busy cluster): the
    start catches up with the ends the read saw -- ready as the query starts, not after its
    first batch; the targets of partitions the read reached further stay."""
    status, calls = _begin({0: 100, 1: 50, 2: 7}, {0: 90, 1: 50, 2: 9})
    assert calls == ["recover", "hand over", "start"]
    assert status.ready and status.targets() == {0: 90, 1: 50, 2: 7}
    assert status.positions() == {0: 90, 1: 50, 2: 9}


def test_without_a_seed_the_query_catches_up() -> None:
    status, calls = _begin({0: 100}, None)
    assert calls == ["recover", "hand over", "start"]
    assert not status.ready and status.targets() == {0: 100}
    status.advance({0: 100})
    assert status.ready

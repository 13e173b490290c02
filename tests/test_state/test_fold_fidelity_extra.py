"""Fidelity on real bytes for the opt-in scenarios: a KIP-848 regex subscription (K=16) and
KIP-848/share/streams groups deleted with DeleteGroups (group-level tombstones K=3/4/6, 11/12/15,
17/20/23).  Same comparison as test_fold_fidelity.py, on a dedicated broker (conftest ``extra_kafka``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from state import events as ev
from state.expiry import consumer_subscribed_topics, expires_at_ms
from state.replay import FoldResult, fold
from streaming.app.capture_cmd import capture
from tests.support.fidelity import _compare, _records_by_group

pytestmark = pytest.mark.broker


def test_regex_and_deleted_modern_groups(extra_kafka: Any, tmp_path: Path) -> None:
    import lab.scenarios_extra
    from lab.lab import Lab
    from lab.scenarios import run_scenarios

    lab = Lab(extra_kafka.bootstrap, extra_kafka.settings.kafka_version, run_id="x")
    try:
        results = run_scenarios(lab, ["kip848_regex", "modern_groups_deleted"])
        out = tmp_path / "capture.jsonl"
        capture(extra_kafka.bootstrap, str(out))
    finally:
        lab.close()
    folded = {gid: fold(None, recs) for gid, recs in _records_by_group(out).items()}
    for name, result in results.items():
        for gid, view in result.groups.items():
            _compare(name, view, folded.get(gid, FoldResult(None, [], [])))

    regex = results["kip848_regex"]
    g = folded[regex.group.group_id].group
    assert g is not None and g.regexes, "the broker's K=16 record"
    assert consumer_subscribed_topics(g) == set(regex.topics)  # resolved by the broker, via the regex
    for t, p in g.offsets:
        assert expires_at_ms(g, t, p) is None  # regex-subscribed topics are protected (Rule 5)

    for gid in results["modern_groups_deleted"].groups:
        res = folded[gid]
        assert res.group is None, gid  # every group-level tombstone replayed: nothing left
        assert [e.reason for e in res.events if isinstance(e, ev.GroupDeleted)] == ["tombstone"], gid
        assert not [e for e in res.events if isinstance(e, ev.ExpiryDisagreement)], gid

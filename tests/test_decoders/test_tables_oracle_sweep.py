"""The inclusive sweep (every (record type, value version, layout) of our tables, encoded by the
test-only encoder) cross-checked with Kafka's own classes -- the oracle for what no broker we run
writes (K=0, OffsetCommit V0/V2, GroupMetadata V0-V2/V4, ...).

One FormatterOracle run on the 4.3.1 jars and one on the 3.9.2 jars.  Cases a Kafka version has
no layout for are not compared:

* 4.3.1 reads K=0 only at V0 (4.1+ ``LegacyOffsetCommitValue``; we accept V0-V4 as <= 4.0 did),
  drops K=9 (removed in 4.1), and reads only the current layout of the multi-layout families;
* 3.9.2 knows K=0..8 only (its loader rejects K>=9) and not the 3.7 early-access layouts;
* each Kafka drops tagged fields newer than itself (unknown tags): for 4.3.1 the 4.4+ streams
  fields, for 3.9.2 the 4.x tags -- those names may be missing from Kafka's output, nothing else.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from decoders import record_json
from lab.record_samples import Case, all_cases
from tests.support.decoders_oracle import OracleRecord, OracleUnavailableError, check, check_3_9, run_oracle
from tests.support.require import require

pytestmark = pytest.mark.broker

CASES = list(all_cases())

UNSUPPORTED_4_3 = {
    (0, 1, "0.9+"), (0, 2, "0.9+"), (0, 3, "0.9+"), (0, 4, "0.9+"),
    (4, 0, "3.7-early-access"), (5, 0, "3.7-early-access"), (7, 0, "3.7-early-access"),
    (8, 0, "3.7-early-access"), (9, 0, "3.9"), (9, 0, "4.0"), (11, 0, "3.9-4.0"), (15, 0, "4.0"),
}  # fmt: skip
NEWER_THAN_4_3 = {"storedDescriptionTopologyEpoch", "failedDescriptionTopologyEpoch"}  # K=17, 4.4+
NEWER_THAN_3_9 = {"topicId", "metadataHash", "assignmentTimestamp", "assignmentEpochs"}


def _run(jars: str) -> list[OracleRecord]:
    records = [(0, i, c.key, c.value) for i, c in enumerate(CASES)]
    try:
        return run_oracle(records, kafka_jars_version=jars)
    except OracleUnavailableError as exc:
        require(False, str(exc))
        raise


def _combo(c: Case) -> tuple[int, int, str]:
    return c.rt.k, c.version, c.layout.label


def _only_newer_fields(problems: list[str], newer: set[str]) -> bool:
    """Every problem is 'a field Kafka does not know was not printed by Kafka'."""
    fields = [re.search(r"\): ([\w.\[\]]+): not printed by Kafka", p) for p in problems]
    return all(m is not None and m.group(1).rsplit(".", 1)[-1] in newer for m in fields)


def _sweep(jars: str, checker: Any, unsupported: set[tuple[int, int, str]], newer: set[str]) -> None:
    """Every case Kafka ``jars`` has a layout for must be read by Kafka and agree with ours.

    ``unsupported`` cases are not compared: Kafka rejects them -- or, for a 3.7 early-access K=5
    value, reads it as the 3.8+ layout and ignores the bytes left over (its readers do not
    require exact consumption; ours do, which is how we tell the layouts apart)."""
    failures = []
    for c, ora in zip(CASES, _run(jars), strict=True):
        ours, status = record_json(c.key, c.value)
        assert status == "ok", (c.id, ours)
        if _combo(c) in unsupported:
            continue
        problems = checker(ours, status, ora)
        if problems and not _only_newer_fields(problems, newer):
            failures.append((c.id, problems[:3]))
    assert not failures, failures[:10]


def test_sweep_agrees_with_kafka_4_3() -> None:
    _sweep("4.3.1", check, UNSUPPORTED_4_3, NEWER_THAN_4_3)


def test_sweep_agrees_with_kafka_3_9() -> None:
    unsupported = {_combo(c) for c in CASES if c.rt.k >= 9 or c.layout.label == "3.7-early-access"}
    _sweep("3.9.2", check_3_9, unsupported, NEWER_THAN_3_9)

"""Every vector file in tests/vectors/ decodes to its expected JSON (spec §9 now; broker captures
in phase 2 drop in as more files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decoders.kafka_json import record_json
from decoders.tables import REGISTRIES

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors"


def _load() -> list[Any]:
    params = []
    for path in sorted(VECTORS_DIR.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        # a file's "topic" (default __consumer_offsets) picks the record types its bytes use
        topic = doc.get("topic", "__consumer_offsets")
        for raw in doc["vectors"]:
            vec = {"topic": topic, **raw}
            params.append(pytest.param(doc.get("compare", "full"), vec, id=f"{path.stem}:{vec['name']}"))
    return params


VECTORS = _load()


def test_vector_files_exist() -> None:
    assert len(VECTORS) >= 16


@pytest.mark.parametrize(("compare", "vec"), VECTORS)
def test_vector(compare: str, vec: dict[str, Any]) -> None:
    key = bytes.fromhex(vec["key"])
    value = None if vec["value"] is None else bytes.fromhex(vec["value"])
    got, status = record_json(key, value, registry=REGISTRIES[vec["topic"]])
    assert status == vec.get("expect_status", "ok")
    expect = vec["expect"]
    if compare == "full":
        assert got == expect
    else:  # Kafka's formatter output: everything but our `extra`
        assert got["key"] == expect["key"]
        if expect["value"] is None:
            assert got["value"] is None
        else:
            assert got["value"]["version"] == expect["value"]["version"]
            assert got["value"]["data"] == expect["value"]["data"]

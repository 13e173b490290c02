"""Kafka's own code as the oracle: run ``jvm/tools/src/FormatterOracle.java`` over records and
compare what it prints with our ``record_json``.

FormatterOracle (see its header) prints, per record, what the console-consumer formatters print
(``OffsetsMessageFormatter`` K=0/1, ``GroupMetadataMessageFormatter`` K=2,
``ShareGroupMessageFormatter`` K=10..15 in 4.x), what the group coordinator's serde + the
generated JSON converters give for every type (the path of ``kafka-dump-log --offsets-decoder``),
and, for consumer-group K=2 values, the subscription/assignment JSON that dump-log substitutes.

Used by ``tests/vectors/make_vectors.py`` (generation refuses to store a vector that disagrees)
and by ``tests/test_decoders/test_decode_real_broker.py``.  One JVM per call; ~1 s for hundreds of
records.  Missing java / jars raise :class:`OracleUnavailableError` (tests turn that into a failure).

As a command, ``.venv/bin/python -m tests.support.decoders_oracle CAPTURE [--jars 3.9.2]`` checks every
record of a capture file and prints the disagreements (exit 1 if any).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from streaming.jars import MissingArtifactsError, jars_root, kafka_dir, kafka_version

ORACLE_CLASS = "FormatterOracle"
#: formatter class (simple name) -> record types it prints, in Kafka 4.x
FORMATTER_TYPES_4X: dict[str, frozenset[int]] = {
    "OffsetsMessageFormatter": frozenset({0, 1}),
    "GroupMetadataMessageFormatter": frozenset({2}),
    "ShareGroupMessageFormatter": frozenset(range(10, 16)),
    # `__share_group_state` (FormatterOracle --share-group-state loads only this one)
    "ShareGroupStateMessageFormatter": frozenset({0, 1}),
}
SHARE_GROUP_STATE = "__share_group_state"
SERDE = "serde"


class OracleUnavailableError(RuntimeError):
    """java, the Kafka jars or the compiled FormatterOracle are missing (message says how to fix)."""


def oracle_classpath(kafka_jars_version: str | None = None) -> str:
    """Kafka ``kafka_jars_version``'s jars + our tools folder (compiled against the newest Kafka).

    FormatterOracle links only to classes both 3.9 and 4.x have (it reaches the rest by
    reflection), so the 4.x-compiled class runs on the 3.9 classpath too.
    """
    try:
        jars = kafka_dir(kafka_jars_version)
    except MissingArtifactsError as exc:
        raise OracleUnavailableError(str(exc)) from exc
    tools = jars_root() / f"tools-{kafka_version()}"
    if not (tools / f"{ORACLE_CLASS}.class").is_file() or not (tools / ".complete").is_file():
        raise OracleUnavailableError(
            f"{tools}/{ORACLE_CLASS}.class not found: compile jvm/tools/src with `make jars`"
        )
    return f"{jars / '*'}:{tools}"


@dataclass(frozen=True)
class OracleRecord:
    partition: int
    offset: int
    type: int | None
    #: formatter simple name -> exactly what its writeTo printed (or "!exception: ...")
    formatters: dict[str, str]
    #: {"key": {"type", "data"}, "value": null | {"version", "data"}} or {"error": "..."}
    serde: dict[str, Any]
    #: K=2 consumer groups: {"members": [{"memberId", "subscription", "assignment"}]}
    consumer_protocol: dict[str, Any] | None

    def printed(self) -> dict[str, Any]:
        """formatter name -> parsed JSON, for formatters that printed JSON (not exceptions)."""
        out = {}
        for name, text in self.formatters.items():
            if not text.startswith("!exception:"):
                out[name] = json.loads(text)
        return out

    def kafka_json(self) -> tuple[str, dict[str, Any]]:
        """(which Kafka path, its JSON): the console formatter that prints this record type if
        one does (4.x), otherwise the serde + converters."""
        printed = self.printed()
        for name, types in FORMATTER_TYPES_4X.items():
            if self.type in types and name in printed:
                return name, printed[name]
        return SERDE, self.serde


def run_oracle(
    records: Iterable[tuple[int, int, bytes, bytes | None]],
    *,
    kafka_jars_version: str | None = None,
    timeout_s: float = 300.0,
    topic: str = "__consumer_offsets",
) -> list[OracleRecord]:
    """One JVM over ``(partition, offset, key, value)`` records; results in the same order.
    ``topic`` `SHARE_GROUP_STATE`: the records are the share coordinator's (4.x jars only)."""
    java = shutil.which("java")
    if java is None:
        raise OracleUnavailableError("`java` (17+) is not on PATH")
    cp = oracle_classpath(kafka_jars_version)
    lines = [f"{p} {o} {k.hex()} {'-' if v is None else v.hex()}\n" for p, o, k, v in records]
    mode = ["--share-group-state"] if topic == SHARE_GROUP_STATE else []
    proc = subprocess.run(
        [java, "-Xmx512m", "-XX:TieredStopAtLevel=1", "-cp", cp, ORACLE_CLASS, *mode],
        input="".join(lines),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{ORACLE_CLASS} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    out = []
    for line in proc.stdout.splitlines():
        obj = json.loads(line)
        out.append(
            OracleRecord(
                partition=obj["partition"],
                offset=obj["offset"],
                type=obj["type"],
                formatters=obj["formatters"],
                serde=obj["serde"],
                consumer_protocol=obj.get("consumerProtocol"),
            )
        )
    if len(out) != len(lines):
        raise RuntimeError(f"{ORACLE_CLASS} printed {len(out)} results for {len(lines)} records")
    return out


# ------------------------------------------------------------------------------------- comparing
def diff(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Field-by-field differences (names, shapes, values, and JSON types: 1 != 1.0 != True)."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        out = []
        for k in sorted(set(ours) | set(theirs)):
            p = f"{path}.{k}" if path else k
            if k not in ours:
                out.append(f"{p}: missing in ours (Kafka: {theirs[k]!r})")
            elif k not in theirs:
                out.append(f"{p}: not printed by Kafka (ours: {ours[k]!r})")
            else:
                out += diff(ours[k], theirs[k], p)
        return out
    if isinstance(theirs, list) and isinstance(ours, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} elements, Kafka {len(theirs)}"]
        return [
            d for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in diff(a, b, f"{path}[{i}]")
        ]
    if type(ours) is not type(theirs) or ours != theirs:
        return [f"{path}: ours {ours!r}, Kafka {theirs!r}"]
    return []


def comparable(ours: dict[str, Any]) -> dict[str, Any]:
    """Our record_json minus what is ours only (``value.extra``)."""
    value = ours.get("value")
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "extra"}
    return {"key": ours.get("key"), "value": value}


def _embedded_diff(ours: dict[str, Any], theirs: dict[str, Any], path: str) -> list[str]:
    if "error" in theirs:
        # Kafka's reader threw: dump-log keeps the bytes.  We must have reported an error too --
        # except for a zero-length blob, which the Java consumer treats as an empty assignment
        # (and so do we: version null, no partitions).
        if "error" in ours or ours.get("version") is None:
            return []
        return [f"{path}: Kafka's reader failed ({theirs['error']}), ours decoded {ours!r}"]
    ours_cmp = {k: v for k, v in ours.items() if k != "readAsVersion"}
    return diff(ours_cmp, theirs, path)


def consumer_protocol_diff(ours: dict[str, Any], oracle: OracleRecord) -> list[str]:
    """Our ``value.extra.consumerProtocol`` vs what dump-log's consumer-protocol expansion prints."""
    theirs = oracle.consumer_protocol
    mine = ((ours.get("value") or {}).get("extra") or {}).get("consumerProtocol")
    if theirs is None:
        return [] if mine is None else ["extra.consumerProtocol: Kafka does not expand this record"]
    a, b = (mine or {"members": []})["members"], theirs["members"]  # we omit it for no members
    if len(a) != len(b):
        return [f"extra.consumerProtocol.members: {len(a)} members, Kafka {len(b)}"]
    out = []
    for i, (m, t) in enumerate(zip(a, b, strict=True)):
        p = f"extra.consumerProtocol.members[{i}]"
        if m["memberId"] != t["memberId"]:
            out.append(f"{p}.memberId: ours {m['memberId']!r}, Kafka {t['memberId']!r}")
        for part in ("subscription", "assignment"):
            out += _embedded_diff(m[part], t[part], f"{p}.{part}")
    return out


def check(ours: dict[str, Any], status: str, oracle: OracleRecord) -> list[str]:
    """Everything that disagrees between our decode of one record and Kafka's (empty = agree).

    * our status must be ok, and Kafka's serde must have decoded the record;
    * the 4.x formatter that prints this record type (if any) must print exactly the serde JSON
      (a consistency check of the oracle itself);
    * ``key``, ``value.version``, ``value.data`` must equal Kafka's, field by field;
    * for consumer groups, our decoded subscription/assignment must equal dump-log's.
    """
    where = f"p{oracle.partition}@{oracle.offset} K={oracle.type}"
    if status != "ok":
        return [f"{where}: our status {status}: {ours}"]
    if "error" in oracle.serde:
        return [f"{where}: Kafka's serde failed: {oracle.serde['error']}"]
    problems = []
    source, kafka = oracle.kafka_json()
    if source != SERDE and kafka != oracle.serde:
        problems.append(f"{where}: {source} printed {kafka}, serde+converters {oracle.serde}")
    problems += [f"{where} ({source}): {d}" for d in diff(comparable(ours), kafka)]
    problems += [f"{where} (dump-log consumer protocol): {d}" for d in consumer_protocol_diff(ours, oracle)]
    return problems


#: the 3.9 console formatters (ApiMessageFormatter) that print each record type correctly -- they
#: do not filter by type: each prints every record, misreading the others' values
FORMATTER_TYPES_3_9: dict[str, frozenset[int]] = {
    "OffsetsMessageFormatter": frozenset({0, 1}),
    "GroupMetadataMessageFormatter": frozenset({2}),
}


def check_3_9(ours: dict[str, Any], status: str, oracle: OracleRecord) -> list[str]:
    """Our decode vs Kafka 3.9's own classes (FormatterOracle on the 3.9.2 classpath).

    For bytes a 3.9 broker wrote, 3.9's serde + converters know every field, so ``key``,
    ``value.version`` and ``value.data`` must equal ours exactly.  3.9's Java formatters print the
    key as ``{"version": K, "data": ...}`` (4.x: ``"type"``); for the types they handle their
    output must be the serde JSON with that one difference.  The consumer-protocol expansion
    (same kafka-clients classes as in 4.x) must equal ours too.
    """
    where = f"p{oracle.partition}@{oracle.offset} K={oracle.type} [3.9]"
    if status != "ok":
        return [f"{where}: our status {status}: {ours}"]
    if "error" in oracle.serde:
        return [f"{where}: Kafka 3.9's serde failed: {oracle.serde['error']}"]
    problems = [f"{where} (serde): {d}" for d in diff(comparable(ours), oracle.serde)]
    printed = oracle.printed()
    for name, types in FORMATTER_TYPES_3_9.items():
        if oracle.type in types:
            expected = {"key": {"version": oracle.type, "data": oracle.serde["key"]["data"]}}
            expected["value"] = oracle.serde["value"]
            if printed.get(name) != expected:
                problems.append(
                    f"{where}: {name} printed {oracle.formatters.get(name)!r}, expected {expected}"
                )
    problems += [f"{where} (consumer protocol): {d}" for d in consumer_protocol_diff(ours, oracle)]
    return problems


def check_all(
    records: Sequence[tuple[int, int, bytes, bytes | None]],
    oracle: Sequence[OracleRecord],
    *,
    legacy_3_9: bool = False,
    topic: str = "__consumer_offsets",
) -> list[str]:
    """check() (or check_3_9()) over records and their oracle results (same order)."""
    from decoders import REGISTRIES, record_json

    problems = []
    for (p, o, k, v), ora in zip(records, oracle, strict=True):
        assert (ora.partition, ora.offset) == (p, o)
        ours, status = record_json(k, v, registry=REGISTRIES[topic])
        problems += (check_3_9 if legacy_3_9 else check)(ours, status, ora)
    return problems


def main(argv: list[str] | None = None) -> int:
    """``.venv/bin/python -m tests.support.decoders_oracle CAPTURE [--jars 3.9.2]``: check every
    record of a capture file (JSON lines or Parquet) against Kafka's own classes."""
    import argparse

    from streaming.pipeline.capture_format import read_capture

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("capture")
    ap.add_argument("--jars", default=None, help="Kafka version whose jars to run (default: newest)")
    ap.add_argument("--topic", default="__consumer_offsets", help="the capture's topic")
    args = ap.parse_args(argv)
    records = [(r.partition, r.offset, r.key, r.value) for r in read_capture(args.capture)]
    legacy = bool(args.jars and args.jars.startswith("3."))
    oracle = run_oracle(records, kafka_jars_version=args.jars, topic=args.topic)
    problems = check_all(records, oracle, legacy_3_9=legacy, topic=args.topic)
    for p in problems:
        print(p)
    print(f"{len(records)} records, {len(problems)} disagreement(s) with Kafka")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

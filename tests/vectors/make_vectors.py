"""Golden vectors from real brokers: `make vectors` (or `.venv/bin/python tests/vectors/make_vectors.py`).

For each broker configuration in RUNS (newest 4.x; 3.9 with its default, Scala group coordinator;
3.9 with the KIP-848 preview coordinator), one after the other:

1. start the broker (lab.broker), run the scenarios, stop every client (members leave:
   more real records), capture ``__consumer_offsets`` twice -- read_committed and read_uncommitted
   (records of aborted transactions are real bytes too) -- and stop the broker;
2. run Kafka's own ``kafka-dump-log --offsets-decoder`` (DumpLogSegments, of the broker's version)
   over the broker's segment files;
3. decode every captured record with our ``record_json`` and require, for EVERY record:
   status ok; agreement with FormatterOracle on the 4.3.1 jars (the 4.x console formatter that
   prints the type, else the coordinator serde + generated converters; dump-log's consumer-protocol
   expansion); for 3.9 brokers also with FormatterOracle on the 3.9.2 jars; and agreement with the
   dump-log output.  Any disagreement fails the run and nothing is written;
4. keep a reviewable subset (every (K, V, layout, tombstone) combination of every scenario, plus up
   to EXAMPLES_PER_SHAPE records of every distinct JSON shape, plus every aborted-transaction
   record) and write ``tests/vectors/<run>.json`` in the format of tests/vectors/README.md.

``--from-captures DIR`` redoes steps 3-4 from the captures and dump-log outputs a previous run
kept in DIR (default build/vectors/), without brokers -- e.g. after a decoder change.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from decoders import REGISTRIES, record_json  # noqa: E402
from streaming.pipeline.capture_format import CapturedRecord, read_capture, read_header  # noqa: E402
from tests.support.decoders_oracle import (  # noqa: E402
    check,
    check_all,
    diff,
    run_oracle,
)

VECTORS_DIR = REPO / "tests" / "vectors"
DEFAULT_WORK = REPO / "build" / "vectors"
EXAMPLES_PER_SHAPE = 2
RUN_ID = "vec"


@dataclass(frozen=True)
class Run:
    name: str
    kafka_version: str
    scenarios: tuple[str, ...]
    broker_extra: dict[str, str] = field(default_factory=dict)
    about: str = ""
    #: the coordinator topic captured and checked: `__consumer_offsets`, or the share
    #: coordinator's `__share_group_state` (FormatterOracle --share-group-state, dump-log's
    #: --share-group-state-decoder)
    topic: str = "__consumer_offsets"

    def record_json(self, key: bytes, value: bytes | None) -> tuple[dict[str, Any], str]:
        return record_json(key, value, registry=REGISTRIES[self.topic])


SHARE_STATE = "__share_group_state"


def runs() -> list[Run]:
    from lab.scenarios import default_scenarios
    from lab.scenarios_extra import KIP848_PREVIEW_3_9
    from lab.scenarios_insights import share_acks  # noqa: F401 - registers the share scenarios

    return [
        Run(
            "kafka-4.3.1",
            "4.3.1",
            (*default_scenarios("4.3.1"), "kip848_regex", "modern_groups_deleted"),
            about="Kafka 4.3.1, default broker settings of the test harness: classic, KIP-848, "
            "share and streams groups, transactions, deletes, explicit retention, a regex "
            "subscription and deleted modern groups.",
        ),
        Run(
            "kafka-3.9.2",
            "3.9.2",
            tuple(default_scenarios("3.9.2")),
            about="Kafka 3.9.2 with its default (Scala) group coordinator: classic groups, "
            "transactions, deletes, explicit retention.",
        ),
        Run(
            "kafka-3.9.2-kip848-preview",
            "3.9.2",
            ("kip848_java_console", "classic_range", "explicit_retention", "txn_abort"),
            broker_extra=dict(KIP848_PREVIEW_3_9),
            about="Kafka 3.9.2 with group.coordinator.rebalance.protocols=classic,consumer (the "
            "KIP-848 preview: the new Java group coordinator writes every record, incl. K=3..8 "
            "for a group of Java console consumers with group.protocol=consumer).",
        ),
        Run(
            "kafka-4.3.1-share-state",
            "4.3.1",
            ("share_group", "share_acks", "share_deleted"),
            about="Kafka 4.3.1's __share_group_state (the share coordinator's ShareSnapshot K=0 and "
            "ShareUpdate K=1): share consumers that accept, release and reject records, and a share "
            "group deleted after it consumed (tombstones).",
            topic=SHARE_STATE,
        ),
    ]


# ------------------------------------------------------------------------------- broker + capture
def run_broker(run: Run, work: Path) -> None:
    """Steps 1-2: scenarios, captures and dump-log output into ``work/<run.name>/``."""
    from lab.broker import BrokerSettings, LocalKafka
    from lab.lab import Lab
    from lab.scenarios import run_scenarios
    from streaming.app.capture_cmd import capture

    out = work / run.name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    t0 = time.monotonic()
    broker = LocalKafka(
        BrokerSettings(kafka_version=run.kafka_version, extra=run.broker_extra), out / "broker"
    )
    broker.start()
    groups: dict[str, str] = {}
    try:
        lab = Lab(broker.bootstrap, run.kafka_version, run_id=RUN_ID)
        try:
            for name in run.scenarios:
                t1 = time.monotonic()
                result = run_scenarios(lab, [name])[name]
                for group in result.groups:
                    groups[group] = name
                print(f"  {run.name}: {name} ({time.monotonic() - t1:.1f}s)", flush=True)
        finally:
            lab.close()
        time.sleep(3)  # leave-group writes of the members closed above
        for isolation in ("read_committed", "read_uncommitted"):
            n = capture(
                broker.bootstrap,
                str(out / f"{isolation}.jsonl"),
                isolation_level=isolation,
                kafka_version=run.kafka_version,
                topic=run.topic,
            )
            print(f"  {run.name}: captured {n} records ({isolation})", flush=True)
    finally:
        broker.stop()
    (out / "groups.json").write_text(json.dumps(groups, indent=1, sort_keys=True) + "\n")
    dump = dump_log(run.kafka_version, broker.data_dir, run.topic)
    (out / "dump-log.txt").write_text(dump, encoding="utf-8")
    print(f"  {run.name}: broker + scenarios + captures in {time.monotonic() - t0:.0f}s", flush=True)


def dump_log(kafka_version: str, data_dir: Path, topic: str = "__consumer_offsets") -> str:
    """``kafka-dump-log --offsets-decoder`` (``--share-group-state-decoder`` for the share
    coordinator's topic) of ``kafka_version`` over every segment of ``topic``."""
    from streaming.jars import kafka_classpath

    segments = sorted(data_dir.glob(f"{topic}-*/*.log"))
    if not segments:
        raise RuntimeError(f"no {topic} segments under {data_dir}")
    decoder = "--share-group-state-decoder" if topic == SHARE_STATE else "--offsets-decoder"
    main = (
        "kafka.tools.DumpLogSegments"
        if kafka_version.startswith("3.")
        else "org.apache.kafka.tools.DumpLogSegments"
    )
    proc = subprocess.run(
        ["java", "-Xmx512m", "-cp", kafka_classpath(kafka_version), main, decoder, "--files",
         ",".join(str(s) for s in segments)],
        capture_output=True, text=True, encoding="utf-8", timeout=300, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"DumpLogSegments failed:\n{proc.stderr[-4000:]}")
    return proc.stdout


def parse_dump_log(text: str) -> dict[tuple[int, int], tuple[Any, Any]]:
    """(partition, offset) -> (key JSON, payload JSON or None for ``<DELETE>``) of data records."""
    out: dict[tuple[int, int], tuple[Any, Any]] = {}
    partition = -1
    for line in text.splitlines():
        if line.startswith("Dumping "):
            partition = int(Path(line.split(" ", 1)[1]).parent.name.rsplit("-", 1)[1])
            continue
        if not line.startswith("| offset: ") or " key: " not in line:
            continue  # batch headers, control records (endTxnMarker)
        offset = int(line[len("| offset: ") :].split(" ", 1)[0])
        body = line[line.index(" key: ") + len(" key: ") :]
        key_text, payload_text = body.split(" payload: ", 1)
        payload = None if payload_text.strip() == "<DELETE>" else json.loads(payload_text)
        out[(partition, offset)] = (json.loads(key_text), payload)
    return out


def dump_log_diff(ours: dict[str, Any], dumped: tuple[Any, Any]) -> list[str]:
    """Our JSON vs one dump-log record: type/version print as strings there, and for "consumer"
    groups each member's subscription/assignment is replaced by its decoded JSON (no version
    field) unless Kafka failed to read it (then the base64 stays)."""
    key, payload = dumped
    problems = diff(ours["key"], {"type": int(key["type"]), "data": key["data"]}, "key")
    value = ours["value"]
    if payload is None or value is None:
        return problems + ([] if payload is None and value is None else ["value: tombstone mismatch"])
    problems += diff(value["version"], int(payload["version"]), "value.version")
    data = json.loads(json.dumps(payload["data"]))
    ours_data = value["data"]
    cp = ((value.get("extra") or {}).get("consumerProtocol") or {}).get("members") or []
    members = (data.get("members") or []) if ours["key"]["type"] == 2 else []
    for i, member in enumerate(members):
        for part in ("subscription", "assignment"):
            if isinstance(member.get(part), dict):
                mine = cp[i][part] if i < len(cp) else {}
                mine = {k: v for k, v in mine.items() if k not in ("version", "readAsVersion")}
                problems += diff(mine, member[part], f"value.extra.consumerProtocol.members[{i}].{part}")
                member[part] = ours_data["members"][i][part]  # compared above
    return problems + diff(ours_data, data, "value.data")


# --------------------------------------------------------------------------------------- checking
@dataclass
class Captured:
    run: Run
    records: list[CapturedRecord]
    aborted: set[tuple[int, int]]
    groups: dict[str, str]
    dumped: dict[tuple[int, int], tuple[Any, Any]]


def load(run: Run, work: Path) -> Captured:
    out = work / run.name
    committed = {(r.partition, r.offset) for r in read_capture(out / "read_committed.jsonl")}
    records = list(read_capture(out / "read_uncommitted.jsonl"))
    header = read_header(out / "read_uncommitted.jsonl")
    if header.kafka_version != run.kafka_version:
        raise RuntimeError(f"{out}: captured from {header.kafka_version}, expected {run.kafka_version}")
    missing = committed - {(r.partition, r.offset) for r in records}
    if missing:
        raise RuntimeError(
            f"{run.name}: read_committed has records read_uncommitted lacks: {sorted(missing)[:5]}"
        )
    return Captured(
        run=run,
        records=records,
        aborted={(r.partition, r.offset) for r in records} - committed,
        groups=json.loads((out / "groups.json").read_text()),
        dumped=parse_dump_log((out / "dump-log.txt").read_text(encoding="utf-8")),
    )


def group_of(obj: dict[str, Any]) -> str:
    data = obj["key"]["data"]
    return str(data.get("group", data.get("groupId")))


def verify(cap: Captured) -> tuple[list[str], dict[tuple[int, int], str]]:
    """Every record against every oracle; returns (problems, (partition, offset) -> Kafka path)."""
    recs = [(r.partition, r.offset, r.key, r.value) for r in cap.records]
    problems: list[str] = []
    paths: dict[tuple[int, int], str] = {}
    oracle = run_oracle(recs, topic=cap.run.topic)
    for (p, o, k, v), ora in zip(recs, oracle, strict=True):
        ours, status = cap.run.record_json(k, v)
        problems += check(ours, status, ora)
        paths[(p, o)] = ora.kafka_json()[0]
        if status == "ok" and group_of(ours) not in cap.groups:
            problems.append(f"p{p}@{o}: group {group_of(ours)!r} was made by no scenario of this run")
        dumped = cap.dumped.get((p, o))
        if dumped is None:
            problems.append(f"p{p}@{o}: not in the dump-log output")
        elif status == "ok":
            problems += [
                f"p{p}@{o} (dump-log {cap.run.kafka_version}): {d}" for d in dump_log_diff(ours, dumped)
            ]
    if cap.run.kafka_version.startswith("3."):
        problems += check_all(
            recs, run_oracle(recs, kafka_jars_version=cap.run.kafka_version), legacy_3_9=True
        )
    return problems, paths


# -------------------------------------------------------------------------------------- selecting
def shape(x: Any) -> Any:
    """A JSON value's structure: keys, types, null vs set, empty vs not (not the values)."""
    if isinstance(x, dict):
        return tuple((k, shape(v)) for k, v in x.items())
    if isinstance(x, list):
        return ("[]",) if not x else ("[", shape(x[0]), len(x) > 1)
    if x is None:
        return None
    if isinstance(x, str):
        return "str" if x else "''"
    return type(x).__name__


def combo(obj: dict[str, Any]) -> tuple[int, int | None, str | None, bool]:
    value = obj["value"]
    layout = None if value is None else (value.get("extra") or {}).get("layout")
    return obj["key"]["type"], None if value is None else value["version"], layout, value is None


def select(cap: Captured) -> list[CapturedRecord]:
    """Every aborted record; per scenario, the first record of each (K, V, layout, tombstone)
    combination; and up to EXAMPLES_PER_SHAPE records of each distinct JSON shape."""
    keep: dict[tuple[int, int], CapturedRecord] = {}
    per_scenario: set[tuple[str, Any]] = set()
    per_shape: Counter[Any] = Counter()
    for r in cap.records:
        ours, _ = cap.run.record_json(r.key, r.value)
        where = (r.partition, r.offset)
        scen = cap.groups[group_of(ours)]
        sig = (combo(ours), shape(ours["value"]), where in cap.aborted)
        if (
            where in cap.aborted
            or (scen, combo(ours)) not in per_scenario
            or per_shape[sig] < EXAMPLES_PER_SHAPE
        ):
            keep[where] = r
            per_scenario.add((scen, combo(ours)))
            per_shape[sig] += 1
    return sorted(keep.values(), key=lambda r: (r.partition, r.offset))


def vector(cap: Captured, r: CapturedRecord, kafka_path: str) -> dict[str, Any]:
    ours, status = cap.run.record_json(r.key, r.value)
    k, v, layout, tomb = combo(ours)
    group = group_of(ours)
    scen = cap.groups[group]
    aborted = (r.partition, r.offset) in cap.aborted
    what = "tombstone" if tomb else f"V{v}" + (f" {layout}" if layout else "")
    return {
        "name": f"{scen} K={k} {what} p{r.partition}@{r.offset}" + (" aborted" if aborted else ""),
        "kafka_version": cap.run.kafka_version,
        "broker": cap.run.name,
        "scenario": scen,
        "group": group,
        "transaction": "aborted" if aborted else None,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp_ms,
        "key": r.key.hex(),
        "value": None if r.value is None else r.value.hex(),
        "oracle": kafka_path,
        "expect_status": status,
        "expect": ours,
    }


def coverage(records: Iterable[CapturedRecord], run: Run) -> dict[str, int]:
    c: Counter[str] = Counter()
    for r in records:
        ours, _ = run.record_json(r.key, r.value)
        k, v, layout, tomb = combo(ours)
        c[f"K={k} " + ("tombstone" if tomb else f"V{v}" + (f" {layout}" if layout else ""))] += 1
    return dict(sorted(c.items(), key=lambda kv: (int(kv[0].split()[0][2:]), kv[0])))


def write(cap: Captured, paths: dict[tuple[int, int], str]) -> Path:
    chosen = select(cap)
    doc = {
        "about": cap.run.about,
        "source": "captured from a real broker by tests/vectors/make_vectors.py; every record of the "
        "capture was checked against Kafka's own formatters/serde (FormatterOracle) and kafka-dump-log "
        "before this subset was stored",
        "kafka_version": cap.run.kafka_version,
        **({"topic": cap.run.topic} if cap.run.topic != "__consumer_offsets" else {}),
        "broker_settings": cap.run.broker_extra,
        "scenarios": list(cap.run.scenarios),
        "scenario": None,
        "compare": "full",
        "capture_counts": coverage(cap.records, cap.run),
        "aborted_in_capture": len(cap.aborted),
        "vectors": [vector(cap, r, paths[(r.partition, r.offset)]) for r in chosen],
    }
    path = VECTORS_DIR / f"{cap.run.name}.json"
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--work", type=Path, default=DEFAULT_WORK, help="where captures are kept (default build/vectors)"
    )
    ap.add_argument("--from-captures", action="store_true", help="reuse the captures in --work; no brokers")
    ap.add_argument("--only", action="append", default=[], help="run name(s) to (re)make, e.g. kafka-4.3.1")
    args = ap.parse_args(argv)
    selected = [r for r in runs() if not args.only or r.name in args.only]
    if not selected:
        ap.error(f"no run named {args.only}; runs: {[r.name for r in runs()]}")
    if not args.from_captures:
        for run in selected:
            print(f"{run.name}: broker {run.kafka_version}, scenarios {', '.join(run.scenarios)}", flush=True)
            run_broker(run, args.work)
    failed = False
    for run in selected:
        cap = load(run, args.work)
        problems, paths = verify(cap)
        if problems:
            failed = True
            print(
                f"{run.name}: {len(problems)} disagreement(s) with Kafka -- no vectors written:",
                file=sys.stderr,
            )
            for p in problems[:50]:
                print("  " + p, file=sys.stderr)
            continue
        path = write(cap, paths)
        n = len(json.loads(path.read_text())["vectors"])
        where = path.relative_to(REPO)
        print(f"{run.name}: {len(cap.records)} records agree with Kafka; {n} vectors -> {where}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

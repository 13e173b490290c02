"""A stop signal to the whole process group is as quiet as one to the driver -- and the log is
what operators read: no Spark progress bar, no start-up noise, JSON lines with ``--log-format json``.

``kill -TERM -<pgid>`` (and systemd's ``KillMode=control-group``) signals the driver *and* its
Spark JVM.  A JVM acting on it stops SparkContext under the running micro-batch while the driver
stops the query: a traceback and exit 1 (streaming/pipeline/session.py, `_launching_jvm`).  Both
ways are run for real here -- `coordinator-mirror run` as a process of its own against the session
broker while a group keeps committing -- and must end alike: exit 0, one log line after the signal,
both JVMs (Spark's and the Kafka client's) gone, and nothing lost: a second run resumes from the
checkpoint to the coordinator's offsets, and the change events of both runs are those of one
uninterrupted fold of the log (`lab.mirror_process.audit_events`).  A signal to every process of
the tree (systemd's ``KillMode=control-group``: Spark's Python workers too) is not quiet -- the
running batch fails -- but exits 0 and loses nothing either (docs/operating.md recommends ``KillMode=mixed``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from lab.mirror_process import audit_events, http_get, read_events, read_log

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]

STOP_LINE = "received {}: stopping between two micro-batches"
#: what the start-up log must not hold any more (the progress bar, and lines a user cannot act on)
NOISE = (
    "[Stage ",
    "Using incubator modules",
    "NativeCodeLoader",
    "resolves to a loopback address",
    "Disabling AQE",
    "adaptive.enabled is not supported",
    "Truncated the string representation",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Committer:
    """An offsets-only group that commits a growing offset to every partition every 0.1 s, so
    micro-batches keep running while the mirror is told to stop."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        from confluent_kafka import Consumer

        self.topic, self.partitions = topic, partitions
        self.offset = 0
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"commit-{group}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        while not self._stop.is_set():
            self.offset += 1
            tps = [TopicPartition(self.topic, p, self.offset) for p in range(self.partitions)]
            self._consumer.commit(offsets=tps, asynchronous=False)
            self._stop.wait(0.1)

    def close(self) -> dict[tuple[str, int], int]:
        """Stop committing; the offsets committed last."""
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()
        return {(self.topic, p): self.offset for p in range(self.partitions)}


def _start(bootstrap: str, work: Path, port: int, group: str, log_format: str) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "streaming.app.cli", "run",
        "--bootstrap-servers", bootstrap,
        "--checkpoint-location", str(work / "ckpt"),
        "--events-path", str(work / "events"),
        "--http-port", str(port),
        "--trigger-interval-s", "0.5",
        "--shuffle-partitions", "2",
        "--group-allow-regex", re.escape(group),
        "--log-format", log_format,
        "--spark-conf", "spark.driver.memory=1g",
    ]  # fmt: skip
    with open(work / "mirror.log", "ab") as out:
        # its own process group, like a service's: the group signal reaches the driver and its JVM
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_ready(port: int, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"mirror exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
        try:
            if http_get(f"http://127.0.0.1:{port}/ready", 5)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"mirror not ready:\n{log.read_text()[-3000:]}")


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            children = [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
        for child in children:
            out += [child, *_descendants(child)]
    return out


def _jvms_of(pid: int) -> list[int]:
    """The driver's JVMs: Spark's and the Kafka client's (`streaming.cluster.jvm`), the java
    processes among ``pid``'s descendants."""
    found = []
    for child in _descendants(pid):
        with contextlib.suppress(OSError):
            if b"java" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]:
                found.append(child)
    assert len(found) >= 2, f"Spark's and the client's JVM under {pid}: {found}"
    return found


def _ignores(pid: int, signum: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(re.search(r"^SigIgn:\s*([0-9a-f]+)$", status, re.M).group(1), 16)  # type: ignore[union-attr]
    return bool(mask >> (signum - 1) & 1)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _lines(text: str, log_format: str) -> list[str]:
    """The log's lines as text (the ``msg`` of JSON ones, each of which must parse)."""
    if log_format == "text":
        return text.splitlines()
    out = []
    for line in text.splitlines():
        obj = json.loads(line)  # every line, Spark's included
        assert {"ts", "level", "logger", "msg"} <= obj.keys(), line
        out.append(f"{obj['level']} {obj['logger']}: {obj['msg']}")
    return out


@pytest.mark.parametrize(
    ("target", "log_format", "signame"),
    [
        ("driver", "text", "SIGTERM"),
        ("group", "text", "SIGTERM"),
        ("group", "json", "SIGTERM"),
        # Ctrl-C in a terminal (PySpark's SparkContext puts a SIGINT handler of its own in place:
        # it cancelled the running batch, and the process exited 130 without a word)
        ("group", "text", "SIGINT"),
        ("tree", "text", "SIGTERM"),
    ],
)
def test_stop_signal_to_the_process_group_is_as_quiet_as_to_the_driver(
    kafka: Any, tmp_path: Path, target: str, log_format: str, signame: str
) -> None:
    signum = signal.Signals[signame]
    from lab.lab import Lab

    run_id = f"stop{os.getpid()}{target}{log_format}{signame}"
    lab = Lab(kafka.bootstrap, kafka.settings.kafka_version, run_id=run_id)
    group = lab.name("stop")
    topic = lab.topic("stop-t", partitions=3, messages_per_partition=1)
    committer = Committer(kafka.bootstrap, group, topic, 3)
    port = _free_port()
    log = tmp_path / "mirror.log"
    proc = _start(kafka.bootstrap, tmp_path, port, group, log_format)
    try:
        _wait_ready(port, proc, log)
        jvms = _jvms_of(proc.pid)
        for jvm in jvms:
            assert _ignores(jvm, signal.SIGTERM) and _ignores(jvm, signal.SIGINT), jvm
        assert not _ignores(proc.pid, signal.SIGTERM)
        # batches are running: the group's commits keep arriving
        deadline = time.monotonic() + 60
        while http_get(f"http://127.0.0.1:{port}/groups/{urllib.parse.quote(group)}", 5)[0] != 200:
            assert time.monotonic() < deadline, "the group never reached the mirror"
            time.sleep(0.2)
        time.sleep(2)
        mark = len(log.read_bytes())
        if target == "group":
            os.killpg(proc.pid, signum)  # what `kill -TERM -<pgid>` does, or a terminal's Ctrl-C
        elif target == "tree":
            # what systemd's KillMode=control-group does: every process of the service, Spark's
            # Python workers (a process group of their own) included
            for pid in [proc.pid, *_descendants(proc.pid)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, log.read_text()[-3000:]
        deadline = time.monotonic() + 30
        while any(map(_alive, jvms)):
            assert time.monotonic() < deadline, "a JVM outlived the driver"
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        final = committer.close()
    text = log.read_text()
    after = _lines(text[mark:], log_format)
    assert after[0].endswith(STOP_LINE.format(signame)), after
    lines = _lines(text[:mark], log_format)
    for noise in NOISE:
        assert not [ln for ln in lines if noise in ln], noise
    # "tree" need not be quiet: the Python workers die under a running batch, whose failure Spark
    # logs (the reason to give systemd KillMode=mixed); still exit 0 and, below, nothing lost
    if target != "tree":
        assert len(after) == 1, "\n".join(after)  # one line, nothing else
        assert not [ln for ln in lines if "Traceback" in ln or "ERROR" in ln], text[-3000:]

    # nothing lost: the next run resumes from the checkpoint to the coordinator's offsets ...
    proc = _start(kafka.bootstrap, tmp_path, port, group, log_format)
    try:
        _wait_ready(port, proc, log)
        deadline = time.monotonic() + 60
        while True:
            status, snapshot = http_get(f"http://127.0.0.1:{port}/groups/{urllib.parse.quote(group)}", 5)
            got = {(o["topic"], int(o["partition"])): int(o["offset"]) for o in snapshot.get("offsets", [])}
            if got == final:
                break
            assert time.monotonic() < deadline, (status, got, final)
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        lab.close()
    # ... and the change events of both runs are one uninterrupted fold's: none lost or repeated
    audit = audit_events(read_events(tmp_path / "events"), read_log(kafka.bootstrap), groups=[group])
    assert audit.clean and audit.commits_expected > 0, audit.summary()


def test_demo_logs_json_without_progress_bars(tmp_path: Path) -> None:
    """`coordinator-mirror demo` (its own local broker and demo groups) with ``--log-format json``:
    every line it prints is a JSON object -- the broker's start, Spark's lines, the mirror's --, no
    progress bar, no start-up noise; it reaches "live" and a SIGTERM ends it with exit 0."""
    port = _free_port()
    out = tmp_path / "demo.log"
    cmd = [
        sys.executable, "-m", "streaming.app.cli", "demo", "--log-format", "json",
        "--http-port", str(port), "--workdir", str(tmp_path / "demo"),
    ]  # fmt: skip
    with open(out, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_ready(port, proc, out, timeout_s=600)
        time.sleep(5)  # a few micro-batches of the demo's groups
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(300) == 0, out.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = _lines(out.read_text(), "json")
    assert any("live: caught up" in ln for ln in lines), lines[-10:]
    for noise in NOISE:
        assert not [ln for ln in lines if noise in ln], noise


def _kinds(port: int) -> set[str]:
    try:
        status, body = http_get(f"http://127.0.0.1:{port}/groups", 5)
    except OSError:
        return set()
    return {str(g.get("kind")) for g in body.get("groups", [])} if status == 200 else set()


def test_ctrl_c_stops_the_demo_quietly(tmp_path: Path) -> None:
    """Ctrl-C in the terminal running `coordinator-mirror demo` (`make demo`): SIGINT to the whole
    foreground process group, sent while the demo's workload is mid-round (a GroupProbe JVM or a
    member in flight -- killed by that SIGINT, they failed the round with a traceback).  The demo
    stops everything it started -- the mirror and its JVMs, the workload and its processes, the
    broker --, prints one line and exits 0."""
    port = _free_port()
    out = tmp_path / "demo.log"
    cmd = [
        sys.executable, "-m", "streaming.app.cli", "demo",
        "--http-port", str(port), "--workdir", str(tmp_path / "demo"),
    ]  # fmt: skip
    with open(out, "wb") as log:
        # a session of its own: the group a terminal's Ctrl-C reaches, the demo its leader
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    seen: set[int] = set()
    try:
        _wait_ready(port, proc, out, timeout_s=600)
        deadline = time.monotonic() + 300

        def in_flight() -> bool:
            """A process of the workload's round alive now (a GroupProbe JVM or a member)."""
            now = _descendants(proc.pid)
            seen.update(now)
            return any(b"GroupProbe" in _cmdline(p) or b"lab.member_host" in _cmdline(p) for p in now)

        # the first groups are there (the preview serves them as soon as they commit) and the
        # round goes on (its other scenarios): the signal comes while one of its processes runs
        while not ({"classic", "consumer"} <= _kinds(port) and in_flight()):
            assert proc.poll() is None and time.monotonic() < deadline, (
                out.read_text()[-3000:],
                [_cmdline(p)[:100] for p in seen],
            )
            time.sleep(0.2)
        mark = len(out.read_bytes())
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
        assert proc.wait(180) == 0, out.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    after = out.read_text()[mark:].splitlines()
    assert len(after) == 1 and after[0].endswith("received SIGINT: stopping between two micro-batches"), after
    assert "Traceback" not in out.read_text()
    # nothing left: not the workload (a process group of its own), not the broker (another), no JVM
    deadline = time.monotonic() + 30
    while left := [p for p in seen if _alive(p)]:
        assert time.monotonic() < deadline, [_cmdline(p)[:120] for p in left]
        time.sleep(0.2)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""

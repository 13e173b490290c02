"""Running group members for scenarios: :class:`Member` (a confluent-kafka or kafka-python
consumer on a thread of its own), :class:`RemoteMember` (the same in a Python process of its own)
and :class:`ChildMember` (a process a scenario can crash).
"""

from __future__ import annotations

import collections
import contextlib
import json
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from lab.probe import TopicPartitionKey

_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


# ------------------------------------------------------------------------------------------ members
class Closable(Protocol):
    def close(self) -> None: ...


class _Command:
    def __init__(self, name: str, arg: Any = None) -> None:
        self.name = name
        self.arg = arg
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class _Consuming:
    """What scenarios read from a member: ``positions`` (consumed) and ``assignment`` (owned)."""

    client_id: str
    positions: dict[TopicPartitionKey, int]
    assignment: set[TopicPartitionKey]

    def wait_consumed(
        self,
        ends: Mapping[TopicPartitionKey, int],
        committed: Mapping[TopicPartitionKey, int] | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        """Wait until every owned partition is consumed up to ``ends`` (its end offset).

        A partition whose group offset is already at its end (``committed``, e.g. by a member that
        owned it before a rebalance) has nothing left to deliver and counts as consumed.
        """
        committed = committed or {}
        deadline = time.monotonic() + timeout_s
        while True:
            owned = set(self.assignment)
            if owned and all(
                max(self.positions.get(tp, 0), committed.get(tp, 0)) >= ends.get(tp, 0) for tp in owned
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"member {self.client_id}: consumed {self.positions} of {ends} (owns {sorted(owned)})"
                )
            time.sleep(0.05)


class Member(_Consuming):
    """One group member (confluent-kafka or kafka-python) polling in its own thread.

    Commits run on the polling thread (client handles are not shared across threads); callers
    block until the commit is acknowledged.  ``positions`` is what the member has consumed.
    """

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topics: list[str],
        *,
        client: str = "confluent",
        protocol: str = "classic",
        assignor: str | None = None,
        instance_id: str | None = None,
        client_id: str | None = None,
        session_timeout_ms: int | None = None,
        extra: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        self.group = group
        self.topics = topics
        self.client = client
        self.protocol = protocol
        self.instance_id = instance_id
        self.client_id = client_id or f"cm-{name or group}-{uuid.uuid4().hex[:6]}"
        self.positions: dict[TopicPartitionKey, int] = {}
        self.assignment: set[TopicPartitionKey] = set()
        #: wall-clock ms: when the member was created (subscribes at once) and each time its
        #: on_assign / on_revoke callback ran (confluent members) -- what a client observes of a
        #: rebalance (lab.scenarios_insights.rebalance_timing)
        self.created_ms = int(time.time() * 1000)
        self.assigned_at_ms: list[int] = []
        self.revoked_at_ms: list[int] = []
        self._commands: queue.Queue[_Command] = queue.Queue()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        if client == "confluent":
            self._consumer = self._make_confluent(bootstrap, assignor, session_timeout_ms, extra)
        elif client == "kafka-python":
            self._consumer = self._make_kafka_python(bootstrap, assignor, session_timeout_ms, extra)
        else:
            raise ValueError(f"unknown client {client!r}")
        self._thread = threading.Thread(target=self._run, name=f"member-{self.client_id}", daemon=True)
        self._thread.start()

    def _make_confluent(
        self, bootstrap: str, assignor: str | None, session_ms: int | None, extra: Mapping[str, Any] | None
    ) -> Any:
        from confluent_kafka import Consumer

        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": self.group,
            "client.id": self.client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "group.protocol": self.protocol,
            "log_level": 3,
            "logger": quiet_logger(),
        }
        if self.protocol == "classic":
            conf["heartbeat.interval.ms"] = 500
            conf["session.timeout.ms"] = session_ms or 10000
            if assignor:
                conf["partition.assignment.strategy"] = assignor
        elif assignor:
            conf["group.remote.assignor"] = assignor
        if self.instance_id:
            conf["group.instance.id"] = self.instance_id

        def on_assign(consumer: Any, partitions: list[Any]) -> None:
            self.assigned_at_ms.append(int(time.time() * 1000))
            self.assignment |= {(tp.topic, tp.partition) for tp in partitions}

        def on_revoke(consumer: Any, partitions: list[Any]) -> None:
            self.revoked_at_ms.append(int(time.time() * 1000))
            self.assignment -= {(tp.topic, tp.partition) for tp in partitions}

        conf.update(extra or {})
        consumer = Consumer(conf)
        consumer.subscribe(self.topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        return consumer

    def _make_kafka_python(
        self, bootstrap: str, assignor: str | None, session_ms: int | None, extra: Mapping[str, Any] | None
    ) -> Any:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

        assignors = {
            None: (RangePartitionAssignor, RoundRobinPartitionAssignor),
            "range": (RangePartitionAssignor,),
            "roundrobin": (RoundRobinPartitionAssignor,),
            "sticky": (StickyPartitionAssignor,),
        }
        conf: dict[str, Any] = {
            "bootstrap_servers": bootstrap,
            "group_id": self.group,
            "client_id": self.client_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            # kafka-python 3.0 runs every client of a process on one shared IO loop; in a busy
            # process (a Spark driver, HTTP servers) that loop stalls for a while, and with a
            # short session the coordinator evicts the member and it keeps rebalancing.
            "heartbeat_interval_ms": 1000,
            "session_timeout_ms": session_ms or 30000,
            "partition_assignment_strategy": assignors[assignor],
        }
        if self.instance_id:
            conf["group_instance_id"] = self.instance_id
        conf.update(extra or {})
        consumer = KafkaConsumer(**conf)
        # kafka-python's leader assigns only partitions it has metadata for; subscribing to a
        # topic created a moment ago can otherwise leave a member Stable with nothing assigned.
        deadline = time.monotonic() + 30
        while any(not consumer.partitions_for_topic(t) for t in self.topics):
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka-python has no metadata for {self.topics}")
            time.sleep(0.1)
        consumer.subscribe(self.topics)
        return consumer

    # -- the polling thread --------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._poll_once()
                while True:
                    try:
                        cmd = self._commands.get_nowait()
                    except queue.Empty:
                        break
                    self._execute(cmd)
        except BaseException as exc:  # surfaced to the caller by commit()/close()
            self._error = exc
        finally:
            while not self._commands.empty():
                cmd = self._commands.get_nowait()
                cmd.error = self._error or RuntimeError("member stopped")
                cmd.done.set()

    def _poll_once(self) -> None:
        if self.client == "confluent":
            msg = self._consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                self.positions[(msg.topic(), msg.partition())] = msg.offset() + 1
        else:
            # Long enough for a JoinGroup/SyncGroup round to finish inside one poll: with short
            # polls on a loaded machine, kafka-python 3.0 members were seen never to rejoin.
            batches = self._consumer.poll(timeout_ms=1000)
            for tp, records in batches.items():
                if records:
                    self.positions[(tp.topic, tp.partition)] = records[-1].offset + 1
            self.assignment = {(tp.topic, tp.partition) for tp in self._consumer.assignment()}

    def _execute(self, cmd: _Command) -> None:
        try:
            if cmd.name == "commit":
                cmd.result = self._commit_retrying()
            elif cmd.name == "close":
                self._close_client(leave=cmd.arg)
                self._stop.set()
        except BaseException as exc:
            cmd.error = exc
        cmd.done.set()

    def _commit_retrying(self, timeout_s: float = 90.0) -> dict[TopicPartitionKey, int]:
        """A commit racing a rebalance fails with a retriable error; finish the rebalance (poll)
        and commit again what the member then owns."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self._commit()
            except Exception as exc:
                text = f"{type(exc).__name__} {exc}"
                retriable = any(
                    word in text
                    for word in (
                        "RebalanceInProgress",
                        "REBALANCE_IN_PROGRESS",
                        "CommitFailed",
                        "ILLEGAL_GENERATION",
                    )
                )
                if not retriable or time.monotonic() > deadline:
                    raise
            for _ in range(3):
                self._poll_once()

    def _commit(self) -> dict[TopicPartitionKey, int]:
        owned = {tp: off for tp, off in self.positions.items() if tp in self.assignment}
        if not owned:
            return {}
        if self.client == "confluent":
            from confluent_kafka import TopicPartition

            self._consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in owned.items()], asynchronous=False
            )
        else:
            from kafka.structs import OffsetAndMetadata
            from kafka.structs import TopicPartition as KafkaTopicPartition

            self._consumer.commit(
                {KafkaTopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in owned.items()}
            )
        return owned

    def _close_client(self, leave: bool) -> None:
        self._consumer.close()

    def _call(self, name: str, arg: Any = None, timeout_s: float = 60.0) -> Any:
        if not self._thread.is_alive():
            raise RuntimeError(f"member {self.client_id} is not running: {self._error!r}")
        cmd = _Command(name, arg)
        self._commands.put(cmd)
        if not cmd.done.wait(timeout_s):
            raise TimeoutError(f"member {self.client_id}: {name} took longer than {timeout_s}s")
        if cmd.error is not None:
            raise cmd.error
        return cmd.result

    # -- API -----------------------------------------------------------------------------------
    def commit(self) -> dict[TopicPartitionKey, int]:
        """Commit what this member consumed on the partitions it owns; returns what was committed."""
        return dict(self._call("commit", timeout_s=120.0))

    def close(self) -> None:
        if self._thread.is_alive():
            self._call("close", True)
            self._thread.join(30)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


class RemoteMember(_Consuming):
    """A :class:`Member` hosted in its own process (:mod:`lab.member_host`).

    kafka-python members run this way: kafka-python 3.0 shares one IO loop among all clients of a
    process, and in the busy test process (Spark driver, HTTP servers, other members) that loop
    stalled long enough to keep a group rebalancing for minutes.
    """

    def __init__(self, bootstrap: str, group: str, topics: list[str], **kwargs: Any) -> None:
        self.group = group
        self.topics = topics
        self.client = kwargs.get("client", "confluent")
        self.protocol = kwargs.get("protocol", "classic")
        self.instance_id = kwargs.get("instance_id")
        self.positions = {}
        self.assignment = set()
        self._lock = threading.Lock()
        self._replies: dict[int, _Command] = {0: _Command("start")}
        self._next_id = 1
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        spec = {"bootstrap": bootstrap, "group": group, "topics": topics, **kwargs}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lab.member_host", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=_PROJECT_ROOT,
        )
        threading.Thread(target=self._read_stdout, name=f"remote-{group}", daemon=True).start()
        threading.Thread(target=self._read_stderr, name=f"remote-{group}-err", daemon=True).start()
        self.client_id = str(self._wait(0, 90.0))

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "state" in msg:
                self.positions = {(t, p): o for t, p, o in msg["state"]["positions"]}
                self.assignment = {(t, p) for t, p in msg["state"]["assignment"]}
                continue
            with self._lock:
                cmd = self._replies.get(msg["id"])
            if cmd is not None:
                cmd.result, cmd.error = msg.get("result"), None
                if "error" in msg:
                    cmd.error = RuntimeError(f"member {self.group}: {msg['error']}")
                cmd.done.set()
        with self._lock:  # the host is gone: nobody will answer what is still pending
            for cmd in self._replies.values():
                if not cmd.done.is_set():
                    cmd.error = RuntimeError(f"member host exited: {self.stderr_tail()}")
                    cmd.done.set()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip())

    def stderr_tail(self) -> str:
        return " | ".join(list(self._stderr)[-10:])

    def _wait(self, request_id: int, timeout_s: float) -> Any:
        cmd = self._replies[request_id]
        if not cmd.done.wait(timeout_s):
            raise TimeoutError(f"member {self.group}: no answer in {timeout_s}s: {self.stderr_tail()}")
        with self._lock:
            del self._replies[request_id]
        if cmd.error is not None:
            raise cmd.error
        return cmd.result

    def _call(self, name: str, timeout_s: float) -> Any:
        assert self.proc.stdin is not None
        with self._lock:
            request_id, self._next_id = self._next_id, self._next_id + 1
            self._replies[request_id] = _Command(name)
        self.proc.stdin.write(json.dumps({"id": request_id, "cmd": name}) + "\n")
        self.proc.stdin.flush()
        return self._wait(request_id, timeout_s)

    def commit(self) -> dict[TopicPartitionKey, int]:
        return {(t, p): o for t, p, o in self._call("commit", 150.0)}

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self._call("close", 60.0)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


def quiet_logger() -> Any:
    import logging

    log = logging.getLogger("coordinator_mirror.lab.librdkafka")
    log.setLevel(logging.ERROR)
    return log


class ChildMember:
    """A member in a separate Python process, so a scenario can SIGKILL it (a real crash)."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        session_timeout_ms: int = 3000,
        protocol: str = "classic",
    ) -> None:
        self.group = group
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lab.member",
                "--bootstrap",
                bootstrap,
                "--group",
                group,
                "--topic",
                topic,
                "--session-timeout-ms",
                str(session_timeout_ms),
                "--protocol",
                protocol,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.member_id = ""

    def wait_committed(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """Wait until the child reports it was assigned partitions and committed them."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"child member exited with {self.proc.wait()}")
            event = json.loads(line)
            if event.get("event") == "committed":
                self.member_id = event.get("member_id", "")
                return dict(event)
        raise TimeoutError("child member did not commit in time")

    def crash(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.crash()

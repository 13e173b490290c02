"""`coordinator-mirror demo` (plugged into the CLI by the lab): the mirror on a local Kafka with demo groups.

Starts the local broker (jvm/lib), then -- side by side -- the mirror and the demo's workload: one
group of each kind first (classic, KIP-848 consumer, share, streams), a rebalance storm, the rest
of the scenario library, and a round of scenarios again every ``--interval`` seconds, so the
broker's `__consumer_offsets` keeps receiving every kind of record.

Ctrl-C (SIGINT to the terminal's whole foreground process group) or SIGTERM stops everything with
one line and exit 0.  What the signal would otherwise reach and break is kept out of that group:
the workload runs in a process group of its own (``python -m lab.demo``, with its clients,
GroupProbe and Kafka Streams JVMs), as the broker does -- a SIGINT that killed a GroupProbe JVM
under a scenario failed the round with a traceback -- and the demo stops both itself, the workload
with SIGTERM to its group (its members are killed, not closed: the broker stops right after); the
mirror's JVMs ignore the signal and stop with the mirror (`streaming.app.run_cmd.serve`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lab.broker import BrokerSettings, LocalKafka
from lab.lab import Lab
from lab.proc import set_pdeathsig
from lab.scenarios import SCENARIOS, default_scenarios, run_scenarios
from streaming.app.logs import configure_logging
from streaming.app.run_cmd import serve
from streaming.settings import Settings, load_settings

log = logging.getLogger("coordinator_mirror.demo")

#: the scenarios that leave a group of each kind behind, run first: every kind shows at once
KINDS_FIRST: tuple[str, ...] = ("classic_range", "kip848_consumer", "share_group", "streams_group")


def demo_order(kafka_version: str) -> list[str]:
    """A round's scenarios: one group of each kind first, then the rest of the default set."""
    names = default_scenarios(kafka_version)
    first = [n for n in KINDS_FIRST if n in names]
    return first + [n for n in names if n not in first]


class DemoWorkload:
    """Scenario rounds against one broker, until ``stop``; the rebalance storm starts once the
    first round's groups of every kind are there."""

    def __init__(self, bootstrap: str, kafka_version: str, interval_s: float = 60.0) -> None:
        self.bootstrap = bootstrap
        self.kafka_version = kafka_version
        self.interval_s = interval_s
        self.rounds = 0
        self.failures = 0
        self._labs: list[Any] = []

    def run(self, stop: threading.Event) -> None:
        order = demo_order(self.kafka_version)
        first = [n for n in order if n in KINDS_FIRST]
        while not stop.is_set():
            lab = Lab(self.bootstrap, self.kafka_version, run_id=f"r{self.rounds}")
            self._labs.append(lab)
            try:
                if self.rounds == 0:
                    run_scenarios(lab, first)
                    # a long-lived stormy group for the rebalance dashboards and alerts
                    storm = Lab(self.bootstrap, self.kafka_version, run_id="storm")
                    self._labs.append(storm)
                    SCENARIOS["churn"].fn(storm)
                    run_scenarios(lab, [n for n in order if n not in first])
                else:
                    run_scenarios(lab, order)
            except Exception:  # a round can fail; keep the demo up
                self.failures += 1
                log.warning("demo scenario round %d failed", self.rounds, exc_info=True)
            self.rounds += 1
            # keep the last two rounds' members alive (Stable groups) and the storm, retire older ones
            while len(self._labs) > 3:
                self._labs.pop(0 if self._labs[0].run_id != "storm" else 1).close()
            stop.wait(self.interval_s)


class WorkloadProcess:
    """The workload in a process group of its own (``python -m lab.demo``): a terminal's SIGINT
    does not reach it, `stop` ends it and every process it started."""

    def __init__(self, bootstrap: str, kafka_version: str, interval_s: float, log_format: str) -> None:
        cmd = [sys.executable, "-m", "lab.demo", bootstrap, kafka_version, str(interval_s), log_format]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=set_pdeathsig,  # noqa: PLW1509 - only async-signal-safe prctl
        )

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM to the workload's group -- its members, GroupProbe and Kafka Streams JVMs with
        it --, then SIGKILL to whatever of the group is still there after ``timeout_s``."""
        pgid = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout_s)
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        self.proc.wait(10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    handlers: dict[str, Callable[[argparse.Namespace], int]],
) -> None:
    p = sub.add_parser(
        "demo",
        help="the mirror on an embedded local Kafka with demo consumer groups (Ctrl-C stops)",
        description="Start a local real Kafka broker, drive demo consumer groups against it "
        "continuously, and run the mirror on it with its HTTP API.",
    )
    p.add_argument(
        "--workdir", default="var/demo", help="broker data, checkpoint, events (default: var/demo)"
    )
    p.add_argument("--interval", type=float, default=60.0, help="seconds between scenario rounds")
    p.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0 = never)")
    p.add_argument("--http-port", type=int, default=8080, help="HTTP API / metrics port (default 8080)")
    p.add_argument("--bootstrap-servers", help="use this cluster instead of starting a local broker")
    p.add_argument(
        "--log-format", choices=["text", "json"], default="text", help="log lines as text or JSON objects"
    )
    handlers["demo"] = _run


def _settings(args: argparse.Namespace, bootstrap: str, workdir: Path) -> Settings:
    return load_settings(
        bootstrap_servers=bootstrap,
        checkpoint_location=str(workdir / "checkpoint"),
        trigger_interval_s=2.0,
        shuffle_partitions=2,
        http_port=args.http_port,
        events_path=workdir / "events",
        events_topic="coordinator-mirror-events",
        offsets_topic="coordinator-mirror-offsets",
        cluster_name="demo",
        log_format=args.log_format,
    )


class SessionStart:
    """The mirror's Spark session started in a thread while the broker starts: the two longest
    steps before ``/ready``, which need nothing of each other (the session's settings are the
    mirror's, its source's address aside).  In a thread, PySpark's SparkContext leaves the
    process's SIGINT handler alone (it installs its own only from the main thread).  The thread
    lives until `close`: py4j ties the JVM's side of the thread's connection to it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.session: Any = None
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-spark-start", daemon=True)

    def start(self) -> SessionStart:
        self._thread.start()
        return self

    def _run(self) -> None:
        from streaming.pipeline.session import mirror_session, warm_python_workers

        try:
            self.session = mirror_session(self.settings, self.settings.kafka_java_options())
        except BaseException as exc:  # `serve` starts one itself and says what is wrong
            self.error = exc
        finally:
            self._ready.set()
        if self.session is not None:
            # then the Python workers, while the mirror starts: a new checkpoint's first
            # micro-batch comes after ready (the driver folds the backfill, so the mirror warms
            # none) and would start them, late for the groups the demo's workload made meanwhile
            with contextlib.suppress(Exception):
                warm_python_workers(self.session)
        self._done.wait()

    def result(self) -> Any:
        """The session, or None when it could not start (`serve` then tries and reports why)."""
        self._ready.wait()
        if self.error is not None:
            log.debug("the demo's Spark session did not start", exc_info=self.error)
        return self.session

    def close(self) -> None:
        session = self.result()
        if session is not None:
            session.stop()
        self._done.set()
        self._thread.join(30)


class RetriedSend(logging.Filter):
    """Drops py4j's note that it re-sent a command on a fresh connection (`GatewayClient.send_command`:
    INFO, on the root logger, with a traceback): with the session started in a thread of its own
    its finalizer thread's first command meets a connection the JVM had closed, once per demo; the
    retry works, and one that fails is logged again, as an ERROR."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.name == "root"
            and record.levelno == logging.INFO
            and record.getMessage() == "Exception while sending command."
        )


class ArchiveInBackground:
    """The Spark driver's class-data archive (`streaming.pipeline.class_archive`), made once the
    demo's mirror is up when there is none, for the next start: ``make setup`` does not make it
    (~50 s of CPU), and a start with it reached ``/ready`` 7-12 s sooner (docs/performance.md).
    At the lowest CPU priority, in a process group of its own (Ctrl-C does not reach it; `stop`
    kills it: a half-made archive is never used, its size stamp comes last); one demo at a time
    makes it (a lock beside it); nothing when ``COORDINATOR_MIRROR_CLASS_ARCHIVE`` names one or
    ``off``, or the jars folder is not writable."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock: int | None = None

    def start(self, _mirror: object = None) -> None:
        import fcntl

        from streaming.pipeline import class_archive

        if os.environ.get(class_archive.ARCHIVE_ENV) is not None or class_archive.archive_path() is not None:
            return
        target = class_archive.default_path()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            lock = os.open(target.with_name(target.name + ".lock"), os.O_CREAT | os.O_RDWR, 0o644)
        except OSError:
            return
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another demo is making it
            os.close(lock)
            return
        self._lock = lock
        make = [sys.executable, "-m", "streaming.app.class_archive_cmd", "--output", str(target)]
        cmd = ["nice", "-n", "19", *make]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=set_pdeathsig,  # noqa: PLW1509 - only async-signal-safe prctl
        )
        log.info("making the Spark driver's class archive in the background, for the next start: %s", target)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(30)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


class QuietStop(threading.Event):
    """The demo's stop: `set` (the stop signal's handler, ``--duration``) first turns the Spark
    session's log off.  The mirror turns it off while it stops the query and -- on a session it was
    given, as this one -- back on after: Spark then logged the running batch's cancelled tasks
    (``Lost task ... TaskKilled``, ``Failed to cancel job group``) after the stop line.  The demo
    stops that session itself right after; the mirror's own lines (Python's log) still show."""

    session: Any = None

    def set(self) -> None:
        if not self.is_set() and self.session is not None:
            # from a thread of its own: `set` may run in a signal handler that interrupted the main
            # thread inside a py4j call, whose connection must not carry another command meanwhile
            quiet = threading.Thread(target=self._quiet, name="demo-quiet", daemon=True)
            quiet.start()
            quiet.join(10)
        super().set()

    def _quiet(self) -> None:
        with contextlib.suppress(Exception):  # a session already gone has nothing to say
            log4j = self.session._jvm.org.apache.logging.log4j
            log4j.core.config.Configurator.setRootLevel(log4j.Level.OFF)
        logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)


def _run(args: argparse.Namespace) -> int:
    configure_logging("INFO", args.log_format)
    logging.getLogger().addFilter(RetriedSend())
    # issue 37: where to look, first (the mirror is up a minute or two later)
    log.info("the web UI: http://localhost:%d/ui/groups (once the mirror is up)", args.http_port)
    stop = QuietStop()

    def _signal(signum: int, _frame: Any) -> None:
        # until the mirror starts (`serve` then takes the signals over): the same one line; the
        # step under way completes, then everything stops
        if not stop.is_set():
            log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _signal)
    signal.signal(signal.SIGINT, _signal)
    workdir = Path(args.workdir).resolve()
    broker: LocalKafka | None = None
    workload: WorkloadProcess | None = None
    archive = ArchiveInBackground()
    timer = None
    if args.duration:
        timer = threading.Timer(args.duration, stop.set)
        timer.daemon = True
        timer.start()
    # (the session's settings need an address: it never connects to it)
    session = SessionStart(_settings(args, args.bootstrap_servers or "localhost:9092", workdir)).start()
    try:
        bootstrap = args.bootstrap_servers
        if not bootstrap:
            # in this thread: the broker gets SIGKILL when the thread that started it ends
            # (PR_SET_PDEATHSIG, `lab.proc.set_pdeathsig`)
            broker = LocalKafka(BrokerSettings(offsets_topic_num_partitions=10), workdir / "kafka")
            log.info("starting a local Kafka broker in %s", broker.workdir)
            broker.start()
            bootstrap = broker.bootstrap
            log.info("Kafka %s up at %s (logs: %s)", broker.settings.kafka_version, bootstrap, broker.workdir)
            # a fresh broker has a fresh __consumer_offsets: an old checkpoint would point past its end
            shutil.rmtree(workdir / "checkpoint", ignore_errors=True)
        spark = stop.session = session.result()
        if stop.is_set():
            return 0
        version = broker.settings.kafka_version if broker else "4"
        workload = WorkloadProcess(bootstrap, version, args.interval, args.log_format)
        return serve(_settings(args, bootstrap, workdir), stop, on_started=archive.start, spark=spark)
    finally:
        if timer is not None:
            timer.cancel()
        archive.stop()
        session.close()
        if workload is not None:
            workload.stop()
        if broker is not None:
            broker.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """The workload process: ``python -m lab.demo BOOTSTRAP KAFKA_VERSION INTERVAL_S LOG_FORMAT``.
    Runs until SIGTERM (the demo sends it to the process group)."""
    bootstrap, kafka_version, interval_s, log_format = argv if argv is not None else sys.argv[1:]
    configure_logging("INFO", "json" if log_format == "json" else "text")
    DemoWorkload(bootstrap, kafka_version, float(interval_s)).run(threading.Event())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`coordinator-mirror demo` (plugged into the CLI by the lab): the mirror on a local Kafka with demo groups.

Starts the local broker (jvm/lib), runs the scenario library once, keeps a rebalance storm going
and re-runs a round of scenarios in the background every ``--interval`` seconds, so the broker's
`__consumer_offsets` keeps receiving every kind of record.  Ctrl-C (or SIGTERM) stops everything.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.broker import BrokerSettings, LocalKafka
from lab.lab import Lab
from lab.scenarios import SCENARIOS, run_scenarios
from streaming.app.logs import configure_logging
from streaming.app.run_cmd import serve
from streaming.settings import load_settings

log = logging.getLogger("coordinator_mirror.demo")


class DemoWorkload:
    """Scenario rounds in a background thread, against one broker."""

    def __init__(self, bootstrap: str, kafka_version: str, interval_s: float = 60.0) -> None:
        self.bootstrap = bootstrap
        self.kafka_version = kafka_version
        self.interval_s = interval_s
        self.rounds = 0
        self.failures = 0
        self._stop = threading.Event()
        self._labs: list[Any] = []
        self._thread = threading.Thread(target=self._run, name="demo-workload", daemon=True)

    def start(self) -> DemoWorkload:
        # a long-lived stormy group for the rebalance dashboards and alerts
        storm = Lab(self.bootstrap, self.kafka_version, run_id="storm")
        SCENARIOS["churn"].fn(storm)
        self._labs.append(storm)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            lab = Lab(self.bootstrap, self.kafka_version, run_id=f"r{self.rounds}")
            self._labs.append(lab)
            try:
                run_scenarios(lab)
            except Exception:  # a demo round can fail (e.g. Ctrl-C mid-way); keep the demo up
                self.failures += 1
                log.warning("demo scenario round %d failed", self.rounds, exc_info=True)
            self.rounds += 1
            # keep the last two rounds' members alive (Stable groups), retire older ones
            while len(self._labs) > 3:
                self._labs.pop(1).close()
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        for lab in self._labs:
            lab.close()


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


def _run(args: argparse.Namespace) -> int:
    configure_logging("INFO", args.log_format)
    # issue 37: where to look, first (the mirror is up a minute or two later)
    log.info("the web UI: http://localhost:%d/ui/groups (once the mirror is up)", args.http_port)
    stop = threading.Event()
    workdir = Path(args.workdir).resolve()
    broker = None
    bootstrap = args.bootstrap_servers
    if not bootstrap:
        broker = LocalKafka(BrokerSettings(offsets_topic_num_partitions=10), workdir / "kafka")
        log.info("starting a local Kafka broker in %s", broker.workdir)
        broker.start()
        bootstrap = broker.bootstrap
        log.info("Kafka %s up at %s (logs: %s)", broker.settings.kafka_version, bootstrap, broker.workdir)
    # a fresh broker has a fresh __consumer_offsets: an old checkpoint would point past its end
    checkpoint = workdir / "checkpoint"
    if broker is not None:
        shutil.rmtree(checkpoint, ignore_errors=True)
    settings = load_settings(
        bootstrap_servers=bootstrap,
        checkpoint_location=str(checkpoint),
        trigger_interval_s=2.0,
        shuffle_partitions=2,
        http_port=args.http_port,
        events_path=workdir / "events",
        events_topic="coordinator-mirror-events",
        offsets_topic="coordinator-mirror-offsets",
        cluster_name="demo",
        log_format=args.log_format,
    )
    workload = DemoWorkload(bootstrap, broker.settings.kafka_version if broker else "4", args.interval)
    timer = None
    if args.duration:
        timer = threading.Timer(args.duration, stop.set)
        timer.daemon = True
        timer.start()
    try:
        workload.start()
        return serve(settings, stop)
    finally:
        if timer is not None:
            timer.cancel()
        log.info("stopping the demo workload (%d scenario rounds ran)", workload.rounds)
        workload.stop()
        if broker is not None:
            broker.stop()

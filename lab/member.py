"""A group member in its own process, so that scenarios can kill it with SIGKILL (a real crash).

Joins ``--group``, consumes ``--topic`` to its current end, commits, prints one JSON line
``{"event": "committed", ...}`` and then keeps polling (heartbeating) until it is killed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    from confluent_kafka import Consumer

    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--session-timeout-ms", type=int, default=3000)
    ap.add_argument("--protocol", default="classic")
    args = ap.parse_args()
    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": f"cm-child-{args.group}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "group.protocol": args.protocol,
        "log_level": 0,
    }
    if args.protocol == "classic":
        conf.update({"session.timeout.ms": args.session_timeout_ms, "heartbeat.interval.ms": 500})
    consumer = Consumer(conf)
    consumer.subscribe([args.topic])
    positions: dict[int, int] = {}
    committed = False
    idle_since = time.monotonic()
    while True:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            positions[int(msg.partition() or 0)] = int(msg.offset() or 0) + 1
            idle_since = time.monotonic()
            continue
        # Commit once the member owns partitions and has been idle (caught up) for a moment.
        if not committed and consumer.assignment() and time.monotonic() - idle_since > 1.0:
            from confluent_kafka import TopicPartition

            owned = {tp.partition for tp in consumer.assignment()}
            offsets = [TopicPartition(args.topic, p, o) for p, o in positions.items() if p in owned]
            if offsets:
                consumer.commit(offsets=offsets, asynchronous=False)
            meta = consumer.consumer_group_metadata()
            print(
                json.dumps(
                    {
                        "event": "committed",
                        "member_id": getattr(meta, "member_id", ""),
                        "offsets": {str(tp.partition): tp.offset for tp in offsets},
                    }
                ),
                flush=True,
            )
            committed = True


if __name__ == "__main__":
    sys.exit(main())

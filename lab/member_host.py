"""Host one lab :class:`~lab.members.Member` in its own Python process.

kafka-python 3.0 runs every client of a process on one shared IO loop. In a process that is busy
with other work (a Spark driver, py4j callbacks, HTTP servers, other members) that loop stalls,
heartbeats and JoinGroup rounds go late, and a member can stay in a rebalance for minutes. A member
hosted here has the loop to itself, as a real consumer process would.

Protocol (JSON lines): argv[1] is the member's keyword arguments. The host writes
``{"state": {"positions": [[t, p, o]...], "assignment": [[t, p]...]}}`` whenever those change and
answers each command read from stdin (``{"id": n, "cmd": "commit" | "close"}``) with
``{"id": n, "result": ...}`` or ``{"id": n, "error": "Type: message"}``.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any


def _write(lock: threading.Lock, obj: dict[str, Any]) -> None:
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def main() -> int:
    from lab.members import Member

    kwargs = json.loads(sys.argv[1])
    lock = threading.Lock()
    try:
        member = Member(**kwargs)
    except Exception as exc:
        _write(lock, {"id": 0, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    _write(lock, {"id": 0, "result": member.client_id})
    stop = threading.Event()

    def publish() -> None:
        last: Any = None
        while not stop.wait(0.05):
            state = {
                "positions": sorted([t, p, o] for (t, p), o in dict(member.positions).items()),
                "assignment": sorted([t, p] for t, p in set(member.assignment)),
            }
            if state != last:
                _write(lock, {"state": state})
                last = state

    publisher = threading.Thread(target=publish, name="member-host-state", daemon=True)
    publisher.start()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["cmd"] == "commit":
                result: Any = sorted([t, p, o] for (t, p), o in member.commit().items())
            elif request["cmd"] == "close":
                member.close()
                result = None
            else:
                raise ValueError(f"unknown command {request['cmd']!r}")
        except Exception as exc:
            _write(lock, {"id": request["id"], "error": f"{type(exc).__name__}: {exc}"})
        else:
            _write(lock, {"id": request["id"], "result": result})
        if request["cmd"] == "close":
            break
    stop.set()
    publisher.join(1)
    if member.alive:
        member.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

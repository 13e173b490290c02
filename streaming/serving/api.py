"""The mirror's HTTP server: the JSON API over the snapshot store, readiness, health and /metrics.

    GET /groups            every group: id, kind, state, generation/epoch, members, offsets, last change
    GET /groups/{id}       everything the mirror holds for one group (offsets with expires_at)
    GET /errors            recent records the mirror could not decode, with partition and offset
    GET /ready             200 once caught up with the end of __consumer_offsets seen at start, else 503
    GET /healthz           200 while the streaming query runs, 500 once it failed
    GET /metrics           Prometheus exposition

Group ids are percent-encoded in the path (they may contain "/" or any Unicode).  Unknown routes
and unknown groups answer 404 with a JSON body.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from streaming.serving.store import SnapshotStore

log = logging.getLogger("coordinator_mirror.http")


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def with_iso_times(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Add ``expires_at`` (ISO-8601) beside every offset's ``expires_at_ms`` for humans."""
    offsets = snapshot.get("offsets")
    if not isinstance(offsets, list):
        return snapshot
    out = dict(snapshot)
    out["offsets"] = [{**o, "expires_at": _iso(o.get("expires_at_ms"))} for o in offsets]
    return out


class MirrorHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        store: SnapshotStore,
        metrics: Callable[[], tuple[bytes, str]] | None = None,
        health: Callable[[], tuple[bool, dict[str, Any]]] | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        self.store = store
        self.metrics = metrics
        self.health = health or (lambda: (True, {}))

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host if isinstance(host, str) else host.decode()
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"

    def start(self) -> MirrorHTTPServer:
        threading.Thread(target=self.serve_forever, name="mirror-http", daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: MirrorHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        try:
            if path == "/groups":
                self._groups(parse_qs(url.query))
            elif path.startswith("/groups/"):
                self._group(unquote(path[len("/groups/") :]))
            elif path == "/ready":
                self._ready()
            elif path == "/healthz":
                ok, detail = self.server.health()
                self._json(200 if ok else 500, {"healthy": ok, **detail})
            elif path == "/errors":
                self._json(200, {"errors": list(self.server.store.errors)})
            elif path == "/metrics" and self.server.metrics is not None:
                body, content_type = self.server.metrics()
                self._send(200, body, content_type)
            elif path == "/":
                self._json(
                    200,
                    {"endpoints": ["/groups", "/groups/{id}", "/errors", "/ready", "/healthz", "/metrics"]},
                )
            else:
                self._json(404, {"error": "not_found", "path": url.path})
        except BrokenPipeError:
            pass
        except Exception as exc:  # one bad request must not take the server down
            log.exception("HTTP %s failed", self.path)
            self._json(500, {"error": "internal", "detail": repr(exc)})

    def _ready(self) -> None:
        """200 once caught up and the source answers; else 503 with ``reason``: "waiting for
        __consumer_offsets" (a new cluster), "source unavailable: ..." (the cluster does not
        answer), "query restarting: ..." or "catching up"."""
        store = self.server.store
        r = store.readiness
        status = store.status
        body = r.to_json()
        reason = None
        if status.waiting_reason:
            reason = status.waiting_reason
        elif not status.source_up:
            reason = f"source unavailable: {status.source_error}"
        elif store.failure:
            reason = f"query restarting: {store.failure}"
        elif not r.ready:
            reason = "catching up"
        body["ready"] = reason is None
        body["reason"] = reason
        body["source_up"] = status.source_up
        self._json(200 if reason is None else 503, body)

    def _groups(self, query: dict[str, list[str]]) -> None:
        rows = self.server.store.summaries()
        for name in ("kind", "state"):
            if name in query:
                wanted = set(query[name])
                rows = [r for r in rows if r.get(name) in wanted]
        self._json(200, {"groups": rows, "count": len(rows)})

    def _group(self, group_id: str) -> None:
        snapshot = self.server.store.group(group_id)
        if snapshot is None:
            self._json(404, {"error": "group_not_found", "group_id": group_id})
        else:
            self._json(200, with_iso_times(snapshot))

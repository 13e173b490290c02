"""The mirror's HTTP server: the JSON API over the snapshot store, readiness, health and /metrics.

    GET /groups            every group: id, kind, state, generation/epoch, members, offsets, last change
    GET /groups/{id}       everything the mirror holds for one group (offsets with expires_at)
    GET /errors            recent records the mirror could not decode, with partition and offset
    GET /ready             200 once caught up with the end of __consumer_offsets seen at start and the
                           source answers, else 503 with a reason
    GET /healthz           200 while the streaming query runs, 500 once it failed
    GET /metrics           Prometheus exposition (gzip when asked; OpenMetrics when enabled and asked)
    GET /openapi.yaml      this API described in OpenAPI 3 (`streaming/serving/openapi.yaml`)
    GET /groups/{id}/lag   lag per partition (messages, seconds, owner) and the sample time
    GET /groups/{id}/timeline  the group's newest change events, newest first
    GET /groups/{id}/offsets?at=<time>  committed offsets as of a moment and the reset plan (issue 38)
    GET /groups/{id}/history   the group's lag over the last hour, per group and partition (issue 37)
    GET /ui/groups, /ui/group  the web UI's pages (issue 37, `streaming.serving.ui`); /ui/config, /ui/assets
    GET /v3/kafka/...      Burrow's cluster, topic and consumer paths (`streaming.serving.burrow`)
    GET /burrow/admin      Burrow's liveness ("GOOD"); /burrow/admin/ready its readiness ("READY")

Group ids are percent-encoded in the path (they may contain "/" or any Unicode).  Unknown routes
and unknown groups answer 404 with a JSON body; other methods 405.

Served by uvicorn (ASGI, h11) running Starlette in a thread with its own event loop; the endpoints
are plain functions that Starlette runs in its thread pool, so a 150 MB ``/metrics`` render or its
gzip never blocks the loop.  ``ROUTES`` is the one routing table.  What the standard library's
``http.server`` lacked and this adds: a deadline for a connection to send a complete request
(`_TimedH11`: idle and slow-header connections are closed), a keep-alive idle timeout, bounded
request heads, optional TLS and bearer/basic authentication read from files, gzip.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hmac
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import Server

from streaming.serving.group_index import BadParameterError, GroupsQuery, Joined, answer
from streaming.serving.insights import with_commit_rate
from streaming.serving.render import resolve_topic_ids
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.serving.ui import UI_HEADERS, Asset, UiContext

if TYPE_CHECKING:
    from streaming.health.lag_history import LagHistory

log = logging.getLogger("coordinator_mirror.http")

OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")
#: a Kafka group id is at most 32,767 bytes; percent-encoded up to 3x that, plus the rest of the head
MAX_REQUEST_HEAD_BYTES = 128 * 1024
_HEAD_TOO_LONG_BODY = b'{"error":"request_head_too_large"}'
#: the answer to a longer head (`_TimedH11`), then the connection is closed
HEAD_TOO_LONG = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n" % len(_HEAD_TOO_LONG_BODY)
) + _HEAD_TOO_LONG_BODY
#: bodies at least this long are gzipped for clients that accept it
GZIP_MIN_BYTES = 1024
#: level 1: ~4x smaller exposition text at a fraction of level 6's time (bench/series.py)
GZIP_LEVEL = 1
#: larger bodies are written in chunks of this size (see `_send`; 16 MiB chunks took 5x as long)
STREAM_CHUNK_BYTES = 1 << 20
OPENMETRICS = "application/openmetrics-text"

Json = dict[str, Any]
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


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


# --------------------------------------------------------------------------------- authentication
class AuthError(ValueError):
    """A credentials file is missing, empty or malformed (names the file, never its content)."""


@dataclass(frozen=True)
class Credentials:
    """What a request must carry: a bearer token, or one of the basic-auth ``user:password`` pairs.
    Read from files (a mounted Kubernetes Secret), never from a flag a `ps` would show."""

    scheme: str  # "Bearer" | "Basic"
    secrets: tuple[bytes, ...]

    @classmethod
    def bearer_from_file(cls, path: Path) -> Credentials:
        token = _read(path).strip()
        if not token or any(c.isspace() for c in token):
            raise AuthError(f"http_auth_token_file: {path} must hold one token (no whitespace)")
        return cls("Bearer", (token.encode(),))

    @classmethod
    def basic_from_file(cls, path: Path) -> Credentials:
        pairs = [ln.strip() for ln in _read(path).splitlines() if ln.strip() and not ln.startswith("#")]
        if not pairs or any(":" not in p or p.startswith(":") for p in pairs):
            raise AuthError(f"http_basic_auth_file: {path} must hold `user:password` lines")
        return cls("Basic", tuple(base64.b64encode(p.encode()) for p in pairs))

    def allows(self, header: str | None) -> bool:
        if not header:
            return False
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != self.scheme.lower():
            return False
        given = value.strip().encode("latin-1", "replace")
        # compare with every secret (constant time per comparison), no early exit on a match
        ok = False
        for secret in self.secrets:
            ok |= hmac.compare_digest(given, secret)
        return ok


def _read(path: Path) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise AuthError(f"{path}: cannot read the credentials file ({exc.strerror})") from None


class _Authenticate:
    """ASGI middleware: every request carries the credentials, but the open paths (probes)."""

    def __init__(self, app: ASGIApp, credentials: Credentials, open_paths: frozenset[str]) -> None:
        self.app = app
        self.credentials = credentials
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") in self.open_paths:
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value.decode("latin-1")
                break
        if self.credentials.allows(header):
            await self.app(scope, receive, send)
            return
        challenge = f'{self.credentials.scheme} realm="coordinator-mirror"'
        body = b'{"error":"unauthorized"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", challenge.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


# --------------------------------------------------------------------------------------- handlers
@dataclass
class ClusterView:
    """What the endpoints read of one mirrored cluster: its groups, its status, its lag routes."""

    store: SnapshotStore
    #: the cluster's own status (readiness, source, query, parts): ``/ready``
    status: MirrorStatus = field(default_factory=MirrorStatus)
    #: the lag routes (``/groups/{id}/lag``, Burrow's ``/v3/kafka/...``): raw path -> (status, JSON),
    #: None when the path is not theirs (`streaming.serving.burrow.lag_route`)
    lag_route: Callable[[str], tuple[int, Any] | None] | None = None
    #: topic id -> name from cluster metadata, applied to ``GET /groups/{id}``
    topic_names: Callable[[], Mapping[str, str]] | None = None
    #: a share group's delivery state (`streaming.serving.share.share_view`), None: not read
    share_state: Callable[[str], dict[str, Any] | None] | None = None
    #: ``GET /groups/{id}/offsets?at=`` (see `OffsetsAt`); None: the offset history is off
    offsets_at: OffsetsAt | None = None
    #: each group's lag over the last hour (``/groups/{id}/history``, the lag columns of
    #: ``GET /groups``: issue 37), None: not kept
    history: LagHistory | None = None
    #: group id -> Burrow's latest status code (`streaming.health.rules.STATUS_NAMES`)
    statuses: Callable[[], Mapping[str, int]] | None = None


@dataclass
class ApiContext:
    """What the endpoints read: each mirrored cluster's view (in the settings' order; one for a
    single cluster) and the process's callbacks."""

    clusters: dict[str, ClusterView]
    metrics: Callable[[], tuple[bytes, str]] | None = None
    health: Callable[[], tuple[bool, dict[str, Any]]] = field(default=lambda: (True, {}))
    openmetrics: Callable[[], tuple[bytes, str]] | None = None
    #: the web UI's pages and settings (issue 37); None: not served
    ui: UiContext | None = None

    @property
    def single(self) -> bool:
        return len(self.clusters) == 1


def _ctx(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.api
    return ctx


def _accepts(request: Request, token: str) -> bool:
    """Does a comma-separated Accept/Accept-Encoding header list ``token`` with a non-zero q?"""
    header = request.headers.get("accept-encoding" if token == "gzip" else "accept", "")
    for item in header.split(","):
        name, *params = (p.strip() for p in item.split(";"))
        if name.lower() == token:
            return not any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params)
    return False


def _send(request: Request, status: int, body: bytes, content_type: str) -> Response:
    headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding"}
    if len(body) >= GZIP_MIN_BYTES and _accepts(request, "gzip"):
        body = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
        headers["Content-Encoding"] = "gzip"
    if len(body) > STREAM_CHUNK_BYTES:
        # in chunks, each written after the previous one drained: handed over whole, asyncio's
        # transport (Python 3.11) buffers it in a bytearray and deletes every sent piece from its
        # front -- quadratic, 10 s instead of 7 s for a 150 MB /metrics (bench/series.py --http)
        return _ChunkedResponse(body, status, headers=headers, media_type=content_type)
    return Response(body, status, headers=headers, media_type=content_type)


class _ChunkedResponse(Response):
    """The body (Content-Length known) sent as slices of itself, each after the previous drained."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        if scope.get("method") == "HEAD":
            await send({"type": "http.response.body", "body": b""})
            return
        view = memoryview(self.body)
        for start in range(0, len(view), STREAM_CHUNK_BYTES):
            end = start + STREAM_CHUNK_BYTES
            await send({"type": "http.response.body", "body": view[start:end], "more_body": end < len(view)})


def _json(request: Request, status: int, obj: Any) -> Response:
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    return _send(request, status, body, "application/json")


def _selected(request: Request) -> tuple[list[tuple[str, ClusterView]], Response | None]:
    """The clusters ``?cluster=`` names (repeatable), or all; a 404 naming the known clusters when
    one is not mirrored here."""
    ctx = _ctx(request)
    wanted = request.query_params.getlist("cluster")
    unknown = [c for c in wanted if c not in ctx.clusters]
    if unknown:
        body = {"error": "cluster_not_found", "cluster": unknown[0], "clusters": list(ctx.clusters)}
        return [], _json(request, 404, body)
    return [(n, v) for n, v in ctx.clusters.items() if not wanted or n in wanted], None


def _holding(request: Request, group_id: str) -> tuple[str, ClusterView] | Response:
    """The cluster whose group ``group_id`` is: ``?cluster=`` when given, else the one cluster
    that holds it.  404 when none does, 409 when several do (the answer lists them: ask again with
    ``?cluster=``)."""
    selected, error = _selected(request)
    if error is not None:
        return error
    if len(selected) == 1:
        return selected[0]
    holders = [(n, v) for n, v in selected if group_id in v.store]
    if len(holders) == 1:
        return holders[0]
    if not holders:
        return _json(request, 404, {"error": "group_not_found", "group_id": group_id})
    names = [n for n, _ in holders]
    return _json(
        request,
        409,
        {
            "error": "group_in_several_clusters",
            "group_id": group_id,
            "clusters": names,
            "message": "a group of this id exists in several mirrored clusters: ask with ?cluster=<name>",
        },
    )


def _groups(request: Request) -> Response:
    """Every group of the selected clusters, or a page of those matching the filters
    (`streaming.serving.group_index`)."""
    selected, error = _selected(request)
    if error is not None:
        return error
    try:
        query = GroupsQuery.parse(request.query_params.getlist)
    except BadParameterError as exc:
        return _json(request, 400, exc.to_json())
    joined = [
        (
            view.store.summaries(),
            Joined(
                name,
                view.history.latest_all() if view.history is not None else {},
                dict(view.statuses()) if view.statuses is not None else {},
            ),
        )
        for name, view in selected
    ]
    return _json(request, 200, answer(joined, query))


def _raw_path(request: Request) -> str:
    """The path as sent (still percent-encoded): "%2F" inside an id stays part of it, whatever the
    router decoded."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    path = raw.decode("latin-1").split("?", 1)[0]
    return path.rstrip("/") if len(path) > 1 and not path.startswith("/groups/") else path


def _group(request: Request) -> Response:
    group_id = unquote(_raw_path(request)[len("/groups/") :], errors="replace")
    held = _holding(request, group_id)
    if isinstance(held, Response):
        return held
    name, view = held
    snapshot = view.store.group(group_id)
    if snapshot is None:
        return _json(request, 404, {"error": "group_not_found", "group_id": group_id})
    if view.topic_names is not None:
        snapshot = resolve_topic_ids(snapshot, view.topic_names())
    share_state = view.share_state(group_id) if view.share_state is not None else None
    if share_state is not None:  # a share group's delivery state (`streaming.serving.share`)
        snapshot = {**snapshot, "share_state": share_state}
    return _json(request, 200, with_commit_rate(with_iso_times({**snapshot, "cluster": name})))


def _timeline(request: Request) -> Response:
    """``/groups/{id}/timeline``: the group's newest change events, newest first (issue 26).  A
    group id ending in an encoded "%2Ftimeline" is a group, not its timeline."""
    path = _raw_path(request)
    if not path.endswith("/timeline"):
        return _group(request)
    group_id = unquote(path[len("/groups/") : -len("/timeline")], errors="replace")
    limit_text = request.query_params.get("limit")
    limit = int(limit_text) if limit_text and limit_text.isdigit() else None
    held = _holding(request, group_id)
    if isinstance(held, Response):
        return held
    store = held[1].store
    timeline = store.timeline
    events = timeline.events(group_id, limit)
    if events is None and group_id in store:
        events = []  # a group held with no event kept (yet, or the timeline off): none, not a 404
    if events is None:
        return _json(request, 404, {"error": "group_not_found", "group_id": group_id})
    return _json(request, 200, {"group_id": group_id, "kept": timeline.limit, "events": events})


def _history(request: Request) -> Response:
    """``/groups/{id}/history``: the group's lag over the last ``lag_history_minutes``
    (`streaming.health.lag_history`).  A group id ending in an encoded "%2Fhistory" is a group."""
    path = _raw_path(request)
    if not path.endswith("/history"):
        return _group(request)
    group_id = unquote(path[len("/groups/") : -len("/history")], errors="replace")
    held = _holding(request, group_id)
    if isinstance(held, Response):
        return held
    name, view = held
    if view.history is None:
        return _json(request, 404, {"error": "not_found", "path": request.url.path})
    body = view.history.series(group_id)
    if body is None and view.store.group(group_id) is not None:
        # held, not measured by a lag round yet: no point, and why
        body = {**view.history.empty(group_id), "reason": "no_lag"}
    if body is None:
        return _json(
            request,
            404,
            {
                "error": "group_not_found",
                "group_id": group_id,
                "reason": "unknown",
                "message": "the mirror has no such group",
            },
        )
    return _json(request, 200, {**body, "cluster": name})


def _lag(request: Request) -> Response:
    """``/groups/{id}/lag`` and Burrow's ``/v3/kafka/...``: answered by the lag hook.  A group id
    ending in an encoded "%2Flag" is a group, not its lag."""
    ctx = _ctx(request)
    path = _raw_path(request)
    if path.startswith("/groups/") and not path.endswith("/lag"):
        return _group(request)
    if path.startswith("/groups/"):
        held = _holding(request, unquote(path[len("/groups/") : -len("/lag")], errors="replace"))
        if isinstance(held, Response):
            return held
        view = held[1]
    else:  # Burrow's: /v3/kafka lists every cluster, /v3/kafka/{cluster}/... is that cluster's
        parts = path.strip("/").split("/")
        first = next(iter(ctx.clusters.values()))
        # a cluster not mirrored here: Burrow's own 404, from any cluster's Burrow
        view = ctx.clusters.get(unquote(parts[2]), first) if len(parts) > 2 else first
    routed = view.lag_route(path) if view.lag_route is not None else None
    if routed is None:
        return _json(request, 404, {"error": "not_found", "path": request.url.path})
    status, body = routed
    if path.rstrip("/") == "/v3/kafka" and isinstance(body, dict):
        body = {**body, "clusters": list(ctx.clusters)}
    return _json(request, status, body)


# ------------------------------------------------ the web UI (issue 37, `streaming.serving.ui`)
def _ui(request: Request) -> UiContext | None:
    ui = _ctx(request).ui
    return ui if ui is not None and ui.enabled else None


def _ui_send(request: Request, asset: Asset) -> Response:
    """A page or file of the UI: its policy headers, revalidated by ETag (no build step names
    files by content, so browsers ask again and get a 304 while it is unchanged)."""
    if asset.etag in {t.strip() for t in request.headers.get("if-none-match", "").split(",")}:
        return Response(
            status_code=304, headers={**UI_HEADERS, "ETag": asset.etag, "Cache-Control": "no-cache"}
        )
    response = _send(request, 200, asset.body, asset.content_type)
    response.headers.update({**UI_HEADERS, "ETag": asset.etag, "Cache-Control": "no-cache"})
    return response


def _ui_not_found(request: Request) -> Response:
    return _json(request, 404, {"error": "not_found", "path": request.url.path})


def _ui_root(request: Request) -> Response:
    """``/ui``: to the groups list (relative, so that a path prefix of a proxy in front stays)."""
    if _ui(request) is None:
        return _ui_not_found(request)
    target = "groups" if _raw_path(request).endswith("/") else "ui/groups"
    return Response(status_code=302, headers={**UI_HEADERS, "Location": target, "Cache-Control": "no-store"})


def _ui_page(request: Request) -> Response:
    ui = _ui(request)
    raw = request.scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0]
    name = request.url.path.rstrip("/").rsplit("/", 1)[-1]
    if ui is None or name not in ui.pages:
        return _ui_not_found(request)
    if raw.endswith("/"):  # /ui/groups/: its relative links would miss; the page itself instead
        query = request.url.query
        location = f"../{name}" + (f"?{query}" if query else "")
        return Response(
            status_code=302, headers={**UI_HEADERS, "Location": location, "Cache-Control": "no-store"}
        )
    return _ui_send(request, ui.pages[name])


def _ui_asset(request: Request) -> Response:
    ui = _ui(request)
    name = request.url.path[len("/ui/assets/") :]
    asset = ui.assets.get(name) if ui is not None else None
    if asset is None:
        return _ui_not_found(request)
    return _ui_send(request, asset)


def _ui_config(request: Request) -> Response:
    ui = _ui(request)
    if ui is None:
        return _ui_not_found(request)
    return _json(request, 200, ui.config(list(_ctx(request).clusters)))


# ------------------------------------------------------------ issue 38: offsets as of a moment
#: ``GET /groups/{id}/offsets?at=<time>``: (group id, the ``at`` parameter) -> (HTTP status, JSON)
#: (`streaming.serving.reset_plan.offsets_route` over the mirror's offset history)
OffsetsAt = Callable[[str, str | None], tuple[int, Any]]


def _offsets_at(request: Request) -> Response:
    """``/groups/{id}/offsets?at=``: the group's committed offsets at a moment and the reset plan
    back to them.  A group id ending in an encoded "%2Foffsets" is a group, not this route."""
    path = _raw_path(request)
    if not path.endswith("/offsets"):
        return _group(request)
    group_id = unquote(path[len("/groups/") : -len("/offsets")], errors="replace")
    held = _holding(request, group_id)
    if isinstance(held, Response):
        return held
    hook = held[1].offsets_at
    if hook is None:
        return _json(request, 404, {"error": "offset_history_off", "group_id": group_id})
    return _json(request, *hook(group_id, request.query_params.get("at")))


# ----------------------------------------------------------------------------------- readiness
def ready_body(status: MirrorStatus) -> tuple[bool, dict[str, Any]]:
    """Ready once caught up and the source answers; else ``reason``: "waiting for
    __consumer_offsets" (a new cluster), "source unavailable: ..." (the cluster does not answer),
    "resuming: ..." (it answers again, the query has shown no progress since), "query
    restarting: ..." or "catching up".  ``parts``: the health of the parts beside the main
    query (the share-state query), reported and never gating readiness."""
    view = status.view()
    body = status.readiness_json()
    reason = None
    if view.waiting_reason:
        reason = view.waiting_reason
    elif not view.source_up:
        reason = f"source unavailable: {view.source_error}"
    elif view.resuming:
        # the lag round reaches the cluster again, but the query may still be blocked in the
        # offset fetch it was in when the cluster went away: not ready until it shows progress
        reason = "resuming: the cluster answers again, the query has not made progress since"
    elif view.failure:
        reason = f"query restarting: {view.failure}"
    elif not body["ready"]:
        reason = "catching up"
    body["ready"] = reason is None
    body["reason"] = reason
    body["source_up"] = view.source_up
    body["parts"] = {name: health.to_json() for name, health in sorted(view.parts.items())}
    return reason is None, body


def fleet_ready_body(clusters: Mapping[str, MirrorStatus]) -> tuple[bool, dict[str, Any]]:
    """``/ready`` of a process mirroring several clusters: ready once at least one cluster is ready
    and none is catching up -- a cluster that is down, refuses the mirror or waits for its topic is
    reported in ``clusters`` and does not hold the others' readiness (a pod serving two healthy
    clusters stays in its Service while the third is down).  ``/ready?cluster=NAME``: that
    cluster's own readiness, as a single cluster's."""
    bodies = {name: ready_body(status) for name, status in clusters.items()}
    ready_ones = [n for n, (ok, _) in bodies.items() if ok]
    catching_up = [n for n, (_, b) in bodies.items() if b["reason"] == "catching up"]
    reason = None
    if catching_up:
        reason = f"catching up: {', '.join(catching_up)}"
    elif not ready_ones:
        reason = "no cluster is ready"
    body = {
        "ready": reason is None,
        "reason": reason,
        "clusters": {n: b for n, (_, b) in bodies.items()},
    }
    return reason is None, body


def _ready(request: Request) -> Response:
    ctx = _ctx(request)
    selected, error = _selected(request)
    if error is not None:
        return error
    if len(selected) == 1 and (ctx.single or request.query_params.get("cluster")):
        ok, body = ready_body(selected[0][1].status)
    else:
        ok, body = fleet_ready_body({n: v.status for n, v in selected})
    return _json(request, 200 if ok else 503, body)


def _healthz(request: Request) -> Response:
    ok, detail = _ctx(request).health()
    return _json(request, 200 if ok else 500, {"healthy": ok, **detail})


def _errors(request: Request) -> Response:
    selected, error = _selected(request)
    if error is not None:
        return error
    rows = [{**e, "cluster": name} for name, view in selected for e in view.store.errors_list()]
    return _json(request, 200, {"errors": rows})


def _metrics(request: Request) -> Response:
    ctx = _ctx(request)
    if ctx.openmetrics is not None and _accepts(request, OPENMETRICS):
        body, content_type = ctx.openmetrics()
    elif ctx.metrics is not None:
        body, content_type = ctx.metrics()
    else:
        return _json(request, 404, {"error": "not_found", "path": request.url.path})
    return _send(request, 200, body, content_type)


def _openapi(request: Request) -> Response:
    return _send(request, 200, OPENAPI_PATH.read_bytes(), "application/yaml")


def _burrow_admin(request: Request) -> Response:
    """Burrow's liveness path (what probes and load balancers set up for Burrow call): ``GOOD``."""
    return _send(request, 200, b"GOOD", "text/plain; charset=utf-8")


def _burrow_ready(request: Request) -> Response:
    """Burrow's readiness path: ``READY`` when ``/ready`` is 200, else 503 ``STARTING``."""
    ctx = _ctx(request)
    statuses = {n: v.status for n, v in ctx.clusters.items()}
    ok, _ = ready_body(next(iter(statuses.values()))) if ctx.single else fleet_ready_body(statuses)
    return _send(request, 200 if ok else 503, b"READY" if ok else b"STARTING", "text/plain; charset=utf-8")


def _index(request: Request) -> Response:
    return _json(request, 200, {"endpoints": [r.path.replace(":path", "") for r in ROUTES if r.path != "/"]})


#: THE routing table: (path, endpoint, open to probes when authentication is on)
ROUTE_TABLE: tuple[tuple[str, Callable[[Request], Response], bool], ...] = (
    ("/groups", _groups, False),
    ("/groups/{id:path}/lag", _lag, False),
    ("/groups/{id:path}/timeline", _timeline, False),
    ("/groups/{id:path}/offsets", _offsets_at, False),  # issue 38
    ("/groups/{id:path}/history", _history, False),  # issue 37: the UI's charts (before the group)
    ("/groups/{id:path}", _group, False),
    ("/errors", _errors, False),
    ("/ready", _ready, True),
    ("/healthz", _healthz, True),
    ("/metrics", _metrics, False),
    ("/openapi.yaml", _openapi, False),
    # Burrow's paths (the suffixed ones first: a group id may hold "/")
    ("/burrow/admin", _burrow_admin, True),
    ("/burrow/admin/ready", _burrow_ready, True),
    ("/v3/kafka", _lag, False),
    ("/v3/kafka/{cluster}", _lag, False),
    ("/v3/kafka/{cluster}/topic", _lag, False),
    ("/v3/kafka/{cluster}/topic/{topic}/consumers", _lag, False),
    ("/v3/kafka/{cluster}/topic/{topic}", _lag, False),
    ("/v3/kafka/{cluster}/consumer", _lag, False),
    ("/v3/kafka/{cluster}/consumer/{group:path}/status", _lag, False),
    ("/v3/kafka/{cluster}/consumer/{group:path}/lag", _lag, False),
    ("/v3/kafka/{cluster}/consumer/{group:path}", _lag, False),
    # -- the web UI (issue 37, `streaming.serving.ui`): its pages, files and settings ---------------
    ("/ui", _ui_root, False),
    ("/ui/groups", _ui_page, False),
    ("/ui/group", _ui_page, False),
    ("/ui/config", _ui_config, False),
    ("/ui/assets/{name:path}", _ui_asset, False),
    # -----------------------------------------------------------------------------------------------
    ("/", _index, False),
)
ROUTES = [Route(path, endpoint, methods=["GET"]) for path, endpoint, _ in ROUTE_TABLE]
PROBE_PATHS = frozenset(path for path, _, probe in ROUTE_TABLE if probe)


async def _not_found(request: Request, exc: Exception) -> Response:
    return Response(
        json.dumps({"error": "not_found", "path": request.url.path}, ensure_ascii=False).encode(),
        404,
        media_type="application/json",
    )


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return Response(
        b'{"error":"method_not_allowed"}', 405, headers={"Allow": "GET, HEAD"}, media_type="application/json"
    )


async def _internal(request: Request, exc: Exception) -> Response:
    log.error("HTTP %s failed: %r", request.url.path, exc)
    return Response(b'{"error":"internal"}', 500, media_type="application/json")


def build_app(ctx: ApiContext, credentials: Credentials | None = None, open_probes: bool = True) -> ASGIApp:
    """The ASGI application: the routes, JSON errors, and authentication when configured."""
    app = Starlette(
        routes=ROUTES,
        exception_handlers={404: _not_found, 405: _not_allowed, 500: _internal},
    )
    app.router.redirect_slashes = False
    app.state.api = ctx
    asgi: ASGIApp = app
    if credentials is not None:
        asgi = _Authenticate(asgi, credentials, PROBE_PATHS if open_probes else frozenset())
    return _strip_trailing_slash(asgi)


def _strip_trailing_slash(app: ASGIApp) -> ASGIApp:
    """``/groups/`` is ``/groups`` (as before): no redirect, the same answer."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if len(path) > 1 and path.endswith("/") and not path.startswith("/groups/"):
                scope = dict(scope, path=path.rstrip("/") or "/")
            elif path == "/groups/":
                scope = dict(scope, path="/groups")
        await app(scope, receive, send)

    return wrapped


# ----------------------------------------------------------------------------------------- server
class _TimedH11(H11Protocol):
    """uvicorn's h11 protocol plus a deadline for a complete request head: a connection that opens
    and sends nothing (or dribbles a header, slowloris) is closed after ``request_timeout_s`` --
    uvicorn's own keep-alive timer runs only between requests of a connection that sent one."""

    request_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_bytes = 0
        self._head_tail = b""
        self._arm()

    def _arm(self) -> None:
        self._head_timer: asyncio.TimerHandle | None = self.loop.call_later(
            self.request_timeout_s, self._head_timeout
        )

    def _waiting_for_request(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self._waiting_for_request() and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_request() and self._head_too_long(data):
            # h11's own bound (h11_max_incomplete_event_size) holds only while the head is
            # incomplete: a longer head that arrives whole in one read would be served
            self.transport.write(HEAD_TOO_LONG)
            self.transport.close()
            return
        super().data_received(data)
        if not self._waiting_for_request():
            self._head_bytes, self._head_tail = 0, b""
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

    def _head_too_long(self, data: bytes) -> bool:
        """Does the request head being received run past `MAX_REQUEST_HEAD_BYTES` (its blank line
        not within the bound, counted across reads)?"""
        seen = self._head_tail + data
        room = MAX_REQUEST_HEAD_BYTES - self._head_bytes + len(self._head_tail)
        if seen.find(b"\r\n\r\n", 0, room + 4) >= 0:
            return False
        self._head_bytes += len(data)
        self._head_tail = seen[-3:]
        return self._head_bytes > MAX_REQUEST_HEAD_BYTES

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._head_bytes, self._head_tail = 0, b""
        if self._head_timer is None and not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)


class MirrorHTTPServer:
    """The API on ``address`` in a background thread: ``MirrorHTTPServer(...).start()`` ... ``stop()``."""

    def __init__(
        self,
        address: tuple[str, int],
        store: SnapshotStore,
        metrics: Callable[[], tuple[bytes, str]] | None = None,
        health: Callable[[], tuple[bool, dict[str, Any]]] | None = None,
        *,
        status: MirrorStatus | None = None,
        share_state: Callable[[str], dict[str, Any] | None] | None = None,
        cluster_name: str = "default",
        clusters: Mapping[str, ClusterView] | None = None,
        openmetrics: Callable[[], tuple[bytes, str]] | None = None,
        lag_route: Callable[[str], tuple[int, Any] | None] | None = None,
        topic_names: Callable[[], Mapping[str, str]] | None = None,
        history: LagHistory | None = None,
        statuses: Callable[[], Mapping[str, int]] | None = None,
        ui: UiContext | None = None,
        credentials: Credentials | None = None,
        open_probes: bool = True,
        tls_cert_file: Path | None = None,
        tls_key_file: Path | None = None,
        idle_timeout_s: float = 15.0,
        request_timeout_s: float = 10.0,
        offsets_at: OffsetsAt | None = None,
    ) -> None:
        for name, path in (("http_tls_cert_file", tls_cert_file), ("http_tls_key_file", tls_key_file)):
            if path is not None and not Path(path).is_file():
                raise AuthError(f"{name}: {path} is not a readable file")
        if clusters is None:  # one cluster: the views given one by one
            one = ClusterView(
                store,
                status or MirrorStatus(),
                lag_route,
                topic_names,
                share_state,
                history=history,
                statuses=statuses,
                offsets_at=offsets_at,
            )
            clusters = {cluster_name: one}
        ctx = ApiContext(dict(clusters), metrics, health or (lambda: (True, {})), openmetrics, ui)
        #: what ``/ready`` reads of the first cluster (the only one, mostly)
        self.status = next(iter(ctx.clusters.values())).status
        #: the web UI is served (issue 37)
        self.ui_enabled = ui is not None and ui.enabled
        self.app = build_app(ctx, credentials, open_probes)
        self.tls = tls_cert_file is not None
        self._sock = socket.create_server(address, reuse_port=False)
        self.server_address = self._sock.getsockname()[:2]
        protocol = type("TimedH11", (_TimedH11,), {"request_timeout_s": request_timeout_s})
        self._server = Server(
            Config(
                self.app,
                http=protocol,
                ws="none",
                lifespan="off",
                interface="asgi3",
                log_config=None,
                access_log=False,
                server_header=False,
                timeout_keep_alive=max(1, round(idle_timeout_s)),
                timeout_graceful_shutdown=5,
                h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
                ssl_certfile=str(tls_cert_file) if tls_cert_file else None,
                ssl_keyfile=str(tls_key_file) if tls_key_file else None,
            )
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def start(self, timeout_s: float = 30.0) -> MirrorHTTPServer:
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name="mirror-http", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server did not start on {self.server_address}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._sock.close()


def credentials_from(token_file: Path | None, basic_file: Path | None) -> Credentials | None:
    """The configured credentials (settings http_auth_token_file / http_basic_auth_file), if any;
    `AuthError` names the setting."""
    for name, path, make in (
        ("http_auth_token_file", token_file, Credentials.bearer_from_file),
        ("http_basic_auth_file", basic_file, Credentials.basic_from_file),
    ):
        if path is not None:
            try:
                return make(path)
            except AuthError as exc:
                message = str(exc)
                raise AuthError(message if message.startswith(name) else f"{name}: {message}") from None
    return None


def routes() -> Iterable[str]:
    """The table's paths in OpenAPI spelling (``{id}``), for the spec test."""
    return [path.replace(":path", "") for path, _, _ in ROUTE_TABLE]

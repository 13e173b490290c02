"""The HTTP server as a client meets it: the OpenAPI description, fuzzing, timeouts, gzip,
OpenMetrics, TLS and authentication -- against a real uvicorn server on loopback.

No Spark: the store is filled directly (`lab.synthetic` for /metrics), and
the lag routes answer from a real lag tracker and Burrow window fed with the same groups.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, settings

from lab.synthetic import RENDERER, exporter, feed_lag, tracker_of
from lab.synthetic import settings as mirror_settings
from state import codec
from streaming.health.lag_history import LagHistory
from streaming.serving.api import OPENAPI_PATH, Credentials, MirrorHTTPServer, routes
from streaming.serving.burrow import lag_route
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.serving.ui import UiContext
from tests.support.http import request, state_bytes

#: ids a client must be able to ask for and get back exactly
WEIRD_IDS = [
    "team/orders",
    "100%-done",
    "%2F-literal",
    "ünïcödé-グループ-🚀",
    "spaces and ?query#frag",
    "trailing/",
    "x" * 65_536,
    "/leading",
    "orders/lag",  # a group, not the lag of "orders"
    "orders/history",  # a group, not the history of "orders"
    "<img src=x onerror=alert(1)>",
]


def _store() -> SnapshotStore:
    store = SnapshotStore(renderer=RENDERER)
    store.apply(
        0,
        [
            (g, state_bytes(g), {"group_id": g, "kind": "classic", "state": "Stable", "members": 1})
            for g in WEIRD_IDS
        ],
    )
    return store


def _ready() -> MirrorStatus:
    status = MirrorStatus()
    status.set_targets({}, {0: 1})
    status.advance({0: 1})
    return status


def _metrics() -> tuple[bytes, str]:
    return b"# HELP x y\n# TYPE x gauge\nx 1\n" * 100, "text/plain; version=0.0.4; charset=utf-8"


@pytest.fixture(scope="module")
def server() -> Iterator[MirrorHTTPServer]:
    mirror = exporter(mirror_settings(), _store())
    lag, burrow = tracker_of(mirror)
    history = LagHistory(lag, 60, 10.0)
    feed_lag(mirror, (codec.decode(blob) for _, blob in mirror.store.states()))
    now_ms = lambda: int(time.time() * 1000)  # noqa: E731
    srv = MirrorHTTPServer(("127.0.0.1", 0), mirror.store, status=_ready(), metrics=_metrics,
                           cluster_name=mirror.cluster,
                           request_timeout_s=1.0,
                           idle_timeout_s=1.0,
                           lag_route=lambda path: lag_route(lag, burrow, path, now_ms()),
                           history=history, statuses=lambda: burrow.watcher.groups,
                           ui=UiContext(lag_interval_s=10.0),
                           ).start()  # fmt: skip
    yield srv
    srv.stop()


# ------------------------------------------------------------------------------------ the OpenAPI
def test_openapi_describes_exactly_the_routing_table() -> None:
    spec = yaml.safe_load(OPENAPI_PATH.read_text())
    assert set(spec["paths"]) == set(routes())


def test_openapi_is_served(server: MirrorHTTPServer) -> None:
    status, _, body = request(f"{server.url}/openapi.yaml")
    assert status == 200 and yaml.safe_load(body)["openapi"].startswith("3.")


SCHEMA = schemathesis.openapi.from_path(OPENAPI_PATH)


@SCHEMA.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_server_conforms_to_openapi(case: Any, server: MirrorHTTPServer) -> None:
    """schemathesis: generated requests for every operation; responses have a documented status,
    content type and schema, and none is a server error."""
    case.call_and_validate(base_url=server.url)


# ------------------------------------------------------------------------------------------- fuzz
@pytest.mark.parametrize("group_id", WEIRD_IDS, ids=lambda g: g[:20])
def test_weird_group_ids_round_trip(server: MirrorHTTPServer, group_id: str) -> None:
    quoted = urllib.parse.quote(group_id, safe="")
    status, _, body = request(f"{server.url}/groups/{quoted}")
    assert status == 200 and json.loads(body)["group_id"] == group_id
    assert "partitions" not in json.loads(body)  # the snapshot, not the lag ("orders%2Flag")
    status, _, body = request(f"{server.url}/groups/{quoted}/lag")
    lag = json.loads(body)
    assert status == 200 and lag["group_id"] == group_id and lag["partitions"][0]["lag"] == 2100 - 1000
    status, _, body = request(f"{server.url}/v3/kafka/synthetic/consumer/{quoted}/lag")
    assert status == 200 and json.loads(body)["status"]["group"] == group_id
    status, _, body = request(f"{server.url}/groups/{quoted}/history")
    history = json.loads(body)
    assert status == 200 and history["group_id"] == group_id and history["lag"][-1] == 2100 - 1000
    status, _, body = request(f"{server.url}/groups?q={quoted}")
    assert status == 200 and group_id in [g["group_id"] for g in json.loads(body)["groups"]]


def test_burrow_paths_answer_burrow_envelopes(server: MirrorHTTPServer) -> None:
    status, _, body = request(f"{server.url}/v3/kafka")
    assert status == 200 and json.loads(body)["clusters"] == ["synthetic"]
    status, _, body = request(f"{server.url}/v3/kafka/synthetic/consumer")
    assert status == 200 and set(json.loads(body)["consumers"]) == set(WEIRD_IDS)
    status, _, body = request(f"{server.url}/v3/kafka/other/consumer")
    assert status == 404 and json.loads(body)["error"] is True
    status, _, body = request(f"{server.url}/groups/nope/lag")
    assert status == 404 and json.loads(body)["error"] == "group_not_found"


def test_burrow_topic_and_admin_paths(server: MirrorHTTPServer) -> None:
    """Burrow's topic paths answer from the round's log ends (high watermark 2100 after
    `synthetic.feed_lag`), its admin paths answer text as Burrow's do."""
    status, _, body = request(f"{server.url}/v3/kafka/synthetic/topic")
    topics = json.loads(body)["topics"]
    assert status == 200 and topics == sorted(f"{g}.t0" for g in WEIRD_IDS)
    topic = urllib.parse.quote(topics[0], safe="")
    status, _, body = request(f"{server.url}/v3/kafka/synthetic/topic/{topic}")
    reply = json.loads(body)
    assert status == 200 and reply["offsets"] == [2100] and reply["message"] == "topic offsets returned"
    status, _, body = request(f"{server.url}/v3/kafka/synthetic/topic/{topic}/consumers")
    assert status == 200 and json.loads(body)["consumers"] == [topics[0][: -len(".t0")]]
    status, _, body = request(f"{server.url}/v3/kafka/synthetic/topic/nope")
    assert status == 404 and json.loads(body)["error"] is True
    status, _, body = request(f"{server.url}/v3/kafka/synthetic/topic/nope/consumers")
    assert status == 200 and json.loads(body)["consumers"] == []
    status, headers, body = request(f"{server.url}/burrow/admin")
    assert (status, body) == (200, b"GOOD") and headers["content-type"].startswith("text/plain")
    assert request(f"{server.url}/burrow/admin/ready")[::2] == (200, b"READY")


def test_burrow_offsets_carry_observed_at(server: MirrorHTTPServer) -> None:
    """Burrow's ConsumerOffset: offset, timestamp, observedAt (when the window stored it), lag."""
    group = urllib.parse.quote(WEIRD_IDS[0], safe="")
    _, _, body = request(f"{server.url}/v3/kafka/synthetic/consumer/{group}")
    offsets = [o for o in json.loads(body)["topics"][f"{WEIRD_IDS[0]}.t0"][0]["offsets"] if o]
    assert offsets and set(offsets[-1]) == {"offset", "timestamp", "observedAt", "lag"}
    assert offsets[-1]["observedAt"] >= offsets[-1]["timestamp"]
    _, _, body = request(f"{server.url}/v3/kafka/synthetic/consumer/{group}/lag")
    end = json.loads(body)["status"]["partitions"][0]["end"]
    assert end == offsets[-1]


def test_burrow_ready_is_503_while_catching_up() -> None:
    status = MirrorStatus()
    status.set_targets({}, {0: 10})
    status.advance({0: 1})
    srv = MirrorHTTPServer(("127.0.0.1", 0), SnapshotStore(renderer=RENDERER), status=status).start()
    try:
        assert request(f"{srv.url}/burrow/admin/ready")[::2] == (503, b"STARTING")
        assert request(f"{srv.url}/burrow/admin")[::2] == (200, b"GOOD")
    finally:
        srv.stop()


@pytest.mark.parametrize(
    "path",
    ["/groups/", "/groups/%", "/groups/%zz", "/groups/%C3", "/groups/" + "%FF" * 40_000, "/" + "a" * 5000,
     "/groups?kind=%00&state=\u00e9", "/metrics/", "/ready/", "/../../etc/passwd", "/groups//x"],
)  # fmt: skip
def test_odd_paths_never_answer_a_server_error(server: MirrorHTTPServer, path: str) -> None:
    status, _, _ = _raw(server, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert 200 <= status < 500


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO", "CONNECT"])
@pytest.mark.parametrize("path", ["/groups", "/groups/team%2Forders", "/metrics", "/ready", "/nope"])
def test_other_methods_are_refused_not_failed(server: MirrorHTTPServer, method: str, path: str) -> None:
    status, _, _ = _raw(server, f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode())
    assert status in (400, 404, 405), status


@pytest.mark.parametrize("size", [8_000, 200_000, 2_000_000])
def test_huge_headers_are_refused_and_the_server_goes_on(server: MirrorHTTPServer, size: int) -> None:
    head = f"GET /groups HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * size}\r\n\r\n".encode()
    status, _, _ = _raw(server, head)
    assert status == 200 if size < 100_000 else status in (0, 400, 413, 431), status
    assert request(f"{server.url}/ready")[0] == 200


@pytest.mark.parametrize("size", [100_000, 200_000])
def test_a_long_head_that_arrives_whole_is_refused_too(server: MirrorHTTPServer, size: int) -> None:
    """h11 bounds a head only while it is incomplete: the server's loop is held while the whole
    request is written, so its first read takes all of it -- a head past MAX_REQUEST_HEAD_BYTES
    (128 KiB) is still refused (431), one within it still served."""
    head = f"GET /groups HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * size}\r\n\r\n".encode()
    host, port = server.server_address
    with socket.create_connection((host, port), timeout=10) as s:
        state = server._server.server_state
        deadline = time.monotonic() + 5
        while not state.connections and time.monotonic() < deadline:
            time.sleep(0.01)
        (proto,) = state.connections
        proto.loop.call_soon_threadsafe(time.sleep, 0.5)  # the loop reads nothing meanwhile
        time.sleep(0.05)
        s.sendall(head)
        raw = b""
        while b"\r\n\r\n" not in raw and (chunk := s.recv(65536)):
            raw += chunk
    status = int(raw.split(b" ")[1]) if raw.startswith(b"HTTP/1.1 ") else 0
    assert status == (200 if len(head) <= 128 * 1024 else 431), raw[:200]
    assert request(f"{server.url}/ready")[0] == 200


def _raw(server: MirrorHTTPServer, data: bytes, timeout_s: float = 10.0) -> tuple[int, bytes, bytes]:
    """Send raw bytes; (status, head, body) -- status 0 when the server closed without answering."""
    host, port = server.server_address
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(data)
        chunks = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                raw = b"".join(chunks)
                if b"\r\n\r\n" in raw:
                    head, _, body = raw.partition(b"\r\n\r\n")
                    length = next(
                        (int(ln.split(b":")[1]) for ln in head.split(b"\r\n")
                         if ln.lower().startswith(b"content-length:")), None,
                    )  # fmt: skip
                    if length is not None and len(body) >= length:
                        break
        except (ConnectionResetError, TimeoutError):
            pass
    raw = b"".join(chunks)
    if not raw.startswith(b"HTTP/1.1 "):
        return 0, b"", b""
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), head, body


# -------------------------------------------------------------------------------------- timeouts
def test_idle_and_slow_connections_are_closed(server: MirrorHTTPServer) -> None:
    """request_timeout_s=1: a connection that never sends a request, one that dribbles a header,
    and a keep-alive connection left idle are all closed by the server within seconds."""
    host, port = server.server_address
    for opening in (b"", b"GET /groups HTTP/1.1\r\nHost: x\r\n"):
        with socket.create_connection((host, port), timeout=10) as s:
            started = time.monotonic()
            s.sendall(opening)
            assert s.recv(1024) == b""  # closed by the server, no answer
            assert time.monotonic() - started < 5
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        while s.recv(65536):
            pass
        assert time.monotonic() - started < 5


# ----------------------------------------------------------------------------- gzip, OpenMetrics
def test_gzip_when_accepted(server: MirrorHTTPServer) -> None:
    plain = request(f"{server.url}/metrics")
    zipped = request(f"{server.url}/metrics", headers={"Accept-Encoding": "gzip"})
    assert plain[1].get("Content-Encoding") is None
    assert zipped[1]["Content-Encoding"] == "gzip" and gzip.decompress(zipped[2]) == plain[2]
    assert len(zipped[2]) < len(plain[2]) / 5
    refused = request(f"{server.url}/metrics", headers={"Accept-Encoding": "gzip;q=0, identity"})
    assert refused[1].get("Content-Encoding") is None


def test_openmetrics_negotiated_when_enabled() -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from lab.synthetic import exporter, filled_store
    from lab.synthetic import settings as mirror_settings
    from streaming.serving.metrics import exposition, openmetrics_exposition

    mirror = exporter(mirror_settings(), filled_store(20, 3))
    srv = MirrorHTTPServer(
        ("127.0.0.1", 0), mirror.store, metrics=lambda: exposition(mirror),
        openmetrics=lambda: openmetrics_exposition(mirror),
    ).start()  # fmt: skip
    try:
        prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"
        status, headers, body = request(f"{srv.url}/metrics", headers={"Accept": prometheus})
        assert status == 200 and headers["Content-Type"].startswith("application/openmetrics-text")
        families = {f.name for f in text_string_to_metric_families(body.decode())}
        assert "coordinator_mirror_group_members" in families or len(families) > 10
        assert body.endswith(b"# EOF\n")
        status, headers, _ = request(f"{srv.url}/metrics", headers={"Accept": "text/plain"})
        assert headers["Content-Type"].startswith("text/plain")
    finally:
        srv.stop()


# ------------------------------------------------------------------------------ TLS, authentication
@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from lab.pki import Pki

    pki = Pki(tmp_path_factory.mktemp("http-pki"), "http-ca")
    pair = pki.issue("mirror-http", "unused", server=True)
    return pki, pair


def test_tls(tls: Any) -> None:
    pki, pair = tls
    srv = MirrorHTTPServer(("127.0.0.1", 0), _store(), status=_ready(), tls_cert_file=pair.cert_pem,
                           tls_key_file=pair.key_pem).start()  # fmt: skip
    try:
        assert srv.url.startswith("https://")
        context = ssl.create_default_context(cafile=str(pki.ca_cert))
        assert request(f"{srv.url}/ready", context=context)[0] == 200
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            request(f"{srv.url}/ready", context=ssl.create_default_context())
        assert _raw(srv, b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")[0] in (0, 400)  # plain HTTP: no answer
    finally:
        srv.stop()


@pytest.mark.parametrize("scheme", ["Bearer", "Basic"])
@pytest.mark.parametrize("open_probes", [True, False])
def test_authentication(tmp_path: Path, scheme: str, open_probes: bool) -> None:
    secret_file = tmp_path / "credentials"
    if scheme == "Bearer":
        secret_file.write_text("s3cr3t-T0ken\n")
        creds = Credentials.bearer_from_file(secret_file)
        good, bad = "Bearer s3cr3t-T0ken", "Bearer wrong"
    else:
        secret_file.write_text("# users\nprometheus:pr0m-pass\nops:0ps-pass\n")
        creds = Credentials.basic_from_file(secret_file)
        import base64

        good = "Basic " + base64.b64encode(b"ops:0ps-pass").decode()
        bad = "Basic " + base64.b64encode(b"ops:nope").decode()
    srv = MirrorHTTPServer(("127.0.0.1", 0), _store(), status=_ready(), metrics=_metrics, credentials=creds,
                           open_probes=open_probes).start()  # fmt: skip
    try:
        for path in ("/groups", "/groups/team%2Forders", "/metrics", "/errors", "/openapi.yaml", "/"):
            assert request(f"{srv.url}{path}")[0] == 401
            status, headers, _ = request(f"{srv.url}{path}", headers={"Authorization": bad})
            assert status == 401 and headers["WWW-Authenticate"].startswith(scheme)
            assert request(f"{srv.url}{path}", headers={"Authorization": good})[0] == 200
        for probe in ("/ready", "/healthz", "/burrow/admin", "/burrow/admin/ready"):
            assert request(f"{srv.url}{probe}")[0] == (200 if open_probes else 401)
            assert request(f"{srv.url}{probe}", headers={"Authorization": good})[0] == 200
    finally:
        srv.stop()


@pytest.mark.parametrize("content", ["", "two words\n", "   \n"])
def test_bad_token_files_are_refused(tmp_path: Path, content: str) -> None:
    from streaming.serving.api import AuthError

    f = tmp_path / "token"
    f.write_text(content)
    with pytest.raises(AuthError, match="http_auth_token_file"):
        Credentials.bearer_from_file(f)


def test_missing_files_name_their_setting(tmp_path: Path) -> None:
    from streaming.serving.api import AuthError, credentials_from

    with pytest.raises(AuthError, match="http_auth_token_file"):
        credentials_from(tmp_path / "missing", None)
    with pytest.raises(AuthError, match="http_basic_auth_file"):
        credentials_from(None, tmp_path / "missing")
    with pytest.raises(AuthError, match="http_tls_cert_file"):
        MirrorHTTPServer(("127.0.0.1", 0), SnapshotStore(), tls_cert_file=tmp_path / "missing",
                         tls_key_file=tmp_path / "missing")  # fmt: skip


def test_large_bodies_arrive_whole() -> None:
    """Bodies over STREAM_CHUNK_BYTES go out in slices: every byte arrives, HEAD sends none."""
    from streaming.serving.api import STREAM_CHUNK_BYTES

    body = bytes(range(256)) * (3 * STREAM_CHUNK_BYTES // 256 + 7)
    srv = MirrorHTTPServer(
        ("127.0.0.1", 0), _store(), status=_ready(), metrics=lambda: (body, "text/plain")
    ).start()
    try:
        status, headers, got = request(f"{srv.url}/metrics")
        assert status == 200 and got == body and int(headers["Content-Length"]) == len(body)
        status, headers, got = request(f"{srv.url}/metrics", method="HEAD")
        assert status == 200 and got == b"" and int(headers["Content-Length"]) == len(body)
        zipped = request(f"{srv.url}/metrics", headers={"Accept-Encoding": "gzip"})[2]
        assert gzip.decompress(zipped) == body
    finally:
        srv.stop()

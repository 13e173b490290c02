"""A small OpenID Connect token endpoint on loopback, for the secured test broker's OAUTHBEARER listener.

OAuth 2 client credentials (RFC 6749 section 4.4) as Kafka's ``OAuthBearerLoginCallbackHandler``
asks for them (KIP-768): ``POST /token`` with the client id and secret in a Basic ``Authorization``
header answers ``{"access_token": <JWT>, "token_type": "Bearer", "expires_in": ...}``; ``GET /jwks``
serves the public key the broker's ``OAuthBearerValidatorCallbackHandler`` verifies the tokens with.
Tokens are RS256 JWTs whose ``sub`` is the client id (the broker's principal: ``User:<client id>``),
signed by ``openssl`` with a key made at start -- the same tool that makes the lab's certificates,
so no JOSE library is needed.  Every token issued is counted per client (`issued`), so a test can
tell that a client really took the OIDC path.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class OidcServer:
    """``with OidcServer(dir) as idp: idp.token_url`` ... (clients registered with `client`)."""

    def __init__(self, directory: Path, *, audience: str = "kafka", lifetime_s: int = 3600) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.audience = audience
        self.lifetime_s = lifetime_s
        self.key = self.dir / "oidc-signing-key.pem"
        self.kid = "cm-lab-1"
        self._clients: dict[str, str] = {}
        self.issued: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        subprocess.run(
            ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
             "-out", str(self.key)],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        modulus = subprocess.run(
            ["openssl", "rsa", "-in", str(self.key), "-noout", "-modulus"],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.strip().split("=", 1)[1]  # fmt: skip
        self.jwks = {
            "keys": [
                {
                    "kty": "RSA",
                    "use": "sig",
                    "alg": "RS256",
                    "kid": self.kid,
                    "n": _b64url(bytes.fromhex(modulus)),
                    "e": _b64url((65537).to_bytes(3, "big")),
                }
            ]
        }

    # -- clients and tokens ----------------------------------------------------------------------
    def client(self, client_id: str, secret: str) -> None:
        with self._lock:
            self._clients[client_id] = secret

    def token(self, subject: str, *, lifetime_s: int | None = None) -> str:
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": self.audience,
            "iat": now,
            "nbf": now - 5,
            "exp": now + (self.lifetime_s if lifetime_s is None else lifetime_s),
            "scope": "kafka",
        }
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", str(self.key)],
            input=signing_input.encode(), check=True, capture_output=True, timeout=60,
        ).stdout  # fmt: skip
        return f"{signing_input}.{_b64url(signature)}"

    # -- the HTTP side ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("OIDC server not started")
        return int(self._server.server_address[1])

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}" if self._server is not None else "cm-lab"

    @property
    def token_url(self) -> str:
        return f"{self.issuer}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    def start(self) -> OidcServer:
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
            self._server.daemon_threads = True
            threading.Thread(target=self._server.serve_forever, name="cm-lab-oidc", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OidcServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _grant(self, authorization: str | None, body: bytes) -> tuple[int, dict[str, Any]]:
        form = parse_qs(body.decode(errors="replace"))
        client_id: str | None = None
        secret: str | None = None
        if authorization and authorization.lower().startswith("basic "):
            raw = base64.b64decode(authorization.split(" ", 1)[1]).decode(errors="replace")
            client_id, _, secret = raw.partition(":")
        else:  # the credentials in the form (client_secret_post)
            client_id = (form.get("client_id") or [""])[0] or None
            secret = (form.get("client_secret") or [""])[0] or None
        if (form.get("grant_type") or [""])[0] != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        with self._lock:
            known = client_id is not None and self._clients.get(client_id) == secret
            if known:
                assert client_id is not None
                self.issued[client_id] = self.issued.get(client_id, 0) + 1
        if not known:
            return 401, {"error": "invalid_client"}
        assert client_id is not None
        return 200, {
            "access_token": self.token(client_id),
            "token_type": "Bearer",
            "expires_in": self.lifetime_s,
        }


def _handler(idp: OidcServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/jwks":
                self._send(200, idp.jwks)
            else:
                self._send(404, {"error": "not_found"})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.split("?")[0] != "/token":
                self._send(404, {"error": "not_found"})
                return
            self._send(*idp._grant(self.headers.get("Authorization"), body))

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler

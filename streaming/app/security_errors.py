"""Security failures a user can cause -- credentials, certificates, ACLs -- as one-line messages.

A table, like the start-up causes of `streaming.app.errors` (its rows go first there: a refused
SASL handshake also ends librdkafka's metadata call as ``_TRANSPORT``, which would otherwise read
as "unreachable").  `classify_security` maps an exception raised while the mirror or ``capture``
starts, a failed query's error text, or the error lines librdkafka reported, to a `StartupError`:
the cause, the setting to look at, a documented exit code.  The detail quoted from Kafka's own
message never carries a secret (Kafka's messages name mechanisms, topics and groups, never
credentials) and is scrubbed of every configured secret value anyway.

Exit codes (README, "Security"):

==  ======================================================================================
5   authentication failed: wrong SASL username/password/mechanism, or an expired token
6   TLS failed: a certificate is not trusted (either side), expired or for another host
7   not authorized: the principal lacks an ACL the mirror needs (README lists them)
==  ======================================================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

EXIT_AUTHENTICATION: Final = 5
EXIT_TLS: Final = 6
EXIT_AUTHORIZATION: Final = 7


class StartupError(Exception):
    """A failure the user can fix: ``message`` says what and what to do; ``exit_code`` is documented."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Cause:
    """One row: a regex over ``ClassName: text`` of the exception (and its causes), the exit code,
    and the message (``{detail}`` = Kafka's words from the match to the end of that line)."""

    name: str
    pattern: str
    exit_code: int
    message: str


SECURITY_CAUSES: Final[tuple[Cause, ...]] = (
    # TLS first: a SASL_SSL handshake that fails in TLS never reaches SASL.
    Cause(
        "tls-untrusted-server",
        r"PKIX path building failed|unable to find valid certification path"
        r"|certificate verify failed|broker certificate could not be verified"
        r"|No subject alternative names|No name matching|subject alternative name",
        EXIT_TLS,
        "TLS handshake failed: the broker's certificate is not trusted or not for this host ({detail}). "
        "Check ssl.truststore.location/ssl.truststore.type (Java: --kafka-options) or ssl.ca.location "
        "(capture), and that the certificate names the bootstrap host.",
    ),
    Cause(
        "tls-client-certificate",
        r"bad.certificate|certificate.unknown|unknown.ca|certificate.required|certificate.expired"
        r"|SSL connection closed by peer|Received fatal alert|SslAuthenticationException"
        r"|SSLHandshakeException|SSL handshake failed",
        EXIT_TLS,
        "TLS handshake failed: the broker refused the connection's certificate ({detail}). Check the "
        "client keystore (ssl.keystore.*; capture: ssl.certificate.location/ssl.key.location): it must "
        "be signed by a CA the broker trusts and not expired.",
    ),
    Cause(
        "authentication",
        r"SaslAuthenticationException|SASL authentication error|Authentication failed"
        r"|invalid credentials|_AUTHENTICATION|SASL_AUTHENTICATION_FAILED|IllegalSaslState"
        r"|UnsupportedSaslMechanism|Unsupported SASL mechanism|LoginException",
        EXIT_AUTHENTICATION,
        "Kafka authentication failed ({detail}). Check the SASL mechanism and credentials: "
        "sasl.mechanism and sasl.jaas.config (run, --kafka-options / output_kafka_options) or "
        "sasl.username/sasl.password (capture).",
    ),
    Cause(
        "authorization",
        r"(?:Topic|Group|Cluster|TransactionalId|DelegationToken)AuthorizationException"
        r"|Not authorized to access [^\n]*|(?:TOPIC|GROUP|CLUSTER|TRANSACTIONAL_ID)_AUTHORIZATION_FAILED"
        r"|[A-Za-z]+ authorization failed",
        EXIT_AUTHORIZATION,
        "Kafka refused an operation: the mirror's principal lacks an ACL ({detail}). Grant the ACLs "
        "listed in README, section Security (Topic __consumer_offsets: Read; Group prefix "
        "spark-kafka-source-: Read; the output topics: Write).",
    ),
)


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _detail(text: str, start: int, limit: int = 240) -> str:
    line = text[start:].splitlines()[0].strip() if text[start:].strip() else ""
    line = line.rstrip(".;:")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value (longer than 3 characters) replaced by ``***``."""
    for secret in sorted({s for s in secrets if len(s) > 3}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def classify_text(text: str, secrets: Iterable[str] = ()) -> StartupError | None:
    """The security `StartupError` whose pattern ``text`` matches first, else None."""
    for cause in SECURITY_CAUSES:
        m = re.search(cause.pattern, text)
        if m:
            detail = scrub(_detail(text, m.start()), secrets)
            return StartupError(cause.message.format(detail=detail), cause.exit_code)
    return None


def classify_security(
    exc: BaseException | None, extra: Iterable[str] = (), secrets: Iterable[str] = ()
) -> StartupError | None:
    """The security `StartupError` for ``exc`` (and its causes) or for ``extra`` texts (librdkafka's
    error callback lines), else None: not a security failure."""
    texts = [f"{type(e).__name__}: {e}" for e in _chain(exc)] if exc is not None else []
    texts += list(extra)
    secrets = list(secrets)
    for text in texts:
        found = classify_text(text, secrets)
        if found is not None:
            return found
    return None

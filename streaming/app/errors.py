"""Failures a user can cause, as one-line messages with an exit code: the one place that classifies them.

Two tables: `SECURITY_CAUSES` (credentials, certificates, ACLs -- read first: a refused SASL
handshake can also surface as a timeout or a transport error) and `CAUSES` (unreachable cluster,
connector jars).  `client_options_error` names the option of a store or value Kafka's client
refuses.  Quoted detail from Kafka's messages never carries a secret (Kafka names mechanisms, topics
and groups, never credentials) and is scrubbed of every configured secret anyway.

`classify` maps an exception raised while the mirror starts (or a failed query's error text) to a
`StartupError`: what went wrong, what to do, and the documented exit code (docs/operating.md, "Exit codes").
The table `CAUSES` is read top to bottom; the first row whose pattern matches the exception's class
name or text wins.  Adding a cause (TLS, SASL, ...) is adding a row.

Exit codes:

==  ======================================================================================
0   stopped cleanly (SIGTERM / Ctrl-C)
1   an unexpected error (the message names it; ``--log-level DEBUG`` shows the traceback)
2   bad settings, or a checkpoint that is not this mirror's (another cluster, a newer format)
3   the Kafka cluster cannot be reached
4   Spark's Kafka connector jars are missing or do not match pyspark
5   Kafka authentication failed
6   TLS failed: a certificate is not trusted, expired or for another host
7   not authorized: the principal lacks an ACL
==  ======================================================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from streaming.settings import is_secret

EXIT_OK: Final = 0
EXIT_UNEXPECTED: Final = 1
EXIT_CONFIG: Final = 2
EXIT_UNREACHABLE: Final = 3
EXIT_CONNECTOR: Final = 4
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
    """One row of the table: a regex over ``ClassName: text`` of the exception (and its causes),
    the exit code, and the message (``{detail}`` = the matched exception's first line)."""

    name: str
    pattern: str
    exit_code: int
    message: str


#: what a single cluster's start does when the cluster does not answer (one of several clusters is
#: tried again instead: `streaming.app.cluster_mirror.ClusterRunner`)
UNREACHABLE_AT_START: Final = (
    "; the mirror retries nothing at start (a supervisor -- Kubernetes, systemd -- restarts it)"
)

CAUSES: Final[tuple[Cause, ...]] = (
    Cause(
        "connector",
        r"MissingArtifactsError|ConnectorVersionError|ClassNotFoundException: .*kafka"
        r"|Failed to find data source: kafka",
        EXIT_CONNECTOR,
        "Spark's Kafka connector is missing or does not match pyspark: {detail}. Run `make jars` "
        "(or set spark_jars / spark_packages to spark-sql-kafka-0-10 of the installed pyspark version).",
    ),
    Cause(
        "unreachable",
        r"kafka\.common\.errors\.TimeoutException|Timed out waiting for a node assignment"
        r"|Timed out waiting to send the call|UnknownHostException|No resolvable bootstrap urls"
        r"|ConnectException: Connection refused|_TRANSPORT|_ALL_BROKERS_DOWN|_TIMED_OUT|BrokerUnreachable",
        EXIT_UNREACHABLE,
        "cannot reach the Kafka cluster at {bootstrap}: {detail}. Check bootstrap_servers, the network "
        "path and the listener the brokers advertise" + UNREACHABLE_AT_START + ".",
    ),
)


SECURITY_CAUSES: Final[tuple[Cause, ...]] = (
    # TLS first: a SASL_SSL handshake that fails in TLS never reaches SASL.
    Cause(
        "tls-untrusted-server",
        r"PKIX path building failed|unable to find valid certification path"
        r"|certificate verify failed|broker certificate could not be verified"
        r"|No subject alternative names|No name matching|subject alternative name",
        EXIT_TLS,
        "TLS handshake failed: the broker's certificate is not trusted or not for this host ({detail}). "
        "Check ssl.truststore.location/ssl.truststore.type (kafka_options), and that the certificate "
        "names the bootstrap host.",
    ),
    Cause(
        "tls-client-certificate",
        r"bad.certificate|certificate.unknown|unknown.ca|certificate.required|certificate.expired"
        r"|SSL connection closed by peer|Received fatal alert|SslAuthenticationException"
        r"|SSLHandshakeException|SSL handshake failed",
        EXIT_TLS,
        "TLS handshake failed: the broker refused the connection's certificate ({detail}). Check the "
        "client keystore (ssl.keystore.*): it must be signed by a CA the broker trusts and not expired.",
    ),
    # Kerberos before the other SASL failures: its login fails in the client (a LoginException), and
    # the usual cause is what the JVM knows of the realm, not the credentials alone
    Cause(
        "kerberos",
        r"Cannot locate (?:KDC|default realm)|Cannot get kdc for realm|krb5\.conf loading failed"
        r"|(?:Client|Server) not found in Kerberos database|Clock skew too great"
        r"|Pre-authentication information was invalid|Integrity check on decrypted field failed"
        r"|Unable to obtain password from user|client is being asked for a password|KrbException",
        EXIT_AUTHENTICATION,
        "Kerberos (GSSAPI) login failed ({detail}). Check sasl.jaas.config (the principal, and a keyTab "
        "holding its key), sasl.kerberos.service.name (the broker's principal is "
        "<service name>/<broker host>), and that every JVM of the mirror reads the realm's krb5.conf: "
        "/etc/krb5.conf, or -Djava.security.krb5.conf=<file> in kafka_client_java_options.",
    ),
    Cause(
        "authentication",
        r"SaslAuthenticationException|SASL authentication error|Authentication failed"
        r"|invalid credentials|_AUTHENTICATION|SASL_AUTHENTICATION_FAILED|IllegalSaslState"
        r"|UnsupportedSaslMechanism|Unsupported SASL mechanism|LoginException",
        EXIT_AUTHENTICATION,
        "Kafka authentication failed ({detail}). Check the SASL mechanism and credentials: "
        "sasl.mechanism and sasl.jaas.config (kafka_options / output_kafka_options), and for "
        "OAUTHBEARER the token endpoint's answer.",
    ),
    Cause(
        "authorization",
        r"(?:Topic|Group|Cluster|TransactionalId|DelegationToken)AuthorizationException"
        r"|Not authorized to access [^\n]*|(?:TOPIC|GROUP|CLUSTER|TRANSACTIONAL_ID)_AUTHORIZATION_FAILED"
        r"|[A-Za-z]+ authorization failed",
        EXIT_AUTHORIZATION,
        "Kafka refused an operation: the mirror's principal lacks an ACL ({detail}). Grant the ACLs "
        "listed in docs/security.md (Topic __consumer_offsets: Read; Group prefix "
        "spark-kafka-source-: Read; the output topics: Write).",
    ),
)


#: Kafka's words for a key store it could not open (DefaultSslEngineFactory: "Failed to load SSL
#: keystore <path> of type <type>", for trust stores too), and the causes underneath
_STORE_FAILED: Final = re.compile(r"Failed to load SSL keystore (?P<path>.+?) of type (?P<type>\S+)")
_STORE_CAUSES: Final = (
    (
        r"password was incorrect|keystore password|mac check failed|Given final block not properly padded"
        r"|failed to decrypt safe contents entry|BadPaddingException|UnrecoverableKeyException",
        "password",
        "the password is wrong",
    ),
    (
        r"Invalid keystore format|DerInputStream|toDerInputStream|Detect premature EOF|not a PKCS12|"
        r"KeyStoreException: (?:JKS|PKCS12) not found|Unrecognized keystore format|invalid stream header",
        "type",
        "the file is not a {type} store",
    ),
    (r"NoSuchFileException|FileNotFoundException|No such file", "location", "the file does not exist"),
    (r"AccessDeniedException|Permission denied", "location", "the file is not readable"),
)
_INVALID_VALUE: Final = re.compile(
    r"Invalid value (?P<value>.*?) for configuration (?P<name>[\w.]+)(?P<rest>.*)"
)
_MISSING_CLASS: Final = re.compile(
    r"Class (?P<cls>[\w.$]+) (?:cannot|could not) be found|ClassNotFoundException: (?P<cls2>[\w.$]+)"
)
_REFUSED: Final = re.compile(
    r"ConfigException|KafkaException: Failed to construct|Failed to create new KafkaAdminClient"
)


def client_options_error(
    setting: str,
    exc: BaseException,
    options: dict[str, str],
    secrets: Iterable[str] = (),
    *,
    bootstrap: str | None = None,
) -> StartupError:
    """A Kafka client refused ``options`` (the settings map ``setting``): the `StartupError` naming
    the option to fix -- a key store it cannot open (its location, type or password option), an
    invalid value, a class not on the class path -- or, for a failure that is not about the
    options (a broker that refuses the credentials, ...), what `classify` says."""
    text = str(exc)
    m = _STORE_FAILED.search(text)
    if m:
        path = m.group("path")
        kind = next(
            (k for k in ("truststore", "keystore") if options.get(f"ssl.{k}.location") == path),
            "keystore",
        )
        for pattern, option, why in _STORE_CAUSES:
            if re.search(pattern, text, re.I):
                name = f"ssl.{kind}.{option}"
                detail = why.format(type=options.get(f"ssl.{kind}.type", "JKS").upper())
                return StartupError(
                    f"{setting}: {name}: Kafka's client cannot open {path} ({detail}; "
                    f"ssl.{kind}.type={options.get(f'ssl.{kind}.type', 'JKS (the default)')})",
                    EXIT_CONFIG,
                )
        return StartupError(
            f"{setting}: ssl.{kind}.location: Kafka's client cannot open {path}: "
            f"{scrub(first_line(text[m.start() :]), secrets)}",
            EXIT_CONFIG,
        )
    m = _MISSING_CLASS.search(text)
    if m:
        cls = m.group("cls") or m.group("cls2")
        named = [k for k, v in options.items() if cls in v]
        return StartupError(
            f"{setting}: {named[0] if named else 'a class option'}: class {cls} is not on the class path "
            "(a login module or callback handler from another jar: add the jar to spark_jars)",
            EXIT_CONFIG,
        )
    m = _INVALID_VALUE.search(text)
    if m:
        value = "***" if is_secret(m.group("name")) else m.group("value")
        rest = scrub(m.group("rest").splitlines()[0] if m.group("rest") else "", secrets)
        return StartupError(f"{setting}: {m.group('name')}: invalid value {value}{rest}", EXIT_CONFIG)
    if _REFUSED.search(text) and classify_security(exc, secrets=secrets) is None:
        return StartupError(
            f"{setting}: Kafka's client refused the options: {scrub(_innermost(text), secrets)}",
            EXIT_CONFIG,
        )
    return classify(exc, bootstrap=bootstrap, secrets=secrets)


def _innermost(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else text


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
    """The security `StartupError` for ``exc`` (and its causes) or for ``extra`` texts (a client's
    log lines), else None: not a security failure."""
    texts = [f"{type(e).__name__}: {e}" for e in exception_chain(exc)] if exc is not None else []
    texts += list(extra)
    secrets = list(secrets)
    for text in texts:
        found = classify_text(text, secrets)
        if found is not None:
            return found
    return None


def exception_chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur)
        # ``raise X from None`` hides the context: a hidden one may not even be printable (a
        # py4j error reads its text from a JVM that may be gone)
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return out


def first_line(text: str, limit: int = 300) -> str:
    """The informative first line of a (possibly Java) error text, without the stack trace."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # py4j: "An error occurred while calling o123.get.\n: java.util.concurrent.ExecutionException: ..."
    lines = [ln.lstrip(": ") for ln in lines if not ln.startswith("at ") and "error occurred while" not in ln]
    line = lines[0] if lines else text.strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def classify(
    exc: BaseException, *, bootstrap: str | None = None, secrets: Iterable[str] = ()
) -> StartupError:
    """The `StartupError` for ``exc``: itself if it is one; else the security rows
    (`SECURITY_CAUSES`: authentication, TLS, ACLs -- first, since a refused SASL
    handshake also reads as a transport error), then `CAUSES`; exit 1 with its first line if no
    row matches.  ``secrets`` are scrubbed from any quoted detail."""
    for e in exception_chain(exc):
        if isinstance(e, StartupError):
            return e
    found = classify_security(exc, secrets=secrets)
    if found is not None:
        return found
    texts = [f"{type(e).__name__}: {e}" for e in exception_chain(exc)]
    for cause in CAUSES:
        rx = re.compile(cause.pattern)
        for text in texts:
            m = rx.search(text)
            if m:
                detail = first_line(text[m.start() :] if "Exception" in m.group(0) else text)
                return StartupError(
                    cause.message.format(detail=detail, bootstrap=bootstrap or "?"), cause.exit_code
                )
    return StartupError(f"unexpected error: {first_line(texts[0])}", EXIT_UNEXPECTED)

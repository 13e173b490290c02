"""librdkafka (confluent-kafka) configuration from the mirror's Java-style Kafka client options.

The mirror takes one spelling of client options everywhere -- Java's (``security.protocol``,
``sasl.jaas.config``, ``ssl.truststore.location``, ...), what Spark's Kafka source and every Kafka
operator already know.  The driver's own reads (``capture``, the cluster room) run on librdkafka,
which spells some of them differently and cannot read Java keystores.  This module translates; a
security option (``security.*``, ``sasl.*``, ``ssl.*``) without a librdkafka equivalent is refused
with its name -- never dropped -- while other Java-only options (consumer tuning for Spark's source)
are left out of the driver's admin clients.

Escape hatch: an option spelled ``librdkafka.<name>`` is passed to librdkafka as ``<name>``.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any, Final

LIBRDKAFKA_PREFIX: Final = "librdkafka."
#: options of these families must translate, or the driver's client refuses to start
SECURITY_PREFIXES: Final = ("security.", "sasl.", "ssl.")

#: Java option names librdkafka understands with the same meaning and value format
SAME: Final = frozenset(
    {
        "bootstrap.servers",
        "client.dns.lookup",  # use_all_dns_ips / resolve_canonical_bootstrap_servers_only (librdkafka 2.2+)
        "client.id",
        "security.protocol",
        "sasl.mechanism",
        "sasl.kerberos.service.name",
        "ssl.key.password",
        "metadata.max.age.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "socket.connection.setup.timeout.ms",
        "connections.max.idle.ms",
    }
)

#: Java options that only tune Java clients: accepted, nothing to translate
JAVA_ONLY_IGNORED: Final = frozenset(
    {
        "ssl.truststore.type",
        "ssl.keystore.type",
        "ssl.truststore.password",  # a PEM truststore has no password
        "request.timeout.ms",
        "default.api.timeout.ms",
        "fetch.max.wait.ms",
    }
)

_JAAS: Final = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>\w+)(?P<options>.*?);?\s*$", re.DOTALL)
_JAAS_OPTION: Final = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')
_USER_PASSWORD_MODULES: Final = ("PlainLoginModule", "ScramLoginModule")


class ClientOptionError(ValueError):
    """A client option the driver's Kafka client cannot honour; the message names the option."""


def _jaas(value: str) -> dict[str, str]:
    """``sasl.jaas.config`` of a PLAIN or SCRAM login module -> sasl.username / sasl.password."""
    m = _JAAS.match(value)
    module = m.group("module") if m else ""
    if not m or not module.endswith(_USER_PASSWORD_MODULES):
        raise ClientOptionError(
            "sasl.jaas.config: only PlainLoginModule and ScramLoginModule translate to librdkafka "
            f"(got {module or 'an unreadable value'}); for OAUTHBEARER give the "
            "librdkafka.sasl.oauthbearer.* options"
        )
    opts = {
        o.group(1): o.group(2) if o.group(2) is not None else o.group(3)
        for o in _JAAS_OPTION.finditer(m.group("options"))
    }
    missing = [k for k in ("username", "password") if k not in opts]
    if missing:
        raise ClientOptionError(f"sasl.jaas.config: {' and '.join(missing)} missing")
    return {"sasl.username": opts["username"], "sasl.password": opts["password"].replace('\\"', '"')}


def _truststore(options: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    if "ssl.truststore.location" in options:
        if options.get("ssl.truststore.type", "JKS").upper() != "PEM":
            raise ClientOptionError(
                "ssl.truststore.location: librdkafka reads PEM trust stores only; set "
                "ssl.truststore.type=PEM and give a PEM file of CA certificates"
            )
        out["ssl.ca.location"] = options["ssl.truststore.location"]
    if "ssl.truststore.certificates" in options:
        out["ssl.ca.pem"] = options["ssl.truststore.certificates"]
    return out


def _keystore(options: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    kind = options.get("ssl.keystore.type", "JKS").upper()
    if "ssl.keystore.location" in options:
        location = options["ssl.keystore.location"]
        if kind == "PKCS12":
            out["ssl.keystore.location"] = location
            if "ssl.keystore.password" in options:
                out["ssl.keystore.password"] = options["ssl.keystore.password"]
        elif kind == "PEM":  # one file with the private key and the certificate chain
            out["ssl.certificate.location"] = location
            out["ssl.key.location"] = location
        else:
            raise ClientOptionError(
                f"ssl.keystore.location: librdkafka cannot read a {kind} key store; use "
                "ssl.keystore.type=PKCS12 or PEM"
            )
    if "ssl.keystore.certificate.chain" in options:
        out["ssl.certificate.pem"] = options["ssl.keystore.certificate.chain"]
    if "ssl.keystore.key" in options:
        out["ssl.key.pem"] = options["ssl.keystore.key"]
    return out


_HANDLED: Final = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.endpoint.identification.algorithm",
    }
)


def librdkafka_config(options: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka configuration for the mirror's Java-style ``options`` (no bootstrap added)."""
    out: dict[str, str] = {}
    # An unknown option that concerns security is refused (never connect with less security than
    # asked); any other unknown option tunes Spark's Java consumer (max.poll.records, ...) and has
    # no say in the driver's admin reads: it is left out.
    unknown = sorted(
        k
        for k in options
        if not k.startswith(LIBRDKAFKA_PREFIX)
        and k not in SAME | JAVA_ONLY_IGNORED | _HANDLED
        and k.startswith(SECURITY_PREFIXES)
    )
    if unknown:
        raise ClientOptionError(
            f"{unknown[0]}: no librdkafka equivalent is known for this Kafka client option; "
            f"spell it {LIBRDKAFKA_PREFIX}<name> to pass a librdkafka option as it is"
        )
    out.update({k: v for k, v in options.items() if k in SAME})
    if "sasl.jaas.config" in options:
        out.update(_jaas(options["sasl.jaas.config"]))
    out.update(_truststore(options))
    out.update(_keystore(options))
    if "ssl.endpoint.identification.algorithm" in options:
        algorithm = options["ssl.endpoint.identification.algorithm"].strip()
        out["ssl.endpoint.identification.algorithm"] = algorithm.lower() if algorithm else "none"
    out.update(
        {k[len(LIBRDKAFKA_PREFIX) :]: v for k, v in options.items() if k.startswith(LIBRDKAFKA_PREFIX)}
    )
    return out


class ClientLog(logging.Handler):
    """A driver client's librdkafka log lines and error callbacks, kept -- never printed (a refused
    handshake or an unreachable broker would print a line per retry) -- so that a failure can say
    why: the call that fails reports only a timeout or "transport failure"."""

    def __init__(self, name: str, keep: int = 50) -> None:
        super().__init__(logging.DEBUG)
        self._lines: deque[str] = deque(maxlen=keep)
        self._lock_lines = threading.Lock()
        self.logger = logging.getLogger(f"coordinator_mirror.librdkafka.{name}")
        self.logger.propagate = False
        self.logger.setLevel(logging.INFO)
        self.logger.handlers = [self]

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock_lines:
            self._lines.append(record.getMessage())

    def error_cb(self, err: Any) -> None:
        with self._lock_lines:
            self._lines.append(str(err))

    def lines(self) -> list[str]:
        with self._lock_lines:
            return list(self._lines)

    def last(self, n: int = 3) -> str:
        """The newest ``n`` lines, for an error message ("" when there are none)."""
        return " | ".join(self.lines()[-n:])


def driver_config(
    bootstrap: str, options: Mapping[str, str], timeout_s: float, client_log: ClientLog | None = None
) -> dict[str, Any]:
    """The driver's librdkafka configuration: the mirror's Java-style ``options`` translated by
    `librdkafka_config` (which refuses, naming the option, what librdkafka cannot honour), plus the
    bootstrap servers, a client id and a connection timeout the options may override; librdkafka's
    log lines and errors go to ``client_log`` (kept, not printed)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": "coordinator-mirror-driver",
        "socket.connection.setup.timeout.ms": int(timeout_s * 1000),
    }
    if client_log is not None:
        conf.update(logger=client_log.logger, error_cb=client_log.error_cb)
    conf.update(librdkafka_config(options))
    return conf

"""A real single-node KRaft Kafka broker on loopback, started and stopped from Python.

One module serves the tests, the demo and the benchmarks.  The broker is the jars that `make jars`
resolved from Maven Central, run with the system's ``java``; it formats its own storage in a
work directory, listens on free loopback ports, and is stopped with a controlled shutdown (SIGTERM)
or killed.  On Linux the JVM also receives SIGKILL if the Python process that started it dies
(PR_SET_PDEATHSIG), so a killed test run leaves no orphan ``java``.

With ``BrokerSettings(secured=True)`` the broker also listens with SASL_SSL (SCRAM-SHA-512 and
OAUTHBEARER with Kafka's unsecured JWTs), OIDC (SASL_SSL with OAUTHBEARER tokens from a token
endpoint, `lab.oidc`, verified against its JWKS), KERBEROS (SASL_SSL with GSSAPI: principals of a KDC
of its own, `lab.kdc`) and SSL (mutual TLS) beside PLAINTEXT, with
certificates made at start (`lab.pki`), a SCRAM super user ``admin`` written into the storage at
format time (``--add-scram``), and Kafka's StandardAuthorizer on.  PLAINTEXT clients are the
principal ``User:ANONYMOUS``, which is a super user: every test that speaks PLAINTEXT keeps full
access, while the users made on the secured listeners hold only the
ACLs a test grants them.  (Not ``allow.everyone.if.no.acl.found=true``: it would let those users
reach every resource that has no ACL at all -- ``__consumer_offsets`` among them -- and a test of
the minimal ACL list would prove nothing.)
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lab.kdc import Kdc
from lab.oidc import OidcServer
from lab.pki import KeyPair, Pki
from lab.proc import free_port as _free_port
from lab.proc import kill_group, stop_group
from lab.proc import set_pdeathsig as _set_pdeathsig
from streaming.jars import kafka_classpath, kafka_version

OFFSETS_TOPIC = "__consumer_offsets"
#: the SCRAM super user of a secured broker (created at format time) and its password
ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-Secret-0"
#: the keystore password of the broker's and the clients' PKCS#12 files
KEYSTORE_PASSWORD = "keystore-Secret-0"
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: the login module of SASL/OAUTHBEARER (Kafka's, both for unsecured JWTs and an OIDC token endpoint)
OAUTH_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
#: the client's callback handler that fetches tokens from a token endpoint (KIP-768)
OAUTH_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
#: the Kerberos service name of the broker (its principal is kafka/<host>@REALM) and that host: the
#: name clients connect to -- what the KERBEROS listener advertises -- and find the principal by
KERBEROS_SERVICE = "kafka"
KERBEROS_HOST = "localhost"


class BrokerStartError(RuntimeError):
    """The broker did not come up; the message carries the tail of its log."""


@dataclass(frozen=True)
class BrokerSettings:
    """What a test or the demo may choose about its broker.  Defaults suit the test suite."""

    kafka_version: str = field(default_factory=kafka_version)
    #: small, so that every test group lands on few partitions (the broker default is 50)
    offsets_topic_num_partitions: int = 5
    #: broker default 10080 (7 days); expiry tests use a dedicated broker with 1
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    #: how often the broker deletes segments past a topic's retention (default 300000): seconds,
    #: so that a test topic with a retention.ms of seconds loses records while the test waits
    log_retention_check_interval_ms: int = 1000
    #: 0 so that a lone consumer's first rebalance completes at once (broker default 3000)
    group_initial_rebalance_delay_ms: int = 0
    #: lets scenarios crash a member and see the session time out within seconds (default 6000)
    group_min_session_timeout_ms: int = 1000
    #: 4.x KIP-848 consumer groups have their own session timeout floor (default 45000)
    group_consumer_min_session_timeout_ms: int = 1000
    group_consumer_session_timeout_ms: int = 6000
    heap: str = "768m"
    #: SASL_SSL (SCRAM-SHA-512, OAUTHBEARER), OIDC, KERBEROS and SSL (mTLS) listeners, the
    #: StandardAuthorizer (see module doc)
    secured: bool = False
    #: any other server.properties entry, verbatim
    extra: Mapping[str, str] = field(default_factory=dict)

    def with_(self, **changes: Any) -> BrokerSettings:
        return replace(self, **changes)


def _major(version: str) -> int:
    return int(version.split(".", 1)[0])


def _admin(bootstrap: str) -> Any:
    """An AdminClient that stays quiet while the broker is still starting (or already gone)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 2000, "log_level": 0}
    )


_LIVE: set[LocalKafka] = set()


@atexit.register
def _kill_leftovers() -> None:
    for broker in list(_LIVE):
        broker.kill()


class LocalKafka:
    """A broker process.  ``with LocalKafka(settings) as kafka: kafka.bootstrap`` ..."""

    def __init__(
        self,
        settings: BrokerSettings | None = None,
        workdir: str | Path | None = None,
        *,
        kdc: Kdc | None = None,
    ) -> None:
        """``kdc``: the KDC of a secured broker's KERBEROS listener, not started yet -- for a caller
        that chooses where its ``krb5.conf`` will be (default: ``<workdir>/kdc``)."""
        self.settings = settings or BrokerSettings()
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="cm-kafka-"))
        self.port = 0
        self.controller_port = 0
        self.sasl_port = 0
        self.ssl_port = 0
        self.oidc_port = 0
        self.oidc: OidcServer | None = None
        self.kerberos_port = 0
        self.kdc: Kdc | None = kdc
        self.process: subprocess.Popen[bytes] | None = None
        self._log_starts: dict[Path, int] = {}  # where the current launch's lines start, per log
        self.cluster_id = ""
        self.pki: Pki | None = None
        self._certs: dict[str, KeyPair] = {}

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        if not self.port:
            raise RuntimeError("broker not started")
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_SSL (SCRAM-SHA-512) listener of a secured broker."""
        if not self.sasl_port:
            raise RuntimeError("broker not started with secured=True")
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        """The SSL listener (client certificates required) of a secured broker."""
        if not self.ssl_port:
            raise RuntimeError("broker not started with secured=True")
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def oidc_bootstrap(self) -> str:
        """The OIDC listener (SASL_SSL, OAUTHBEARER tokens of `oidc`) of a secured broker."""
        if not self.oidc_port:
            raise RuntimeError("broker not started with secured=True")
        return f"127.0.0.1:{self.oidc_port}"

    @property
    def kerberos_bootstrap(self) -> str:
        """The KERBEROS listener (SASL_SSL, GSSAPI with principals of `kdc`) of a secured broker,
        by the host name its principal names (``kafka/localhost``)."""
        if not self.kerberos_port:
            raise RuntimeError("broker not started with secured=True")
        return f"{KERBEROS_HOST}:{self.kerberos_port}"

    def bootstrap_of(self, listener: str) -> str:
        """The address of ``listener``: PLAINTEXT, SASL_SSL (also OAUTHBEARER), OIDC, GSSAPI or SSL."""
        return {
            "PLAINTEXT": self.bootstrap,
            "SASL_SSL": self.sasl_bootstrap,
            "OAUTHBEARER": self.sasl_bootstrap,
            "OIDC": self.oidc_bootstrap,
            "GSSAPI": self.kerberos_bootstrap,
            "SSL": self.ssl_bootstrap,
        }[listener]

    @property
    def log_path(self) -> Path:
        return self.workdir / "broker.log"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def server_properties(self) -> dict[str, str]:
        s = self.settings
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": str(s.offsets_topic_num_partitions),
            "offsets.retention.minutes": str(s.offsets_retention_minutes),
            "offsets.retention.check.interval.ms": str(s.offsets_retention_check_interval_ms),
            "log.retention.check.interval.ms": str(s.log_retention_check_interval_ms),
            "group.initial.rebalance.delay.ms": str(s.group_initial_rebalance_delay_ms),
            "group.min.session.timeout.ms": str(s.group_min_session_timeout_ms),
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "3",
            "min.insync.replicas": "1",
            "default.replication.factor": "1",
            # A short commit-marker delay keeps transactional scenarios quick.
            "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
        }
        if _major(s.kafka_version) >= 4:
            props.update(
                {
                    # Share-group state lives in its own internal topic (KIP-932).
                    "share.coordinator.state.topic.replication.factor": "1",
                    "share.coordinator.state.topic.min.isr": "1",
                    "share.coordinator.state.topic.num.partitions": "3",
                    "group.consumer.min.session.timeout.ms": str(s.group_consumer_min_session_timeout_ms),
                    "group.consumer.session.timeout.ms": str(s.group_consumer_session_timeout_ms),
                    "group.share.min.session.timeout.ms": str(s.group_consumer_min_session_timeout_ms),
                    "group.share.session.timeout.ms": str(s.group_consumer_session_timeout_ms),
                    "group.streams.min.session.timeout.ms": str(s.group_consumer_min_session_timeout_ms),
                    "group.streams.session.timeout.ms": str(s.group_consumer_session_timeout_ms),
                    # Heartbeats carry KIP-848 reconciliation: frequent ones make groups converge fast.
                    "group.consumer.min.heartbeat.interval.ms": "500",
                    "group.consumer.heartbeat.interval.ms": "500",
                    "group.share.min.heartbeat.interval.ms": "500",
                    "group.share.heartbeat.interval.ms": "500",
                    "group.streams.min.heartbeat.interval.ms": "500",
                    "group.streams.heartbeat.interval.ms": "500",
                }
            )
        if s.secured:
            props.update(self._secured_properties())
        props.update(s.extra)
        return props

    def _secured_properties(self) -> dict[str, str]:
        assert self.pki is not None
        assert self.oidc is not None
        assert self.kdc is not None
        plain = f"PLAINTEXT://127.0.0.1:{self.port}"
        sasl, ssl = f"SASL_SSL://127.0.0.1:{self.sasl_port}", f"SSL://127.0.0.1:{self.ssl_port}"
        oidc = f"OIDC://127.0.0.1:{self.oidc_port}"
        # bound to loopback, advertised by the host name of the broker's principal
        krb, krb_advertised = (
            f"KERBEROS://127.0.0.1:{self.kerberos_port}",
            f"KERBEROS://{self.kerberos_bootstrap}",
        )
        return {
            "listeners": f"{plain},CONTROLLER://127.0.0.1:{self.controller_port},{sasl},{ssl},{oidc},{krb}",
            "advertised.listeners": f"{plain},{sasl},{ssl},{oidc},{krb_advertised}",
            "listener.security.protocol.map": (
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,OIDC:SASL_SSL,KERBEROS:SASL_SSL"
            ),
            "sasl.enabled.mechanisms": f"{SCRAM_MECHANISM},OAUTHBEARER",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            # Kafka's unsecured JWTs (no signature; the principal is the token's sub claim)
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": f"{OAUTH_LOGIN_MODULE} required;",
            # tokens of the OIDC endpoint, verified against its JWKS (KIP-768)
            "listener.name.oidc.sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.oidc.oauthbearer.sasl.jaas.config": f"{OAUTH_LOGIN_MODULE} required;",
            "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            ),
            "sasl.oauthbearer.jwks.endpoint.url": self.oidc.jwks_url,
            "sasl.oauthbearer.expected.audience": self.oidc.audience,
            # Kerberos: the broker logs in as kafka/localhost@REALM from its keytab; a client
            # principal of the KDC's (default) realm is User:<its first component>
            # (sasl.kerberos.principal.to.local.rules=DEFAULT)
            "listener.name.kerberos.sasl.enabled.mechanisms": "GSSAPI",
            "listener.name.kerberos.gssapi.sasl.jaas.config": self.kdc.jaas(
                f"{KERBEROS_SERVICE}/{KERBEROS_HOST}"
            ),
            "sasl.kerberos.service.name": KERBEROS_SERVICE,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.pki.dir / "broker.p12"),
            "ssl.keystore.password": KEYSTORE_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.pki.ca_cert),
            "listener.name.ssl.ssl.client.auth": "required",
            # a client certificate's CN is its principal: CN=mirror-tls -> User:mirror-tls
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # ANONYMOUS: every PLAINTEXT client (the other tests, the lab) and the controller link
            "super.users": f"User:ANONYMOUS;User:{ADMIN_USER}",
            "allow.everyone.if.no.acl.found": "false",
        }

    def client_options(
        self,
        listener: str,
        user: str,
        password: str = "",
        *,
        truststore: str = "PEM",
        keystore: str = "PKCS12",
    ) -> dict[str, str]:
        """Java client options (Spark's Kafka source, ``--kafka-options``) for ``user`` on a
        secured listener: ``SASL_SSL`` (SCRAM ``password``), ``OAUTHBEARER`` (the SASL_SSL listener
        with an unsecured JWT whose sub is ``user``), ``OIDC`` (client ``user`` with secret
        ``password`` at the token endpoint, registered here), ``GSSAPI`` (Kerberos principal
        ``user@REALM`` of `kdc`, made here, its key in a keytab) or ``SSL`` (``user``'s certificate,
        issued by `client_cert`, in a ``keystore`` of type PKCS12, JKS or PEM).  The trust store
        holding the broker's CA is a ``truststore`` of type PEM, PKCS12 or JKS."""
        assert self.pki is not None and self.oidc is not None
        location, store_password = self.pki.truststore(truststore, KEYSTORE_PASSWORD)
        common = {"ssl.truststore.type": truststore, "ssl.truststore.location": str(location)}
        if store_password:
            common["ssl.truststore.password"] = store_password
        if listener == "SASL_SSL":
            return {
                **common,
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": SCRAM_MECHANISM,
                "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{user}" password="{password}";',
            }
        if listener == "OAUTHBEARER":
            return {
                **common,
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.jaas.config": f'{OAUTH_LOGIN_MODULE} required unsecuredLoginStringClaim_sub="{user}";',
            }
        if listener == "OIDC":
            self.oidc.client(user, password)
            return {
                **common,
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.login.callback.handler.class": OAUTH_LOGIN_HANDLER,
                "sasl.oauthbearer.token.endpoint.url": self.oidc.token_url,
                "sasl.jaas.config": (
                    f'{OAUTH_LOGIN_MODULE} required clientId="{user}" clientSecret="{password}";'
                ),
            }
        if listener == "GSSAPI":
            assert self.kdc is not None
            return {
                **common,
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "GSSAPI",
                "sasl.kerberos.service.name": KERBEROS_SERVICE,
                "sasl.jaas.config": self.kdc.jaas(user),
            }
        pair = self.client_cert(user)
        return {**common, "security.protocol": "SSL", **self.pki.keystore_options(pair, keystore)}

    def client_cert(self, user: str) -> KeyPair:
        """``user``'s client certificate from the broker's CA (made once)."""
        assert self.pki is not None
        if user not in self._certs:
            self._certs[user] = self.pki.issue(user, KEYSTORE_PASSWORD)
        return self._certs[user]

    def _write_configs(self) -> tuple[Path, Path]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        server = self.workdir / "server.properties"
        server.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(
            "status = error\n"
            "appender.file.type = File\n"
            "appender.file.name = FILE\n"
            f"appender.file.fileName = {self.workdir / 'server.log'}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = FILE\n"
            "logger.kafka.name = kafka\nlogger.kafka.level = INFO\n"
            "logger.state.name = state.change.logger\nlogger.state.level = WARN\n"
        )
        return server, log4j

    def _java(self, *args: str, log4j: Path | None = None, heap: str | None = None) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise BrokerStartError("`java` (17+) is not on PATH")
        cmd = [java]
        if heap:
            cmd += [f"-Xmx{heap}", "-Xms128m", "-XX:+UseG1GC"]
        if log4j is not None:
            cmd.append(f"-Dlog4j2.configurationFile={log4j}")
        if self.oidc is not None:  # Kafka 4 allows no token or JWKS URL it is not told of
            cmd.append(f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.oidc.jwks_url}")
        if self.kdc is not None:  # the realm and its KDC
            cmd.append(f"-Djava.security.krb5.conf={self.kdc.krb5_conf}")
        cmd += ["-Djava.awt.headless=true", "-cp", kafka_classpath(self.settings.kafka_version), *args]
        return cmd

    def _format(self, server: Path, log4j: Path) -> None:
        # KRaft cluster ids are 22-char URL-safe base64 of 16 bytes; StorageTool random-uuid
        # would cost a JVM start, so build one ourselves.
        import base64

        # ...and never starting with "-", which the storage tool would read as an option.
        while True:
            self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            if not self.cluster_id.startswith("-"):
                break
        args = ["kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(server)]
        if self.settings.secured:
            # KIP-900: SCRAM credentials written into the KRaft metadata before the first start
            args += ["--add-scram", f"{SCRAM_MECHANISM}=[name={ADMIN_USER},password={ADMIN_PASSWORD}]"]
        cmd = self._java(*args, log4j=log4j)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if out.returncode != 0:
            raise BrokerStartError(f"formatting KRaft storage failed:\n{out.stdout}\n{out.stderr}")

    def start(self, timeout_s: float = 90.0, *, offsets_topic: bool = True) -> LocalKafka:
        """Format fresh storage and start.  ``offsets_topic=False`` leaves the cluster as a brand-new
        one is: no `__consumer_offsets` until the first group request."""
        if self.process is not None:
            return self
        last_error = ""
        for _attempt in range(3):  # a free port can be taken between probing and binding
            self.port, self.controller_port = _free_port(), _free_port()
            if self.settings.secured:
                self.sasl_port, self.ssl_port, self.oidc_port = _free_port(), _free_port(), _free_port()
                self.kerberos_port = _free_port()
                if self.pki is None:
                    self.pki = Pki(self.workdir / "pki")
                    self.pki.issue("broker", KEYSTORE_PASSWORD, server=True)
                if self.oidc is None:  # before the broker: it reads the JWKS at start
                    self.oidc = OidcServer(self.workdir / "oidc").start()
                # before the broker: it logs in at start
                self.kdc = (self.kdc or Kdc(self.workdir / "kdc")).start()
            if self.data_dir.exists():
                shutil.rmtree(self.data_dir)
            server, log4j = self._write_configs()
            self._format(server, log4j)
            self._launch(server, log4j)
            try:
                self._wait_ready(timeout_s, offsets_topic=offsets_topic)
                return self
            except BrokerStartError as exc:
                last_error = str(exc)
                self.kill()
                if not self._bind_failed():
                    break
        raise BrokerStartError(last_error)

    def _launch(self, server: Path, log4j: Path) -> None:
        self._log_starts = {path: path.stat().st_size if path.exists() else 0 for path in self._log_paths()}
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(server), log4j=log4j, heap=self.settings.heap),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_set_pdeathsig,  # noqa: PLW1509 - only async-signal-safe prctl
            )
        _LIVE.add(self)

    def restart(self, timeout_s: float = 90.0) -> LocalKafka:
        """Start a stopped broker again on the same data directory and ports (a broker outage
        that ends: the log, the cluster id and the bootstrap address are kept)."""
        if self.process is not None:
            return self
        if not self.port or not self.data_dir.exists():
            raise RuntimeError("restart() needs a broker that was started and stopped before")
        self._launch(self.workdir / "server.properties", self.workdir / "log4j2.properties")
        try:
            self._wait_ready(timeout_s, offsets_topic=False)
        except BrokerStartError:
            self.kill()
            raise
        return self

    def _bind_failed(self) -> bool:
        """Whether this launch's broker could not bind a listener's port (taken since it was
        chosen): read from the whole of this launch's log -- the bind error is followed by a
        controlled shutdown of well over 40 lines, so a log tail no longer shows it."""
        text = self._launch_log()
        return "Address already in use" in text or "BindException" in text

    def _log_paths(self) -> tuple[Path, Path]:
        """The JVM's own output, and log4j's file (where the broker's errors go)."""
        return self.log_path, self.workdir / "server.log"

    def _launch_log(self) -> str:
        """What this launch wrote to its logs (both files are appended to by every launch)."""
        text = ""
        for path in self._log_paths():
            if path.exists():
                with open(path, "rb") as f:
                    f.seek(self._log_starts.get(path, 0))
                    text += f.read().decode(errors="replace")
        return text

    def _first_error(self) -> str:
        """This launch's first ERROR line, which a log tail of its shutdown no longer shows."""
        return next((line for line in self._launch_log().splitlines() if " ERROR " in line), "")

    def _log_tail(self, lines: int = 40) -> str:
        text = ""
        for path in self._log_paths():
            if path.exists():
                text += "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
        return text

    def _wait_ready(self, timeout_s: float, *, offsets_topic: bool = True) -> None:
        """Wait until the broker serves metadata and (``offsets_topic``) `__consumer_offsets`
        exists with leaders."""
        deadline = time.monotonic() + timeout_s
        admin = _admin(self.bootstrap)
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise BrokerStartError(
                    f"broker exited with {self.process.returncode}; its first error: "
                    f"{self._first_error() or '(none logged)'}\nlog tail:\n{self._log_tail()}"
                )
            try:
                md = admin.list_topics(timeout=2)
                if md.brokers:
                    break
            except Exception:  # not serving yet: keep polling until the deadline
                pass
            if time.monotonic() > deadline:
                raise BrokerStartError(f"broker not serving metadata after {timeout_s}s:\n{self._log_tail()}")
            time.sleep(0.2)
        if offsets_topic:
            self.ensure_offsets_topic(admin, max(5.0, deadline - time.monotonic()))

    def ensure_offsets_topic(self, admin: Any = None, timeout_s: float = 60.0) -> None:
        """Make the coordinator create `__consumer_offsets` (it does so on the first FindCoordinator)."""
        admin = admin or _admin(self.bootstrap)
        deadline = time.monotonic() + timeout_s
        while True:
            md = admin.list_topics(timeout=5)
            t = md.topics.get(OFFSETS_TOPIC)
            if (
                t is not None
                and t.error is None
                and len(t.partitions) == self.settings.offsets_topic_num_partitions
                and all(p.leader >= 0 for p in t.partitions.values())
            ):
                return
            try:
                # Any group request makes the coordinator look itself up.  (Not
                # list_consumer_group_offsets without partitions: librdkafka 2.16 segfaults on
                # that call against 4.3 brokers.)
                for f in admin.describe_consumer_groups(["cm-bootstrap-probe"]).values():
                    f.result(timeout=5)
            except Exception:  # COORDINATOR_NOT_AVAILABLE while the topic is being created
                pass
            if time.monotonic() > deadline:
                raise BrokerStartError(f"{OFFSETS_TOPIC} not ready after {timeout_s}s:\n{self._log_tail()}")
            time.sleep(0.3)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Controlled shutdown (SIGTERM), then SIGKILL if it takes longer than ``timeout_s``."""
        proc = self.process
        if proc is None:
            return
        stop_group(proc, timeout_s)
        self._forget()

    def kill(self) -> None:
        proc = self.process
        if proc is None:
            return
        kill_group(proc)
        self._forget()

    def _forget(self) -> None:
        self.process = None
        _LIVE.discard(self)

    def cleanup(self) -> None:
        """Stop and remove the work directory (if this object created it)."""
        self.stop()
        if self.oidc is not None:
            self.oidc.stop()
            self.oidc = None
        if self.kdc is not None:
            self.kdc.stop()
            self.kdc = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = "running" if self.process else "stopped"
        return f"LocalKafka({self.settings.kafka_version}, {state}, port={self.port}, dir={self.workdir})"

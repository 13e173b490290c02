"""A Kerberos KDC on loopback (MIT krb5: Debian's ``krb5-kdc`` and ``krb5-admin-server``), a realm of
its own in a work directory, for the secured test broker's GSSAPI listener.

`Kdc.start` writes a ``kdc.conf`` and a ``krb5.conf`` (`krb5_conf`: what a JVM is told with
``-Djava.security.krb5.conf``), creates the realm's database (``kdb5_util create``) and runs
``krb5kdc`` in the foreground on a free loopback port (TCP and UDP; the clients are told to use
TCP).  `Kdc.keytab` makes a principal with a random key (``kadmin.local addprinc -randkey``) and
exports its key to a keytab file of its own (``ktadd``) -- the broker's ``kafka/localhost@REALM``
and every client's.  Nothing here reads or writes the system's ``/etc/krb5.conf`` or
``/etc/krb5kdc``: the tools are pointed at the work directory by ``KRB5_CONFIG`` and
``KRB5_KDC_PROFILE``.  The KDC dies with the process that started it (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

from lab.proc import free_port, set_pdeathsig, stop_group

#: the lab's realm (a name of its own: nothing on the machine or in DNS knows it)
REALM = "COORDINATOR-MIRROR.TEST"
#: where Debian puts the KDC's tools (often not on a non-root user's PATH)
_SBIN = ("/usr/sbin", "/sbin")
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local")
#: the Debian packages that carry `TOOLS` (`make setup` installs them)
PACKAGES = ("krb5-kdc", "krb5-admin-server")


class KdcError(RuntimeError):
    """A KDC tool is missing, one of its commands failed or the KDC did not come up (the message
    carries its output)."""


def find_tools() -> dict[str, str]:
    """The KDC's tools by name; `KdcError` naming the missing ones and their packages otherwise."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    found = {t: shutil.which(t, path=path) for t in TOOLS}
    missing = [t for t, p in found.items() if p is None]
    if missing:
        raise KdcError(
            f"{', '.join(missing)} not found: apt-get install {' '.join(PACKAGES)} (`make setup` does)"
        )
    return {t: p for t, p in found.items() if p is not None}


class Kdc:
    """``with Kdc(dir) as kdc: kdc.keytab("mirror")`` ... (see the module docstring)."""

    def __init__(self, directory: Path, realm: str = REALM) -> None:
        self.dir = Path(directory)
        self.realm = realm
        self.port = 0
        self.krb5_conf = self.dir / "krb5.conf"
        self.kdc_conf = self.dir / "kdc.conf"
        self.process: subprocess.Popen[bytes] | None = None
        self._tools: dict[str, str] = {}
        self._keytabs: dict[str, Path] = {}

    # -- principals ------------------------------------------------------------------------------
    def principal(self, name: str) -> str:
        """``name`` in this realm (``mirror`` -> ``mirror@REALM``; a name with a realm is kept)."""
        return name if "@" in name else f"{name}@{self.realm}"

    def keytab(self, name: str) -> Path:
        """A keytab holding the key of principal ``name`` (created with a random key, once)."""
        principal = self.principal(name)
        if principal not in self._keytabs:
            path = self.dir / "keytabs" / f"{principal.split('@')[0].replace('/', '_')}.keytab"
            path.parent.mkdir(exist_ok=True)
            self._kadmin(f"addprinc -randkey {principal}")
            self._kadmin(f"ktadd -k {path} {principal}")
            self._keytabs[principal] = path
        return self._keytabs[principal]

    def jaas(self, name: str) -> str:
        """The JAAS line of a Kafka client or broker logging in as ``name`` from its keytab."""
        return (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
            f'keyTab="{self.keytab(name)}" principal="{self.principal(name)}";'
        )

    def tickets(self, client: str, service: str) -> int:
        """How many service tickets for ``service`` the KDC issued to ``client`` (from its log's
        ``TGS_REQ ... ISSUE: ..., <client> for <service>`` lines): each is a Kerberos login of a
        client that went on to authenticate to that service."""
        log = self.dir / "kdc.log"
        if not log.exists():
            return 0
        tail = f", {self.principal(client)} for {self.principal(service)}"
        return sum(
            1 for line in log.read_text(errors="replace").splitlines()
            if "TGS_REQ" in line and "ISSUE:" in line and line.endswith(tail)
        )  # fmt: skip

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, timeout_s: float = 30.0) -> Kdc:
        if self.process is not None:
            return self
        self._tools = find_tools()
        self.dir.mkdir(parents=True, exist_ok=True)
        last = ""
        for _attempt in range(3):  # a free port can be taken between probing and binding
            self.port = free_port()
            self._write_configs()
            if not (self.dir / "principal").exists():
                # the master key only encrypts this throwaway database: a random one, never kept
                self._run("kdb5_util", "create", "-s", "-r", self.realm, "-P", secrets.token_hex(16))
            with open(self.dir / "krb5kdc.out", "ab") as out:
                self.process = subprocess.Popen(
                    [self._tools["krb5kdc"], "-n", "-r", self.realm],
                    env=self._env(),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=set_pdeathsig,  # noqa: PLW1509 - only async-signal-safe prctl
                )
            try:
                self._wait_ready(timeout_s)
                return self
            except KdcError as exc:
                last = str(exc)
                self.stop()
                if "Address already in use" not in last:
                    break
        raise KdcError(last)

    def _write_configs(self) -> None:
        d, realm, port = self.dir, self.realm, self.port
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f" kdc_listen = 127.0.0.1:{port}\n"
            f" kdc_tcp_listen = 127.0.0.1:{port}\n"
            "[realms]\n"
            f" {realm} = {{\n"
            f"  database_name = {d / 'principal'}\n"
            f"  key_stash_file = {d / 'stash'}\n"
            f"  acl_file = {d / 'kadm5.acl'}\n"
            "  max_life = 1d\n"
            "  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            " }\n"
            "[logging]\n"
            f" kdc = FILE:{d / 'kdc.log'}\n"
            f" admin_server = FILE:{d / 'kadmin.log'}\n"
            f" default = FILE:{d / 'krb5lib.log'}\n"
        )
        # what the JVMs read (-Djava.security.krb5.conf) and the tools too (KRB5_CONFIG): this realm
        # is the default one (a Kafka broker maps principals of its default realm to their short
        # name), its KDC asked over TCP, host names taken as given (the broker is kafka/localhost)
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f" default_realm = {realm}\n"
            " dns_lookup_kdc = false\n"
            " dns_lookup_realm = false\n"
            " dns_canonicalize_hostname = false\n"
            " rdns = false\n"
            " udp_preference_limit = 1\n"
            "[realms]\n"
            f" {realm} = {{\n"
            f"  kdc = 127.0.0.1:{port}\n"
            " }\n"
            "[domain_realm]\n"
            f" localhost = {realm}\n"
        )
        (d / "kadm5.acl").write_text("")

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.kdc_conf),
            # never the user's ticket cache
            "KRB5CCNAME": f"FILE:{self.dir / 'ccache'}",
        }

    def _run(self, tool: str, *args: str) -> str:
        out = subprocess.run(
            [self._tools[tool], *args],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if out.returncode != 0:
            raise KdcError(
                f"{tool} {args[0]} failed ({out.returncode}): {out.stdout.strip()} {out.stderr.strip()}"
            )
        return out.stdout

    def _kadmin(self, query: str) -> None:
        if not self._tools:
            raise KdcError("the KDC is not started")
        self._run("kadmin.local", "-r", self.realm, "-q", query)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise KdcError(f"krb5kdc exited with {self.process.returncode}: {self._log_tail()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            if time.monotonic() > deadline:
                raise KdcError(
                    f"krb5kdc not listening on 127.0.0.1:{self.port} after {timeout_s}s: {self._log_tail()}"
                )
            time.sleep(0.05)

    def _log_tail(self, lines: int = 20) -> str:
        text = ""
        for name in ("krb5kdc.out", "kdc.log"):
            path = self.dir / name
            if path.exists():
                text += "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
        return text

    def stop(self) -> None:
        proc = self.process
        if proc is None:
            return
        stop_group(proc)
        self.process = None

    def __enter__(self) -> Kdc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

"""Test-time TLS material for the lab broker's secured listeners, made with the system's ``openssl``.

One call makes a throwaway certificate authority, a broker certificate for ``127.0.0.1`` and
``localhost``, and client certificates (their CN becomes the Kafka principal through the broker's
``ssl.principal.mapping.rules``), each as PEM files and a password-protected PKCS#12 keystore --
and, converted by the JDK's keytool, as JKS (`Pki.truststore`, `Pki.keystore_options`): every
store type a Java client reads.  A second, unrelated "rogue" authority signs
certificates that the broker must refuse.  Nothing here is fit for production: keys live in a temp
directory and expire in two days.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class PkiError(RuntimeError):
    """openssl is missing or one of its commands failed (the message carries its stderr)."""


@dataclass(frozen=True)
class KeyPair:
    """One certificate: PEM key and certificate, and a PKCS#12 keystore holding both plus the CA."""

    name: str
    key_pem: Path
    cert_pem: Path
    keystore: Path
    password: str


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise PkiError("`openssl` is not on PATH (apt-get install openssl)")
    out = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if out.returncode != 0:
        raise PkiError(f"openssl {' '.join(args[:2])} failed: {out.stderr.strip()}")


class Pki:
    """A certificate authority in ``directory`` (created on first use) that issues key pairs."""

    def __init__(self, directory: Path, ca_name: str = "cm-test-ca") -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_key = self.dir / f"{ca_name}.key"
        self.ca_cert = self.dir / f"{ca_name}.pem"
        if not self.ca_cert.exists():
            _openssl(
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", str(self.ca_key), "-out", str(self.ca_cert), "-days", "2",
                "-subj", f"/CN={ca_name}",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                cwd=self.dir,
            )  # fmt: skip

    def issue(self, name: str, password: str, *, server: bool = False) -> KeyPair:
        """A key pair with ``CN=name``; ``server`` adds the loopback names the broker listens on."""
        key, csr, cert = (self.dir / f"{name}.{ext}" for ext in ("key", "csr", "pem"))
        keystore = self.dir / f"{name}.p12"
        _openssl(
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}",
            cwd=self.dir,
        )  # fmt: skip
        ext = self.dir / f"{name}.ext"
        lines = ["basicConstraints=CA:FALSE", "extendedKeyUsage=serverAuth,clientAuth"]
        if server:
            lines.append("subjectAltName=IP:127.0.0.1,DNS:localhost")
        ext.write_text("\n".join(lines) + "\n")
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(self.ca_cert), "-CAkey", str(self.ca_key),
            "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext),
            cwd=self.dir,
        )  # fmt: skip
        _openssl(
            "pkcs12", "-export", "-in", str(cert), "-inkey", str(key), "-certfile", str(self.ca_cert),
            "-name", name, "-out", str(keystore), "-passout", f"pass:{password}",
            cwd=self.dir,
        )  # fmt: skip
        return KeyPair(name, key, cert, keystore, password)

    # -- the same material in every store type a Java client takes ------------------------------
    def truststore(self, kind: str, password: str) -> tuple[Path, str | None]:
        """The CA certificate as a trust store of ``kind`` -- PEM (the certificate file itself, no
        password), PKCS12 or JKS (made once by the JDK's keytool) -- and the store's password."""
        kind = kind.upper()
        if kind == "PEM":
            return self.ca_cert, None
        store = self.dir / f"truststore.{kind.lower()}"
        if not store.exists():
            _keytool(
                "-importcert", "-noprompt", "-alias", "ca", "-file", str(self.ca_cert),
                "-keystore", str(store), "-storetype", kind, "-storepass", password,
                cwd=self.dir,
            )  # fmt: skip
        return store, password

    def keystore_options(self, pair: KeyPair, kind: str) -> dict[str, str]:
        """Java client options presenting ``pair`` from a key store of ``kind``: PKCS12 (as issued),
        JKS (converted by keytool) or PEM (the private key and the certificate chain in one file)."""
        kind = kind.upper()
        if kind == "PKCS12":
            location = pair.keystore
        elif kind == "JKS":
            location = pair.keystore.with_suffix(".jks")
            if not location.exists():
                _keytool(
                    "-importkeystore", "-noprompt",
                    "-srckeystore", str(pair.keystore), "-srcstoretype", "PKCS12",
                    "-srcstorepass", pair.password,
                    "-destkeystore", str(location), "-deststoretype", "JKS", "-deststorepass", pair.password,
                    "-destkeypass", pair.password,
                    cwd=self.dir,
                )  # fmt: skip
        elif kind == "PEM":
            location = pair.cert_pem.with_suffix(".chain.pem")
            if not location.exists():  # an unencrypted PKCS#8 key, then the certificate chain
                _openssl(
                    "pkcs8",
                    "-topk8",
                    "-nocrypt",
                    "-in",
                    str(pair.key_pem),
                    "-out",
                    str(location),
                    cwd=self.dir,
                )
                location.write_text(
                    location.read_text() + pair.cert_pem.read_text() + self.ca_cert.read_text()
                )
            return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(location)}
        else:
            raise PkiError(f"no {kind} key store: PKCS12, JKS or PEM")
        return {
            "ssl.keystore.type": kind,
            "ssl.keystore.location": str(location),
            "ssl.keystore.password": pair.password,
        }


def _keytool(*args: str, cwd: Path) -> None:
    keytool = shutil.which("keytool")
    if keytool is None:
        raise PkiError("keytool (the JDK's) is not on PATH: JKS and PKCS12 trust stores are made with it")
    out = subprocess.run([keytool, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if out.returncode != 0:
        raise PkiError(f"keytool {args[0]} failed: {(out.stdout + out.stderr).strip()}")

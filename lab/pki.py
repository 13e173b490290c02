"""Test-time TLS material for the lab broker's secured listeners, made with the system's ``openssl``.

One call makes a throwaway certificate authority, a broker certificate for ``127.0.0.1`` and
``localhost``, and client certificates (their CN becomes the Kafka principal through the broker's
``ssl.principal.mapping.rules``), each as PEM files (what librdkafka reads) and a password-protected
PKCS#12 keystore (what the Java clients read).  A second, unrelated "rogue" authority signs
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

"""Certificates for local brokers with an SSL listener: a CA of their own, made with openssl at start.

PEM throughout, so neither side needs a keystore password: the broker reads its key and chain from
one PEM file (Kafka's `ssl.keystore.type=PEM`, an unencrypted PKCS#8 key), and librdkafka trusts the
CA through `ssl.ca.location`. The broker's certificate names 127.0.0.1 and localhost, so clients
verify the host name as they do by default.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mirror.errors import LocalClusterError

DAYS = 30


@dataclass(frozen=True)
class TlsFiles:
    """A CA certificate and a broker's key with its certificate chain, as PEM files."""

    ca_certificate: Path
    broker_keystore: Path  # private key, then the broker's certificate and the CA's

    def broker_settings(self) -> dict[str, str]:
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.broker_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_certificate),
        }

    def client_properties(self) -> dict[str, str]:
        """librdkafka's properties for a client of the broker (SSL, no client certificate)."""
        return {"security.protocol": "SSL", "ssl.ca.location": str(self.ca_certificate)}


def make_tls_files(directory: Path, *, name: str = "broker") -> TlsFiles:
    """Create (once) a CA and a certificate it signed for `name` on 127.0.0.1 in `directory`."""
    files = TlsFiles(directory / "ca.pem", directory / f"{name}-keystore.pem")
    if files.ca_certificate.exists() and files.broker_keystore.exists():
        return files
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, key = directory / "ca.key", directory / f"{name}.key"
    request, certificate = directory / f"{name}.csr", directory / f"{name}.pem"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
        "-out", str(files.ca_certificate), "-days", str(DAYS), "-subj", "/CN=mirror local CA",
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(request),
        "-subj", f"/CN={name}",
    )  # fmt: skip
    extensions = directory / f"{name}.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n", encoding="utf-8")
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(files.ca_certificate), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(certificate), "-days", str(DAYS), "-extfile", str(extensions),
    )  # fmt: skip
    pkcs8 = _openssl("pkcs8", "-topk8", "-nocrypt", "-in", str(key))
    files.broker_keystore.write_text(
        pkcs8 + certificate.read_text(encoding="utf-8") + files.ca_certificate.read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    files.broker_keystore.chmod(0o600)
    return files


def _openssl(*arguments: str) -> str:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise LocalClusterError("openssl is not on PATH; install it to start brokers with an SSL listener")
    result = subprocess.run([openssl, *arguments], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise LocalClusterError(f"openssl {arguments[0]} failed ({last}); check the openssl installation")
    return result.stdout

"""Certificates for local brokers with an SSL listener: a CA of their own, made with openssl at start.

PEM throughout, so brokers need no keystore password: a broker reads its key and chain from one PEM
file (Kafka's `ssl.keystore.type=PEM`, an unencrypted PKCS#8 key) and trusts the CA's PEM file;
librdkafka trusts the CA through `ssl.ca.location`. A broker's certificate names the hosts it is
given (127.0.0.1 and localhost unless told otherwise), so clients verify the host name as they do by
default. With mutual TLS the broker requires a client certificate signed by the same CA; a client's
key may be encrypted, as it is in production, and then needs `ssl.key.password`.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mirror.errors import LocalClusterError

DAYS = 30
LOCAL_HOSTS = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class ClientCertificate:
    """A client's certificate and its key (PKCS#8 PEM, encrypted when `key_password` is set)."""

    certificate: Path
    key: Path
    key_password: str | None = None

    def client_properties(self) -> dict[str, str]:
        properties = {"ssl.certificate.location": str(self.certificate), "ssl.key.location": str(self.key)}
        if self.key_password is not None:
            properties["ssl.key.password"] = self.key_password
        return properties


@dataclass(frozen=True)
class TlsFiles:
    """A CA certificate and a broker's key with its certificate chain, as PEM files.

    `client` set: the broker requires client certificates (mutual TLS) and clients present this one.
    """

    ca_certificate: Path
    broker_keystore: Path  # private key, then the broker's certificate and the CA's
    client: ClientCertificate | None = None

    def broker_settings(self) -> dict[str, str]:
        settings = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.broker_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_certificate),
        }
        if self.client is not None:
            settings["ssl.client.auth"] = "required"
        return settings

    def client_properties(self) -> dict[str, str]:
        """librdkafka's properties for a client of the broker (with its certificate under mutual TLS)."""
        properties = {"security.protocol": "SSL", "ssl.ca.location": str(self.ca_certificate)}
        if self.client is not None:
            properties.update(self.client.client_properties())
        return properties


class CertificateAuthority:
    """A CA made once in `directory` (its key beside it), which signs brokers' and clients' certificates."""

    def __init__(self, directory: Path, *, name: str = "mirror local CA") -> None:
        self.directory = directory
        self.certificate = directory / "ca.pem"
        self._key = directory / "ca.key"
        if self.certificate.exists() and self._key.exists():
            return
        directory.mkdir(parents=True, exist_ok=True)
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(self._key),
            "-out", str(self.certificate), "-days", str(DAYS), "-subj", f"/CN={name}",
        )  # fmt: skip
        self._key.chmod(0o600)

    def broker(
        self,
        name: str = "broker",
        *,
        hosts: Sequence[str] = LOCAL_HOSTS,
        client: ClientCertificate | None = None,
    ) -> TlsFiles:
        """A broker's files (made once): its certificate names `hosts`; `client` makes TLS mutual."""
        keystore = self.directory / f"{name}-keystore.pem"
        files = TlsFiles(self.certificate, keystore, client)
        if keystore.exists():
            return files
        certificate, key = self.issue(name, hosts=hosts)
        keystore.write_text(
            key.read_text(encoding="utf-8")
            + certificate.read_text(encoding="utf-8")
            + self.certificate.read_text(encoding="utf-8"),
            encoding="utf-8",
        )
        keystore.chmod(0o600)
        return files

    def client(
        self, name: str, *, key_password: str | None = None, expired: bool = False
    ) -> ClientCertificate:
        """A client certificate for `name` (the principal User:CN=`name`); `expired`: it ran out yesterday."""
        certificate, key = self.issue(name, key_password=key_password, expired=expired)
        return ClientCertificate(certificate, key, key_password)

    def issue(
        self,
        name: str,
        *,
        hosts: Sequence[str] = (),
        key_password: str | None = None,
        expired: bool = False,
    ) -> tuple[Path, Path]:
        """Sign a new key's certificate for CN=`name`; returns the certificate's and the key's PEM files."""
        key, request = self.directory / f"{name}.key", self.directory / f"{name}.csr"
        certificate = self.directory / f"{name}.pem"
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(request),
            "-subj", f"/CN={name}",
        )  # fmt: skip
        # Encrypted or not, the key is PKCS#8: Kafka's PEM keystore reads only that form.
        # The password goes through stdin: on the command line any user's ps would show it.
        encryption = ["-passout", "stdin"] if key_password else ["-nocrypt"]
        pkcs8 = _openssl("pkcs8", "-topk8", "-in", str(key), *encryption, stdin=key_password)
        key.write_text(pkcs8, encoding="utf-8")
        key.chmod(0o600)
        self._sign(request, certificate, hosts=hosts, expired=expired)
        return certificate, key

    def _sign(self, request: Path, certificate: Path, *, hosts: Sequence[str], expired: bool) -> None:
        # `openssl ca` rather than `openssl x509 -req`: OpenSSL 3.0's x509 cannot set a start date, and
        # an expired certificate needs one in the past.
        config = self.directory / "ca.cnf"
        database, serial = self.directory / "index.txt", self.directory / "serial"
        if not database.exists():
            database.write_text("", encoding="utf-8")
            serial.write_text(f"{secrets.randbits(64):016X}\n", encoding="utf-8")
        names = ",".join(f"{'IP' if _is_address(h) else 'DNS'}:{h}" for h in hosts)
        config.write_text(
            "[ca]\ndefault_ca = local\n"
            f"[local]\ndatabase = {database}\nnew_certs_dir = {self.directory}\nserial = {serial}\n"
            "default_md = sha256\npolicy = any\nunique_subject = no\nx509_extensions = issued\n"
            "[any]\ncommonName = supplied\n"
            "[issued]\nbasicConstraints = CA:FALSE\n" + (f"subjectAltName = {names}\n" if names else ""),
            encoding="utf-8",
        )
        now = datetime.now(UTC)
        start, end = (
            (now - timedelta(days=2), now - timedelta(days=1))
            if expired
            else (now, now + timedelta(days=DAYS))
        )
        _openssl(
            "ca", "-batch", "-notext", "-config", str(config), "-cert", str(self.certificate),
            "-keyfile", str(self._key), "-in", str(request), "-out", str(certificate),
            "-startdate", start.strftime("%Y%m%d%H%M%SZ"), "-enddate", end.strftime("%Y%m%d%H%M%SZ"),
        )  # fmt: skip


def make_tls_files(directory: Path, *, name: str = "broker", hosts: Sequence[str] = LOCAL_HOSTS) -> TlsFiles:
    """Create (once) a CA in `directory` and a broker's certificate it signed for `hosts`."""
    return CertificateAuthority(directory).broker(name, hosts=hosts)


def _is_address(host: str) -> bool:
    return host.replace(".", "").isdigit() or ":" in host


def _openssl(*arguments: str, stdin: str | None = None) -> str:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise LocalClusterError("openssl is not on PATH; install it to start brokers with an SSL listener")
    result = subprocess.run([openssl, *arguments], input=stdin, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise LocalClusterError(f"openssl {arguments[0]} failed ({last}); check the openssl installation")
    return result.stdout

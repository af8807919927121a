"""What the certificates of a client's TLS settings say: why a handshake failed, and whose they are.

A failed connection is explained in one line that names the fix.

librdkafka reports every broker certificate it cannot verify with the same sentence, whether the
CA is the wrong one, the certificate expired or it does not name the host; and a client
certificate the broker refused only as the TLS alert the broker sent. To name the cause, the
broker's certificate is verified again with Python's ssl module against the same CA and host name,
and the client's own certificate is read. Messages name files and certificate subjects, never the
contents of a property that holds a secret.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

# librdkafka's words when it could not verify the broker's certificate.
_BROKER_UNVERIFIED = "certificate verify failed"
# TLS alerts a broker sends when it refuses the client's certificate (or its absence).
_CLIENT_REFUSED = re.compile(
    r"alert (bad certificate|certificate unknown|unknown ca|certificate expired|certificate required|"
    r"unsupported certificate|certificate revoked)|client SSL authentication might be required"
)
_ENDPOINT = re.compile(r"\b(?:sasl_)?ssl://\[?([^\]/\s]+?)\]?:([0-9]{1,5})/", re.IGNORECASE)
_PROBE_TIMEOUT_SECONDS = 5.0

# OpenSSL's X509_V_ERR_* codes Python's ssl module reports in SSLCertVerificationError.verify_code.
_NOT_YET_VALID, _EXPIRED = 9, 10
_NAME_MISMATCH = frozenset({62, 64})  # a host name, an IP address the certificate does not list
_UNKNOWN_ISSUER = frozenset({2, 18, 19, 20, 21})
# The attribute keywords Java's X500Principal writes by name in RFC 2253 form, as Kafka's principal.
_JAVA_KEYWORDS = frozenset(
    {
        NameOID.COMMON_NAME,
        NameOID.COUNTRY_NAME,
        NameOID.LOCALITY_NAME,
        NameOID.STATE_OR_PROVINCE_NAME,
        NameOID.STREET_ADDRESS,
        NameOID.ORGANIZATION_NAME,
        NameOID.ORGANIZATIONAL_UNIT_NAME,
        NameOID.DOMAIN_COMPONENT,
        NameOID.USER_ID,
    }
)
_CLIENT_CERTIFICATE_KEYS = ("ssl.certificate.location", "ssl.certificate.pem", "ssl.keystore.location")


def is_certificate_failure(text: str) -> bool:
    """True if librdkafka's error `text` says a certificate was refused, by this client or the broker."""
    return _BROKER_UNVERIFIED in text or _CLIENT_REFUSED.search(text) is not None


def explain_certificate_failure(properties: Mapping[str, str], text: str) -> str:
    """'problem; fix' for a certificate failure librdkafka reported in `text` (is_certificate_failure)."""
    endpoint = _endpoint(text, properties)
    if _BROKER_UNVERIFIED in text:
        return _broker_certificate_problem(properties, endpoint)
    return _client_certificate_problem(properties, endpoint, text)


def explain_key_failure(properties: Mapping[str, str]) -> str | None:
    """'problem; fix' when the client's key file cannot be read, or its password does not open it;
    None when the key opens with it (librdkafka's own reason is then the one to give)."""
    location = properties.get("ssl.key.location")
    if not location:
        return None
    try:
        data = Path(location).read_bytes()
    except OSError as exc:
        return (
            f"ssl.key.location {location} cannot be read ({exc.strerror}); point it at the client's key file"
        )
    password = properties.get("ssl.key.password")
    problem = None
    try:
        serialization.load_pem_private_key(data, password.encode() if password else None)
    except TypeError:  # encrypted and no password given (or a password for a key that has none)
        if not password:
            problem = (
                f"the key in ssl.key.location {location} is encrypted; set ssl.key.password to its password"
            )
    except ValueError:
        if password and b"ENCRYPTED" in data:
            problem = (
                f"ssl.key.password does not decrypt the key in ssl.key.location {location}; set the "
                "password the key was encrypted with"
            )
    except Exception:  # noqa: BLE001, S110 - an algorithm cryptography lacks: librdkafka's reason stands
        pass
    return problem


def certificate_principal(properties: Mapping[str, str]) -> str | None:
    """The principal a broker sees for a client authenticated by its TLS certificate (Kafka's default
    mapping: User: and the subject's distinguished name), or None without a readable certificate."""
    if str(properties.get("security.protocol", "")).upper() != "SSL":
        return None  # SASL_SSL authenticates with SASL; PLAINTEXT has no certificate
    if not any(properties.get(key) for key in _CLIENT_CERTIFICATE_KEYS):
        return None
    certificate, _ = _client_certificate(properties)
    if certificate is None or any(a.oid not in _JAVA_KEYWORDS for a in certificate.subject):
        # Java writes other attributes (emailAddress...) as OID=#hex: better no name than a wrong one.
        return None
    return f"User:{certificate.subject.rfc4514_string()}"


def client_certificate_problem(properties: Mapping[str, str]) -> str | None:
    """'problem; fix' if the configured client certificate is out of its validity dates: known
    before connecting, and surer than the alert a broker may or may not send back."""
    if not any(properties.get(key) for key in _CLIENT_CERTIFICATE_KEYS):
        return None
    certificate, origin = _client_certificate(properties)
    return _dates_problem(certificate, origin, properties) if certificate is not None else None


def _dates_problem(certificate: x509.Certificate, origin: str, properties: Mapping[str, str]) -> str | None:
    now = datetime.now(UTC)
    if certificate.not_valid_after_utc < now:
        return (
            f"the client certificate {origin} expired on {_date(certificate.not_valid_after_utc)}; "
            f"renew it and point {_origin_key(properties)} at the new one"
        )
    if certificate.not_valid_before_utc > now:
        return (
            f"the client certificate {origin} is not valid before "
            f"{_date(certificate.not_valid_before_utc)}; check the clocks of broker and client"
        )
    return None


def _broker_certificate_problem(properties: Mapping[str, str], endpoint: tuple[str, int] | None) -> str:
    where = f"{endpoint[0]}:{endpoint[1]}" if endpoint else "the broker"
    generic = (
        f"the broker's certificate at {where} could not be verified; check ssl.ca.location (the CA that "
        "signed the broker's certificate) and that bootstrap_servers uses a host name the certificate lists"
    )
    code = _verify_error(properties, endpoint) if endpoint is not None else None
    if endpoint is None or code is None:
        return generic  # Python verifies what librdkafka did not: no better reason to give
    return _broker_reason(code, _peer_certificate(endpoint), properties, endpoint) or generic


def _verify_error(properties: Mapping[str, str], endpoint: tuple[str, int]) -> int | None:
    """OpenSSL's verify error for the broker's certificate, checked as librdkafka was told to check it."""
    try:
        context = _verifying_context(properties)
        with (
            socket.create_connection(endpoint, timeout=_PROBE_TIMEOUT_SECONDS) as connection,
            context.wrap_socket(connection, server_hostname=endpoint[0]),
        ):
            return None
    except ssl.SSLCertVerificationError as exc:
        return int(exc.verify_code)
    except (OSError, ValueError, OverflowError):
        return None


def _broker_reason(
    code: int, certificate: x509.Certificate | None, properties: Mapping[str, str], endpoint: tuple[str, int]
) -> str | None:
    host, where = endpoint[0], f"{endpoint[0]}:{endpoint[1]}"
    if code in _NAME_MISMATCH:
        names = ", ".join(_names(certificate)) if certificate is not None else "other names"
        return (
            f"the broker's certificate at {where} is not valid for {host} (it names {names}); put a "
            f"name it lists in bootstrap_servers, or reissue the certificate with {host} in its "
            "subjectAltName"
        )
    if code == _EXPIRED:
        until = f" on {_date(certificate.not_valid_after_utc)}" if certificate is not None else ""
        return f"the broker's certificate at {where} expired{until}; renew the broker's certificate"
    if code == _NOT_YET_VALID:
        since = f" before {_date(certificate.not_valid_before_utc)}" if certificate is not None else ""
        return (
            f"the broker's certificate at {where} is not valid{since}; check the clocks of broker and client"
        )
    if code in _UNKNOWN_ISSUER:
        issuer = f" ({_subject(certificate.issuer)})" if certificate is not None else ""
        if properties.get("ssl.ca.location"):
            trusted = f"ssl.ca.location {properties['ssl.ca.location']}"
        else:
            trusted = "ssl.ca.pem" if properties.get("ssl.ca.pem") else "the system's CA certificates"
        return (
            f"the broker's certificate at {where} was signed by a CA{issuer} that {trusted} does not hold; "
            "set ssl.ca.location to the PEM file of the CA that signed the broker's certificate"
        )
    return None


def _client_certificate_problem(
    properties: Mapping[str, str], endpoint: tuple[str, int] | None, text: str
) -> str:
    where = f"{endpoint[0]}:{endpoint[1]}" if endpoint else "the broker"
    if not any(properties.get(key) for key in _CLIENT_CERTIFICATE_KEYS):
        return (
            f"the broker at {where} requires a client certificate (mutual TLS); set ssl.certificate.location "
            "and ssl.key.location (and ssl.key.password if the key is encrypted)"
        )
    certificate, origin = _client_certificate(properties)
    dates = _dates_problem(certificate, origin, properties) if certificate is not None else None
    if dates is not None:
        return dates
    alert = _CLIENT_REFUSED.search(text)
    described = (
        f" ({_subject(certificate.subject)}, signed by {_subject(certificate.issuer)})" if certificate else ""
    )
    return (
        f"the broker at {where} refused the client certificate {origin}{described}"
        f"{f' with TLS alert {alert.group(1)!r}' if alert else ''}; have it signed by a CA in the broker's "
        "ssl.truststore, or add its CA there"
    )


def _verifying_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    """A client context that verifies as librdkafka was told to: the same CAs and host name check."""
    location = properties.get("ssl.ca.location")
    if location and location != "probe":
        path = Path(location)
        context = ssl.create_default_context(
            cafile=str(path) if path.is_file() else None, capath=str(path) if path.is_dir() else None
        )
    elif properties.get("ssl.ca.pem"):
        context = ssl.create_default_context(cadata=properties["ssl.ca.pem"])
    else:
        context = ssl.create_default_context()
    if properties.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    return context


def _peer_certificate(endpoint: tuple[str, int]) -> x509.Certificate | None:
    """The certificate the broker presents, fetched without verifying it (only to describe it)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection(endpoint, timeout=_PROBE_TIMEOUT_SECONDS) as connection,
            context.wrap_socket(connection, server_hostname=endpoint[0]) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der) if der else None
    except (OSError, ValueError, OverflowError):
        return None


def _client_certificate(properties: Mapping[str, str]) -> tuple[x509.Certificate | None, str]:
    """The client's certificate as configured, and how to name it in a message."""
    try:
        if properties.get("ssl.certificate.location"):
            location = properties["ssl.certificate.location"]
            return x509.load_pem_x509_certificate(Path(location).read_bytes()), location
        if properties.get("ssl.certificate.pem"):
            return x509.load_pem_x509_certificate(
                properties["ssl.certificate.pem"].encode()
            ), "(ssl.certificate.pem)"
        location = properties["ssl.keystore.location"]
        password = properties.get("ssl.keystore.password")
        _, certificate, _ = pkcs12.load_key_and_certificates(
            Path(location).read_bytes(), password.encode() if password else None
        )
        return certificate, location
    except Exception:  # noqa: BLE001 - unreadable, malformed or an unsupported algorithm: name the file only
        origin = next(
            (
                properties[k]
                for k in _CLIENT_CERTIFICATE_KEYS
                if k != "ssl.certificate.pem" and properties.get(k)
            ),
            "",
        )
        return None, origin or "(ssl.certificate.pem)"


def _origin_key(properties: Mapping[str, str]) -> str:
    return next(key for key in _CLIENT_CERTIFICATE_KEYS if properties.get(key))


def _endpoint(text: str, properties: Mapping[str, str]) -> tuple[str, int] | None:
    match = _ENDPOINT.search(text)
    if match is not None:
        return match.group(1), int(match.group(2))
    first = properties.get("bootstrap.servers", "").split(",")[0].strip()
    host, _, port = first.rpartition(":")
    return (host.strip("[]"), int(port)) if host and re.fullmatch("[0-9]{1,5}", port) else None


def _names(certificate: x509.Certificate) -> list[str]:
    try:
        extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [_subject(certificate.subject)]
    except Exception:  # noqa: BLE001 - extensions cryptography's strict parser refuses
        return ["names that could not be read"]
    return [str(name) for name in extension.get_values_for_type(x509.DNSName)] + [
        str(address) for address in extension.get_values_for_type(x509.IPAddress)
    ]


def _subject(name: x509.Name) -> str:
    common = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    value = common[0].value if common else None
    return f"CN={value}" if isinstance(value, str) else name.rfc4514_string()


def _date(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")

"""Why a TLS connection failed, as mirror says it: librdkafka against a real TLS server on loopback.

A Kafka broker does not start with an expired certificate of its own (it checks its keystore), so
the broker side of these cases is a Python TLS server that completes handshakes and closes; the
client side is librdkafka, as mirror runs it, and what it reports is what mirror explains. The
cases a real broker can show (wrong CA, host name, client certificates) are in
tests/integration/test_tls.py.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirror.errors import ClusterTlsError, ConfigError
from mirror.kafka.certificates import is_certificate_failure
from mirror.kafka.clients import check_properties, wait_until_reachable
from mirror.local.tls import CertificateAuthority

pytestmark = pytest.mark.integration
PASSWORD = "s3cret-key-pa55"  # noqa: S105


@contextlib.contextmanager
def tls_server(certificate: Path, key: Path) -> Iterator[int]:
    """A loopback server that answers TLS handshakes with `certificate`; yields its port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with contextlib.suppress(OSError), connection:
                connection.settimeout(2)
                with context.wrap_socket(connection, server_side=True):
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stopping.set()
        thread.join()
        listener.close()


def _trusting(port: int, ca: Path) -> dict[str, str]:
    """librdkafka's properties for the loopback server on `port`, trusting the CA in `ca`."""
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": str(ca)}


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("ca"))


def test_an_expired_broker_certificate_is_named_with_its_date_and_the_fix(
    authority: CertificateAuthority,
) -> None:
    certificate, key = authority.issue("expired-broker", hosts=("127.0.0.1",), expired=True)
    with tls_server(certificate, key) as port, pytest.raises(ClusterTlsError) as raised:
        wait_until_reachable(_trusting(port, authority.certificate), timeout_seconds=20, what="cluster B")
    message = str(raised.value)
    assert message.startswith(f"cluster B: the broker's certificate at 127.0.0.1:{port} expired on 20")
    assert message.endswith("; renew the broker's certificate")
    assert "\n" not in message


def test_a_broker_certificate_from_an_unknown_ca_names_the_ca_file_to_set(
    authority: CertificateAuthority, tmp_path: Path
) -> None:
    certificate, key = authority.issue("broker", hosts=("127.0.0.1",))
    other = CertificateAuthority(tmp_path / "other", name="some other CA")
    with (
        tls_server(certificate, key) as port,
        pytest.raises(ClusterTlsError, match=r"signed by a CA \(CN=mirror local CA\) that ssl.ca.location"),
    ):
        wait_until_reachable(_trusting(port, other.certificate), timeout_seconds=20, what="cluster B")


def test_an_ip_address_the_broker_certificate_does_not_list_is_named_with_the_names_it_does(
    authority: CertificateAuthority,
) -> None:
    certificate, key = authority.issue("named-broker", hosts=("kafka-0.example.internal",))
    with tls_server(certificate, key) as port, pytest.raises(ClusterTlsError) as raised:
        wait_until_reachable(_trusting(port, authority.certificate), timeout_seconds=20, what="cluster B")
    assert (
        f"certificate at 127.0.0.1:{port} is not valid for 127.0.0.1 (it names kafka-0.example.internal)"
        in str(raised.value)
    )


def test_an_encrypted_key_without_its_password_or_with_a_wrong_one_is_refused_at_start_naming_the_key(
    authority: CertificateAuthority,
) -> None:
    client = authority.client("encrypted-client", key_password=PASSWORD)
    base = {
        "bootstrap.servers": "127.0.0.1:9",
        "security.protocol": "SSL",
        "ssl.ca.location": str(authority.certificate),
        "ssl.certificate.location": str(client.certificate),
        "ssl.key.location": str(client.key),
    }
    with pytest.raises(
        ConfigError, match=r"the key in ssl.key.location .* is encrypted; set ssl.key.password"
    ):
        check_properties({"producer": base}, what="cluster B")
    wrong = "not-the-right-one"
    with pytest.raises(ConfigError) as raised:
        check_properties({"producer": {**base, "ssl.key.password": wrong}}, what="cluster B")
    assert "ssl.key.password does not decrypt the key in ssl.key.location" in str(raised.value)
    assert wrong not in str(raised.value)
    check_properties({"producer": {**base, "ssl.key.password": PASSWORD}}, what="cluster B")  # the right one


def test_a_refused_connection_is_no_certificate_failure() -> None:
    assert not is_certificate_failure(
        "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused"
    )
    assert is_certificate_failure(
        "ssl://h:1/bootstrap: Receive failed: ssl/tls alert certificate unknown: 46"
    )

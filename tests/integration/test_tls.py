"""A flow from a cluster reached over SASL_SSL into one that requires mutual TLS (MM2's
MirrorConnectorsIntegrationSSLTest, with SCRAM over TLS on the source and client certificates on the
target, as production has them).

Two brokers of their own, one CA made at start: S has a SASL_SSL listener (server certificate only,
SCRAM-SHA-512 users, ACLs enforced; mirror logs in as its super user); T requires a client
certificate (`ssl.client.auth=required`), and its certificate names 127.0.0.1 only, so reaching it as
`localhost` is a host name mismatch. mirror's client key for T is encrypted; its `ssl.key.password`
must appear in no output, log or state file. Records are copied exactly, groups move with nothing
re-read or skipped, and every certificate mistake stops `mirror run` at start with one line that
names the cause and the fix.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mirror.errors import ClusterTlsError, ClusterUnreachableError
from mirror.kafka.clients import wait_until_reachable
from mirror.local.broker import BrokerSpec
from mirror.local.environment import discard_brokers, start_brokers
from mirror.local.jars import kafka_libs
from mirror.local.ports import free_port
from mirror.local.sasl import SaslUsers
from mirror.local.tls import CertificateAuthority, TlsFiles
from tests.checkpoint_flow import Flow
from tests.helpers import assert_eventually, run_mirror
from tests.kafka_backends import AUTHORIZER, KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]
WRONG_PASSWORD = "Wr0ng-Pa55word"  # noqa: S105


@dataclasses.dataclass(frozen=True)
class Secured:
    source: KafkaCluster  # S: SASL_SSL
    target: KafkaCluster  # T: mutual TLS
    authority: CertificateAuthority
    target_tls: TlsFiles

    @property
    def key_password(self) -> str:
        assert self.target_tls.client is not None and self.target_tls.client.key_password
        return self.target_tls.client.key_password


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("tls")
    authority = CertificateAuthority(root / "ca")
    source_tls = authority.broker("broker-s")
    client = authority.client("mirror-client", key_password="k3y-pa55-" + root.name)
    target_tls = authority.broker("broker-t", hosts=("127.0.0.1",), client=client)
    users = SaslUsers(admin_password=f"admin-{root.name}")
    # A broker reaches itself through its own listener: under mutual TLS as User:CN=broker-t.
    overrides = {**AUTHORIZER, "super.users": "User:ANONYMOUS;User:CN=broker-t"}
    specs = [
        BrokerSpec("S", root / "S", free_port(), free_port(), sasl=users, tls=source_tls),
        BrokerSpec("T", root / "T", free_port(), free_port(), overrides, tls=target_tls),
    ]
    brokers = start_brokers(specs, libs=kafka_libs(), short_lived=True)
    try:
        scram = {
            **source_tls.client_properties(),
            **users.client_properties(mechanism="SCRAM-SHA-512"),
            "security.protocol": "SASL_SSL",
        }
        source = KafkaCluster("S", brokers[0].bootstrap_servers, None, brokers[0], scram)
        target = KafkaCluster(
            "T", brokers[1].bootstrap_servers, None, brokers[1], target_tls.client_properties()
        )
        yield Secured(source, target, authority, target_tls)
    finally:
        discard_brokers(
            brokers
        )  # their data is thrown away: no controlled shutdown, but to write the class archive


@pytest.fixture(scope="module")
def flow(secured: Secured, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    running = Flow(
        secured.source,
        secured.target,
        tmp_path_factory.mktemp("tls-flow"),
        clusters={
            alias: {"properties": dict(c.security)}
            for alias, c in (("S", secured.source), ("T", secured.target))
        },
    )
    try:
        yield running
        assert running.run.stop() == 0, running.run.output()[-3000:]
    finally:
        running.run.cleanup()


def test_the_clusters_refuse_plaintext_and_the_target_a_client_without_a_certificate(
    secured: Secured,
) -> None:
    # The proof that the flow below went through TLS both ways, and through mutual TLS into T; and
    # what a user who left out security.protocol, or the client certificate, is told.
    for cluster in (secured.source, secured.target):
        with pytest.raises(ClusterUnreachableError) as plaintext:
            wait_until_reachable(
                {"bootstrap.servers": cluster.bootstrap_servers},
                timeout_seconds=4,
                what=f"cluster {cluster.alias}",
            )
        assert re.fullmatch(
            rf"cluster {cluster.alias}: no Kafka broker answered at {re.escape(cluster.bootstrap_servers)} "
            r"within 4s \(127\.0\.0\.1:\d+/bootstrap: Disconnected: connection closed by peer: .*in state "
            r"APIVERSION_QUERY\)\); the listener there seems to speak TLS: "
            r"set security\.protocol to SSL \(or SASL_SSL\) with the ssl\.\* properties, or use the "
            r"cluster's plaintext port \(or, behind a proxy, check the broker it forwards to\)",
            str(plaintext.value),
        ), str(plaintext.value)
    server_only = {
        k: v for k, v in secured.target.security.items() if not k.startswith(("ssl.key", "ssl.cert"))
    }
    with pytest.raises(ClusterTlsError) as anonymous:
        wait_until_reachable(
            {"bootstrap.servers": secured.target.bootstrap_servers, **server_only},
            timeout_seconds=10,
            what="cluster T",
        )
    assert str(anonymous.value) == (
        f"cluster T: the broker at {secured.target.bootstrap_servers} requires a client certificate "
        "(mutual TLS); set ssl.certificate.location and ssl.key.location (and ssl.key.password if the "
        "key is encrypted)"
    )


def test_a_caught_up_group_resumes_over_mutual_tls_with_nothing_re_read(flow: Flow) -> None:
    flow.assert_a_caught_up_group_re_reads_nothing("caught-up", old=2000, new=300)


def test_a_mid_stream_group_skips_nothing_over_mutual_tls(flow: Flow) -> None:
    flow.assert_a_mid_stream_group_skips_nothing("mid-stream", total=2000, consumed=777)


def test_the_passwords_appear_in_no_output_log_metric_or_state_file(flow: Flow, secured: Secured) -> None:
    passwords = {
        "ssl.key.password": secured.key_password,
        "sasl.password": secured.source.security["sasl.password"],
    }
    config = flow.config.read_text(encoding="utf-8")
    assert all(password in config for password in passwords.values())  # the run was given them
    port = yaml.safe_load(config)["metrics"]["port"]

    def scraped() -> bytes:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
                return bytes(page.read())
        except OSError as exc:
            raise AssertionError(f"the run's metrics endpoint does not answer yet ({exc})") from exc

    metrics = assert_eventually(scraped, timeout=60)
    validated = run_mirror("validate", str(flow.config), timeout=60)
    assert validated.returncode == 0, validated.stderr
    for name, password in passwords.items():
        written = [
            str(path)
            for path in flow.config.parent.rglob("*")
            if path.is_file() and path != flow.config and password.encode() in path.read_bytes()
        ]
        assert written == [], f"{name} is written in {written}"
        assert password.encode() not in metrics
        assert password not in validated.stdout + validated.stderr
        assert f"{name}: '**********'" in validated.stdout


def _mistakes(secured: Secured, tmp: Path) -> dict[str, tuple[dict[str, Any], str]]:
    """Each certificate mistake: T's cluster entry with it, and what mirror's one line must say."""
    good = dict(secured.target.security)
    other = CertificateAuthority(tmp / "other-ca", name="another CA")
    expired = secured.authority.client("expired-client", key_password=secured.key_password, expired=True)
    foreign = other.client("foreign-client")
    target = secured.target.bootstrap_servers
    without_client = {k: v for k, v in good.items() if not k.startswith(("ssl.key", "ssl.cert"))}
    return {
        "wrong CA": (
            {"properties": {**good, "ssl.ca.location": str(other.certificate)}},
            r"signed by a CA \(CN=mirror local CA\) that ssl\.ca\.location .*other-ca/ca\.pem does not hold; "
            r"set ssl\.ca\.location to the PEM file of the CA",
        ),
        "hostname mismatch": (
            {"bootstrap_servers": target.replace("127.0.0.1", "localhost"), "properties": good},
            r"not valid for localhost \(it names 127\.0\.0\.1\); put a name it lists in bootstrap_servers",
        ),
        "expired client certificate": (
            {"properties": {**good, **expired.client_properties()}},
            r"client certificate .*expired-client\.pem expired on \d{4}-\d\d-\d\d .*; renew it",
        ),
        "client certificate of another CA": (
            {"properties": {**good, **foreign.client_properties()}},
            r"refused the client certificate .*foreign-client\.pem "
            r"\(CN=foreign-client, signed by CN=another CA\)"
            r".*; have it signed by a CA in the broker's ssl\.truststore",
        ),
        "no client certificate": (
            {"properties": without_client},
            r"requires a client certificate \(mutual TLS\); "
            r"set ssl\.certificate\.location and ssl\.key\.location",
        ),
        "wrong key password": (
            {"properties": {**good, "ssl.key.password": WRONG_PASSWORD}},
            r"ssl\.key\.password does not decrypt the key in ssl\.key\.location .*mirror-client\.key",
        ),
    }


def test_each_certificate_mistake_stops_the_run_with_one_line_naming_the_fix(
    secured: Secured, tmp_path: Path
) -> None:
    failures = []
    for mistake, (target_entry, expected) in _mistakes(secured, tmp_path).items():
        config = {
            "clusters": {
                "S": {
                    "bootstrap_servers": secured.source.bootstrap_servers,
                    "properties": dict(secured.source.security),
                },
                "T": {"bootstrap_servers": secured.target.bootstrap_servers, **target_entry},
            },
            "flows": {"S->T": {"topics": ["never-copied"]}},
            "spark": {"checkpoint_dir": str(tmp_path / "state")},
            "metrics": {"enabled": False},
        }
        path = tmp_path / f"{mistake.replace(' ', '-')}.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        result = run_mirror("run", str(path), timeout=120)
        lines = result.stderr.strip().splitlines()
        said = lines[-1] if lines else ""
        if not (
            result.returncode == 2
            and said.startswith("mirror: cluster T: ")
            and re.search(expected, said)
            and "Traceback" not in result.stderr
            and secured.key_password not in result.stdout + result.stderr
            and WRONG_PASSWORD not in result.stdout + result.stderr
        ):
            failures.append(f"{mistake}: exit {result.returncode}, said {said!r}")
    assert failures == []

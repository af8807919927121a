"""`mirror acls`: which ACLs a configuration needs where (tests/reliability proves they suffice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.cli import main
from mirror.config import load_config
from mirror.local.tls import CertificateAuthority
from mirror.security import RequiredAcl, required_acls


def _config(tmp_path: Path, flow: str, clusters: str = "") -> Path:
    path = tmp_path / "mm2.yaml"
    path.write_text(
        "clusters:\n"
        "  A: {bootstrap_servers: 'a:9092', properties: {sasl.username: alice, sasl.password: pw-123}}\n"
        "  B: {bootstrap_servers: 'b:9092'}\n"
        f"{clusters}"
        "flows:\n"
        f"  A->B: {flow}\n",
        encoding="utf-8",
    )
    return path


def _find(acls: list[RequiredAcl], cluster: str, resource: str, name: str) -> RequiredAcl:
    matches = [a for a in acls if (a.cluster, a.resource, a.name) == (cluster, resource, name)]
    assert len(matches) == 1, f"{cluster} {resource} {name}: {matches}"
    return matches[0]


@pytest.mark.parametrize(
    ("topics", "expected"),
    [
        ("['orders']", [("orders", "literal")]),
        (r"['orders\..*', payments]", [("orders.", "prefixed"), ("payments", "literal")]),
        ("['.*']", [("*", "literal")]),
        ("['(a|b)-events']", [("*", "literal")]),
    ],
)
def test_topic_filters_become_literal_prefixed_or_wildcard_read_acls_on_the_source(
    tmp_path: Path, topics: str, expected: list[tuple[str, str]]
) -> None:
    acls = required_acls(load_config(_config(tmp_path, f"{{topics: {topics}}}")))
    copied = [a for a in acls if a.why.endswith("read the topics it copies, and their configs")]
    reads = [(a.name, a.pattern) for a in copied]
    assert all(a.cluster == "A" and "Read" in a.operations for a in copied)
    assert reads == expected


def test_the_target_needs_the_remote_prefix_the_internal_topics_groups_and_transactional_ids(
    tmp_path: Path,
) -> None:
    acls = required_acls(load_config(_config(tmp_path, "{topics: [orders]}")))
    remote = _find(acls, "B", "topic", "A.")
    assert remote.pattern == "prefixed"
    assert {"Create", "Write", "Alter", "AlterConfigs"} <= set(remote.operations)
    for internal in ("mm2-offsets.A.internal", "mm2-offset-syncs.A.internal", "heartbeats"):
        assert "Write" in _find(acls, "B", "topic", internal).operations
    assert _find(acls, "B", "group", "__mirror-positions.A-B").operations == ("Read", "Describe")
    transactions = _find(acls, "B", "transactional-id", "mirror-A-B-")
    assert (transactions.pattern, transactions.operations) == ("prefixed", ("Write", "Describe"))
    assert _find(acls, "A", "transactional-id", "mirror-B-A-heartbeats").operations == ("Write", "Describe")


def test_an_identity_flow_needs_its_topics_by_name_and_the_prefixed_copy_of_the_heartbeats(
    tmp_path: Path,
) -> None:
    # The identity policy keeps topic names, but not the heartbeats topic's (MM2 prefixes it so
    # heartbeats can tell the paths apart); a run without Create on it stopped at start-up.
    acls = required_acls(load_config(_config(tmp_path, "{topics: [orders], replication_policy: identity}")))
    assert "Create" in _find(acls, "B", "topic", "orders").operations
    assert "Create" in _find(acls, "B", "topic", "A.heartbeats").operations
    assert not [a for a in acls if a.cluster == "B" and a.name == "A."]


def test_at_least_once_without_acl_sync_needs_no_transactional_ids_nor_cluster_alter(tmp_path: Path) -> None:
    flow = "{topics: [orders], exactly_once: false, sync_topic_acls: false}"
    acls = required_acls(load_config(_config(tmp_path, flow)))
    assert not [a for a in acls if a.resource == "transactional-id"]
    assert _find(acls, "B", "cluster", "kafka-cluster").operations == ("Describe",)


def test_acls_command_prints_kafka_acls_lines_for_the_configured_principal_and_never_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["acls", str(_config(tmp_path, "{topics: [orders]}"))]) == 0
    out = capsys.readouterr().out
    assert "# cluster A (a:9092), for User:alice:" in out
    assert "--allow-principal User:MIRROR_PRINCIPAL" in out  # B names no sasl.username
    assert "--transactional-id mirror-A-B- --resource-pattern-type prefixed" in out
    assert "pw-123" not in out


def test_acls_command_names_the_client_certificate_subject_under_mutual_tls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = CertificateAuthority(tmp_path / "ca").client("mirror-dr", key_password="pw-456")  # noqa: S106
    config = tmp_path / "mm2.yaml"
    config.write_text(
        "clusters:\n"
        "  A: {bootstrap_servers: 'a:9092'}\n"
        "  B:\n"
        "    bootstrap_servers: 'b:9093'\n"
        "    properties:\n"
        "      security.protocol: ssl\n"
        f"      ssl.certificate.location: {client.certificate}\n"
        f"      ssl.key.location: {client.key}\n"
        "      ssl.key.password: pw-456\n"
        "flows:\n"
        "  A->B: {topics: [orders]}\n",
        encoding="utf-8",
    )
    assert main(["acls", str(config)]) == 0
    out = capsys.readouterr().out
    assert "# cluster B (b:9093), for User:CN=mirror-dr:" in out
    assert "--allow-principal User:CN=mirror-dr" in out
    assert "pw-456" not in out

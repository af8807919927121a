"""`mirror config import`: an MM2 dedicated-mode properties file becomes an equivalent mm2.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
import yaml

from mirror.cli import main
from mirror.config import load_config
from mirror.config.flow_settings import flow_settings
from mirror.config.mm2_properties import ImportResult, import_properties
from mirror.config.models import MirrorConfig
from mirror.errors import PropertiesImportError

FIXTURE = Path(__file__).parent.parent / "fixtures" / "mm2_properties" / "dedicated.properties"
ROLES: tuple[Literal["consumer", "producer", "admin"], ...] = ("consumer", "producer", "admin")


@pytest.fixture(scope="module")
def imported() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load(import_properties(FIXTURE).yaml)  # type: ignore[no-any-return]


def test_clusters_keep_bootstrap_and_client_settings(imported: dict) -> None:  # type: ignore[type-arg]
    a = imported["clusters"]["A"]
    assert a["bootstrap_servers"] == "a1:9092, a2:9092"
    assert a["properties"]["security.protocol"] == "SASL_SSL"
    assert a["properties"]["sasl.mechanism"] == "SCRAM-SHA-512"
    assert a["consumer"] == {"max.partition.fetch.bytes": "2097152"}


def test_jaas_credentials_become_librdkafka_username_and_password(imported: dict) -> None:  # type: ignore[type-arg]
    properties = imported["clusters"]["A"]["properties"]
    assert properties["sasl.username"] == "mirror"
    assert properties["sasl.password"] == "p@ss=w;rd"
    assert "sasl.jaas.config" not in properties


def test_java_producer_names_become_librdkafka_names(imported: dict) -> None:  # type: ignore[type-arg]
    assert imported["clusters"]["B"]["producer"] == {"message.max.bytes": "2000000", "linger.ms": "10"}


def test_flow_settings_and_top_level_defaults_merge_per_flow(imported: dict) -> None:  # type: ignore[type-arg]
    flow = imported["flows"]["A->B"]
    assert flow["enabled"] is True
    assert flow["topics"] == ["orders.*", "payments"]
    assert flow["topics_exclude"] == [".*-test"]
    assert flow["groups"] == ["billing.*"]
    assert flow["emit_heartbeats"] is False
    assert flow["sync_group_offsets"] is True
    assert flow["emit_checkpoints_interval_seconds"] == 10.0
    assert flow["replication_policy"] == "identity"
    assert flow["replication_factor"] == 3
    assert flow["refresh_topics_interval_seconds"] == 30.0
    assert flow["offset_lag_max"] == 50
    assert flow["tasks_max"] == 4


def test_exactly_once_follows_the_target_workers_setting(imported: dict) -> None:  # type: ignore[type-arg]
    assert imported["flows"]["A->B"]["exactly_once"] is True


def test_a_flow_mm2_would_not_run_stays_disabled(imported: dict) -> None:  # type: ignore[type-arg]
    assert imported["flows"]["B->A"]["enabled"] is False


def test_everything_not_carried_over_is_listed_with_a_reason() -> None:
    result = import_properties(FIXTURE)
    dropped = "\n".join(result.not_carried_over)
    for key in (
        "A.ssl.truststore.location",
        "A.consumer.isolation.level",
        "B.offset.flush.interval.ms",
        "dedicated.mode.enable.internal.rest",
        "listeners",
        "some.unknown.key",
    ):
        assert f"{key}:" in dropped, f"{key} missing from {dropped}"


def test_converted_file_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mm2.yaml"
    assert main(["config", "import", str(FIXTURE), "-o", str(out)]) == 0
    config = load_config(out)
    assert config.flows["A->B"].topics == ["orders.*", "payments"]
    assert config.flows["A->B"].tasks_max == 4
    assert "not carried over: A.ssl.truststore.location" in capsys.readouterr().err


def test_a_file_without_clusters_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text("A.bootstrap.servers = a:1\n", encoding="utf-8")
    assert main(["config", "import", str(path)]) == 2
    assert "no 'clusters' property" in capsys.readouterr().err


def test_a_cluster_without_bootstrap_servers_is_named(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text("clusters = A, B\nA.bootstrap.servers = a:1\n", encoding="utf-8")
    with pytest.raises(PropertiesImportError, match=r"no B\.bootstrap\.servers"):
        import_properties(path)


def test_offset_syncs_off_keeps_mm2s_group_sync_default_so_the_flow_stays_valid(tmp_path: Path) -> None:
    # MM2 accepts emit.offset-syncs.enabled=false with checkpoints off: its group sync is off by
    # default. mirror's is on, and would need offset syncs, so the import writes MM2's default.
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
        "A->B.emit.offset-syncs.enabled = false\nA->B.emit.checkpoints.enabled = false\n",
        encoding="utf-8",
    )
    out = tmp_path / "mm2.yaml"
    assert main(["config", "import", str(path), "-o", str(out)]) == 0
    flow = load_config(out).flows["A->B"]
    assert (flow.emit_offset_syncs, flow.emit_checkpoints, flow.sync_group_offsets) == (False, False, False)


def test_a_disabled_flow_is_not_checked_for_offset_syncs(tmp_path: Path) -> None:
    # MM2 skips the check for a connector that is not enabled.
    path = tmp_path / "mm2.yaml"
    path.write_text(
        "clusters: {A: {bootstrap_servers: 'a:1'}, B: {bootstrap_servers: 'b:1'}}\n"
        "flows: {A->B: {enabled: false, emit_offset_syncs: false}}\n",
        encoding="utf-8",
    )
    assert load_config(path).flows["A->B"].enabled is False


def _convert(tmp_path: Path, text: str) -> tuple[MirrorConfig, ImportResult]:
    """`text` as an mm2.properties file, imported and loaded as `mirror run` would load it."""
    properties = tmp_path / "mm2.properties"
    properties.write_text(text, encoding="utf-8")
    result = import_properties(properties)
    converted = tmp_path / "mm2.yaml"
    converted.write_text(result.yaml, encoding="utf-8")
    return load_config(converted), result


def _reasons(result: ImportResult) -> dict[str, str]:
    return dict(entry.split(": ", 1) for entry in result.not_carried_over)


TWO_CLUSTERS = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"


def test_use_defaults_from_becomes_the_flows_use_defaults_from(tmp_path: Path) -> None:
    config, _ = _convert(
        tmp_path,
        TWO_CLUSTERS + "use.defaults.from = source\nA->B.enabled = true\n"
        "B->A.enabled = true\nB->A.use.defaults.from = target\n",
    )
    assert config.flows["A->B"].use_defaults_from == "source"
    assert config.flows["B->A"].use_defaults_from == "target"


def test_an_unknown_use_defaults_from_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(TWO_CLUSTERS + "A->B.enabled = true\nuse.defaults.from = sideways\n", encoding="utf-8")
    with pytest.raises(PropertiesImportError) as caught:
        import_properties(path)
    [problem] = caught.value.problems
    assert "flows.A->B.use_defaults_from: 'sideways' is not allowed; use 'target' or 'source'" in problem


def test_top_level_security_settings_reach_every_cluster_below_its_own_and_its_roles(tmp_path: Path) -> None:
    # MirrorMakerConfigTest.testClusterConfigProperties and .testClientConfigProperties: a role
    # setting beats the cluster's, which beats the top level's.
    config, _ = _convert(
        tmp_path,
        TWO_CLUSTERS + "A->B.enabled = true\n"
        "security.protocol = SSL\nsasl.mechanism = PLAIN\n"
        'sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="top" '
        'password="top-secret";\n'
        "A.security.protocol = PLAINTEXT\nA.producer.security.protocol = SSL\n"
        'A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
        'password="a-secret";\n',
    )
    a, b = config.clusters["A"], config.clusters["B"]
    assert a.client_properties("admin")["security.protocol"] == "PLAINTEXT"
    assert a.client_properties("consumer")["security.protocol"] == "PLAINTEXT"
    assert a.client_properties("producer")["security.protocol"] == "SSL"
    assert {role: b.client_properties(role)["security.protocol"] for role in ROLES} == dict.fromkeys(
        ROLES, "SSL"
    )
    assert (a.client_properties("admin")["sasl.username"], a.client_properties("admin")["sasl.password"]) == (
        "a",
        "a-secret",
    )
    assert (b.client_properties("admin")["sasl.username"], b.client_properties("admin")["sasl.password"]) == (
        "top",
        "top-secret",
    )
    assert (
        a.client_properties("consumer")["sasl.mechanism"] == b.client_properties("consumer")["sasl.mechanism"]
    )
    assert a.client_properties("consumer")["bootstrap.servers"] == "a:9092"


def test_client_settings_mm2_ignores_at_top_and_cluster_level_are_reported_not_carried(
    tmp_path: Path,
) -> None:
    # Deliberate: MM2 gives its replication clients only security.protocol, ssl.* and sasl.* from
    # these levels, so carrying e.g. A.auto.offset.reset=latest would make mirror skip records MM2
    # copied. The role level (A.consumer.*) is where client settings take effect in both.
    config, result = _convert(
        tmp_path,
        TWO_CLUSTERS + "A->B.enabled = true\nfetch.min.bytes = 1\nA.auto.offset.reset = latest\n"
        "A.producer.linger.ms = 7\nconsumer.max.poll.interval.ms = 1\n",
    )
    reasons = _reasons(result)
    assert "only security.protocol, ssl.* and sasl.*" in reasons["fetch.min.bytes"]
    assert "clusters.A.consumer, .producer or .admin" in reasons["A.auto.offset.reset"]
    assert "clusters.<alias>.consumer" in reasons["consumer.max.poll.interval.ms"]
    a = config.clusters["A"]
    assert "fetch.min.bytes" not in a.client_properties("consumer")
    assert "auto.offset.reset" not in a.client_properties("consumer")
    assert a.client_properties("producer")["linger.ms"] == "7"


def test_config_provider_references_are_reported_and_never_carried(tmp_path: Path) -> None:
    # MirrorMakerConfigTest.testClientConfigProperties (secrets through a ConfigProvider) and
    # .testLazyConfigResolution: mirror resolves no providers, so it carries neither the placeholder
    # (librdkafka would take it as the password) nor the provider setup.
    config, result = _convert(
        tmp_path,
        TWO_CLUSTERS + "A->B.enabled = true\nconfig.providers = vault\n"
        "config.providers.vault.class = com.example.VaultConfigProvider\n"
        "ssl.key.password = ${vault:secret/mm2:key}\n"
        "A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="${file:/etc/mm2/secrets.properties:username}" password="a-secret";\n'
        "A->B.topics = ${vault:secret/mm2:topics}\n",
    )
    reasons = _reasons(result)
    unresolved = "holds a config-provider reference (${provider:path:key}), which mirror does not resolve"
    for key in ("ssl.key.password", "A.sasl.jaas.config", "A->B.topics"):
        assert unresolved in reasons[key], key
    assert "a-secret" not in "\n".join(result.not_carried_over)
    for key in ("config.providers", "config.providers.vault.class"):
        assert "mirror has no config providers" in reasons[key]
    properties = config.clusters["A"].client_properties("admin")
    assert "ssl.key.password" not in properties
    assert "sasl.password" not in properties
    assert config.flows["A->B"].topics == [".*"]


def test_flow_level_client_settings_are_reported_with_the_cluster_section_that_takes_them(
    tmp_path: Path,
) -> None:
    # MirrorConnectorConfigTest's prefixes (consumer., source.consumer., target.admin., ...) as
    # <A>-><B>. keys: mirror has client properties per cluster only.
    config, result = _convert(
        tmp_path,
        TWO_CLUSTERS + "A->B.enabled = true\nA->B.consumer.max.poll.interval.ms = 120000\n"
        "A->B.source.consumer.auto.offset.reset = latest\nA->B.target.admin.connections.max.idle.ms = 1\n"
        "A->B.source.cluster.security.protocol = SSL\nA->B.security.protocol = SSL\n",
    )
    reasons = _reasons(result)
    assert (
        "under clusters.A.consumer and clusters.B.consumer" in reasons["A->B.consumer.max.poll.interval.ms"]
    )
    assert (
        "put auto.offset.reset under clusters.A.consumer "
        in reasons["A->B.source.consumer.auto.offset.reset"]
    )
    assert "under clusters.B.admin " in reasons["A->B.target.admin.connections.max.idle.ms"]
    assert "under clusters.A.properties " in reasons["A->B.source.cluster.security.protocol"]
    assert "does not hand a flow-level security.protocol to its clients" in reasons["A->B.security.protocol"]
    assert "max.poll.interval.ms" not in config.clusters["A"].client_properties("consumer")
    assert flow_settings(config, "A", "B", config.flows["A->B"]).auto_offset_reset == "earliest"


@pytest.mark.parametrize(
    ("line", "fields"),
    [
        pytest.param(
            "security.protocol = abc", ["clusters.A.properties", "clusters.B.properties"], id="top-level"
        ),
        # MirrorMakerConfigTest.testWorkerConfigs sets this; MM2's worker would refuse it at start.
        pytest.param("B.producer.security.protocol = SASL", ["clusters.B.producer"], id="role-level"),
    ],
)
def test_an_invalid_security_protocol_is_refused_in_one_line_per_cluster_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, fields: list[str]
) -> None:
    # MirrorMakerConfigTest.testInvalidSecurityProtocol.
    path = tmp_path / "mm2.properties"
    path.write_text(TWO_CLUSTERS + f"A->B.enabled = true\n{line}\n", encoding="utf-8")
    assert main(["config", "import", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    errors = err.splitlines()
    assert len(errors) == len(fields), err
    for error, field in zip(errors, fields, strict=True):
        assert error.startswith(f"mirror: {path}: the converted configuration is not valid: {field}: ")
        assert "security.protocol" in error
        assert (
            "is not a Kafka security protocol; use one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" in error
        )


def test_an_unknown_offset_syncs_location_is_refused_in_one_line(tmp_path: Path) -> None:
    # MirrorSourceConfigTest.testOffsetSyncsTopic (the invalid location).
    path = tmp_path / "mm2.properties"
    path.write_text(
        TWO_CLUSTERS + "A->B.enabled = true\noffset-syncs.topic.location = something\n", encoding="utf-8"
    )
    with pytest.raises(PropertiesImportError) as caught:
        import_properties(path)
    [problem] = caught.value.problems
    assert (
        "flows.A->B.offset_syncs_topic_location: 'something' is not allowed; use 'source' or 'target'"
        in problem
    )


def test_checkpoints_asked_for_without_offset_syncs_are_refused_in_one_line(tmp_path: Path) -> None:
    # MirrorCheckpointConfigTest.testValidateIfConnectorEnabled: set explicitly, checkpoints that
    # cannot be made are an error (Δ: MM2 refuses its checkpoint connector only, mirror the flow).
    path = tmp_path / "mm2.properties"
    path.write_text(
        TWO_CLUSTERS
        + "A->B.enabled = true\nemit.offset-syncs.enabled = false\nemit.checkpoints.enabled = true\n",
        encoding="utf-8",
    )
    with pytest.raises(PropertiesImportError) as caught:
        import_properties(path)
    [problem] = caught.value.problems
    assert "flows.A->B: emit_offset_syncs is false" in problem


def test_offset_syncs_off_writes_checkpoints_off_as_mm2_runs_such_a_flow(tmp_path: Path) -> None:
    # DedicatedMirrorIntegrationTest.testClusterWithEmitOffsetDisabled sets only
    # emit.offset-syncs.enabled=false: MM2's checkpoint connector fails validation and the flow
    # copies without it, which is what the import writes.
    config, result = _convert(
        tmp_path, TWO_CLUSTERS + "A->B.enabled = true\nemit.offset-syncs.enabled = false\n"
    )
    flow = config.flows["A->B"]
    assert (flow.emit_offset_syncs, flow.emit_checkpoints, flow.sync_group_offsets) == (False, False, False)
    assert any("without its checkpoint connector" in note for note in result.notes)


def test_internal_topic_replication_factors_fold_into_one_and_a_conflict_is_reported(tmp_path: Path) -> None:
    config, result = _convert(
        tmp_path,
        TWO_CLUSTERS + "A->B.enabled = true\ncheckpoints.topic.replication.factor = 3\n"
        "heartbeats.topic.replication.factor = 3\noffset-syncs.topic.replication.factor = 1\n"
        "B->A.enabled = true\nB->A.checkpoints.topic.replication.factor = -1\n",
    )
    assert config.flows["A->B"].internal_topics_replication_factor == 3
    assert config.flows["B->A"].internal_topics_replication_factor is None  # -1: the broker default
    assert (
        "already 3 from another *.topic.replication.factor; kept that"
        in _reasons(result)["offset-syncs.topic.replication.factor"]
    )


def test_an_end_of_line_comment_in_a_value_the_import_reads_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kafka's geo-replication docs write `clusters = us-west, us-east   # defines cluster aliases`.
    # A .properties file has no such comments: MM2 takes them as part of the value, an alias, a
    # topic pattern that matches nothing, an `enabled` that is not true.
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B   # two clusters\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "A->B.enabled = true  # on\ntopics = orders.* # some\nA.consumer.client.id = mm2 #1\n",
        encoding="utf-8",
    )
    assert main(["config", "import", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    fix = "is part of the value, as .properties files have no end-of-line comments (MM2 reads it so too)"
    assert err.splitlines() == [
        f"mirror: {path}: clusters: '# two clusters' {fix}; move the comment to a line of its own",
        f"mirror: {path}: A->B.enabled: '# on' {fix}; move the comment to a line of its own",
        f"mirror: {path}: topics: '# some' {fix}; move the comment to a line of its own",
    ]


def test_a_missing_bootstrap_names_the_key_that_differs_only_in_case(tmp_path: Path) -> None:
    # Kafka's docs (active/active example) write Us-east.bootstrap.servers for cluster us-east.
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, b\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n", encoding="utf-8"
    )
    with pytest.raises(PropertiesImportError) as caught:
        import_properties(path)
    assert caught.value.problems == [
        f"{path}: cluster b: no b.bootstrap.servers in the properties file; add it "
        "(B.bootstrap.servers is another alias: aliases are case-sensitive, in MM2 too)"
    ]


def test_a_flow_key_naming_a_cluster_not_listed_is_reported_as_ignored(tmp_path: Path) -> None:
    # Kafka's docs write us-west->us.east.topics; MM2 applies <A>-><B>. keys of its cluster pairs only.
    config, result = _convert(
        tmp_path, TWO_CLUSTERS + "A->B.enabled = true\nA->C.topics = x\nA->B.groups = g\n"
    )
    assert _reasons(result) == {
        "A->C.topics": "names no flow between two of the clusters (A, B), so MM2 ignores it too; check the "
        "aliases' spelling"
    }
    assert config.flows["A->B"].topics == [".*"]


def test_a_misspelt_flow_setting_is_reported_with_the_setting_it_resembles(tmp_path: Path) -> None:
    # Kafka's docs write us-west->us-east.emit.heartbeats = false, which MM2 ignores: it emits heartbeats.
    config, result = _convert(tmp_path, TWO_CLUSTERS + "A->B.enabled = true\nA->B.emit.heartbeats = false\n")
    assert _reasons(result) == {
        "A->B.emit.heartbeats": "no mirror flow setting corresponds to 'emit.heartbeats' "
        "(did you mean 'emit.heartbeats.enabled'?)"
    }
    assert config.flows["A->B"].emit_heartbeats is True


def test_a_role_bootstrap_other_than_the_clusters_is_reported_and_the_same_one_is_not(tmp_path: Path) -> None:
    # Kafka's docs set us-west.admin.bootstrap.servers: MM2's admin clients of us-west use it, while
    # mirror has one bootstrap_servers per cluster. Dropping it silently hid that.
    config, result = _convert(
        tmp_path,
        TWO_CLUSTERS + "A->B.enabled = true\nA.admin.bootstrap.servers = a2:9092\n"
        "B.producer.bootstrap.servers = b:9092\n",
    )
    reasons = _reasons(result)
    assert list(reasons) == ["A.admin.bootstrap.servers"]
    assert reasons["A.admin.bootstrap.servers"].startswith(
        "mirror's clients of A all use its bootstrap_servers;"
    )
    assert config.clusters["A"].client_properties("admin")["bootstrap.servers"] == "a:9092"


@pytest.mark.parametrize(
    ("lines", "topics", "reported"),
    [
        pytest.param(
            "B.offset.storage.topic = b-offsets\n", {"A->B": "b-offsets", "B->A": None}, [], id="target"
        ),
        pytest.param(
            "offset.storage.topic = all-offsets\nB.offset.storage.topic = b-offsets\n",
            {"A->B": "all-offsets", "B->A": "all-offsets"},
            ["B.offset.storage.topic"],
            id="top-level-wins",
        ),
        pytest.param(
            "B.offset.storage.topic = b-offsets\nA->B.offsets.storage.topic = flow-offsets\n",
            {"A->B": "flow-offsets", "B->A": None},
            [],
            id="connector-level-wins",
        ),
    ],
)
def test_the_workers_offsets_topic_is_where_the_flows_into_that_cluster_resume_from(
    tmp_path: Path, lines: str, topics: dict[str, str | None], reported: list[str]
) -> None:
    # MirrorMakerConfig.workerConfig: the workers of flow A->B take B's settings, then the top-level
    # offset.storage.* ones, and keep A->B's source positions in that offsets topic on B (Strimzi's
    # offsetStorageTopic). A connector's own offsets.storage.topic (KIP-618) comes first.
    config, result = _convert(tmp_path, TWO_CLUSTERS + "A->B.enabled = true\nB->A.enabled = true\n" + lines)
    for name, topic in topics.items():
        source, target = name.split("->")
        settings = flow_settings(config, source, target, config.flows[name])
        assert settings.offsets_topic == (topic or f"mm2-offsets.{source}.internal"), name
        assert config.flows[name].offsets_storage_topic == topic, name
    reasons = _reasons(result)
    assert list(reasons) == reported
    assert all("take the top-level offset.storage.topic instead" in reasons[key] for key in reported)


def test_a_workers_offsets_topic_of_a_cluster_no_flow_writes_into_is_reported(tmp_path: Path) -> None:
    config, result = _convert(
        tmp_path,
        TWO_CLUSTERS + "A->B.enabled = true\nA.offset.storage.topic = a-offsets\n"
        "A.offset.storage.replication.factor = 3\n",
    )
    reasons = _reasons(result)
    assert "no enabled flow replicates into A, so no flow takes it" in reasons["A.offset.storage.topic"]
    assert reasons["A.offset.storage.replication.factor"].startswith("a Connect worker storage setting;")
    assert config.flows["A->B"].offsets_storage_topic is None


def test_a_pem_truststore_becomes_librdkafkas_ca_location_where_its_type_applies(tmp_path: Path) -> None:
    # Strimzi hands MM2 its trusted certificates as a PEM truststore; librdkafka reads such a file as
    # ssl.ca.location. The type applies as MM2 hands security settings down: role, cluster, top level.
    config, result = _convert(
        tmp_path,
        TWO_CLUSTERS
        + "A->B.enabled = true\nssl.truststore.type = PEM\nA.ssl.truststore.location = /certs/a.crt\n"
        "B.ssl.truststore.type = JKS\nB.ssl.truststore.location = /certs/b.jks\n"
        "B.producer.ssl.truststore.type = pem\nB.producer.ssl.truststore.location = /certs/b.crt\n",
    )
    a, b = config.clusters["A"], config.clusters["B"]
    assert {role: a.client_properties(role)["ssl.ca.location"] for role in ROLES} == dict.fromkeys(
        ROLES, "/certs/a.crt"
    )
    assert b.client_properties("producer")["ssl.ca.location"] == "/certs/b.crt"
    assert "ssl.ca.location" not in b.client_properties("admin")
    reasons = _reasons(result)
    assert list(reasons) == ["B.ssl.truststore.type", "B.ssl.truststore.location"]
    assert "export the truststore and set ssl.ca.location" in reasons["B.ssl.truststore.location"]


def test_a_keystore_type_librdkafka_reads_is_implied_and_another_is_reported(tmp_path: Path) -> None:
    config, result = _convert(
        tmp_path,
        TWO_CLUSTERS
        + "A->B.enabled = true\nA.ssl.keystore.type = PKCS12\nA.ssl.keystore.location = /certs/a.p12\n"
        "B.ssl.keystore.type = PEM\n",
    )
    assert config.clusters["A"].client_properties("admin")["ssl.keystore.location"] == "/certs/a.p12"
    reasons = _reasons(result)
    assert list(reasons) == ["B.ssl.keystore.type"]
    assert "ssl.certificate.location and ssl.key.location (PEM files)" in reasons["B.ssl.keystore.type"]


def test_buffer_memory_becomes_librdkafkas_producer_queue_bound_in_kilobytes(tmp_path: Path) -> None:
    # Kafka's docs set us-east.producer.buffer.memory = 32768: both bound what a producer holds unsent,
    # which a container's memory limit depends on (librdkafka's default is 1 GiB, Java's 32 MiB).
    config, result = _convert(
        tmp_path,
        TWO_CLUSTERS
        + "A->B.enabled = true\nB.producer.buffer.memory = 32768\nA.producer.buffer.memory = 1000\n"
        "B.admin.buffer.memory = lots\nbuffer.memory = 1\n",
    )
    assert config.clusters["B"].client_properties("producer")["queue.buffering.max.kbytes"] == "32"
    assert config.clusters["A"].client_properties("producer")["queue.buffering.max.kbytes"] == "1"
    reasons = _reasons(result)
    assert reasons["B.admin.buffer.memory"] == "'lots' is not a number of bytes"
    assert "only security.protocol, ssl.* and sasl.*" in reasons["buffer.memory"]

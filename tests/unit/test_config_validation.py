"""`mirror validate`: every malformed config gets one line per problem naming file, field and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.cli import main
from mirror.client import MirrorClient
from mirror.config import load_config
from mirror.config.cluster import ClusterConfig
from mirror.config.models import MirrorConfig
from mirror.errors import ConfigError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bad_configs"
EXAMPLE = Path(__file__).parent.parent.parent / "config" / "mm2.example.yaml"
BAD_CONFIGS = sorted(FIXTURES.glob("*.yaml"))


def _expected_lines(path: Path) -> list[str]:
    return [
        line.removeprefix("# expect:").strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("# expect:")
    ]


def test_there_are_at_least_ten_malformed_fixtures() -> None:
    assert len(BAD_CONFIGS) >= 10
    assert all(_expected_lines(path) for path in BAD_CONFIGS)


@pytest.mark.parametrize("path", BAD_CONFIGS, ids=[p.stem for p in BAD_CONFIGS])
def test_validate_answers_a_malformed_config_with_one_line_per_problem(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exit_code = main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert exit_code == 2
    assert out == ""
    lines = err.splitlines()
    expected = _expected_lines(path)
    assert len(lines) == len(expected), err
    for line, wanted in zip(lines, expected, strict=True):
        assert line.startswith(f"mirror: {path}"), line
        assert wanted in line, f"expected {wanted!r} in {line!r}"
    assert "Traceback" not in err


def test_example_config_is_valid_and_documents_every_key() -> None:
    config = load_config(EXAMPLE)
    text = EXAMPLE.read_text(encoding="utf-8")
    flow_keys = set(type(config.flows["A->B"]).model_fields)
    sections = {
        "cluster": set(type(config.clusters["A"]).model_fields),
        "flow": flow_keys,
        "spark": set(type(config.spark).model_fields),
        "metrics": set(type(config.metrics).model_fields),
    }
    for section, keys in sections.items():
        for key in keys:
            assert f"{key}:" in text, f"config/mm2.example.yaml does not document {section} key {key!r}"


def test_validate_prints_effective_config_with_secrets_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mm2.yaml"
    path.write_text(
        "clusters:\n"
        "  A:\n"
        "    bootstrap_servers: 127.0.0.1:9092\n"
        "    properties: {security.protocol: SASL_PLAINTEXT, sasl.mechanism: PLAIN, sasl.username: u,\n"
        "                 sasl.password: hunter2}\n"
        "  B: {bootstrap_servers: 127.0.0.1:9093}\n"
        "flows:\n"
        "  A->B: {topics: [orders]}\n",
        encoding="utf-8",
    )
    assert main(["validate", str(path)]) == 0
    out, _ = capsys.readouterr()
    assert "hunter2" not in out
    assert "sasl.password: '**********'" in out
    assert "offset_lag_max: 100" in out  # defaults are shown
    assert load_config(path).clusters["A"].client_properties("producer")["sasl.password"] == "hunter2"


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mm2.yaml"
    path.write_text(
        "clusters:\n  A: {bootstrap_servers: a:1}\n  B: {bootstrap_servers: b:1}\n"
        "flows:\n  A->B: {}\nspark: {app_name: from-file}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("MIRROR_SPARK__MASTER", "local[2,3]")
    monkeypatch.setenv("MIRROR_CLUSTERS__B__BOOTSTRAP_SERVERS", "b:2")
    config = load_config(path)
    assert config.spark.master == "local[2,3]"
    assert config.spark.app_name == "from-file"
    assert set(config.clusters) == {"A", "B"}
    assert config.clusters["B"].bootstrap_servers == "b:2"


def test_config_is_frozen() -> None:
    config = MirrorConfig(clusters={"A": {"bootstrap_servers": "a:1"}})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="frozen"):
        config.spark = config.spark  # type: ignore[misc]


def test_mm2_defaults_apply_to_a_minimal_flow(tmp_path: Path) -> None:
    path = tmp_path / "mm2.yaml"
    path.write_text(
        "clusters:\n  A: {bootstrap_servers: a:1}\n  B: {bootstrap_servers: b:1}\nflows:\n  A->B: {}\n",
        encoding="utf-8",
    )
    flow = load_config(path).flows["A->B"]
    assert flow.enabled and flow.exactly_once
    assert flow.topics == [".*"]
    assert flow.topics_exclude == [r".*[\-\.]internal", r".*\.replica", r"__.*"]
    assert flow.groups_exclude == [r"console-consumer-.*", r"connect-.*", r"__.*"]
    assert flow.offset_lag_max == 100
    assert flow.replication_factor is None


def test_missing_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_load_config_raises_config_error_listing_problems() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(FIXTURES / "19-several-problems.yaml")
    assert len(caught.value.problems) == 3


def test_each_client_role_takes_the_cluster_properties_then_its_own_overrides() -> None:
    # MirrorConnectorConfigTest.testSourceConsumerConfig(WithSourcePrefix), .testSourceProducerConfig,
    # .testSourceAdminConfig, .testTargetAdminConfig: a role setting wins over the cluster's, and
    # never leaks into another role.
    cluster = ClusterConfig(
        bootstrap_servers="a1:9092,a2:9092",
        properties={"security.protocol": "SSL", "client.id": "cluster", "sasl.password": "s3cret"},
        consumer={"max.poll.interval.ms": "120000", "client.id": "consumer"},
        producer={"acks": "1", "security.protocol": "PLAINTEXT"},
        admin={"connections.max.idle.ms": "10000"},
    )
    shared = {"bootstrap.servers": "a1:9092,a2:9092", "security.protocol": "SSL", "sasl.password": "s3cret"}
    assert cluster.client_properties("consumer") == {
        **shared,
        "client.id": "consumer",
        "max.poll.interval.ms": "120000",
    }
    assert cluster.client_properties("producer") == {
        **shared,
        "client.id": "cluster",
        "acks": "1",
        "security.protocol": "PLAINTEXT",
    }
    assert cluster.client_properties("admin") == {
        **shared,
        "client.id": "cluster",
        "connections.max.idle.ms": "10000",
    }


def _write(tmp_path: Path, properties: str) -> Path:
    path = tmp_path / "mm2.yaml"
    path.write_text(
        "clusters:\n"
        f"  A: {{bootstrap_servers: 127.0.0.1:9092, {properties}}}\n"
        "  B: {bootstrap_servers: 127.0.0.1:9093}\n"
        "flows: {A->B: {}}\n",
        encoding="utf-8",
    )
    return path


def test_security_protocol_is_accepted_in_any_case_and_kept_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # MirrorMakerConfigTest.testCaseInsensitiveSecurityProtocol,
    # MirrorConnectorConfigTest.testCaseInsensitiveSecurityProtocol: as Kafka and librdkafka do.
    path = _write(
        tmp_path,
        "properties: {security.protocol: sasl_ssl, sasl.mechanism: PLAIN, sasl.username: u, "
        "sasl.password: p}, admin: {security.protocol: Sasl_Plaintext}",
    )
    cluster = load_config(path).clusters["A"]
    assert cluster.client_properties("consumer")["security.protocol"] == "sasl_ssl"
    assert cluster.client_properties("admin")["security.protocol"] == "Sasl_Plaintext"
    assert main(["validate", str(path)]) == 0  # librdkafka's own check passes too
    assert "security.protocol: sasl_ssl" in capsys.readouterr().out


def test_an_invalid_security_protocol_in_a_role_is_one_line_naming_the_role(tmp_path: Path) -> None:
    # MirrorConnectorConfigTest.testInvalidSecurityProtocol, for the file `mirror run` loads.
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, "producer: {security.protocol: SASL}"))
    [problem] = caught.value.problems
    assert ":2: clusters.A.producer: security.protocol 'SASL' is not a Kafka security protocol" in problem


def test_mirror_client_refuses_an_invalid_security_protocol_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # MirrorMakerConfigTest.testClientInvalidSecurityProtocol: from a file, from properties given
    # directly, and through a command built on MirrorClient. No broker is contacted.
    path = _write(tmp_path, "properties: {security.protocol: abc}")
    with pytest.raises(ConfigError, match=r"clusters\.A\.properties: security\.protocol 'abc'"):
        MirrorClient.from_config(path, "A")
    with pytest.raises(ConfigError) as caught:
        MirrorClient("A", {"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "abc"})
    [problem] = caught.value.problems
    assert problem.startswith("cluster A: admin client properties: ")
    assert 'Invalid value "abc" for configuration property "security.protocol"' in problem
    assert main(["topology", "--cluster", "A", "-c", str(path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "security.protocol 'abc' is not a Kafka security protocol" in line


def test_mirror_client_accepts_a_lower_case_security_protocol() -> None:
    # MirrorMakerConfigTest.testCaseInsensitiveSecurityProtocol for the client: building it
    # checks the properties with librdkafka and contacts no broker.
    properties = {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u",
        "sasl.password": "p",
    }
    assert MirrorClient("A", properties).alias == "A"


def test_validate_refuses_client_properties_librdkafka_rejects_in_one_line_per_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `mirror run` makes this check at start; `mirror validate` makes it too, so "valid" means the
    # run will not refuse the file's client properties.
    path = tmp_path / "mm2.yaml"
    path.write_text(
        "clusters:\n"
        "  A: {bootstrap_servers: 127.0.0.1:9092, properties: {fetch.min.byte: '1'}}\n"
        "  B: {bootstrap_servers: 127.0.0.1:9093, producer: {acks: sometimes}}\n"
        "flows: {A->B: {}}\n",
        encoding="utf-8",
    )
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    first, second = err.splitlines()
    assert first.startswith(f"mirror: {path}: clusters.A: admin client properties: ")
    assert 'No such configuration property: "fetch.min.byte"; fix or remove it' in first
    assert second.startswith(f"mirror: {path}: clusters.B: producer client properties: ")
    assert 'Invalid value for configuration property "request.required.acks"' in second

"""`mirror config import`: an MM2 dedicated-mode properties file becomes an equivalent mm2.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mirror.cli import main
from mirror.config import load_config
from mirror.config.mm2_properties import import_properties
from mirror.errors import PropertiesImportError

FIXTURE = Path(__file__).parent.parent / "fixtures" / "mm2_properties" / "dedicated.properties"


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

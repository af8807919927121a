"""`mirror validate`: every malformed config gets one line per problem naming file, field and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.cli import main
from mirror.config import load_config
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
        "    properties: {security.protocol: SASL_PLAINTEXT, sasl.username: u, sasl.password: hunter2}\n"
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

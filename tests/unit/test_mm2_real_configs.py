"""Real MM2 configurations through `mirror config import`, pinned as fixtures (tests/fixtures/mm2_real).

Kafka's own config/connect-mirror-maker.properties, the examples of its geo-replication docs, and
Strimzi's KafkaMirrorMaker2 examples converted by hand to dedicated-mode properties; each file says
where it comes from and how it was converted. Each `<name>.properties` is imported with the CLI as a
user would, and what the import prints is compared with the files beside it: `<name>.mm2.yaml` (the
converted file), `<name>.not-carried.txt` and `<name>.notes.txt` (its "not carried over:" and "note:"
lines), or `<name>.error.txt` for a file it refuses (exit 2, one line per problem). A converted file
must then pass `mirror validate`, librdkafka's check of the client properties included.

MIRROR_UPDATE_FIXTURES=1 rewrites the expected files instead of comparing; read the diff as an MM2
operator would before committing it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from mirror.cli import main
from mirror.local.tls import make_tls_files

FIXTURES = Path(__file__).parent.parent / "fixtures" / "mm2_real"
NAMES = sorted(path.name.removesuffix(".properties") for path in FIXTURES.glob("*.properties"))
UPDATE = os.environ.get("MIRROR_UPDATE_FIXTURES") == "1"
CONVERTED = (".mm2.yaml", ".not-carried.txt", ".notes.txt")
REFUSED = (".error.txt",)

# What an operator adds before `mirror validate` passes, as MIRROR_* environment overrides: the
# secrets the import reports it could not carry (read through a config provider in the original),
# and files at the paths the examples name (made here: a CA, a client key and certificate in one PEM
# file, and a PKCS#12 keystore with the example's password).
PEM_TRUST = {
    "MIRROR_CLUSTERS__cluster-a__PROPERTIES__ssl.ca.location": "{ca}",
    "MIRROR_CLUSTERS__cluster-b__PROPERTIES__ssl.ca.location": "{ca}",
}
OPERATOR_ENV: Mapping[str, Mapping[str, str]] = {
    "kafka-docs-replication-flows": {
        "MIRROR_CLUSTERS__us-east__PROPERTIES__ssl.keystore.location": "{pkcs12}",
    },
    "strimzi-mirror-maker-2-tls": PEM_TRUST,
    "strimzi-scram-sha-512-auth": {
        **PEM_TRUST,
        **{
            f"MIRROR_CLUSTERS__{alias}__PROPERTIES__{name}": value
            for alias in ("cluster-a", "cluster-b")
            for name, value in (("sasl.username", f"{alias}-user"), ("sasl.password", f"{alias}-secret"))
        },
    },
    "strimzi-tls-auth": {
        **PEM_TRUST,
        **{
            f"MIRROR_CLUSTERS__{alias}__PROPERTIES__{name}": "{client_pem}"
            for alias in ("cluster-a", "cluster-b")
            for name in ("ssl.certificate.location", "ssl.key.location")
        },
    },
}
# The password of kafka-docs-replication-flows' keystore, us-east.ssl.keystore.password in the docs.
KEYSTORE_PASSWORD = "my-secret-password"  # noqa: S105


@pytest.fixture(scope="module")
def client_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tls = make_tls_files(tmp_path_factory.mktemp("tls"), name="client")
    pkcs12 = tls.broker_keystore.with_suffix(".p12")
    subprocess.run(
        ["openssl", "pkcs12", "-export", "-in", str(tls.broker_keystore), "-out", str(pkcs12),
         "-passout", f"pass:{KEYSTORE_PASSWORD}"],
        check=True, capture_output=True,
    )  # fmt: skip
    return {"ca": str(tls.ca_certificate), "client_pem": str(tls.broker_keystore), "pkcs12": str(pkcs12)}


def test_every_fixture_names_its_source_and_has_its_expected_files() -> None:
    assert len(NAMES) >= 15, NAMES
    assert set(OPERATOR_ENV) <= set(NAMES)
    known = {f"{name}{suffix}" for name in NAMES for suffix in (".properties", *CONVERTED, *REFUSED)}
    for path in FIXTURES.iterdir():
        if path.name.endswith(".strimzi.yaml"):
            assert path.name.removesuffix(".strimzi.yaml") in NAMES, f"{path.name}: no .properties beside it"
            assert path.read_text(encoding="utf-8").startswith("# Source: strimzi/"), path.name
        else:
            assert path.name in known, f"{path.name}: not a fixture of a .properties file"
    for name in NAMES:
        assert (FIXTURES / f"{name}.properties").read_text(encoding="utf-8").startswith("# Source: "), name
        if not UPDATE:
            assert {_kind(name)} <= {CONVERTED, REFUSED}, name


@pytest.mark.parametrize("name", NAMES)
def test_a_real_mm2_configuration_converts_as_pinned_and_validates(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    client_files: dict[str, str],
) -> None:
    converted = tmp_path / "mm2.yaml"
    monkeypatch.chdir(FIXTURES)  # the CLI names the file as the user typed it
    code = main(["config", "import", f"{name}.properties", "-o", str(converted)])
    out, err = capsys.readouterr()
    lines = err.splitlines()
    if code == 2:
        assert out == ""
        assert "Traceback" not in err
        produced = {".error.txt": _text(lines)}
    else:
        assert code == 0, err
        not_carried = [line for line in lines if line.startswith("not carried over: ")]
        notes = [line for line in lines if line.startswith("note: ")]
        assert lines == [f"wrote {converted}", *not_carried, *notes], err
        produced = {
            ".mm2.yaml": converted.read_text(encoding="utf-8"),
            ".not-carried.txt": _text(not_carried),
            ".notes.txt": _text(notes),
        }
    if UPDATE:
        for suffix in (*CONVERTED, *REFUSED):
            (FIXTURES / f"{name}{suffix}").unlink(missing_ok=True)
        for suffix, text in produced.items():
            (FIXTURES / f"{name}{suffix}").write_text(text, encoding="utf-8")
    assert _kind(name) == tuple(produced), f"{name}: the import now {'refuses' if code else 'accepts'} it"
    for suffix, text in produced.items():
        assert text == (FIXTURES / f"{name}{suffix}").read_text(encoding="utf-8"), f"{name}{suffix} differs"

    if code == 0:
        for variable, value in OPERATOR_ENV.get(name, {}).items():
            monkeypatch.setenv(variable, value.format(**client_files))
        # librdkafka looks the examples' hosts up in the background, and a client destroyed during a
        # failing lookup can wait 5 s for it; the check builds clients only, so any address does.
        for alias in yaml.safe_load(produced[".mm2.yaml"])["clusters"]:
            monkeypatch.setenv(f"MIRROR_CLUSTERS__{alias}__BOOTSTRAP_SERVERS", "127.0.0.1:1")
        assert main(["validate", str(converted)]) == 0, capsys.readouterr().err


def _kind(name: str) -> tuple[str, ...]:
    """The expected files of `name`: CONVERTED, REFUSED, or whatever mix is there (a mistake)."""
    return tuple(suffix for suffix in (*CONVERTED, *REFUSED) if (FIXTURES / f"{name}{suffix}").exists())


def _text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)

"""docker/: the image, the compose demo, the Kubernetes manifests and the systemd unit, checked
statically, since this machine has no Docker engine, no registry and no Kubernetes: linters and
schemas (hadolint, the Compose specification, Kubernetes' API schemas, systemd-analyze), and that
every file, port, path, command and setting they name agrees with mirror and with each other."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from packaging.requirements import Requirement

from mirror.cli.entry import build_parser
from mirror.config import load_config
from mirror.errors import ConfigError, FlowTakenOverError
from mirror.local.jars import KAFKA_VERSION, cache_root
from tests.dashboards import load as load_dashboards_script

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE_WHEEL = "docker_compose-1.29.2-*.whl"
KUBERNETES_VERSION = "1.33.0"
ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - in a container the metrics must be reachable from outside


def _freeze_script() -> Any:
    """docker/freeze_constraints.py, a script (docker/ is no package: `docker` is a PyPI name too)."""
    spec = importlib.util.spec_from_file_location("freeze_constraints", DOCKER / "freeze_constraints.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined and comments dropped."""
    lines = [
        line for line in (DOCKER / "Dockerfile").read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [
        (word.upper(), rest.strip())
        for word, _, rest in (line.strip().partition(" ") for line in joined.splitlines() if line.strip())
    ]


def _image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction, args in _dockerfile():
        if instruction == "ENV":
            env.update(dict(pair.split("=", 1) for pair in shlex.split(args)))
    return env


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())  # type: ignore[no-any-return]


def _manifests() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((DOCKER / "kubernetes" / "mirror.yaml").read_text()))


def _of_kind(kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in _manifests() if doc["kind"] == kind]
    return found


def _unit() -> dict[str, list[str]]:
    """The systemd unit's `Key=value` settings (a key may repeat)."""
    settings: dict[str, list[str]] = {}
    for line in (DOCKER / "systemd" / "mirror.service").read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


# --- the image --------------------------------------------------------------------------------


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint is missing: it comes with the dev extras (`make install`)"
    result = subprocess.run(
        [hadolint, str(DOCKER / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_pins_its_base_images_and_runs_mirror_as_a_non_root_user() -> None:
    instructions = _dockerfile()
    images = [args.split("=", 1)[1] for name, args in instructions if name == "ARG" and "_IMAGE=" in args]
    assert len(images) == 2 and all(re.search(r":\d+\.\d+\.\d+", image) for image in images), images
    assert ("USER", "10001:10001") in instructions
    # tini as PID 1 hands SIGTERM to mirror and reaps orphans; mirror is what runs.
    assert ("ENTRYPOINT", '["/usr/bin/tini", "--", "mirror"]') in instructions
    (cmd,) = [json.loads(args) for name, args in instructions if name == "CMD"]
    assert cmd == ["run", "/etc/mirror/mm2.yaml"]
    build_parser().parse_args(cmd)  # a command mirror knows
    assert ("STOPSIGNAL", "SIGTERM") in instructions
    for name, args in instructions:
        if name == "COPY" and "--from" not in args:
            for source in shlex.split(args)[:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"


def test_the_health_check_asks_the_metrics_port_the_image_configures() -> None:
    env = _image_env()
    (check,) = [args for name, args in _dockerfile() if name == "HEALTHCHECK"]
    assert f"http://127.0.0.1:{env['MIRROR_METRICS__PORT']}/metrics" in check
    assert env["MIRROR_METRICS__HOST"] == ALL_INTERFACES
    assert ("EXPOSE", env["MIRROR_METRICS__PORT"]) in _dockerfile()
    assert env["MIRROR_SPARK__CHECKPOINT_DIR"].startswith("/var/lib/mirror/")
    # mirror writes its cache under XDG_CACHE_HOME: it must be on the volume, not the root file system.
    assert env["XDG_CACHE_HOME"].startswith("/var/lib/mirror/") and env["HOME"] == "/var/lib/mirror"
    assert ("VOLUME", '["/var/lib/mirror"]') in _dockerfile()


def test_the_image_pins_every_runtime_dependency_within_pyprojects_ranges() -> None:
    freeze = _freeze_script()
    pinned = {}
    for line in (DOCKER / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pinned[freeze.normalized(name)] = version
    # The same distributions as installed here (versions may differ: pip resolves the ranges anew).
    assert set(pinned) == set(freeze.runtime_closure("mirror")), "regenerate: `make docker-constraints`"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for text in declared:
        requirement = Requirement(text)
        version = pinned[freeze.normalized(requirement.name)]
        assert requirement.specifier.contains(version), f"{version} of {requirement.name} is outside {text}"


def test_every_file_of_the_mirror_package_that_is_not_python_goes_into_the_wheel() -> None:
    # The image installs a wheel, not this checkout: a file left out (Spark's log4j2 configuration
    # once was) is missing only there.
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "mirror"
    ]
    package = ROOT / "mirror"
    for path in package.rglob("*"):
        if path.is_file() and path.suffix not in (".py", ".pyc"):
            relative = path.relative_to(package)
            assert any(relative.match(pattern) for pattern in patterns), f"{relative} is not in package-data"


# --- the compose demo -------------------------------------------------------------------------


def test_the_compose_file_follows_the_compose_specification() -> None:
    wheels = sorted((cache_root() / "compose-spec").glob(COMPOSE_WHEEL))
    assert wheels, "the Compose specification's schema is missing: `make setup` downloads it"
    schema = json.loads(zipfile.ZipFile(wheels[-1]).read("compose/config/compose_spec.json"))
    jsonschema.Draft201909Validator(schema).validate(_compose())


def test_every_file_the_compose_demo_mounts_exists() -> None:
    for name, service in _compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DOCKER / source).exists(), f"{name} mounts {source}: no such file"


def test_the_compose_demo_runs_the_kafka_version_the_tests_run() -> None:
    images = {s["image"] for s in _compose()["services"].values() if s["image"].startswith("apache/kafka")}
    assert images == {f"apache/kafka:{KAFKA_VERSION}"}


def test_mirror_in_the_compose_demo_reads_a_valid_config_naming_the_demos_clusters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compose = _compose()
    for key, value in _image_env().items():
        if key.startswith("MIRROR_"):
            monkeypatch.setenv(key, value)
    config = load_config(DOCKER / "mm2.yaml")
    hosts = {cluster.bootstrap_servers.split(":")[0] for cluster in config.clusters.values()}
    assert hosts <= set(compose["services"]), hosts
    assert config.metrics.host == ALL_INTERFACES and config.metrics.port == 9464
    mirror = compose["services"]["mirror"]
    assert "./mm2.yaml:/etc/mirror/mm2.yaml:ro" in mirror["volumes"]
    # A clean stop may take a minute (a cluster away); docker's default 10 s would kill it first.
    assert int(mirror["stop_grace_period"].rstrip("s")) >= 60
    monitor = compose["services"]["heartbeat-monitor"]["command"]
    build_parser().parse_args(monitor)


def test_prometheus_scrapes_the_demos_services_and_loads_the_alert_rules(tmp_path: Path) -> None:
    compose = _compose()
    prometheus = yaml.safe_load((DOCKER / "prometheus.yml").read_text())
    targets = {
        job["job_name"]: target
        for job in prometheus["scrape_configs"]
        for target in job["static_configs"][0]["targets"]
    }
    monitor = compose["services"]["heartbeat-monitor"]["command"]
    monitor_port = monitor[monitor.index("--serve-metrics") + 1].rsplit(":", 1)[1]
    assert targets == {
        "mirror": f"mirror:{_image_env()['MIRROR_METRICS__PORT']}",  # the job name the alerts use
        "mirror-heartbeats": f"heartbeat-monitor:{monitor_port}",
    }
    (rules,) = prometheus["rule_files"]
    assert f"../dashboards/alerts.yaml:{rules}:ro" in compose["services"]["prometheus"]["volumes"]
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: apt-get install prometheus (.ci/run does)"
    local = dict(prometheus, rule_files=[str(ROOT / "dashboards" / "alerts.yaml")])
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(local))
    checked = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_grafana_is_provisioned_with_the_prometheus_and_every_dashboard_build_py_makes() -> None:
    grafana = _compose()["services"]["grafana"]
    provisioning = DOCKER / "grafana" / "provisioning"
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())["datasources"]
    assert source["type"] == "prometheus" and source["isDefault"] is True
    assert source["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "mirror.yaml").read_text())["providers"]
    assert f"../dashboards:{provider['options']['path']}:ro" in grafana["volumes"]
    built = load_dashboards_script("build").DASHBOARDS
    assert sorted(path.name for path in (ROOT / "dashboards").glob("*.json")) == sorted(built)


# --- Kubernetes -------------------------------------------------------------------------------


def test_the_kubernetes_manifests_validate_against_the_api_schemas() -> None:
    documents = _manifests()
    assert [doc["kind"] for doc in documents] == [
        "ConfigMap", "Secret", "PersistentVolumeClaim", "Deployment", "Service", "PodDisruptionBudget",
    ]  # fmt: skip
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_deployment_runs_one_instance_that_stops_cleanly_and_is_probed_on_its_metrics() -> None:
    deployment = _of_kind("Deployment")["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}
    pod = deployment["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= 60
    assert pod["securityContext"]["runAsUser"] == 10001 and pod["securityContext"]["runAsNonRoot"]
    (container,) = pod["containers"]
    build_parser().parse_args(container["args"])
    (port,) = container["ports"]
    assert port == {"name": "metrics", "containerPort": int(_image_env()["MIRROR_METRICS__PORT"])}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}, probe
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes[mounts["/etc/mirror"]]["configMap"]["name"] == _of_kind("ConfigMap")["metadata"]["name"]
    assert volumes[mounts["/var/lib/mirror"]]["persistentVolumeClaim"]["claimName"] == "mirror-state"
    labels = deployment["template"]["metadata"]["labels"]
    for kind in ("Service", "PodDisruptionBudget"):
        selector = _of_kind(kind)["spec"]["selector"]
        assert selector.get("matchLabels", selector).items() <= labels.items(), kind


def test_the_configmaps_config_with_the_secrets_merged_in_is_valid_and_keeps_the_passwords_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mm2.yaml").write_text(_of_kind("ConfigMap")["data"]["mm2.yaml"])
    secret = _of_kind("Secret")["stringData"]
    (container,) = _of_kind("Deployment")["spec"]["template"]["spec"]["containers"]
    for variable in container["env"]:
        value = variable.get("value")
        if "valueFrom" in variable:
            value = secret[variable["valueFrom"]["secretKeyRef"]["key"]]
        monkeypatch.setenv(variable["name"], value)
    config = load_config(tmp_path / "mm2.yaml")
    for alias in ("A", "B"):
        password = config.clusters[alias].properties["sasl.password"]
        assert str(password) == "**********" and password.get_secret_value() == "change-me"  # type: ignore[union-attr]
    # Everything else comes from the ConfigMap: environment overrides would win over it unseen.
    assert config.spark.master == "local[2]"
    assert {variable["name"] for variable in container["env"]} == {
        "MIRROR_CLUSTERS__A__PROPERTIES",
        "MIRROR_CLUSTERS__B__PROPERTIES",
    }


# --- systemd ----------------------------------------------------------------------------------


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd (.ci/run does)"
    unit = (DOCKER / "systemd" / "mirror.service").read_text()
    # verify checks that ExecStart's binary exists: point it at this checkout's mirror.
    local = unit.replace("/opt/mirror/bin/mirror", str(Path(sys.executable).parent / "mirror"))
    (tmp_path / "mirror.service").write_text(local)
    result = subprocess.run(
        [analyze, "verify", str(tmp_path / "mirror.service")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stdout + result.stderr


def test_the_systemd_unit_stops_mirror_as_mirror_expects_and_restarts_only_what_a_restart_mends() -> None:
    unit = _unit()
    (start,) = unit["ExecStart"]
    build_parser().parse_args(shlex.split(start)[1:])
    assert unit["KillMode"] == ["mixed"] and unit["KillSignal"] == ["SIGTERM"]
    assert int(unit["TimeoutStopSec"][0]) >= 90
    assert unit["Restart"] == ["on-failure"]
    prevented = {int(code) for code in unit["RestartPreventExitStatus"][0].split()}
    assert prevented == {ConfigError.exit_code, FlowTakenOverError.exit_code}

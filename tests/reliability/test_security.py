"""Secured clusters: SASL (PLAIN on the source, SCRAM on the target) and an authorizer that denies
what no ACL allows. mirror replicates with exactly the ACLs `mirror acls` lists; a missing ACL or
a wrong password stops it with one line; its password appears in no output."""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from mirror.config import load_config
from mirror.local.broker import BrokerSpec
from mirror.local.environment import discard_brokers, start_brokers
from mirror.local.jars import kafka_libs
from mirror.local.ports import free_port
from mirror.local.sasl import SaslUsers
from mirror.security import RequiredAcl, required_acls
from tests.helpers import run_mirror, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, write_config
from tests.records import read_topic
from tests.reliability.conftest import Record
from tests.reliability.traffic import compare_topics
from tests.runbooks import SequencedProducer, SharedCounter

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability]

# Random per session, so finding one in an output can only mean it leaked.
PASSWORDS = {
    user: f"{user}-{uuid.uuid4().hex}"
    for user in ("mirror", "no-txn", "no-create", "no-describe-configs", "creates-nothing", "app")
}
MECHANISMS = {"A": "PLAIN", "B": "SCRAM-SHA-512"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, KafkaCluster]]:
    """Two secured single-broker clusters, A and B, of their own (the shared pair is open)."""
    users = SaslUsers(admin_password=f"admin-{uuid.uuid4().hex}", users=PASSWORDS)
    root = tmp_path_factory.mktemp("secured")
    specs = [BrokerSpec(alias, root / alias, free_port(), free_port(), sasl=users) for alias in ("A", "B")]
    brokers = start_brokers(specs, libs=kafka_libs(), short_lived=True)
    try:
        yield tuple(  # type: ignore[misc]
            KafkaCluster(b.spec.alias, b.bootstrap_servers, None, b, users.client_properties())
            for b in brokers
        )
    finally:
        discard_brokers(
            brokers
        )  # their data is thrown away: no controlled shutdown, but to write the class archive


def sasl_clusters(user: str, password: str | None = None) -> dict[str, dict[str, object]]:
    """The `clusters` keys that log `user` in: PLAIN on A, SCRAM-SHA-512 on B."""
    return {
        alias: {
            "properties": {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": password or PASSWORDS[user],
            }
        }
        for alias, mechanism in MECHANISMS.items()
    }


def grant(clusters: tuple[KafkaCluster, KafkaCluster], user: str, acls: list[RequiredAcl]) -> None:
    by_alias = {cluster.alias: cluster for cluster in clusters}
    for alias in {acl.cluster for acl in acls}:
        bindings = [
            AclBinding(
                _RESOURCES[acl.resource],
                acl.name,
                ResourcePatternType[acl.pattern.upper()],
                f"User:{user}",
                "*",
                AclOperation[_OPERATIONS.get(operation, operation.upper())],
                AclPermissionType.ALLOW,
            )
            for acl in acls
            if acl.cluster == alias
            for operation in acl.operations
        ]
        admin = AdminClient(by_alias[alias].properties())
        for future in admin.create_acls(bindings, request_timeout=30).values():
            future.result(timeout=30)


_OPERATIONS = {"AlterConfigs": "ALTER_CONFIGS", "DescribeConfigs": "DESCRIBE_CONFIGS"}
_RESOURCES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional-id": ResourceType.TRANSACTIONAL_ID,
    "cluster": ResourceType.BROKER,  # librdkafka's name for the cluster resource
}


def source_topic(source: KafkaCluster, name: str, records: int) -> None:
    admin = AdminClient(source.properties())
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(timeout=30)
    producer = Producer(source.properties())
    for i in range(records):
        producer.produce(name, key=b"%d" % i, value=b"secret-record-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0


def test_replicates_between_secured_clusters_with_only_the_listed_acls_and_never_shows_the_password(
    secured: tuple[KafkaCluster, KafkaCluster],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    source, target = secured
    topic = unique_name(request, "secured-")
    source_topic(source, topic, 5000)
    config = write_config(tmp_path, source, target, [topic], clusters=sasl_clusters("mirror"))
    grant(secured, "mirror", required_acls(load_config(config)))

    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source, target, [topic], run)
        port = yaml.safe_load(config.read_text())["metrics"]["port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            metrics = response.read().decode()
        exit_code = run.stop()
    finally:
        run.cleanup()
    validate = run_mirror("validate", str(config))
    acls = run_mirror("acls", str(config))
    comparison = compare_topics(source, target, [topic])
    outputs = {
        "mirror run": run.output(),
        "mirror validate": validate.stdout + validate.stderr,
        "mirror acls": acls.stdout + acls.stderr,
        "metrics": metrics,
    }
    leaks = [name for name, text in outputs.items() if PASSWORDS["mirror"] in text]
    complaints = [
        line for line in run.output().splitlines() if " WARNING " in line or "authoriz" in line.lower()
    ]
    reliability(
        "security",
        "Replication SASL/PLAIN source -> SASL/SCRAM-SHA-512 target, authorizer on, only the ACLs "
        "`mirror acls` lists",
        shown=f"{comparison.checked:,} records checked, {comparison.lost} lost, {comparison.duplicated} "
        f"duplicated; warnings: {len(complaints)}; password found in: {', '.join(leaks) or 'nothing'}",
        exit_code=exit_code,
    )
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact and comparison.checked == 5000, comparison
    assert not complaints, complaints
    assert not leaks, leaks
    assert validate.returncode == 0 and "sasl.password" in validate.stdout
    assert "kafka-acls.sh" in acls.stdout
    # The internal topics it created are compacted, as MM2's are, and the ones read whole are
    # single-partition (MirrorUtilsTest.testCreateCompactedTopic).
    internal = {"mm2-offset-syncs.A.internal": 1, "A.checkpoints.internal": 1, "heartbeats": 1}
    assert _layout(target, internal) == {name: (n, "compact") for name, n in internal.items()}


@pytest.mark.parametrize(
    ("user", "missing", "expected"),
    [
        ("no-txn", "transactional-id", "Transactional Id authorization failed"),
        ("no-create", "Create", "creating topic A."),
        ("mirror", "password", "refused the credentials"),
        ("no-describe-configs", "DescribeConfigs", " on source cluster A: "),
    ],
)
def test_a_missing_permission_or_a_wrong_password_stops_the_run_with_one_line(
    secured: tuple[KafkaCluster, KafkaCluster],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
    user: str,
    missing: str,
    expected: str,
) -> None:
    source, target = secured
    topic = unique_name(request, "denied-")
    source_topic(source, topic, 100)
    wrong = f"wrong-{uuid.uuid4().hex}" if missing == "password" else None
    config = write_config(tmp_path, source, target, [topic], clusters=sasl_clusters(user, wrong))
    acls = required_acls(load_config(config))
    if missing == "transactional-id":
        acls = [acl for acl in acls if acl.resource != "transactional-id"]
    elif missing == "DescribeConfigs":
        acls = [
            replace(acl, operations=tuple(op for op in acl.operations if op != "DescribeConfigs"))
            if acl.cluster == "A" and acl.name == topic
            else acl
            for acl in acls
        ]
    elif missing == "Create":
        acls = [
            replace(acl, operations=tuple(op for op in acl.operations if op != "Create"))
            if acl.resource == "topic" and acl.pattern == "prefixed"
            else acl
            for acl in acls
        ]
    grant(secured, user, acls)

    result = run_mirror("run", str(config), timeout=180)

    errors = [line for line in result.stderr.splitlines() if line.startswith("mirror: ")]
    case = {
        "password": "wrong SASL password",
        "transactional-id": "missing ACL on the target: transactional ids",
        "Create": "missing ACL on the target: topic creation",
        "DescribeConfigs": "missing ACL on the source: DescribeConfigs on the copied topic",
    }[missing]
    reliability("security", case, shown=" / ".join(errors) or "nothing", exit_code=result.returncode)
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(errors) == 1, result.stderr[-3000:]
    assert expected in errors[0]
    if (
        missing == "DescribeConfigs"
    ):  # the topics are named (MirrorSourceConnectorTest.testMissingDescribeConfigsAcl)
        assert f"describing configs of topic {topic} on source cluster A: " in errors[0]
    assert "Traceback" not in result.stderr
    assert PASSWORDS[user] not in result.stdout + result.stderr
    assert wrong is None or wrong not in result.stdout + result.stderr
    assert _records_on(target, f"A.{topic}") == 0, "a refused run wrote records"


def _records_on(cluster: KafkaCluster, topic: str) -> int:
    if topic not in AdminClient(cluster.properties()).list_topics(timeout=30).topics:
        return 0
    return sum(map(len, read_topic(cluster.bootstrap_servers, topic, security=cluster.security).values()))


def test_a_principal_without_create_runs_over_topics_an_administrator_created_beforehand(
    secured: tuple[KafkaCluster, KafkaCluster],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    # MM2 (MirrorUtilsTest) takes an authorization refusal of an internal topic's creation to mean
    # the topic exists; mirror lists the cluster first and creates only what is missing, so a
    # principal without any Create runs as long as an administrator made the topics.
    source, target = secured
    topic = unique_name(request, "precreated-")
    source_topic(source, topic, 1000)
    config = write_config(tmp_path, source, target, [topic], clusters=sasl_clusters("creates-nothing"))
    acls = required_acls(load_config(config))
    by_alias = {cluster.alias: cluster for cluster in secured}
    for acl in acls:
        if acl.resource == "topic" and "Create" in acl.operations and acl.pattern == "literal":
            partitions = 25 if acl.name.startswith("mm2-offsets.") or "checkpoint-offsets" in acl.name else 1
            _create(by_alias[acl.cluster], acl.name, partitions, {"cleanup.policy": "compact"})
    for name, partitions in ((f"A.{topic}", 2), ("A.heartbeats", 1), ("A.checkpoints.internal", 1)):
        _create(target, name, partitions, {"cleanup.policy": "compact"} if "internal" in name else {})
    grant(
        secured,
        "creates-nothing",
        [replace(acl, operations=tuple(op for op in acl.operations if op != "Create")) for acl in acls],
    )

    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source, target, [topic], run)
        exit_code = run.stop()
    finally:
        run.cleanup()
    comparison = compare_topics(source, target, [topic])
    reliability(
        "security",
        "No Create permission anywhere, every topic created beforehand by an administrator",
        comparison=comparison,
        exit_code=exit_code,
    )
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact and comparison.checked == 1000, comparison
    # No "flow A->B: created <topic> ..." line (the partition names in the tasks' lines say
    # "precreated").
    assert ": created " not in run.output(), run.output()[-3000:]


def _create(cluster: KafkaCluster, name: str, partitions: int, config: dict[str, str]) -> None:
    """Create a topic as the administrator; one that exists already is left as it is."""
    admin = AdminClient(cluster.properties())  # kept alive until the answer comes
    future = admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name]
    try:
        future.result(timeout=30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def _layout(cluster: KafkaCluster, topics: dict[str, int]) -> dict[str, tuple[int, str]]:
    """(partition count, cleanup.policy) of each of `topics`."""
    admin = AdminClient(cluster.properties())
    listed = admin.list_topics(timeout=30).topics
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in topics]
    configs = {r.name: f.result(timeout=30) for r, f in admin.describe_configs(resources).items()}
    return {name: (len(listed[name].partitions), configs[name]["cleanup.policy"].value) for name in topics}


def _allow(cluster: KafkaCluster, topic: str, principal: str, operations: tuple[str, ...]) -> None:
    admin = AdminClient(cluster.properties())
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                   AclOperation[operation], AclPermissionType.ALLOW)
        for operation in operations
    ]  # fmt: skip
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(timeout=30)


def _write_acls(cluster: KafkaCluster, topic: str) -> set[tuple[str, str]]:
    """(principal, permission) of every WRITE ACL on `topic`."""
    admin = AdminClient(cluster.properties())
    found = admin.describe_acls(
        AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                         AclOperation.WRITE, AclPermissionType.ANY),
        request_timeout=30,
    ).result(timeout=30)  # fmt: skip
    return {(binding.principal, binding.permission_type.name) for binding in found}


def test_a_cutover_fences_the_producers_with_a_deny_write_acl_that_never_reaches_the_target(
    secured: tuple[KafkaCluster, KafkaCluster], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    source, target = secured
    topic = unique_name(request, "fenced-")
    source_topic(source, topic, 100)
    for cluster in secured:  # the application may write the topic on both sides
        _allow(cluster, topic, "User:app", ("WRITE", "DESCRIBE"))
    flow = {"replication_policy": "identity", "sync_topic_acls_interval_seconds": 2}
    config = write_config(tmp_path, source, target, [topic], clusters=sasl_clusters("mirror"), **flow)
    grant(secured, "mirror", required_acls(load_config(config)))
    # The cutover runs as an administrator: fencing creates ACLs (Alter on A's cluster).
    administrator = {c.alias: {"properties": dict(c.security)} for c in secured}
    admin_config = write_config(
        tmp_path, source, target, [topic], name="admin.yaml", clusters=administrator, **flow
    )
    app = {
        alias: replace(cluster, security=sasl_clusters("app")[alias]["properties"])  # type: ignore[arg-type]
        for alias, cluster in zip(("A", "B"), secured, strict=True)
    }
    producer = SequencedProducer(SharedCounter(), topic, 2, fenced=True)
    producer.start(app["A"])
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        cutover = run_mirror(
            "migrate", "cutover", str(admin_config), "--state-dir", str(tmp_path / "migrate"),
            "--producer-principal", "User:app", "--fence-seconds", "3", "--lag-threshold", "100000",
            "--drain-timeout", "120",
        )  # fmt: skip
        assert cutover.returncode == 0, cutover.stdout + cutover.stderr
        assert "fence: WRITE denied to User:app" in cutover.stdout
        producer.stop()
        assert producer.refused > 0, "the application kept writing through the fence"
        assert ("User:app", "DENY") in _write_acls(source, topic)
        time.sleep(6)  # three ACL syncs of the running flow
        on_target = _write_acls(target, topic)
        assert ("User:app", "ALLOW") in on_target and ("User:app", "DENY") not in on_target, on_target
        moved = Producer(app["B"].properties())
        moved.produce(topic, value=b"written on B after the move")
        assert moved.flush(30) == 0
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()
    on_b = read_topic(target.bootstrap_servers, topic, security=target.security)
    values = {int(r.value) for records in on_b.values() for r in records if r.value and r.value.isdigit()}
    assert set(producer.acked) <= values, "a record the application wrote on A before the fence is missing"

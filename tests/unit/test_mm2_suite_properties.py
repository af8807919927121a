"""Every property Kafka's MM2 tests set, through `mirror config import` and into a flow's settings.

One case per Kafka test (MirrorMakerConfigTest, MirrorConnectorConfigTest, MirrorSourceConfigTest,
MirrorCheckpointConfigTest, MirrorConnectorsIntegrationBaseTest's mm2Props and its variants,
DedicatedMirrorIntegrationTest): its properties are written as an mm2.properties file, imported,
loaded as `mirror run` loads the result, and checked in the FlowSettings the run would hand its
components. Whatever is not carried must be listed in `not_carried_over` with a reason, and nothing
else may be. Connector-level keys of the config-class tests are given in their dedicated-mode form
(`<alias>.consumer.x` for `source.consumer.x`). Refusals (an invalid security.protocol or location)
are in test_mm2_properties_import.py, cluster pairs in test_heartbeat_pairs.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mirror.config import load_config
from mirror.config.flow_settings import FlowSettings, flow_settings
from mirror.config.mm2_properties import import_properties
from mirror.config.models import FlowConfig

ABSENT = object()  # in an expected client-properties mapping: the key must not be there

PRIMARY_BACKUP = {
    "clusters": "primary, backup",
    "primary.bootstrap.servers": "primary:9092",
    "backup.bootstrap.servers": "backup:9092",
}
# MirrorConnectorsIntegrationBaseTest.basicMM2Config() and what startClusters() adds to it.
BASIC_MM2 = {
    **PRIMARY_BACKUP,
    "groups": "consumer-group-.*",
    "sync.topic.acls.enabled": "false",
    "emit.checkpoints.interval.seconds": "1",
    "emit.heartbeats.interval.seconds": "1",
    "refresh.topics.interval.seconds": "1",
    "refresh.groups.interval.seconds": "1",
    "checkpoints.topic.replication.factor": "1",
    "heartbeats.topic.replication.factor": "1",
    "offset-syncs.topic.replication.factor": "1",
    "config.storage.replication.factor": "1",
    "offset.storage.replication.factor": "1",
    "status.storage.replication.factor": "1",
    "replication.factor": "1",
    "primary.offset.flush.interval.ms": "5000",
    "backup.offset.flush.interval.ms": "5000",
    "primary->backup.enabled": "true",
    "backup->primary.enabled": "true",
    "topics": "test-topic-.*, primary.test-topic-.*, backup.test-topic-.*",
    "config.properties.exclude": r"delete\.retention\..*",
    "sync.topic.configs.interval.seconds": "1",
}
BASIC_MM2_DROPPED = (
    "config.storage.replication.factor",
    "offset.storage.replication.factor",
    "status.storage.replication.factor",
    "primary.offset.flush.interval.ms",
    "backup.offset.flush.interval.ms",
)
BASIC_MM2_FLOW: Mapping[str, object] = {
    "groups": ["consumer-group-.*"],
    "topics": ["test-topic-.*", "primary.test-topic-.*", "backup.test-topic-.*"],
    "config_properties_exclude": [r"delete\.retention\..*"],
    "replication_factor": 1,
    "internal_replication_factor": 1,
    "refresh_groups_interval_seconds": 1.0,
}
BASIC_MM2_FLOW_CONFIG: Mapping[str, object] = {
    "sync_topic_acls": False,
    "emit_checkpoints_interval_seconds": 1.0,
    "emit_heartbeats_interval_seconds": 1.0,
    "refresh_topics_interval_seconds": 1.0,
    "sync_topic_configs_interval_seconds": 1.0,
}
# DedicatedMirrorIntegrationTest's common mmProps.
DEDICATED = {
    "dedicated.mode.enable.internal.rest": "false",
    "listeners": "http://localhost:0",
    "refresh.topics.interval.seconds": "1",
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
    "A->B.topics": "^test-topic-.*",
    "replication.factor": "1",
    "checkpoints.topic.replication.factor": "1",
    "heartbeats.topic.replication.factor": "1",
    "offset-syncs.topic.replication.factor": "1",
    "offset.storage.replication.factor": "1",
    "status.storage.replication.factor": "1",
    "config.storage.replication.factor": "1",
}
DEDICATED_DROPPED = (
    "dedicated.mode.enable.internal.rest",
    "listeners",
    "offset.storage.replication.factor",
    "status.storage.replication.factor",
    "config.storage.replication.factor",
)
SUPER_USER_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="super" password="super_pwd";'
)
CONNECTOR_USER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="connector" password="connector_pwd";'
)
FORWARDING_ADMIN = "org.apache.kafka.connect.mirror.clients.admin.FakeForwardingAdminWithLocalMetadata"
FAKE_PROVIDER = "org.apache.kafka.connect.mirror.MirrorMakerConfigTest$FakeConfigProvider"


@dataclass(frozen=True)
class SuiteCase:
    properties: Mapping[str, str]
    flow: str = "primary->backup"
    # FlowSettings attributes (a method is called without arguments); a mapping value is a subset
    # of the client properties, ABSENT marking keys that must not be there.
    settings: Mapping[str, object] = field(default_factory=dict)
    flow_config: Mapping[str, object] = field(default_factory=dict)  # FlowConfig-only settings
    remote_topics: Mapping[str, str] = field(default_factory=dict)
    topic_matches: Mapping[str, bool] = field(default_factory=dict)
    group_matches: Mapping[str, bool] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()  # exactly the keys reported in not_carried_over
    notes: tuple[str, ...] = ()  # fragments some note must contain
    no_notes: tuple[str, ...] = ()  # fragments no note may contain


CASES = {
    # --- MirrorMakerConfigTest ---------------------------------------------------------------------
    "MirrorMakerConfigTest.testClusterConfigProperties": SuiteCase(
        # MM2 builds connector configs for any pair; mirror needs the flow written (a->b.enabled).
        {
            "clusters": "a, b",
            "a.bootstrap.servers": "servers-one",
            "b.bootstrap.servers": "servers-two",
            "security.protocol": "SSL",
            "replication.factor": "4",
            "a->b.enabled": "true",
        },
        flow="a->b",
        settings={
            "source_consumer": {"bootstrap.servers": "servers-one", "security.protocol": "SSL"},
            "target_producer": {"bootstrap.servers": "servers-two", "security.protocol": "SSL"},
            "source_admin": {"security.protocol": "SSL"},
            "target_admin": {"security.protocol": "SSL"},
            "replication_factor": 4,
        },
    ),
    "MirrorMakerConfigTest.testReplicationConfigProperties": SuiteCase(
        {
            "clusters": "a, b",
            "a.bootstrap.servers": "a:1",
            "b.bootstrap.servers": "b:1",
            "a->b.tasks.max": "123",
        },
        flow="a->b",
        settings={"tasks_max": 123},
        flow_config={"enabled": False},  # MM2 runs a pair only with a->b.enabled=true
    ),
    "MirrorMakerConfigTest.testClientConfigProperties": SuiteCase(
        {
            "clusters": "a, b",
            "config.providers": "fake",
            "config.providers.fake.class": FAKE_PROVIDER,
            "replication.policy.separator": "__",
            "ssl.key.password": "${fake:secret:password}",
            "security.protocol": "SSL",
            "a.security.protocol": "PLAINTEXT",
            "a.producer.security.protocol": "SSL",
            "a.bootstrap.servers": "127.0.0.1:9092, 127.0.0.2:9092",
            "b.bootstrap.servers": "127.0.0.3:9092, 127.0.0.4:9092",
            "metrics.reporter": "org.apache.kafka.common.metrics.FakeMetricsReporter",
            "a.metrics.reporter": "org.apache.kafka.common.metrics.FakeMetricsReporter",
            "b->a.metrics.reporter": "org.apache.kafka.common.metrics.FakeMetricsReporter",
            "b.forwarding.admin.class": "org.apache.kafka.clients.admin.FakeForwardingAdmin",
            "a.xxx": "yyy",
            "xxx": "zzz",
        },
        # Cluster a's clients are the target side of flow b->a (which b->a.metrics.reporter writes).
        flow="b->a",
        settings={
            "separator": "__",
            "target_admin": {
                "bootstrap.servers": "127.0.0.1:9092, 127.0.0.2:9092",
                "security.protocol": "PLAINTEXT",
                "xxx": ABSENT,
                "ssl.key.password": ABSENT,
            },
            "target_consumer": {"security.protocol": "PLAINTEXT"},
            "target_producer": {"security.protocol": "SSL"},
            "source_admin": {"security.protocol": "SSL", "ssl.key.password": ABSENT},
        },
        remote_topics={"topic1": "b__topic1"},
        dropped=(
            "config.providers",
            "config.providers.fake.class",
            "ssl.key.password",
            "metrics.reporter",
            "a.metrics.reporter",
            "b->a.metrics.reporter",
            "b.forwarding.admin.class",
            "a.xxx",
            "xxx",
        ),
    ),
    "MirrorMakerConfigTest.testIncludesConnectorConfigProperties": SuiteCase(
        {
            "clusters": "a, b",
            "a.bootstrap.servers": "a:1",
            "b.bootstrap.servers": "b:1",
            "a->b.enabled": "true",
            "tasks.max": "100",
            "topics": "topic-1",
            "groups": "group-2",
            "replication.policy.separator": "__",
            "config.properties.exclude": "property-3",
            "metric.reporters": "FakeMetricsReporter",
            "topic.filter.class": "org.apache.kafka.connect.mirror.DefaultTopicFilter",
            "xxx": "yyy",
        },
        flow="a->b",
        settings={
            "tasks_max": 100,
            "topics": ["topic-1"],
            "groups": ["group-2"],
            "separator": "__",
            "config_properties_exclude": ["property-3"],
        },
        dropped=("metric.reporters", "topic.filter.class", "xxx"),
    ),
    "MirrorMakerConfigTest.testIncludesTopicFilterProperties": SuiteCase(
        # Kafka names the pair source->target beside clusters a, b; mirror's pair must be defined.
        {
            "clusters": "source, target",
            "source.bootstrap.servers": "s:1",
            "target.bootstrap.servers": "t:1",
            "source->target.topics": "topic1, topic2",
            "source->target.topics.exclude": "topic3",
        },
        flow="source->target",
        settings={"topics": ["topic1", "topic2"], "topics_exclude": ["topic3"]},
        topic_matches={"topic1": True, "topic2": True, "topic3": False},
    ),
    "MirrorMakerConfigTest.testWorkerConfigs": SuiteCase(
        # b.producer.security.protocol=SASL is left out: not a protocol, refused (see the import tests).
        {
            "clusters": "a, b",
            "a.bootstrap.servers": "a:1",
            "b.bootstrap.servers": "b:1",
            "a->b.enabled": "true",
            "config.providers": "fake",
            "config.providers.fake.class": FAKE_PROVIDER,
            "replication.policy.separator": "__",
            "offset.storage.replication.factor": "123",
            "b.status.storage.replication.factor": "456",
            "b.producer.client.id": "client-one",
            "b.security.protocol": "PLAINTEXT",
            "ssl.truststore.password": "secret1",
            "ssl.key.password": "${fake:secret:password}",
            "b.xxx": "yyy",
        },
        flow="a->b",
        settings={
            "separator": "__",
            "target_producer": {"client.id": "client-one", "security.protocol": "PLAINTEXT"},
            "target_consumer": {"security.protocol": "PLAINTEXT", "client.id": ABSENT},
            "target_admin": {"ssl.truststore.password": ABSENT, "ssl.key.password": ABSENT},
        },
        dropped=(
            "config.providers",
            "config.providers.fake.class",
            "offset.storage.replication.factor",
            "b.status.storage.replication.factor",
            "ssl.truststore.password",
            "ssl.key.password",
            "b.xxx",
        ),
    ),
    "MirrorMakerConfigTest.testCaseInsensitiveSecurityProtocol": SuiteCase(
        {**PRIMARY_BACKUP, "primary->backup.enabled": "true", "security.protocol": "sasl_ssl"},
        settings={
            "source_consumer": {"security.protocol": "sasl_ssl"},
            "target_producer": {"security.protocol": "sasl_ssl"},
        },
    ),
    "MirrorMakerConfigTest.testLazyConfigResolution": SuiteCase(
        {
            **PRIMARY_BACKUP,
            "backup->primary.enabled": "true",
            "backup->primary.topics": "${fake:secret:password}",
            "ssl.key.password": "${fake:secret:password}",
        },
        flow="backup->primary",
        settings={"topics": [".*"], "source_admin": {"ssl.key.password": ABSENT}},
        dropped=("backup->primary.topics", "ssl.key.password"),
    ),
    # --- MirrorConnectorConfigTest (connector prefixes in their dedicated-mode form) --------------
    "MirrorConnectorConfigTest.testSourceConsumerConfig": SuiteCase(
        {
            **PRIMARY_BACKUP,
            "primary->backup.enabled": "true",
            "primary.consumer.max.poll.interval.ms": "120000",
            "primary.consumer.auto.offset.reset": "latest",
        },
        settings={
            "source_consumer": {"bootstrap.servers": "primary:9092", "max.poll.interval.ms": "120000"},
            "target_consumer": {"max.poll.interval.ms": ABSENT},
            "auto_offset_reset": "latest",
        },
    ),
    "MirrorConnectorConfigTest.testSourceConsumerConfigWithSourcePrefix": SuiteCase(
        # At flow level MM2 applies it; mirror has client properties per cluster only and says so.
        {
            **PRIMARY_BACKUP,
            "primary->backup.enabled": "true",
            "primary->backup.source.consumer.auto.offset.reset": "latest",
            "primary->backup.source.consumer.max.poll.interval.ms": "100",
        },
        settings={"auto_offset_reset": "earliest", "source_consumer": {"max.poll.interval.ms": ABSENT}},
        dropped=(
            "primary->backup.source.consumer.auto.offset.reset",
            "primary->backup.source.consumer.max.poll.interval.ms",
        ),
    ),
    "MirrorConnectorConfigTest.testSourceProducerConfig": SuiteCase(
        {
            **PRIMARY_BACKUP,
            "primary->backup.enabled": "true",
            "primary.producer.acks": "1",
            "primary->backup.source.producer.acks": "0",
            "primary->backup.producer.acks": "0",
        },
        settings={"source_producer": {"acks": "1"}, "target_producer": {"acks": ABSENT}},
        dropped=("primary->backup.source.producer.acks", "primary->backup.producer.acks"),
    ),
    "MirrorConnectorConfigTest.testSourceAdminConfig/testTargetAdminConfig": SuiteCase(
        {
            **PRIMARY_BACKUP,
            "primary->backup.enabled": "true",
            "primary.admin.connections.max.idle.ms": "10000",
            "backup.admin.connections.max.idle.ms": "20000",
            "primary->backup.target.admin.connections.max.idle.ms": "1",
        },
        settings={
            "source_admin": {"connections.max.idle.ms": "10000"},
            "target_admin": {"connections.max.idle.ms": "20000"},
            "source_consumer": {"connections.max.idle.ms": ABSENT},
        },
        dropped=("primary->backup.target.admin.connections.max.idle.ms",),
    ),
    "MirrorConnectorConfigTest.testMetricsReporters": SuiteCase(
        {
            **PRIMARY_BACKUP,
            "primary->backup.enabled": "true",
            "metric.reporters": "org.apache.kafka.common.metrics.JmxReporter",
            "name": "ConnectorName",
            "connector.class": "ConnectorClass",
            "source.cluster.alias": "source1",
            "target.cluster.alias": "target2",
        },
        dropped=(
            "metric.reporters",
            "name",
            "connector.class",
            "source.cluster.alias",
            "target.cluster.alias",
        ),
    ),
    # --- MirrorSourceConfigTest -----------------------------------------------------------------
    "MirrorSourceConfigTest.testTopicMatching": SuiteCase(
        {**PRIMARY_BACKUP, "primary->backup.enabled": "true", "topics": "topic1"},
        topic_matches={"topic1": True, "topic2": False},
    ),
    "MirrorSourceConfigTest.testConfigPropertyMatching": SuiteCase(
        {**PRIMARY_BACKUP, "primary->backup.enabled": "true", "config.properties.exclude": "prop2"},
        settings={"config_properties_exclude": ["prop2"]},
    ),
    "MirrorSourceConfigTest.testNoTopics": SuiteCase(
        {**PRIMARY_BACKUP, "primary->backup.enabled": "true", "topics": ""},
        settings={"topics": []},
        topic_matches={"topic1": False, "topic2": False, "": False},
    ),
    "MirrorSourceConfigTest.testAllTopics": SuiteCase(
        {**PRIMARY_BACKUP, "primary->backup.enabled": "true", "topics": ".*"},
        topic_matches={"topic1": True, "topic2": True},
    ),
    "MirrorSourceConfigTest.testListOfTopics": SuiteCase(
        {**PRIMARY_BACKUP, "primary->backup.enabled": "true", "topics": "topic1, topic2"},
        topic_matches={"topic1": True, "topic2": True, "topic3": False},
    ),
    "MirrorSourceConfigTest.testOffsetSyncsTopic(source)": SuiteCase(
        {**PRIMARY_BACKUP, "primary->backup.enabled": "true", "offset-syncs.topic.location": "source"},
        settings={
            "offset_syncs_location": "source",
            "offset_syncs_topic": "mm2-offset-syncs.backup.internal",
        },
    ),
    "MirrorSourceConfigTest.testOffsetSyncsTopic(target)": SuiteCase(
        {**PRIMARY_BACKUP, "primary->backup.enabled": "true", "offset-syncs.topic.location": "target"},
        settings={
            "offset_syncs_location": "target",
            "offset_syncs_topic": "mm2-offset-syncs.primary.internal",
        },
    ),
    "MirrorSourceConfigTest.testOffsetSyncsTopic(default)": SuiteCase(
        # Δ: unset, mirror puts the syncs where an exactly-once flow commits them, the target.
        {**PRIMARY_BACKUP, "primary->backup.enabled": "true"},
        settings={"exactly_once": True, "offset_syncs_location": "target"},
    ),
    "MirrorSourceConfigTest.testProducerConfigsForOffsetSyncsTopic": SuiteCase(
        {
            **PRIMARY_BACKUP,
            "primary->backup.enabled": "true",
            "primary.producer.batch.size": "1",
            "backup.producer.acks": "1",
            "producer.max.poll.interval.ms": "1",
            "fetch.min.bytes": "1",
        },
        settings={
            "source_producer": {"batch.size": "1", "acks": ABSENT},
            "target_producer": {"acks": "1", "batch.size": ABSENT},
            "source_consumer": {"fetch.min.bytes": ABSENT},
        },
        dropped=("producer.max.poll.interval.ms", "fetch.min.bytes"),
    ),
    "MirrorSourceConfigTest.testAdminConfigsForOffsetSyncsTopic": SuiteCase(
        {
            **PRIMARY_BACKUP,
            "primary->backup.enabled": "true",
            "primary.admin.request.timeout.ms": "1",
            "backup.admin.send.buffer.bytes": "1",
            "admin.reconnect.backoff.max.ms": "1",
            "retries": "123",
        },
        settings={
            "source_admin": {"request.timeout.ms": "1", "reconnect.backoff.max.ms": ABSENT},
            "target_admin": {"send.buffer.bytes": "1", "retries": ABSENT},
        },
        dropped=("admin.reconnect.backoff.max.ms", "retries"),
    ),
    # --- MirrorCheckpointConfigTest -------------------------------------------------------------
    "MirrorCheckpointConfigTest.testGroupMatching": SuiteCase(
        {**PRIMARY_BACKUP, "primary->backup.enabled": "true", "groups": "group1"},
        group_matches={"group1": True, "group2": False},
    ),
    "MirrorCheckpointConfigTest.testConsumerConfigsForOffsetSyncsTopic": SuiteCase(
        {
            **PRIMARY_BACKUP,
            "primary->backup.enabled": "true",
            "primary.consumer.max.partition.fetch.bytes": "1",
            "backup.consumer.heartbeat.interval.ms": "1",
            "consumer.max.poll.interval.ms": "1",
            "fetch.min.bytes": "1",
        },
        settings={
            "source_consumer": {"max.partition.fetch.bytes": "1", "max.poll.interval.ms": ABSENT},
            "target_consumer": {"heartbeat.interval.ms": "1", "fetch.min.bytes": ABSENT},
        },
        dropped=("consumer.max.poll.interval.ms", "fetch.min.bytes"),
    ),
    "MirrorCheckpointConfigTest.testSkipValidationIfConnectorDisabled": SuiteCase(
        {
            **PRIMARY_BACKUP,
            "primary->backup.enabled": "false",
            "emit.checkpoints.enabled": "true",
            "emit.offset-syncs.enabled": "false",
        },
        settings={"emit_offset_syncs": False, "emit_checkpoints": True},
        flow_config={"enabled": False},
    ),
    "MirrorCheckpointConfigTest.testValidateIfConnectorEnabled(nothing-to-do)": SuiteCase(
        # Δ: a copy-only flow is valid in mirror; MM2 reports its checkpoint connector idle.
        {
            **PRIMARY_BACKUP,
            "primary->backup.enabled": "true",
            "emit.checkpoints.enabled": "false",
            "sync.group.offsets.enabled": "false",
        },
        settings={"emit_checkpoints": False, "sync_group_offsets": False, "emit_offset_syncs": True},
    ),
    # --- MirrorConnectorsIntegrationBaseTest and its variants ----------------------------------
    "MirrorConnectorsIntegrationBaseTest.testReplication": SuiteCase(
        BASIC_MM2,
        # backup->primary is enabled and emits its own heartbeats.
        settings={**BASIC_MM2_FLOW, "emit_heartbeats": True, "reverse_heartbeats": False},
        flow_config=BASIC_MM2_FLOW_CONFIG,
        dropped=BASIC_MM2_DROPPED,
        notes=("primary->backup: MM2 ran this flow at-least-once",),
    ),
    "MirrorConnectorsIntegrationBaseTest.testOneWayReplicationWithAutoOffsetSync": SuiteCase(
        {
            **BASIC_MM2,
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "1",
            "offset.lag.max": "10",
            "backup->primary.enabled": "false",
        },
        settings={
            **BASIC_MM2_FLOW,
            "sync_group_offsets": True,
            "sync_group_offsets_interval_seconds": 1.0,
            "offset_lag_max": 10,
            "reverse_heartbeats": True,  # MM2's heartbeats-only herder backup->primary
        },
        flow_config=BASIC_MM2_FLOW_CONFIG,
        dropped=BASIC_MM2_DROPPED,
    ),
    "MirrorConnectorsIntegrationBaseTest."
    "testReplicationWithoutOffsetSyncWillNotCreateOffsetSyncsTopic": SuiteCase(
        {**BASIC_MM2, "emit.offset-syncs.enabled": "false"},
        settings={"emit_offset_syncs": False, "emit_checkpoints": False, "sync_group_offsets": False},
        dropped=BASIC_MM2_DROPPED,
        notes=("without its checkpoint connector",),
    ),
    "MirrorConnectorsIntegrationBaseTest.testOffsetSyncsTopicsOnTarget": SuiteCase(
        {
            **BASIC_MM2,
            "primary->backup.offset-syncs.topic.location": "target",
            "backup->primary.enabled": "false",
        },
        settings={
            "offset_syncs_location": "target",
            "offset_syncs_topic": "mm2-offset-syncs.primary.internal",
        },
        dropped=BASIC_MM2_DROPPED,
    ),
    "MirrorConnectorsIntegrationBaseTest.testReplicateSourceDefault": SuiteCase(
        {**BASIC_MM2, "use.defaults.from": "source"},
        settings={"use_defaults_from": "source", "config_properties_exclude": [r"delete\.retention\..*"]},
        dropped=BASIC_MM2_DROPPED,
    ),
    "MirrorConnectorsIntegrationBaseTest.testReplicateFromLatest": SuiteCase(
        {**BASIC_MM2, "primary.consumer.auto.offset.reset": "latest", "backup->primary.enabled": "false"},
        settings={"auto_offset_reset": "latest", "source_consumer": {"auto.offset.reset": "latest"}},
        dropped=BASIC_MM2_DROPPED,
    ),
    "MirrorConnectorsIntegrationExactlyOnceTest": SuiteCase(
        {
            **BASIC_MM2,
            "primary.exactly.once.source.support": "enabled",
            "backup.exactly.once.source.support": "enabled",
        },
        settings={"exactly_once": True},
        dropped=BASIC_MM2_DROPPED,
        no_notes=("at-least-once",),
    ),
    "MirrorConnectorsIntegrationSSLTest": SuiteCase(
        {
            **BASIC_MM2,
            "backup.ssl.truststore.location": "/tmp/truststore.jks",
            "backup.ssl.truststore.password": "truststore-secret",
            "backup.security.protocol": "SSL",
            "backup.producer.ssl.truststore.location": "/tmp/truststore.jks",
            "backup.producer.ssl.truststore.password": "truststore-secret",
            "backup.producer.security.protocol": "SSL",
        },
        settings={
            "target_admin": {"security.protocol": "SSL", "ssl.truststore.location": ABSENT},
            "target_producer": {"security.protocol": "SSL", "ssl.truststore.password": ABSENT},
            "source_consumer": {"security.protocol": ABSENT},
        },
        dropped=(
            *BASIC_MM2_DROPPED,
            "backup.ssl.truststore.location",
            "backup.ssl.truststore.password",
            "backup.producer.ssl.truststore.location",
            "backup.producer.ssl.truststore.password",
        ),
    ),
    "IdentityReplicationIntegrationTest": SuiteCase(
        {
            **BASIC_MM2,
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
            "topics": "test-topic-.*",
        },
        settings={"replication_policy": "identity", "topics": ["test-topic-.*"]},
        remote_topics={"test-topic-1": "test-topic-1"},
        dropped=BASIC_MM2_DROPPED,
    ),
    "MirrorConnectorsWithCustomForwardingAdminIntegrationTest": SuiteCase(
        {
            **BASIC_MM2,
            "sasl.mechanism": "PLAIN",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.jaas.config": SUPER_USER_JAAS,
            "forwarding.admin.class": FORWARDING_ADMIN,
            "consumer.override.sasl.jaas.config": SUPER_USER_JAAS,
            "producer.override.sasl.jaas.config": SUPER_USER_JAAS,
            "consumer.security.protocol": "SASL_PLAINTEXT",
            "producer.sasl.jaas.config": SUPER_USER_JAAS,
            "admin.sasl.jaas.config": CONNECTOR_USER_JAAS,
            "admin.override.sasl.jaas.config": CONNECTOR_USER_JAAS,
            "sync.topic.configs.enabled": "true",
            "sync.topic.acls.enabled": "true",
            "sync.topic.acls.interval.seconds": "1",
        },
        settings={
            role: {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "super",
                "sasl.password": "super_pwd",
            }
            for role in ("source_consumer", "source_admin", "target_producer", "target_admin")
        },
        flow_config={
            "sync_topic_configs": True,
            "sync_topic_acls": True,
            "sync_topic_acls_interval_seconds": 1.0,
        },
        dropped=(
            *BASIC_MM2_DROPPED,
            "forwarding.admin.class",
            "consumer.override.sasl.jaas.config",
            "producer.override.sasl.jaas.config",
            "consumer.security.protocol",
            "producer.sasl.jaas.config",
            "admin.sasl.jaas.config",
            "admin.override.sasl.jaas.config",
        ),
    ),
    # --- DedicatedMirrorIntegrationTest ---------------------------------------------------------
    "DedicatedMirrorIntegrationTest.testSingleNodeCluster": SuiteCase(
        {**DEDICATED, "B->A.enabled": "false", "B->A.emit.heartbeats.enabled": "false"},
        flow="A->B",
        settings={
            "topics": ["^test-topic-.*"],
            "replication_factor": 1,
            "internal_replication_factor": 1,
            "emit_heartbeats": True,
            "reverse_heartbeats": False,  # B->A and its heartbeats are off in MM2 too
        },
        flow_config={"refresh_topics_interval_seconds": 1.0},
        topic_matches={"test-topic-1": True, "other-topic": False},
        dropped=DEDICATED_DROPPED,
    ),
    "DedicatedMirrorIntegrationTest.testClusterWithEmitOffsetDisabled": SuiteCase(
        {**DEDICATED, "emit.offset-syncs.enabled": "false"},
        flow="A->B",
        settings={
            "emit_offset_syncs": False,
            "emit_checkpoints": False,
            "sync_group_offsets": False,
            "reverse_heartbeats": True,
        },
        dropped=DEDICATED_DROPPED,
        notes=("without its checkpoint connector",),
    ),
    "DedicatedMirrorIntegrationTest.testMultiNodeCluster": SuiteCase(
        # Kafka's second alias is full of odd characters; mirror's aliases are [A-Za-z0-9_-] (N/A).
        {
            **DEDICATED,
            "dedicated.mode.enable.internal.rest": "true",
            "B.exactly.once.source.support": "enabled",
            "A.consumer.isolation.level": "read_committed",
            "A->B.offset-syncs.topic.location": "target",
            "B->A.enabled": "false",
            "B->A.emit.heartbeats.enabled": "false",
            "A.scheduled.rebalance.max.delay.ms": "1000",
            "B.scheduled.rebalance.max.delay.ms": "1000",
        },
        flow="A->B",
        settings={
            "exactly_once": True,
            "offset_syncs_location": "target",
            "offset_syncs_topic": "mm2-offset-syncs.A.internal",
            "source_consumer": {"isolation.level": ABSENT},
        },
        dropped=(
            *DEDICATED_DROPPED,
            "A.consumer.isolation.level",
            "A.scheduled.rebalance.max.delay.ms",
            "B.scheduled.rebalance.max.delay.ms",
        ),
        no_notes=("at-least-once",),
    ),
}


def _properties_file(properties: Mapping[str, str]) -> str:
    # A backslash escapes in a .properties file; MM2 reads `delete\\.retention` as `delete\.retention`.
    return "".join(f"{key} = {_escaped(value)}\n" for key, value in properties.items())


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\")


def _check(actual: object, expected: object, what: str) -> None:
    if callable(actual):
        actual = actual()
    if isinstance(expected, Mapping):
        assert isinstance(actual, Mapping), what
        for key, value in expected.items():
            if value is ABSENT:
                assert key not in actual, f"{what}: {key} should not be set"
            else:
                assert actual.get(key) == value, f"{what}[{key!r}]: {actual.get(key)!r} != {value!r}"
    else:
        assert actual == expected, f"{what}: {actual!r} != {expected!r}"


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_every_kafka_suite_property_reaches_the_flow_settings_or_is_reported_with_a_reason(
    case: SuiteCase, tmp_path: Path
) -> None:
    source = tmp_path / "mm2.properties"
    source.write_text(_properties_file(case.properties), encoding="utf-8")
    result = import_properties(source)
    converted = tmp_path / "mm2.yaml"
    converted.write_text(result.yaml, encoding="utf-8")
    config = load_config(converted)

    reasons = dict(entry.split(": ", 1) for entry in result.not_carried_over)
    assert sorted(reasons) == sorted(case.dropped)
    assert all(reason.strip() for reason in reasons.values())
    for fragment in case.notes:
        assert any(fragment in note for note in result.notes), f"no note with {fragment!r}: {result.notes}"
    for fragment in case.no_notes:
        assert not any(fragment in note for note in result.notes), result.notes

    flow: FlowConfig = config.flows[case.flow]
    source_alias, target_alias = case.flow.split("->")
    settings: FlowSettings = flow_settings(config, source_alias, target_alias, flow)
    for name, expected in case.settings.items():
        _check(getattr(settings, name), expected, f"FlowSettings.{name}")
    for name, expected in case.flow_config.items():
        _check(getattr(flow, name), expected, f"FlowConfig.{name}")
    for topic, remote in case.remote_topics.items():
        assert settings.remote_topic(topic) == remote
    for topic, matches in case.topic_matches.items():
        assert settings.topic_filter().matches(topic) is matches, topic
    for group, matches in case.group_matches.items():
        assert settings.group_filter().matches(group) is matches, group

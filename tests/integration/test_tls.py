"""A flow into a cluster reached over TLS (MM2's MirrorConnectorsIntegrationSSLTest: the backup
cluster has an SSL listener, and every client of it, the producer included, speaks SSL).

The target is a broker of its own with only an SSL listener and a CA made at start; mirror reaches
it with librdkafka's `security.protocol: SSL` and `ssl.ca.location`, verifying the broker's host
name. Records are copied exactly, a caught-up group resumes there with nothing re-read, and a
mid-stream one skips nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from mirror.local.broker import BrokerSpec, free_port
from mirror.local.environment import start_brokers
from mirror.local.jars import kafka_libs
from mirror.local.tls import make_tls_files
from tests.checkpoint_flow import Flow
from tests.kafka_backends import AUTHORIZER, KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    root = tmp_path_factory.mktemp("tls")
    tls = make_tls_files(root / "certificates")
    spec = BrokerSpec("T", root / "T", free_port(), free_port(), AUTHORIZER, tls=tls)
    (broker,) = start_brokers([spec], libs=kafka_libs())
    try:
        yield KafkaCluster("T", broker.bootstrap_servers, None, broker, tls.client_properties())
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def flow(
    source_cluster: KafkaCluster, tls_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Flow]:
    # Aliases of its own: the flow's internal topics, positions and ids are its own.
    source = dataclasses.replace(source_cluster, alias="S")
    running = Flow(
        source,
        tls_cluster,
        tmp_path_factory.mktemp("tls-flow"),
        clusters={"T": {"properties": dict(tls_cluster.security)}},
    )
    try:
        yield running
        assert running.run.stop() == 0, running.run.output()[-3000:]
    finally:
        running.run.cleanup()


def test_the_target_listens_only_for_tls(tls_cluster: KafkaCluster) -> None:
    # The proof that the flow below went through TLS: a plaintext client gets nowhere.
    plaintext = AdminClient({"bootstrap.servers": tls_cluster.bootstrap_servers})
    with pytest.raises(Exception, match=r"(?i)timed out|transport|disconnect|broker"):
        plaintext.list_topics(timeout=5)


def test_a_caught_up_group_resumes_over_tls_with_nothing_re_read(flow: Flow) -> None:
    flow.assert_a_caught_up_group_re_reads_nothing("caught-up", old=2000, new=300)


def test_a_mid_stream_group_skips_nothing_over_tls(flow: Flow) -> None:
    flow.assert_a_mid_stream_group_skips_nothing("mid-stream", total=2000, consumed=777)

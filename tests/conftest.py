from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka_backends import KafkaCluster, choose_backend


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[KafkaCluster]]:
    """Two independent clusters, A (source) and B (target), shared by every test of the session."""
    backend = choose_backend()
    with backend(("A", "B"), tmp_path_factory.mktemp("kafka")) as clusters:
        yield clusters


@pytest.fixture(scope="session")
def source_cluster(kafka_clusters: list[KafkaCluster]) -> KafkaCluster:
    return kafka_clusters[0]


@pytest.fixture(scope="session")
def target_cluster(kafka_clusters: list[KafkaCluster]) -> KafkaCluster:
    return kafka_clusters[1]

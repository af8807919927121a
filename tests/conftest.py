from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.kafka_backends import KafkaCluster, choose_backend

# Properties are about results, never about how fast an example runs on a loaded CI machine.
settings.register_profile("mirror", deadline=None)
settings.load_profile("mirror")


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

"""Where the tests' Kafka clusters come from: one factory, three backends.

- local (default, and what CI uses): real KRaft brokers from the Maven Central jars, as JVM
  processes on 127.0.0.1, started by mirror's own launcher;
- existing: MIRROR_TEST_SOURCE_BOOTSTRAP / MIRROR_TEST_TARGET_BOOTSTRAP name running clusters;
- testcontainers: MIRROR_TEST_KAFKA_BACKEND=testcontainers runs the apache/kafka image (needs Docker).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirror.local.broker import BrokerSpec, LocalBroker
from mirror.local.cluster import LocalCluster, NodePorts, cluster_specs, start_clusters
from mirror.local.environment import discard_brokers, start_brokers
from mirror.local.jars import KAFKA_VERSION, kafka_libs
from mirror.local.ports import free_port
from mirror.local.toxiproxy import Proxy, Toxiproxy, wan_listener

# An authorizer that allows everything unless an ACL says otherwise, so ACL sync has ACLs to sync.
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:ANONYMOUS",
}


@dataclass(frozen=True)
class KafkaCluster:
    """A cluster a test can talk to; `libs` is set when Kafka's own Java tools are available."""

    alias: str
    bootstrap_servers: str
    libs: Path | None = None
    broker: LocalBroker | None = None  # the broker process, for fault tests (local backend only)
    security: Mapping[str, str] = field(default_factory=dict)  # SASL client properties (admin)
    nodes: LocalCluster | None = None  # every node, for replicated clusters' fault tests
    proxies: tuple[Proxy, ...] = ()  # a Toxiproxy link per node, where the cluster has them

    @property
    def proxied_bootstrap_servers(self) -> str:
        """Through the proxies: a client that bootstraps here fetches and produces through them."""
        assert self.proxies, f"cluster {self.alias} has no proxies"
        return ",".join(proxy.address for proxy in self.proxies)

    @property
    def pid(self) -> int | None:
        return self.broker.pid if self.broker is not None else None

    def properties(self, **extra: str) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap_servers, **self.security, **extra}


@contextmanager
def local_clusters(aliases: tuple[str, ...], root: Path) -> Iterator[list[KafkaCluster]]:
    libs = kafka_libs()
    specs = [BrokerSpec(alias, root / alias, free_port(), free_port(), AUTHORIZER) for alias in aliases]
    # A module's brokers live for minutes: C1 alone (LocalBroker's short_lived).
    brokers = start_brokers(specs, libs=libs, short_lived=True)
    try:
        yield [KafkaCluster(b.spec.alias, b.bootstrap_servers, libs, b) for b in brokers]
    finally:
        # Their data is thrown away: SIGKILL, not a controlled shutdown while the machine is busy
        # (but for the first brokers on a machine, which write the class archive as they exit).
        discard_brokers(brokers)


@contextmanager
def replicated_clusters(
    aliases: tuple[str, ...],
    root: Path,
    *,
    brokers: int = 3,
    toxiproxy: Toxiproxy | None = None,
    settings: Mapping[str, str] | None = None,
) -> Iterator[list[KafkaCluster]]:
    """Clusters of `brokers` nodes each (RF 3, min ISR 2), from the launcher `mirror local up
    --brokers 3` uses; each node can be stopped, killed and started alone. With `toxiproxy`, each
    node also listens behind a proxy of its own (KafkaCluster.proxies), for network faults.
    `settings` are broker settings of every node, over the launcher's."""
    libs = kafka_libs()
    proxies: dict[str, list[Proxy]] = {alias: [] for alias in aliases}

    def behind_a_proxy(alias: str) -> Callable[[NodePorts], Mapping[str, str]] | None:
        if toxiproxy is None:
            return None

        def listener(node: NodePorts) -> Mapping[str, str]:
            proxy = toxiproxy.proxy(f"{alias}-{node.node_id}", upstream_port=free_port())
            proxies[alias].append(proxy)
            return wan_listener(node.port, node.controller_port, proxy.upstream_port, proxy.listen_port)

        return listener

    clusters = [
        LocalCluster(
            cluster_specs(
                alias,
                root / alias,
                [NodePorts(n, free_port(), free_port()) for n in range(1, brokers + 1)],
                overrides={**AUTHORIZER, **(settings or {})},
                node_overrides=behind_a_proxy(alias),
            ),
            libs,
            short_lived=True,
        )
        for alias in aliases
    ]
    start_clusters(clusters)
    try:
        yield [
            KafkaCluster(c.alias, c.bootstrap_servers, libs, nodes=c, proxies=tuple(proxies[c.alias]))
            for c in clusters
        ]
    finally:
        # Their data is thrown away: SIGKILL, not a controlled shutdown of six nodes (about 30 s),
        # but for nodes writing the class archive.
        for cluster in clusters:
            cluster.discard()


@contextmanager
def existing_clusters(aliases: tuple[str, ...], root: Path) -> Iterator[list[KafkaCluster]]:
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        # Every worker would run the same flows (A->B, same transactional ids) on the same pair.
        raise RuntimeError(
            "MIRROR_TEST_SOURCE_BOOTSTRAP/MIRROR_TEST_TARGET_BOOTSTRAP name one pair of clusters, which "
            "test workers cannot share: run `make test TEST_WORKERS=0`"
        )
    bootstraps = [os.environ["MIRROR_TEST_SOURCE_BOOTSTRAP"], os.environ["MIRROR_TEST_TARGET_BOOTSTRAP"]]
    libs = kafka_libs() if os.environ.get("MIRROR_TEST_JAVA_TOOLS", "1") == "1" else None
    yield [KafkaCluster(alias, bootstrap, libs) for alias, bootstrap in zip(aliases, bootstraps, strict=True)]


@contextmanager
def container_clusters(aliases: tuple[str, ...], root: Path) -> Iterator[list[KafkaCluster]]:
    # Imported here: only people who pick this backend need Docker and its client.
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    image = os.environ.get("MIRROR_TEST_KAFKA_IMAGE", f"apache/kafka:{KAFKA_VERSION}")
    with ExitStack() as stack:
        clusters = []
        for alias in aliases:
            # The advertised address must be the one the host dials, so the host port is fixed
            # and identical to the container port.
            port = free_port()
            container: Any = (
                DockerContainer(image)
                .with_bind_ports(port, port)
                .with_env("KAFKA_NODE_ID", "1")
                .with_env("KAFKA_PROCESS_ROLES", "broker,controller")
                .with_env("KAFKA_LISTENERS", f"PLAINTEXT://:{port},CONTROLLER://:9093")
                .with_env("KAFKA_ADVERTISED_LISTENERS", f"PLAINTEXT://127.0.0.1:{port}")
                .with_env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
                .with_env("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT")
                .with_env("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@localhost:9093")
                .with_env("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1")
                .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
                .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
                .with_env("KAFKA_MIN_INSYNC_REPLICAS", "1")
                .with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
                .with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "false")
            )
            stack.enter_context(container)
            wait_for_logs(container, "Kafka Server started", timeout=120)
            clusters.append(KafkaCluster(alias, f"127.0.0.1:{port}", None))
        yield clusters


Backend = Callable[[tuple[str, ...], Path], Any]


def choose_backend() -> Backend:
    if os.environ.get("MIRROR_TEST_SOURCE_BOOTSTRAP") and os.environ.get("MIRROR_TEST_TARGET_BOOTSTRAP"):
        return existing_clusters
    name = os.environ.get("MIRROR_TEST_KAFKA_BACKEND", "local")
    backends: dict[str, Backend] = {"local": local_clusters, "testcontainers": container_clusters}
    if name not in backends:
        raise ValueError(f"MIRROR_TEST_KAFKA_BACKEND={name!r}: use one of {', '.join(backends)}")
    return backends[name]

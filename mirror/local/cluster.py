"""A local KRaft cluster of one or more nodes on 127.0.0.1, each node a broker and a controller.

With three nodes the cluster is replicated as operators run them (RF 3, min ISR 2, a three-voter
quorum), so one node can be stopped, killed and started again while the others carry on: the
fault drills of `mirror local kill-broker` and the broker-loss tests use this class.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from mirror.errors import LocalClusterError
from mirror.local.broker import BrokerSpec, LocalBroker, new_cluster_id

REPLICATED_HEAP = "384m"  # six JVMs share two cores and a few GiB in the fault tests
SINGLE_HEAP = "1g"


@dataclass(frozen=True)
class NodePorts:
    node_id: int
    port: int
    controller_port: int


def cluster_specs(
    alias: str,
    directory: Path,
    nodes: Sequence[NodePorts],
    *,
    cluster_id: str | None = None,
    overrides: Mapping[str, str] | None = None,
    node_overrides: Callable[[NodePorts], Mapping[str, str]] | None = None,
) -> list[BrokerSpec]:
    """The specs of every node of one cluster; one node keeps the single-node layout (its directory
    is the cluster's), more nodes live in `node-<id>` below it and share a cluster id.
    `node_overrides` adds settings of a node's own (a second listener on its own port)."""
    base = BrokerSpec(alias, directory, 0, 0, dict(overrides or {}))

    def own(node: NodePorts) -> dict[str, str]:
        return {**base.overrides, **(node_overrides(node) if node_overrides else {})}

    if len(nodes) == 1:
        return [
            replace(
                base, port=nodes[0].port, controller_port=nodes[0].controller_port, overrides=own(nodes[0])
            )
        ]
    voters = tuple((node.node_id, node.controller_port) for node in nodes)
    shared_id = cluster_id or new_cluster_id()
    return [
        replace(
            base,
            directory=directory / f"node-{node.node_id}",
            port=node.port,
            controller_port=node.controller_port,
            node_id=node.node_id,
            voters=voters,
            cluster_id=shared_id,
            overrides=own(node),
        )
        for node in nodes
    ]


class LocalCluster:
    """The nodes of one cluster: started together, each stoppable, killable and restartable alone."""

    def __init__(
        self, specs: Sequence[BrokerSpec], libs: Path, *, heap: str | None = None, short_lived: bool = False
    ) -> None:
        """`short_lived`: nodes that run for minutes, on C1 alone (LocalBroker)."""
        if not specs:
            raise ValueError("a cluster needs at least one node")
        heap = heap or (REPLICATED_HEAP if len(specs) > 1 else SINGLE_HEAP)
        self.alias = specs[0].alias
        self.brokers = {
            spec.node_id: LocalBroker(spec, libs, heap=heap, short_lived=short_lived) for spec in specs
        }

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.bootstrap_servers for broker in self.brokers.values())

    @property
    def size(self) -> int:
        return len(self.brokers)

    def client_properties(self) -> dict[str, str]:
        first = next(iter(self.brokers.values()))
        return {**first.spec.client_properties(), "bootstrap.servers": self.bootstrap_servers}

    def broker(self, node_id: int) -> LocalBroker:
        try:
            return self.brokers[node_id]
        except KeyError:
            known = ", ".join(str(n) for n in self.brokers)
            raise LocalClusterError(
                f"cluster {self.alias} has no broker {node_id}; its brokers are {known}"
            ) from None

    def start(self, timeout_seconds: float = 120.0) -> None:
        """Start every node, then wait until each answers and all are registered."""
        start_clusters([self], timeout_seconds)

    def launch(self) -> None:
        """Start every node's process without waiting (start_clusters waits)."""
        for broker in self.brokers.values():
            if broker.pid is None:
                broker.start()

    def wait_until_ready(self, timeout_seconds: float = 120.0) -> None:
        for broker in self.brokers.values():
            broker.wait_until_ready(timeout_seconds)
        if self.size > 1:
            self.wait_until_registered(timeout_seconds)

    def stop(self) -> None:
        """Every node at once: one by one, the last would wait out its controlled shutdown with no
        quorum left to grant it."""
        running = [broker for broker in self.brokers.values() if broker.pid is not None]
        for broker in running:
            broker.terminate()
        for broker in running:
            broker.stop(timeout_seconds=20)

    def discard(self) -> None:
        """Every node, its data thrown away: killed, unless one writes the class archive
        (LocalBroker.discard); then all are stopped together, as its controlled shutdown needs
        the quorum of the others."""
        if any(broker.writes_archive for broker in self.brokers.values()):
            self.stop()
        else:
            for broker in self.brokers.values():
                broker.kill()

    def kill_broker(self, node_id: int) -> None:
        self.broker(node_id).kill()

    def stop_broker(self, node_id: int) -> None:
        self.broker(node_id).stop()

    def start_broker(self, node_id: int, timeout_seconds: float = 120.0) -> None:
        broker = self.broker(node_id)
        broker.start()
        broker.wait_until_ready(timeout_seconds)
        self.wait_until_registered(timeout_seconds)

    def wait_until_registered(self, timeout_seconds: float = 120.0) -> None:
        """Until the cluster's metadata lists every node as a live broker."""
        want = set(self.brokers)
        self._wait(
            lambda metadata: want <= set(metadata.brokers),
            timeout_seconds,
            f"not every broker of {self.alias} registered ({sorted(want)})",
        )

    def wait_until_in_sync(self, timeout_seconds: float = 180.0) -> None:
        """Until every partition of every topic has all its replicas in sync: after a node comes
        back, the point from which another node may go down without a partition losing its ISR."""

        def in_sync(metadata: ClusterMetadata) -> bool:
            for topic in metadata.topics.values():
                if topic.error is not None:
                    return False
                for partition in topic.partitions.values():
                    if partition.error is not None or set(partition.isrs) != set(partition.replicas):
                        return False
            return True

        self._wait(in_sync, timeout_seconds, f"the replicas of {self.alias} did not all get back in sync")

    def _wait(self, done: Callable[[ClusterMetadata], bool], timeout_seconds: float, failure: str) -> None:
        admin = AdminClient({**self.client_properties(), "log_level": "0"})
        deadline = time.monotonic() + timeout_seconds
        while True:
            try:
                if done(admin.list_topics(timeout=5)):
                    return
            except KafkaException:
                pass  # nodes still starting: ask again
            if time.monotonic() > deadline:
                raise LocalClusterError(f"{failure} within {timeout_seconds:g}s; see the nodes' server.log")
            time.sleep(0.5)


def start_clusters(clusters: Sequence[LocalCluster], timeout_seconds: float = 120.0) -> None:
    """Start every node of every cluster, then wait for all (the JVMs start in parallel); if any
    fails, or Ctrl-C arrives, stop every node started."""
    try:
        for cluster in clusters:
            cluster.launch()
        for cluster in clusters:
            cluster.wait_until_ready(timeout_seconds)
    except BaseException:
        for cluster in clusters:
            cluster.stop()
        raise


def local_nodes(count: int, base_port: int) -> list[NodePorts]:
    """Ports for `count` nodes from `base_port` up: client port, then controller port, per node."""
    return [NodePorts(index + 1, base_port + 2 * index, base_port + 2 * index + 1) for index in range(count)]

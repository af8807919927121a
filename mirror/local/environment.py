"""A set of local clusters that outlives the command that started it (`mirror local up|down|status`,
and the fault drills `stop-broker|kill-broker|start-broker`).

State lives in `<dir>/state.json`: per cluster its nodes' ids, ports and pids, so `down` and `status` work
from another shell and a second `up` finds the running pair instead of starting another.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mirror.errors import LocalClusterError
from mirror.local.broker import BrokerSpec, LocalBroker, is_local_broker, new_cluster_id, stop_process
from mirror.local.cluster import LocalCluster, NodePorts, cluster_specs, local_nodes, start_clusters
from mirror.local.jars import kafka_libs

DEFAULT_DIR = Path(".mirror-local")
DEFAULT_ALIASES = ("A", "B")
DEFAULT_BASE_PORT = 19092
_PORT_STRIDE = 10000  # A: 19092/19093 (and 19094/19095, ... for more nodes), B: 29092/29093


def start_brokers(
    specs: Sequence[BrokerSpec], *, libs: Path, timeout_seconds: float = 90.0, short_lived: bool = False
) -> list[LocalBroker]:
    """Start every broker, then wait for all; if any fails (or Ctrl-C arrives) stop those started.
    `short_lived`: brokers that run for minutes, on C1 alone (LocalBroker)."""
    brokers = [LocalBroker(spec, libs, short_lived=short_lived) for spec in specs]
    started: list[LocalBroker] = []
    try:
        for broker in brokers:
            broker.start()
            started.append(broker)
        for broker in brokers:
            broker.wait_until_ready(timeout_seconds)
    except BaseException:
        for broker in started:
            broker.stop()
        raise
    return brokers


def discard_brokers(brokers: Sequence[LocalBroker]) -> None:
    """Single-node clusters whose data is thrown away (LocalBroker.discard): those writing the
    class archive are sent SIGTERM together, then each is waited for or killed."""
    for broker in brokers:
        if broker.writes_archive:
            broker.terminate()
    for broker in brokers:
        broker.discard()


@dataclass(frozen=True)
class BrokerStatus:
    node_id: int
    bootstrap_servers: str
    pid: int | None
    running: bool


@dataclass(frozen=True)
class ClusterStatus:
    alias: str
    bootstrap_servers: str
    pid: int | None  # the first running node's
    running: bool  # every node runs
    directory: Path
    brokers: tuple[BrokerStatus, ...] = ()


@dataclass
class _Node:
    """One node of a cluster in state.json."""

    node_id: int
    port: int
    controller_port: int
    pid: int | None = None


@dataclass
class _Entry:
    """One cluster in state.json."""

    nodes: list[_Node]
    cluster_id: str | None = None

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> _Entry:
        if "nodes" not in raw:  # written before clusters had several nodes: one node, id 1
            return cls([_Node(1, int(raw["port"]), int(raw["controller_port"]), raw.get("pid"))])
        return cls([_Node(**node) for node in raw["nodes"]], raw.get("cluster_id"))


class LocalEnvironment:
    """The local clusters under one directory."""

    def __init__(self, directory: Path = DEFAULT_DIR) -> None:
        self.directory = directory
        self._state_file = directory / "state.json"

    def _read_state(self) -> dict[str, _Entry]:
        if not self._state_file.exists():
            return {}
        try:
            clusters = json.loads(self._state_file.read_text(encoding="utf-8"))["clusters"]
            return {alias: _Entry.parse(entry) for alias, entry in clusters.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LocalClusterError(
                f"{self._state_file} is unreadable ({exc}); stop any brokers by hand and delete the directory"
            ) from exc

    def _write_state(self, clusters: dict[str, _Entry]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        state = {"clusters": {alias: asdict(entry) for alias, entry in clusters.items()}}
        self._state_file.write_text(json.dumps(state, indent=2), encoding="utf-8")

    def _specs(self, alias: str, entry: _Entry) -> dict[int, BrokerSpec]:
        nodes = [NodePorts(node.node_id, node.port, node.controller_port) for node in entry.nodes]
        specs = cluster_specs(alias, self.directory / alias, nodes, cluster_id=entry.cluster_id)
        return {spec.node_id: spec for spec in specs}

    def _running(self, spec: BrokerSpec, node: _Node) -> bool:
        return node.pid is not None and is_local_broker(node.pid, spec.directory)

    def status(self) -> list[ClusterStatus]:
        statuses = []
        for alias, entry in self._read_state().items():
            specs = self._specs(alias, entry)
            brokers = tuple(
                BrokerStatus(
                    node.node_id,
                    specs[node.node_id].bootstrap_servers,
                    node.pid if self._running(specs[node.node_id], node) else None,
                    self._running(specs[node.node_id], node),
                )
                for node in entry.nodes
            )
            pids = [broker.pid for broker in brokers if broker.running]
            statuses.append(
                ClusterStatus(
                    alias,
                    ",".join(broker.bootstrap_servers for broker in brokers),
                    pids[0] if pids else None,
                    all(broker.running for broker in brokers),
                    self.directory / alias,
                    brokers,
                )
            )
        return statuses

    def up(
        self,
        aliases: Sequence[str] = DEFAULT_ALIASES,
        *,
        base_port: int = DEFAULT_BASE_PORT,
        brokers: int | None = None,
    ) -> tuple[list[ClusterStatus], bool]:
        """Start the clusters unless they already run; returns their status and whether it started any.

        A cluster started before keeps its ports, size and data, so mm2.local.yaml stays right; asking
        for another number of brokers than it has is an error (`down --purge` first). `brokers`
        unset: as many as it has, one for a new cluster.
        """
        state = self._read_state()
        for index, alias in enumerate(aliases):
            if alias in state and brokers is not None and len(state[alias].nodes) != brokers:
                raise LocalClusterError(
                    f"cluster {alias} under {self.directory} has {len(state[alias].nodes)} broker(s), not "
                    f"{brokers}; run `mirror local down --purge` first to start it afresh"
                )
            if alias not in state:
                ports = local_nodes(brokers or 1, base_port + index * _PORT_STRIDE)
                nodes = [_Node(p.node_id, p.port, p.controller_port) for p in ports]
                state[alias] = _Entry(nodes, new_cluster_id() if len(nodes) > 1 else None)
        whole: list[tuple[_Entry, LocalCluster]] = []
        partial: list[tuple[str, _Entry, _Node]] = []
        for alias in aliases:
            entry = state[alias]
            specs = self._specs(alias, entry)
            idle = [node for node in entry.nodes if not self._running(specs[node.node_id], node)]
            if len(idle) == len(entry.nodes):
                whole.append((entry, LocalCluster(list(specs.values()), kafka_libs())))
            else:  # the cluster runs with nodes down: start those alone
                partial += [(alias, entry, node) for node in idle]
        start_clusters([cluster for _, cluster in whole])
        for entry, cluster in whole:
            for node in entry.nodes:
                node.pid = cluster.broker(node.node_id).pid
        if whole:
            self._write_state(state)
        for alias, entry, node in partial:
            self._start_node(alias, entry, node, state)
        started_any = bool(whole or partial)
        return self.status(), started_any

    def _node(self, alias: str, node_id: int) -> tuple[dict[str, _Entry], _Entry, _Node]:
        state = self._read_state()
        if alias not in state:
            known = ", ".join(state) or "none; start them with: mirror local up"
            raise LocalClusterError(f"no local cluster {alias} under {self.directory} (clusters: {known})")
        entry = state[alias]
        for node in entry.nodes:
            if node.node_id == node_id:
                return state, entry, node
        ids = ", ".join(str(node.node_id) for node in entry.nodes)
        raise LocalClusterError(f"cluster {alias} has no broker {node_id}; its brokers are {ids}")

    def _start_node(self, alias: str, entry: _Entry, node: _Node, state: dict[str, _Entry]) -> None:
        cluster = LocalCluster(list(self._specs(alias, entry).values()), kafka_libs())
        cluster.start_broker(node.node_id)
        node.pid = cluster.broker(node.node_id).pid
        self._write_state(state)

    def start_broker(self, alias: str, node_id: int) -> BrokerStatus:
        """Start one node of a cluster again (after stop-broker or kill-broker), with its data."""
        state, entry, node = self._node(alias, node_id)
        spec = self._specs(alias, entry)[node_id]
        if not self._running(spec, node):
            self._start_node(alias, entry, node, state)
        return BrokerStatus(node_id, spec.bootstrap_servers, node.pid, True)

    def stop_broker(self, alias: str, node_id: int, *, kill: bool = False) -> bool:
        """Stop one node: SIGTERM (a controlled shutdown), or SIGKILL with `kill` (a crash).
        Returns False if it was not running."""
        state, entry, node = self._node(alias, node_id)
        spec = self._specs(alias, entry)[node_id]
        if not self._running(spec, node):
            return False
        assert node.pid is not None  # noqa: S101 - running implies a pid
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.pid, signal.SIGKILL)
        else:
            stop_process(node.pid)
        node.pid = None
        self._write_state(state)
        return True

    def down(self, *, purge: bool = False) -> list[str]:
        """Stop every running cluster; with `purge`, also delete their data. Returns the aliases stopped."""
        stopped = []
        state = self._read_state()
        running: list[int] = []
        for alias, entry in state.items():
            specs = self._specs(alias, entry)
            pids = [node.pid for node in entry.nodes if self._running(specs[node.node_id], node)]
            running += [pid for pid in pids if pid is not None]
            if pids:
                stopped.append(alias)
            for node in entry.nodes:
                node.pid = None
        # Every node at once: one by one, a cluster's last node would wait out its controlled
        # shutdown with no quorum left to grant it.
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in running:
            stop_process(pid)
        if purge and self.directory.exists():
            shutil.rmtree(self.directory)
        elif state:
            self._write_state(state)
        return stopped


def write_local_config(path: Path, clusters: Sequence[ClusterStatus], state_dir: Path) -> None:
    """A ready mm2.yaml: one enabled flow from the first cluster to the second, default filters."""
    source, target = clusters[0], clusters[1]
    text = (
        "# Written by `mirror local up` for the local clusters it started; safe to edit or delete.\n"
        "# Every key and its default: config/mm2.example.yaml\n"
        "clusters:\n"
        f"  {source.alias}:\n"
        f"    bootstrap_servers: {source.bootstrap_servers}\n"
        f"  {target.alias}:\n"
        f"    bootstrap_servers: {target.bootstrap_servers}\n"
        "flows:\n"
        f"  {source.alias}->{target.alias}:\n"
        "    enabled: true\n"
        "spark:\n"
        f"  checkpoint_dir: {state_dir / 'spark-state'}\n"
    )
    path.write_text(text, encoding="utf-8")

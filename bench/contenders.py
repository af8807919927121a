"""How each contender is configured and started: real MirrorMaker 2 and `mirror`, in both modes.

Each contender sees the source cluster under an alias of its own, so its remote topics
(`<alias>.<topic>`) and internal topics never meet another contender's on the shared target.
Both get the same checkpoint, group-sync and group-refresh interval (so translation results compare
like with like) and otherwise their defaults (for `mirror`, also its default tasks and commit interval).
The topics they replicate are given as regexes, which both full-match against source topic names.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from bench import processes
from mirror.local.broker import BrokerSpec, LocalBroker
from mirror.local.cluster import LocalCluster, NodePorts, cluster_specs
from mirror.local.cluster import start_clusters as start_replicated
from mirror.local.environment import start_brokers
from mirror.local.jars import kafka_libs
from mirror.local.ports import free_port
from mirror.local.toxiproxy import Toxiproxy, wan_listener

TARGET_ALIAS = "B"
MM2_TASKS_MAX = 8  # one task per source partition, MM2's usual sizing


@dataclass(frozen=True)
class Clusters:
    source: str
    target: str
    libs: Path
    replicas: int = 1  # replication factor of every topic: 1, or 3 on 3-broker clusters
    # Where the replicators reach the source: through a WAN-like proxy (`--wan`), or directly.
    # Seeding, paced producers and checks always use `source`.
    wan_source: str | None = None
    wan_ms: int = 0  # the proxy's latency each way
    brokers: tuple[processes.BrokerJvm, ...] = ()  # every broker JVM of both clusters

    @property
    def replicated_source(self) -> str:
        """The source's bootstrap servers as the contenders see them."""
        return self.wan_source or self.source


# A 3-broker cluster's nodes hold the 1,000-partition sets three times over: more heap than the
# fault tests' clusters.
REPLICATED_BENCH_HEAP = "768m"


Stoppable = LocalBroker | LocalCluster | Toxiproxy


def start_clusters(work: Path, brokers: int = 1, *, wan_ms: int = 0) -> tuple[list[Stoppable], Clusters]:
    """Two fresh clusters of `brokers` brokers each under `work`, on free loopback ports; with 3,
    replicated as operators run them (RF 3, min ISR 2: mirror.local.broker.REPLICATED_SETTINGS).
    With `wan_ms` (single brokers only), the contenders reach the source through Toxiproxy with
    that latency each way: a WAN link of twice that round trip.

    Their data lives in memory (/dev/shm) where the machine has it, their logs under `work`. On
    this machine's disk, the kernel's writeback of thousands of partition files 30 s after they
    were written (vm.dirty_expire_centisecs) stalled the brokers' appends for ~5 s: with no
    replicator at all, the 1,000-partition load's p99 was 5.3 s on disk and 0.3 s in memory.
    The bench measures replicators, not this disk.
    """
    libs = kafka_libs()
    data = _memory_dir()
    if brokers > 1:
        if wan_ms:
            raise ValueError("a WAN link is proxied to single-broker clusters only")
        return _start_replicated(work, brokers, libs, data)
    ports = {alias: (free_port(), free_port()) for alias in ("source", "target")}
    overrides: dict[str, dict[str, str]] = {
        alias: {
            **({"log.dirs": str(data / alias)} if data is not None else {}),
            # A deleted topic's files stay open until they are deleted (60 s by default): a
            # contender's 5,000 partitions would still count against the next one's open files.
            "file.delete.delay.ms": "1000",
        }
        for alias in ports
    }
    toxiproxy = Toxiproxy(work / "toxiproxy.log") if wan_ms else None
    proxy = None
    try:
        if toxiproxy is not None:
            proxy = toxiproxy.proxy("source-wan", upstream_port=free_port())
            toxiproxy.add_latency(proxy, wan_ms)
            overrides["source"].update(wan_listener(*ports["source"], proxy.upstream_port, proxy.listen_port))
        specs = [
            BrokerSpec(alias, work / alias, *ports[alias], overrides=overrides[alias]) for alias in ports
        ]
        source, target = start_brokers(specs, libs=libs)
    except BaseException:
        if toxiproxy is not None:
            toxiproxy.stop()
        raise
    jvms = _jvms("source", [source]) + _jvms("target", [target])
    clusters = Clusters(source.bootstrap_servers, target.bootstrap_servers, libs, brokers=jvms)
    if toxiproxy is None or proxy is None:
        return [source, target], clusters
    return [source, target, toxiproxy], replace(clusters, wan_source=proxy.address, wan_ms=wan_ms)


def _start_replicated(
    work: Path, brokers: int, libs: Path, data: Path | None
) -> tuple[list[Stoppable], Clusters]:
    clusters = []
    for alias in ("source", "target"):
        nodes = [NodePorts(node, free_port(), free_port()) for node in range(1, brokers + 1)]
        specs = cluster_specs(alias, work / alias, nodes)
        if data is not None:
            specs = [
                replace(spec, overrides={"log.dirs": str(data / alias / f"node-{spec.node_id}")})
                for spec in specs
            ]
        clusters.append(LocalCluster(specs, libs, heap=REPLICATED_BENCH_HEAP))
    start_replicated(clusters)
    source, target = clusters
    jvms = _jvms("source", source.brokers.values()) + _jvms("target", target.brokers.values())
    return [source, target], Clusters(
        source.bootstrap_servers, target.bootstrap_servers, libs, brokers, brokers=jvms
    )


def _jvms(
    side: Literal["source", "target"], brokers: Iterable[LocalBroker]
) -> tuple[processes.BrokerJvm, ...]:
    return tuple(
        processes.BrokerJvm(side, broker.pid, broker.spec.gc_log)
        for broker in brokers
        if broker.pid is not None
    )


def _memory_dir() -> Path | None:
    """A directory in memory, removed when the bench exits; None where there is no /dev/shm."""
    shm = Path("/dev/shm")  # noqa: S108 - a private directory made in it below
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        return None
    path = Path(tempfile.mkdtemp(prefix="mirror-bench-data-", dir=shm))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@dataclass(frozen=True)
class Contender:
    name: str
    family: Literal["mirror", "mm2", "floor"]
    exactly_once: bool
    # Flow settings a mirror contender runs with besides its defaults (`--mirror-flow`): a lever
    # measured in the bench before it becomes a default.
    flow_overrides: tuple[tuple[str, Any], ...] = ()
    # An MM2 contender whose remote topics the bench makes before it starts (`--mm2-premade-topics`):
    # what an operator does when MM2 cannot make them itself (10,000 partitions are more than one
    # CreateTopics request may carry, and MM2 sends one).
    premade_topics: bool = False
    # The floor's transactional producers (`bench/floor.py --producers`).
    producers: int = 1
    # The floor's producer library: librdkafka's (`bench/floor.py`) or aiokafka's
    # (`bench/floor_aiokafka.py`, several partitions in each produce request).
    producer_client: Literal["confluent-kafka", "aiokafka"] = "confluent-kafka"
    # A mirror contender run with `--debug` (`bench.profile_copy --debug`): every commit's
    # timings in its run.log.
    debug: bool = False

    @property
    def alias(self) -> str:
        return self.name.replace("-", "")

    @property
    def label(self) -> str:
        if self.family == "floor":
            if self.producer_client == "aiokafka":
                return "floor: bare consume -> transactional produce (bench/floor_aiokafka.py)"
            many = f", {self.producers} producers" if self.producers > 1 else ""
            return f"floor: bare consume -> transactional produce (bench/floor.py{many})"
        product = "mirror" if self.family == "mirror" else "MirrorMaker 2"
        premade = ", remote topics made for it" if self.premade_topics else ""
        producer = dict(self.flow_overrides).get("copy_producer")
        through = f", {producer}'s producer" if producer else ""
        return f"{product} {'exactly-once' if self.exactly_once else 'at-least-once'}{premade}{through}"

    @property
    def checkpoints(self) -> bool:
        """Whether it translates group offsets: the floor copies records and nothing else."""
        return self.family != "floor"

    def remote_topic(self, topic: str) -> str:
        return f"{self.alias}.{topic}"

    def start(
        self, clusters: Clusters, topics: list[str], run_dir: Path, *, checkpoint_seconds: int
    ) -> subprocess.Popen[bytes]:
        """Replicate the source topics that full-match one of the regexes `topics`."""
        run_dir.mkdir(parents=True, exist_ok=True)
        if self.family == "mm2":
            return self._start_mm2(clusters, topics, run_dir, checkpoint_seconds)
        if self.family == "floor":
            floor = (
                [sys.executable, "-m", "bench.floor_aiokafka"]
                if self.producer_client == "aiokafka"
                else [sys.executable, "-m", "bench.floor", f"--producers={self.producers}"]
            )
            floor += [clusters.replicated_source, clusters.target, self.alias]
            return processes.start([*floor, *topics], run_dir / "run.log")
        return self._start_mirror(clusters, topics, run_dir, checkpoint_seconds)

    def _start_mirror(
        self, clusters: Clusters, topics: list[str], run_dir: Path, checkpoint_seconds: int
    ) -> subprocess.Popen[bytes]:
        config = {
            "clusters": {
                self.alias: {"bootstrap_servers": clusters.replicated_source},
                TARGET_ALIAS: {"bootstrap_servers": clusters.target},
            },
            "flows": {
                f"{self.alias}->{TARGET_ALIAS}": {
                    "topics": topics,
                    "exactly_once": self.exactly_once,
                    "refresh_groups_interval_seconds": checkpoint_seconds,
                    "emit_checkpoints_interval_seconds": checkpoint_seconds,
                    "sync_group_offsets_interval_seconds": checkpoint_seconds,
                    **dict(self.flow_overrides),
                }
            },
            "spark": {"checkpoint_dir": str(run_dir / "spark")},
            "metrics": {"enabled": True, "port": free_port()},
        }
        path = run_dir / "mm2.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        debug = ["--debug"] if self.debug else []
        return processes.start(
            [sys.executable, "-m", "mirror", *debug, "run", str(path)], run_dir / "run.log"
        )

    def _start_mm2(
        self, clusters: Clusters, topics: list[str], run_dir: Path, checkpoint_seconds: int
    ) -> subprocess.Popen[bytes]:
        source, flow = self.alias, f"{self.alias}->{TARGET_ALIAS}"
        lines = [
            f"clusters = {source}, {TARGET_ALIAS}",
            f"{source}.bootstrap.servers = {clusters.replicated_source}",
            f"{TARGET_ALIAS}.bootstrap.servers = {clusters.target}",
            f"{flow}.enabled = true",
            # A comma-separated list of regexes (MM2 joins them with "|" and full-matches).
            f"{flow}.topics = {', '.join(topics)}",
            f"{TARGET_ALIAS}->{source}.enabled = false",
            f"tasks.max = {MM2_TASKS_MAX}",
            f"refresh.groups.interval.seconds = {checkpoint_seconds}",
            f"emit.checkpoints.interval.seconds = {checkpoint_seconds}",
            "sync.group.offsets.enabled = true",
            f"sync.group.offsets.interval.seconds = {checkpoint_seconds}",
            "sync.topic.acls.enabled = false",
            # Every topic, remote and internal, with as many replicas as the clusters have brokers.
            f"replication.factor = {clusters.replicas}",
            *(
                f"{topic}.replication.factor = {clusters.replicas}"
                for topic in ("offset-syncs.topic", "checkpoints.topic", "heartbeats.topic")
            ),
            *(
                f"{store}.storage.replication.factor = {clusters.replicas}"
                for store in ("offset", "config", "status")
            ),
        ]
        if self.exactly_once:
            # What the Kafka docs require for exactly-once MirrorMaker 2 in dedicated mode (KIP-618).
            lines += [
                f"{TARGET_ALIAS}.exactly.once.source.support = enabled",
                f"{source}.consumer.isolation.level = read_committed",
                "dedicated.mode.enable.internal.rest = true",
                f"listeners = http://127.0.0.1:{free_port()}",
            ]
        properties = run_dir / "mm2.properties"
        properties.write_text("\n".join(lines) + "\n", encoding="utf-8")
        log4j = run_dir / "log4j2.properties"
        log4j.write_text(
            "appender.f.type=File\nappender.f.name=f\n"
            f"appender.f.fileName={run_dir / 'mm2.log'}\nappender.f.layout.type=PatternLayout\n"
            "appender.f.layout.pattern=%d %p %c: %m%n\n"
            "rootLogger.level=info\nrootLogger.appenderRef.f.ref=f\n",
            encoding="utf-8",
        )
        command = [
            # The heap bin/connect-mirror-maker.sh gives it.
            "java", "-Xms256m", "-Xmx2g", f"-Dlog4j2.configurationFile={log4j}",
            "-cp", str(clusters.libs / "*"),
            "org.apache.kafka.connect.mirror.MirrorMaker", str(properties),
        ]  # fmt: skip
        return processes.start(command, run_dir / "run.log")


CONTENDERS = (
    Contender("mm2-alo", "mm2", exactly_once=False),
    Contender("mm2-eos", "mm2", exactly_once=True),
    Contender("mirror-alo", "mirror", exactly_once=False),
    Contender("mirror-eos", "mirror", exactly_once=True),
    # librdkafka's copy producer (mirror.runner.copy_producer): both modes copy through aiokafka's
    # by default.
    Contender(
        "mirror-eos-librdkafka",
        "mirror",
        exactly_once=True,
        flow_overrides=(("copy_producer", "librdkafka"),),
    ),
    Contender(
        "mirror-alo-librdkafka",
        "mirror",
        exactly_once=False,
        flow_overrides=(("copy_producer", "librdkafka"),),
    ),
    Contender("floor-eos", "floor", exactly_once=True),
    Contender("floor-eos-k4", "floor", exactly_once=True, producers=4),
    Contender("floor-eos-aiokafka", "floor", exactly_once=True, producer_client="aiokafka"),
)

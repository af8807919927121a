"""Brokers of a replicated cluster going away (RF 3, min ISR 2, two 3-node clusters): one lost for a
while, the most ordinary fault a production cluster has, and every one restarted in turn, as a
rolling upgrade does, with leaders moved by hand after. Leaders and coordinators move to the nodes
left, and the copy must go on through it: nothing lost, nothing copied twice, order kept, and
records reaching the target while a broker is down."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror.kafka.admin import create_topics, topic_ids
from mirror.kafka.clients import admin_client
from mirror.local.toxiproxy import Proxy, Toxiproxy
from tests.helpers import assert_eventually
from tests.kafka_backends import KafkaCluster, replicated_clusters
from tests.mirror_process import (
    MirrorRun,
    assert_alive,
    source_partitions,
    total_copied,
    wait_until_caught_up,
    wait_until_copying,
    write_config,
)
from tests.records import compare_records, read_topic
from tests.reliability.conftest import Record
from tests.reliability.progress import Progress
from tests.reliability.traffic import Traffic, compare_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability, pytest.mark.solo]

TOPICS, PARTITIONS = 20, 10  # 200 partitions, RF 3
RATE = 500  # records/s on the source throughout
TRANSACTION_STATE_PARTITIONS = 10  # REPLICATED_SETTINGS' transaction.state.log.num.partitions


# Kafka's controller elects the preferred leaders every 5 minutes of its life (auto.leader.rebalance):
# after a drill restarted a node, that moved the target's leaders and coordinators back to it in the
# middle of the next drill's outage, a fault of its own (its copy tasks gave up on the moved
# coordinator and re-opened, 40 s without a commit) at a moment no test chose. Leaders moved back on
# purpose are a step of the soak drills (_move_leaders).
NO_PERIODIC_ELECTION = {"auto.leader.rebalance.enable": "false"}


@pytest.fixture(scope="module")
def toxiproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toxiproxy]:
    proxy = Toxiproxy(tmp_path_factory.mktemp("toxiproxy") / "toxiproxy.log")
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def replicated(
    tmp_path_factory: pytest.TempPathFactory, toxiproxy: Toxiproxy
) -> Iterator[list[KafkaCluster]]:
    """Two 3-broker clusters A and B for this module alone (six JVMs: one pair at a time); each
    node also behind a Toxiproxy link of its own, for the network partitions."""
    root = tmp_path_factory.mktemp("replicated")
    clusters = replicated_clusters(("A", "B"), root, toxiproxy=toxiproxy, settings=NO_PERIODIC_ELECTION)
    with clusters as started:
        yield started


@pytest.fixture(autouse=True)
def every_node_up(replicated: list[KafkaCluster]) -> None:
    """Each test starts with every node up and in sync, whatever a test before it left down; so a
    test need not restart at its end a node nothing after it needs (six JVMs: that costs minutes)."""
    for cluster in replicated:
        assert cluster.nodes is not None
        if any(broker.pid is None for broker in cluster.nodes.brokers.values()):
            cluster.nodes.launch()
            cluster.nodes.wait_until_ready(300)  # see the broker-loss drill's restart
            cluster.nodes.wait_until_in_sync()


def _topics_under_load(source: KafkaCluster, prefix: str) -> tuple[list[str], Traffic]:
    """TOPICS new topics of PARTITIONS partitions (RF 3), every replica in sync, taking RATE
    records/s from now on."""
    assert source.nodes is not None
    topics = [f"{prefix}-{n:02d}-{time.monotonic_ns() % 10**6}" for n in range(TOPICS)]
    admin = AdminClient(source.properties())
    for future in admin.create_topics(
        [NewTopic(t, PARTITIONS) for t in topics], operation_timeout=60
    ).values():
        future.result(timeout=60)
    source.nodes.wait_until_in_sync()
    return topics, Traffic(source, dict.fromkeys(topics, PARTITIONS), per_second=RATE).start()


def transaction_coordinator(cluster: KafkaCluster, transactional_ids: list[str]) -> int:
    """The broker leading the __transaction_state partition of most of `transactional_ids`: the
    transaction coordinator of most of the flow's copy tasks (Kafka's partitionFor: the id's Java
    hashCode, made non-negative, modulo the topic's partition count)."""
    metadata = AdminClient(cluster.properties()).list_topics("__transaction_state", timeout=30)
    partitions = metadata.topics["__transaction_state"].partitions
    leaders = Counter(
        partitions[_java_abs(_java_hash(t)) % len(partitions)].leader for t in transactional_ids
    )
    return int(leaders.most_common(1)[0][0])


def _java_hash(text: str) -> int:
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _java_abs(value: int) -> int:
    return 0 if value == -(1 << 31) else abs(value)


def _busiest_leader(cluster: KafkaCluster, topics: list[str]) -> int:
    metadata = AdminClient(cluster.properties()).list_topics(timeout=30)
    leaders = Counter(
        partition.leader for topic in topics for partition in metadata.topics[topic].partitions.values()
    )
    return int(leaders.most_common(1)[0][0])


def _other_broker(cluster: KafkaCluster, not_this: int) -> int:
    assert cluster.nodes is not None
    return next(node for node in sorted(cluster.nodes.brokers) if node != not_this)


# Each side's loss in turn, on one run, each for a minute: a target broker (not the transaction
# coordinator of the copy tasks), the source broker leading most of the flow's partitions, then the
# copy tasks' transaction coordinator. A minute, not less: on this 2-core machine with six brokers,
# a coordinator's move took from 14 s to over 30 s (two runs of .ci/run), and the window checked
# for copying starts once the cluster has moved every leader off the node.
FAULTS = (("target", 60), ("source", 60), ("transaction coordinator", 60))
# Each outage lasts past the moment the cluster moved the lost node's leaders by at least this; the
# window in which the copy must go on starts 5 s after that moment. The controller fences a lost
# node within the broker session timeout (9 s) as a rule, but once in a CI run a source broker's 72
# partitions stayed led by it for the whole minute (the source took no records either, its ISRs
# still naming the dead node).
HOLD_SECONDS = 45
MOVE_SECONDS = 180  # the controller's fencing of a lost node, on six JVMs and two cores
COPY_TASKS = 2
PARTITION_SECONDS = 60  # a network partition's length
CUT_OFF = (
    "the copy waits while it lasts; one warning line says which cluster stopped answering, one line says "
    "when it answers again, and the copy goes on from the committed positions"
)


@dataclass
class Outage:
    which: str
    cluster: KafkaCluster
    node: int
    down_seconds: int
    killed_at: float
    first_line: int  # the run's output line at the kill: what the tasks said from there on
    roles: str  # what the node was to the flow when it was killed
    led: set[tuple[str, int]]  # the flow's source partitions it led then: the only ones it can take offline
    moved_at: float = 0.0  # no partition of the cluster led by the node any more: it was fenced
    restarted_at: float = 0.0
    back_at: float = 0.0  # the node in sync and the copy going on again

    def ends_at(self) -> float:
        """When the node is started again: `down_seconds` after the kill, and HOLD_SECONDS at least
        after its leaders moved."""
        return max(self.killed_at + self.down_seconds, self.moved_at + HOLD_SECONDS)


# A hang guard, not a time limit: outages of a minute in turn (longer where the cluster is slow to
# move leaders: up to MOVE_SECONDS + HOLD_SECONDS), each followed by a restart that may wait up to
# 300 s and a catch-up; on a slower machine of this kind the drill ran past the default 600 s while
# still copying (CI of 2026-11-28).
@pytest.mark.timeout(2100)
def test_brokers_lost_one_at_a_time_on_either_side_copy_on_and_lose_and_duplicate_nothing(
    replicated: list[KafkaCluster], tmp_path: Path, reliability: Record
) -> None:
    source, target = replicated
    assert source.nodes is not None and target.nodes is not None
    topics, traffic = _topics_under_load(source, "loss")
    config = write_config(tmp_path, source, target, topics, tasks_max=COPY_TASKS)
    run = MirrorRun(config, tmp_path / "run.log", options=("--log-format", "json"))
    # 100 partitions per task: one producer each (FlowSettings.task_producers), ids task:0 and task:1.
    ids = [f"mirror-A-B-task:{index}" for index in range(COPY_TASKS)]
    outages: list[Outage] = []
    try:
        with Progress(source, target, topics) as progress:
            wait_until_copying(source, target, topics, run, more=5000, timeout=240)
            for which, down_seconds in FAULTS:
                cluster, node = _broker_to_lose(which, source, target, topics, ids)
                assert cluster.nodes is not None
                roles = _roles(cluster, node, topics, ids)
                led = {(t, p) for t in topics for p in _led(cluster, t, node)} if cluster is source else set()
                outage = Outage(
                    which,
                    cluster,
                    node,
                    down_seconds,
                    time.monotonic(),
                    len(run.output().splitlines()),
                    roles,
                    led,
                )
                outages.append(outage)
                cluster.nodes.kill_broker(node)
                outage.moved_at = _fenced(cluster, node)
                # mirror must ride out the outage: still running when the broker comes back.
                with pytest.raises(subprocess.TimeoutExpired):
                    run.wait(timeout=outage.ends_at() - time.monotonic())
                outage.restarted_at = time.monotonic()
                # A combined controller+broker node killed under load: on six JVMs and two cores
                # its re-registration was once refused (DUPLICATE_BROKER_REGISTRATION) for ~2 min
                # while the slow quorum still held the dead incarnation. That is the test bed, not
                # mirror, so the restart gets more than the usual 120 s.
                cluster.nodes.start_broker(node, timeout_seconds=300)
                cluster.nodes.wait_until_in_sync()  # caught up; it leads nothing (NO_PERIODIC_ELECTION)
                wait_until_copying(source, target, topics, run, more=2000, timeout=120)
                outage.back_at = time.monotonic()
            produced = traffic.stop()
            wait_until_caught_up(source, target, topics, run, timeout=400)
        exit_code = run.stop()
    finally:
        traffic.stop()
        run.cleanup()
    comparison = compare_topics(source, target, topics)
    lines = run.output().splitlines()
    recopied = [line for line in lines if "copying the partition again" in line]
    for index, outage in enumerate(outages):
        # Once the cluster has moved the leaders and coordinators (metadata says so), it copies: a
        # few seconds later, as clients learn where they went.
        began = outage.moved_at + 5
        while_down = progress.copied_between(began, outage.restarted_at)
        idle = progress.idle_between(began, outage.restarted_at)
        stuck, offline = progress.stuck_between(began, outage.restarted_at)
        stall = progress.longest_stall(outage.killed_at, outage.back_at)
        until = outages[index + 1].first_line if index + 1 < len(outages) else len(lines)
        warned = _worker_warnings(lines[outage.first_line : until])
        reliability(
            "fault",
            f"{outage.which.capitalize()} broker of 3 ({outage.roles}) SIGKILLed for "
            f"{outage.restarted_at - outage.killed_at:.0f} s "
            f"(RF 3, min ISR 2), {TOPICS * PARTITIONS} partitions at {RATE} records/s, one run for all three",
            does=(
                "leaders and the transaction coordinator move to the nodes left; open transactions that "
                "fail are aborted and their records copied again from the committed positions, the rest "
                "copy on"
            ),
            comparison=comparison,
            shown=f"leaders moved off it {outage.moved_at - outage.killed_at:.0f} s after the kill; "
            f"copied {while_down} records while it was down (from 5 s after that), into "
            f"{len(progress.partitions) - len(idle)} partitions of {len(progress.partitions)}; "
            f"longest stall {stall:.0f} s; "
            f"{len(warned)} warnings from the Spark workers; exit {exit_code}",
        )
        print(  # noqa: T201
            f"{outage.which} ({outage.roles}): leaders moved {outage.moved_at - outage.killed_at:.1f}s "
            f"after the kill, copied while down {while_down}, {len(idle)} partitions idle "
            f"{idle[:3]}, {len(stuck)} of them with records to copy, {len(offline)} offline on the source, "
            f"longest stall {stall:.1f}s, "
            f"the workers warned {len(warned)} times, first {[r['message'] for r in warned[:2]]}; "
            f"{progress.failed} progress samples failed in the whole run"
        )
        assert while_down > 0, (
            f"nothing reached the target while {outage.which} broker {outage.node} was down"
        )
        # Every partition with records to copy copies while a broker is down, whichever task owns it:
        # one task stuck for a whole outage fails here though the other copies on. Partitions the
        # load left alone are not counted: in one CI run 144 of 200 sat still while a source broker
        # was down, and only the source's ends tell a stalled producer from a stuck copy task.
        assert not stuck, (
            f"{len(stuck)} partitions with records to copy copied nothing while {outage.which} broker "
            f"{outage.node} was down ({outage.roles}), e.g. {stuck[:5]}; the copy tasks said "
            f"{_told(lines[outage.first_line : until])}"
        )
        # A partition is offline on the source only if the broker that died led it (its last
        # in-sync replica): any other whose end went unknown is the check failing, not the load.
        assert set(offline) <= outage.led, sorted(set(offline) - outage.led)[:5]
        if outage.which == "source":
            # The checkpoint rounds, in a Spark worker, list the source's groups from every broker:
            # with one lost they say so on the console of `mirror run`, and carry on.
            listing = [
                r for r in warned if r["component"] == "checkpoint" and "source cluster A" in r["message"]
            ]
            assert listing, [r["message"] for r in warned][:5] or lines[outage.first_line : until][-20:]
            assert all(r["flow"] == "A->B" for r in listing), listing[:2]
            # One broker of three away is not a silent cluster: the driver's lag read may fail for
            # its partitions until their leaders move, and says so, not "has not answered".
            silent = [
                line
                for line in lines[outage.first_line : until]
                if "source cluster A has not answered" in line
            ]
            assert not silent, silent
    print(f"{comparison}")  # noqa: T201
    # Between them, the target's two kills took down every coordinator the flow's commits go to.
    killed = " / ".join(outage.roles for outage in outages if outage.cluster is target)
    for role in ("transaction coordinator", "positions group's coordinator", "mm2-offsets.A.internal"):
        assert role in killed, f"no target kill hit the {role}: {killed}"
    assert not recopied, recopied[:3]
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == produced


def _fenced(cluster: KafkaCluster, node: int) -> float:
    """When the controller has fenced the killed `node`: no longer a live broker in the metadata,
    nor the leader of any partition of `cluster` (internal topics too: the coordinators), whose
    leaders moved to the nodes left (or, where it was the last in-sync replica, to none)."""
    admin = AdminClient({**cluster.properties(), "log_level": "0"})

    def moved() -> None:
        try:
            metadata = admin.list_topics(timeout=10)
        except KafkaException as exc:  # every node left busy: asked again
            raise AssertionError(f"no metadata: {exc}") from exc
        # A fenced node is left out of the brokers listed: this holds for a node that led nothing
        # too (one restarted earlier, its leaders never moved back).
        assert node not in metadata.brokers, f"node {node} still listed as a live broker"
        still = [
            f"{name}-{p}"
            for name, topic in metadata.topics.items()
            for p, partition in topic.partitions.items()
            if partition.leader == node
        ]
        assert not still, f"{len(still)} partitions still led by the lost node, e.g. {still[:3]}"

    try:
        assert_eventually(moved, timeout=MOVE_SECONDS, interval=0.5)
    except AssertionError as exc:
        raise AssertionError(
            f"cluster {cluster.alias} had not fenced node {node} {MOVE_SECONDS} s after its SIGKILL, so its "
            f"leaders did not move (the test bed's controller, not mirror): {exc}\n"
            + _quorum_diagnosis(cluster)
        ) from exc
    return time.monotonic()


def _quorum_status(cluster: KafkaCluster, *what: str) -> subprocess.CompletedProcess[str]:
    """Kafka's own metadata-quorum tool against `cluster`: `describe --status`, `--replication`."""
    assert cluster.libs is not None
    command = [
        "java", "-cp", str(cluster.libs / "*"), "org.apache.kafka.tools.MetadataQuorumCommand",
        "--bootstrap-server", cluster.bootstrap_servers, "describe", *what,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


_GC_PAUSE = re.compile(r"Pause .* (\d+\.\d+)ms$")


def _quorum_diagnosis(cluster: KafkaCluster) -> str:
    """What a stuck fencing needs to be told apart (a quorum without a leader, a voter far behind,
    a node in long GC pauses): the quorum's replication as Kafka's tool reports it, and per node
    whether it runs, its last warning or lifecycle step, and its longest GC pause logged."""
    assert cluster.nodes is not None
    try:
        replication = _quorum_status(cluster, "--replication")
        quorum = (replication.stdout or replication.stderr).strip()
    except subprocess.TimeoutExpired:  # the diagnosis must not hide the failure it explains
        quorum = "Kafka's metadata-quorum tool did not answer within 120 s"
    lines = [f"quorum of {cluster.alias}: {quorum}"]
    for node_id, broker in cluster.nodes.brokers.items():
        try:
            logged = broker.spec.gc_log.read_text().splitlines()
        except OSError:
            logged = []
        pauses = [float(m.group(1)) for m in map(_GC_PAUSE.search, logged) if m]
        longest = f"{max(pauses):.0f} ms" if pauses else "none logged"
        lines.append(
            f"node {node_id}: {'running' if broker.pid is not None else 'not running'}, "
            f"longest GC pause {longest}, last logged: {broker.last_step()}"
        )
    return "\n".join(lines)


def _broker_to_lose(
    which: str, source: KafkaCluster, target: KafkaCluster, topics: list[str], ids: list[str]
) -> tuple[KafkaCluster, int]:
    if which == "source":
        # The source runs no transactions of the flow's: the broker leading most of its
        # partitions is the one whose loss moves most leaders under the copy tasks.
        return source, _busiest_leader(source, topics)
    coordinator = transaction_coordinator(target, ids)
    if which == "target":
        # Not the coordinator of the copy tasks' transactions, which the third case kills: the
        # coordinator of the group the commits write positions to if another broker is, else the
        # other broker leading most of the offsets topic the commits write Connect's records to.
        positions = _group_coordinator(target, POSITIONS_GROUP)
        if positions != coordinator:
            return target, positions
        others = (
            [node for node in sorted(target.nodes.brokers) if node != coordinator] if target.nodes else []
        )
        return target, max(others, key=lambda node: len(_led(target, OFFSETS_TOPIC, node)))
    return target, coordinator


POSITIONS_GROUP = "__mirror-positions.A-B"  # FlowSettings.positions_group()
OFFSETS_TOPIC = "mm2-offsets.A.internal"  # the copy's offsets.storage.topic (KIP-618)


def _roles(cluster: KafkaCluster, node: int, topics: list[str], ids: list[str]) -> str:
    """What `node` is to the flow: coordinators it holds, and partitions it leads."""
    if cluster.alias == "A":
        return (
            f"leader of {sum(len(_led(cluster, topic, node)) for topic in topics)} of the flow's partitions"
        )
    roles = []
    if transaction_coordinator(cluster, ids) == node:
        roles.append("the copy tasks' transaction coordinator")
    if _group_coordinator(cluster, POSITIONS_GROUP) == node:
        roles.append("the positions group's coordinator")
    led = _led(cluster, OFFSETS_TOPIC, node)
    if led:
        roles.append(f"leader of {len(led)} {OFFSETS_TOPIC} partitions")
    return ", ".join(roles) or "no coordinator of the flow's"


def _led(cluster: KafkaCluster, topic: str, node: int) -> list[int]:
    metadata = AdminClient(cluster.properties()).list_topics(topic, timeout=30)
    return [p for p, info in metadata.topics[topic].partitions.items() if info.leader == node]


def _group_coordinator(cluster: KafkaCluster, group: str) -> int:
    """The broker leading the __consumer_offsets partition of `group` (Kafka's partitionFor)."""
    metadata = AdminClient(cluster.properties()).list_topics("__consumer_offsets", timeout=30)
    partitions = metadata.topics["__consumer_offsets"].partitions
    return int(partitions[_java_abs(_java_hash(group)) % len(partitions)].leader)


def _worker_warnings(lines: list[str]) -> list[dict[str, Any]]:
    """The WARNING and ERROR lines the Spark workers wrote (JSON lines naming their component: a
    copy task, a checkpoint or heartbeat round)."""
    return [
        record
        for record in _json_lines(lines)
        if "component" in record and record.get("level") in ("WARNING", "ERROR")
    ]


def _told(lines: list[str], most: int = 30) -> list[str]:
    """What the workers' copy tasks and Kafka clients said, each kind of line once (numbers aside),
    with its time and task: enough to tell, from a failed run alone, which step of a task stalled."""
    told, kinds = [], set()
    for record in _json_lines(lines):
        if record.get("component") != "source":
            continue
        kind = (record.get("task"), re.sub(r"\d+", "N", str(record.get("message")))[:120])
        if kind not in kinds:
            kinds.add(kind)
            told.append(f"{record.get('time')} task {record.get('task')}: {str(record.get('message'))[:300]}")
    return told[:most]


def _json_lines(lines: list[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


@dataclass(frozen=True)
class Step:
    name: str
    act: Callable[[MirrorRun], str]  # does it to the run; returns what it did, for the report
    # Long enough (minutes) that records must reach the target while it is being done.
    copies_meanwhile: bool = False
    does: str = (
        "the copy follows leaders and coordinators as they move (metadata refresh, coordinator lookup); a "
        "transaction that fails is aborted and copied again from the committed positions"
    )


# A soak drill (`make soak`): about 12 minutes on CI's machine, which the 45-minute CI run cannot
# hold beside the brokers-lost drill above, the one the broker-loss issue keeps in CI. A hang
# guard, not a time limit: each restart may wait up to 300 s, then a catch-up.
@pytest.mark.soak
@pytest.mark.timeout(1500)
def test_the_target_restarted_in_turn_leaders_moved_and_a_minute_cut_off_lose_and_duplicate_nothing(
    replicated: list[KafkaCluster], toxiproxy: Toxiproxy, tmp_path: Path, reliability: Record
) -> None:
    """Every target broker stopped (SIGTERM: a controlled shutdown) and started again in turn,
    each back in sync before the next goes, as a rolling upgrade does; then the leadership of every
    partition moved by hand on each side (replicas reordered by Kafka's reassignment tool, then a
    preferred leader election); then a minute of network partition between `mirror run` and the
    target, which it reports in one line when it begins and one when it ends. The copy goes on
    throughout; the longest stall of each is shown. (The source's minute: `make soak`.)"""
    source, target = replicated

    def steps(topics: list[str]) -> list[Step]:
        remote = [f"A.{topic}" for topic in topics]
        return [
            Step("rolling restart of the target", lambda _: _rolling_restart(target), copies_meanwhile=True),
            Step("leaders moved by hand on the target", lambda _: _move_leaders(target, remote, tmp_path)),
            Step("leaders moved by hand on the source", lambda _: _move_leaders(source, topics, tmp_path)),
            Step(
                f"a {PARTITION_SECONDS} s network partition between `mirror run` and the target (Toxiproxy "
                "dropping every byte of each broker's link)",
                lambda run: _cut_off(toxiproxy, target, "target", run),
                does=CUT_OFF,
            ),
        ]

    _steps_under_load(replicated, tmp_path, reliability, "roll", steps)


@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_a_rolling_restart_of_the_source_the_controllers_killed_and_brokers_down_ten_minutes_lose_nothing(
    replicated: list[KafkaCluster], tmp_path: Path, reliability: Record
) -> None:
    """`make soak`, not CI (about half an hour): the source restarted in turn, each cluster's
    active KRaft controller SIGKILLed, then a broker of each side left down for ten minutes."""
    source, target = replicated

    def steps(topics: list[str]) -> list[Step]:
        return [
            Step("rolling restart of the source", lambda _: _rolling_restart(source), copies_meanwhile=True),
            Step("the target's active KRaft controller SIGKILLed", lambda _: _kill_controller(target)),
            Step("the source's active KRaft controller SIGKILLed", lambda _: _kill_controller(source)),
            Step(
                "a target broker down for ten minutes",
                lambda _: _down_for(target, _busiest_leader(target, [f"A.{t}" for t in topics]), 600),
                copies_meanwhile=True,
            ),
            Step(
                "a source broker down for ten minutes",
                lambda _: _down_for(source, _busiest_leader(source, topics), 600),
                copies_meanwhile=True,
            ),
        ]

    _steps_under_load(replicated, tmp_path, reliability, "soak", steps)


def _steps_under_load(
    replicated: list[KafkaCluster],
    tmp_path: Path,
    reliability: Record,
    prefix: str,
    steps_for: Callable[[list[str]], list[Step]],
) -> None:
    """A flow of 200 partitions under load through `steps_for(topics)`, one after the other, each
    followed by copying again; then every record compared. Each step shows what it did, what was
    copied meanwhile (it must be some) and the longest stall."""
    source, target = replicated
    assert source.nodes is not None and target.nodes is not None
    topics, traffic = _topics_under_load(source, prefix)
    # Through the proxies, so that a step can cut them; everything else here reaches the brokers.
    far_source = replace(source, bootstrap_servers=source.proxied_bootstrap_servers)
    far_target = replace(target, bootstrap_servers=target.proxied_bootstrap_servers)
    run = MirrorRun(
        write_config(tmp_path, far_source, far_target, topics, tasks_max=COPY_TASKS), tmp_path / "run.log"
    )
    shown: list[tuple[Step, str, float, float, int]] = []  # what it did, start, end, copied while doing it
    try:
        with Progress(source, target, topics) as progress:
            wait_until_copying(source, target, topics, run, more=5000, timeout=240)
            partitions = source_partitions(source, topics)
            for step in steps_for(topics):
                before = _committed(source, target, topics, partitions)
                started = time.monotonic()
                did = step.act(run)
                # Asked of the target now, not of the sampler, whose samples may fail meanwhile.
                copied = _committed(source, target, topics, partitions) - before
                with pytest.raises(subprocess.TimeoutExpired):
                    run.wait(timeout=1)  # still running
                wait_until_copying(source, target, topics, run, more=2000, timeout=120)
                time.sleep(1.5)  # the sampler's next sample, a second apart, falls in the window
                shown.append((step, did, started, time.monotonic(), copied))
            produced = traffic.stop()
            wait_until_caught_up(source, target, topics, run, timeout=400)
        exit_code = run.stop()
    finally:
        traffic.stop()
        run.cleanup()
    comparison = compare_topics(source, target, topics)
    for step, did, started, ended, copied in shown:
        stall = progress.longest_stall(started, ended)
        name = step.name[0].upper() + step.name[1:]  # not capitalize(): it lowers KRaft and SIGKILL
        reliability(
            "fault",
            f"{name} (RF 3, min ISR 2), {TOPICS * PARTITIONS} partitions at {RATE} records/s, one run for "
            f"the {len(shown)} steps",
            does=step.does,
            comparison=comparison,
            shown=f"{did}; copied {copied} records meanwhile; longest stall {stall:.0f} s; exit {exit_code}",
        )
        print(f"{step.name}: {did}, copied {copied} meanwhile, longest stall {stall:.1f}s")  # noqa: T201
    print(f"{comparison}")  # noqa: T201
    stopped = [step.name for step, *_, copied in shown if step.copies_meanwhile and copied == 0]
    assert stopped == [], f"no record reached the target while these were done: {stopped}"
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == produced


def _rolling_restart(cluster: KafkaCluster) -> str:
    """Each node in turn: SIGTERM (it hands its leaders over and waits for that), started again,
    and every replica back in sync before the next one goes."""
    assert cluster.nodes is not None
    took = []
    for node in sorted(cluster.nodes.brokers):
        started = time.monotonic()
        cluster.nodes.stop_broker(node)
        cluster.nodes.start_broker(node, timeout_seconds=300)  # see the broker-loss drill's restart
        cluster.nodes.wait_until_in_sync()
        took.append(time.monotonic() - started)
    return f"{len(took)} nodes restarted, {', '.join(f'{t:.0f}' for t in took)} s each"


def _cut_off(toxiproxy: Toxiproxy, cluster: KafkaCluster, role: str, run: MirrorRun) -> str:
    """Every broker's link of `cluster` drops all bytes for PARTITION_SECONDS, `mirror run` riding
    it out; then its two lines (stopped answering, answers again) and no line of the other side."""
    first_line = len(run.output().splitlines())
    cut: list[Proxy] = []
    try:
        for proxy in cluster.proxies:
            toxiproxy.black_hole(proxy, on=True)
            cut.append(proxy)
        with pytest.raises(subprocess.TimeoutExpired):  # mirror waits it out
            run.wait(timeout=PARTITION_SECONDS)
    finally:
        for proxy in cut:
            toxiproxy.black_hole(proxy, on=False)
    who = f"the {role} cluster {cluster.alias}"
    assert_eventually(partial(_said, run, first_line, f"{who} answers again"), timeout=60, interval=1)
    lines = run.output().splitlines()[first_line:]
    silent = [line for line in lines if f"{who} has not answered" in line]
    again = [line for line in lines if f"{who} answers again" in line]
    others = [
        line for line in lines if ("has not answered" in line or "answers again" in line) and who not in line
    ]
    assert len(silent) == 1 and len(again) == 1 and others == [], (silent, again, others)
    assert "warning:" in silent[0] and "the copy waits for it" in silent[0], silent[0]
    return f"said: {silent[0]} / {again[0]}"


def _kill_controller(cluster: KafkaCluster) -> str:
    """SIGKILL the quorum's leader (every node is a controller and a broker), then start it again."""
    return _down_for(cluster, _active_controller(cluster), 0) + " (the active controller)"


def _active_controller(cluster: KafkaCluster) -> int:
    """The quorum's leader, as Kafka's metadata-quorum tool reports it."""
    result = _quorum_status(cluster, "--status")
    leader = re.search(r"LeaderId:\s+(\d+)", result.stdout)
    assert result.returncode == 0 and leader, result.stdout + result.stderr
    return int(leader.group(1))


def _down_for(cluster: KafkaCluster, node: int, seconds: float) -> str:
    """SIGKILL `node`, leave it down `seconds`, start it and wait until every replica is in sync."""
    assert cluster.nodes is not None
    cluster.nodes.kill_broker(node)
    time.sleep(seconds)
    started = time.monotonic()
    cluster.nodes.start_broker(node, timeout_seconds=300)  # see the broker-loss drill's restart
    cluster.nodes.wait_until_in_sync()
    back = time.monotonic() - started
    return f"node {node} of {cluster.alias} killed, down {seconds:g} s, in sync {back:.0f} s after its start"


def _move_leaders(cluster: KafkaCluster, topics: list[str], work: Path) -> str:
    """Each partition's replicas reordered so that an in-sync replica other than its leader comes
    first (the same replicas: nothing is copied between brokers), then a preferred leader election
    of those partitions: every leader moves to another broker, which is checked."""
    assert cluster.libs is not None, "Kafka's reassignment tool comes from the jars"
    metadata = AdminClient(cluster.properties()).list_topics(timeout=30)
    leaders: dict[tuple[str, int], int] = {}
    moves = []
    for topic in topics:
        for p, info in metadata.topics[topic].partitions.items():
            new = next(r for r in info.replicas if r != info.leader and r in info.isrs)
            leaders[(topic, p)] = new
            moves.append(
                {"topic": topic, "partition": p, "replicas": [new, *(r for r in info.replicas if r != new)]}
            )
    plan = work / f"reassign-{cluster.alias}-{time.monotonic_ns()}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": moves}), encoding="utf-8")

    def reassign(action: str) -> str:
        command = [
            "java", "-cp", str(cluster.libs / "*"),
            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
            "--bootstrap-server", cluster.bootstrap_servers, "--reassignment-json-file", str(plan), action,
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    reassign("--execute")

    def completed() -> None:  # --verify exits 0 while a reassignment is still in progress
        said = reassign("--verify")
        assert said.count("is complete") >= len(moves), said[-2000:]  # "is complete(d)."

    assert_eventually(completed, timeout=120, interval=2)
    admin = AdminClient(cluster.properties())
    outcome = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, p) for t, p in leaders]).result(
        timeout=60
    )
    assert [f"{tp.topic}-{tp.partition}: {e}" for tp, e in outcome.items() if e is not None] == []

    def moved() -> None:
        now = AdminClient(cluster.properties()).list_topics(timeout=30).topics
        stayed = [tp for tp, leader in leaders.items() if now[tp[0]].partitions[tp[1]].leader != leader]
        assert stayed == [], f"{len(stayed)} leaders not moved yet, e.g. {stayed[:3]}"

    assert_eventually(moved, timeout=60, interval=1)
    return f"{len(leaders)} of {len(leaders)} leaders moved"


@pytest.mark.soak
def test_a_minute_of_network_partition_from_either_cluster_is_said_once_and_the_copy_resumes_exactly(
    replicated: list[KafkaCluster], toxiproxy: Toxiproxy, tmp_path: Path, reliability: Record
) -> None:
    """`make soak`: a minute cut off from the target, then from the source (CI cuts the target)."""
    source, target = replicated

    def steps(_: list[str]) -> list[Step]:
        return [
            Step(
                f"a {PARTITION_SECONDS} s network partition between `mirror run` and the {role} (Toxiproxy "
                "dropping every byte of each broker's link)",
                partial(_cut_off, toxiproxy, cluster, role),
                does=CUT_OFF,
            )
            for role, cluster in (("target", target), ("source", source))
        ]

    _steps_under_load(replicated, tmp_path, reliability, "cut", steps)


def _said(run: MirrorRun, from_line: int, text: str) -> None:
    lines = run.output().splitlines()[from_line:]
    assert any(text in line for line in lines), lines[-5:]


def _committed(
    source: KafkaCluster, target: KafkaCluster, topics: list[str], partitions: list[tuple[str, int]]
) -> int:
    """What the flow has committed, asked until the target answers (total_copied says 0 when not)."""

    def answered() -> int:
        copied = total_copied(source, target, topics, partitions=partitions)
        assert copied > 0, "the target did not answer"
        return copied

    return assert_eventually(answered, timeout=120, interval=1)


UNCLEAN_PARTITIONS, UNCLEAN_RECORDS = 4, 400  # records per phase, over the partitions
UNCLEAN_DOES = (
    "finds the source log shorter than its position (the consumer checks the committed leader epoch, "
    "KIP-320), says which offsets the source lost and the target keeps, counts them in "
    "mirror_source_copied_then_lost_records_total, and copies the source's new records from where its "
    "log now ends"
)


@pytest.mark.parametrize("mirror_down", [False, True], ids=["running", "restarted"])
def test_an_unclean_leader_election_on_the_source_is_reported_and_its_new_records_copied_once(
    replicated: list[KafkaCluster], tmp_path: Path, reliability: Record, mirror_down: bool
) -> None:
    """A source partition's only in-sync replica lost after `mirror` copied its last records, and a
    replica that lacked them elected leader (unclean.leader.election.enable): the source log now ends
    below the flow's position, and the records it takes next reuse the lost offsets. They must be
    copied, none skipped as if copied and none of the older records copied twice, and the loss said
    once per partition and counted. `running`: `mirror run` copies through it, and its consumer
    checks its position against the new leader (librdkafka, KIP-320); `restarted`: it is stopped
    before and started after, so the check comes from the epoch committed with the position."""
    source, target = replicated
    assert source.nodes is not None
    # The topic's two replicas are on the nodes other than the active controller: killing the
    # follower first is then a broker loss the controller sees, not an election of a new
    # controller, which on two busy cores took 22 s in a local run (and likely the 120 s a CI run
    # waited for the ISR to shrink).
    controller = _active_controller(source)
    leader, follower = sorted(node for node in source.nodes.brokers if node != controller)[:2]
    topic = f"unclean-{'restarted' if mirror_down else 'running'}-{time.monotonic_ns() % 10**6}"
    admin = admin_client(source.properties())  # its election waits on a dead broker: ADMIN_CONNECTIONS
    new = NewTopic(
        topic,
        num_partitions=UNCLEAN_PARTITIONS,
        replica_assignment=[[leader, follower]] * UNCLEAN_PARTITIONS,
        config={"unclean.leader.election.enable": "true", "min.insync.replicas": "1"},
    )
    admin.create_topics([new], operation_timeout=60)[topic].result(timeout=60)
    _produce_phase(source, topic, "copied")
    config = write_config(tmp_path, source, target, [topic])
    port = yaml.safe_load(config.read_text())["metrics"]["port"]
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source, target, [topic], run)
        source.nodes.kill_broker(follower)
        _wait_for_partitions(source, topic, lambda p: p.isrs == [leader], "the follower out of the ISR")
        _produce_phase(source, topic, "lost")  # on the leader alone
        wait_until_caught_up(source, target, [topic], run)
        copied = read_topic(source.bootstrap_servers, topic)
        if mirror_down:
            assert run.stop() == 0, run.output()[-3000:]
        source.nodes.kill_broker(leader)
        source.nodes.broker(follower).start()
        source.nodes.broker(follower).wait_until_ready(300)
        # The controller elects the follower by itself, as the topic allows an unclean election;
        # asked too, as kafka-leader-election --election-type unclean does ("not needed" once done).
        # The answer does not matter, the metadata checked next does: in a CI run it never came
        # (TimeoutError after 60 s), likely sent to the broker just killed, which the client's
        # metadata still named controller (the controller test below waits the same way).
        elections = admin.elect_leaders(
            ElectionType.UNCLEAN, [TopicPartition(topic, p) for p in range(UNCLEAN_PARTITIONS)]
        )
        with contextlib.suppress(KafkaException, TimeoutError):
            elections.result(timeout=60)
        _wait_for_partitions(source, topic, lambda p: p.leader == follower, "the follower elected")
        _produce_phase(source, topic, "new")  # at offsets the lost records had
        if mirror_down:
            run = MirrorRun(config, tmp_path / "run.log")
        source.nodes.start_broker(leader, timeout_seconds=300)
        source.nodes.wait_until_in_sync()
        now = read_topic(source.bootstrap_servers, topic)
        # The target keeps what it copied; after it come the records the source took since.
        kept = {p: len(_common_prefix(copied[p], now[p])) for p in now}
        expected = {p: copied[p] + now[p][kept[p] :] for p in now}
        lost = sum(len(copied[p]) - kept[p] for p in now)
        assert lost > 0 and all(len(now[p]) > kept[p] for p in now), (kept, lost)
        remote = f"A.{topic}"

        def copied_all() -> None:
            assert_alive(run)
            ends = {p: len(records) for p, records in read_topic(target.bootstrap_servers, remote).items()}
            assert ends == {p: len(records) for p, records in expected.items()}, ends

        try:
            assert_eventually(copied_all, timeout=180, interval=2)
        except AssertionError as exc:
            # What the copy tasks checked and found is the story of a failure here.
            told = [line for line in run.output().splitlines() if "KIP-320" in line or "unclean" in line]
            raise AssertionError(f"{exc}; the run said: {told[-12:]}") from exc
        counted = _metric_sum(port, "mirror_source_copied_then_lost_records_total", topic)
        exit_code = run.stop()
    finally:
        run.cleanup()
    comparison = compare_records(expected, read_topic(target.bootstrap_servers, remote))
    said = [line for line in run.output().splitlines() if "unclean leader election" in line and topic in line]
    said_for = {p for p in now if any(f"{topic}-{p}:" in line for line in said)}
    reliability(
        "fault",
        f"Unclean leader election on the source after the lost records were copied ({UNCLEAN_PARTITIONS} "
        f"partitions, RF 2, mirror {'stopped and started again' if mirror_down else 'running'})",
        does=UNCLEAN_DOES,
        comparison=comparison,
        shown=f"{lost} offsets lost on the source, kept on the target; said for {len(said_for)} partitions; "
        f"counted {counted:g}; exit {exit_code}",
    )
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact, comparison
    assert said_for == set(now), said[:4]
    assert counted == lost


def _produce_phase(cluster: KafkaCluster, topic: str, phase: str) -> None:
    """UNCLEAN_RECORDS records spread over the partitions, each value naming its phase."""
    producer = Producer(cluster.properties(acks="all"))
    for n in range(UNCLEAN_RECORDS):
        value, key = f"{phase}-{n}".encode(), str(n).encode()
        producer.produce(topic, value, key=key, partition=n % UNCLEAN_PARTITIONS)
    assert producer.flush(60) == 0


def _wait_for_partitions(cluster: KafkaCluster, topic: str, holds: Callable[[Any], bool], what: str) -> None:
    """Until every partition of `topic` holds; both waits are the controller's work (fencing the
    killed node shrinks the ISR; the election), so a failure says how the quorum stood."""
    admin = AdminClient({**cluster.properties(), "log_level": "0"})

    def held() -> None:
        try:
            metadata = admin.list_topics(topic, timeout=10)
        except KafkaException as exc:
            # Asked of the broker just killed, the request times out until the client gives up on
            # it (a CI run failed here, not in what the test checks): not yet, rather than a failure.
            raise AssertionError(f"waiting for {what}: metadata not answered ({exc})") from exc
        partitions = metadata.topics[topic].partitions.values()
        states = [(p.leader, p.isrs) for p in partitions]
        assert all(holds(p) for p in partitions), f"waiting for {what}: (leader, ISR) {states}"

    try:
        assert_eventually(held, timeout=MOVE_SECONDS, interval=0.5)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc} after {MOVE_SECONDS} s (the test bed's controller, not mirror)\n"
            + _quorum_diagnosis(cluster)
        ) from exc


def _common_prefix(first: list[Any], second: list[Any]) -> list[Any]:
    return list(itertools.takewhile(lambda pair: pair[0] == pair[1], zip(first, second, strict=False)))


def _metric_sum(port: int, name: str, topic: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") and f'topic="{topic}"' in line
    )


def _described(admin: AdminClient, topic: str) -> dict[str, str | None]:
    """The topic's ID once the broker asked knows the topic. A topic just created reaches each
    broker's metadata a moment later, and a broker that has not got it yet answers that it does not
    exist (a copy task opening waits for it: mirror.source.start); no answer at all raises."""
    described = topic_ids(admin, [topic], what="target cluster B")
    assert list(described) == [topic] and described[topic], described
    return described


def test_a_topic_is_created_and_described_though_the_broker_named_controller_was_killed_a_moment_before(
    replicated: list[KafkaCluster], reliability: Record
) -> None:
    """librdkafka sends CreateTopics and DescribeTopics to the broker its metadata named controller
    and waits for it: with that broker just SIGKILLed, `mirror run` used to exit at start-up
    ("creating topic heartbeats: no answer within 30 s", 4 times in 5 by hand), and a copy task
    reopening after a fault asked for its topics' IDs again and again, copying nothing until the
    broker came back, though two brokers of three were up."""
    target = replicated[1]
    assert target.nodes is not None
    creator, describer = admin_client(target.properties()), admin_client(target.properties())
    victim = creator.list_topics(timeout=30).controller_id
    # Under KRaft each answer names a live broker at random: ask until both clients name the victim.
    for _ in range(60):
        if describer.list_topics(timeout=30).controller_id == victim:
            break
    else:
        pytest.fail(f"the describing client's metadata never named broker {victim} controller")
    topic = f"created-after-kill-{time.monotonic_ns() % 10**6}"
    target.nodes.kill_broker(victim)  # every_node_up starts it again before any later test
    began = time.monotonic()
    created = create_topics(creator, [(topic, 3, {})], replication_factor=2)
    took = time.monotonic() - began
    began = time.monotonic()
    described = assert_eventually(partial(_described, describer, topic), timeout=30)
    took_ids = time.monotonic() - began
    reliability(
        "fault",
        "The broker the admin client's metadata names controller SIGKILLed just before a topic is "
        "created and described (start-up: the internal topics; a copy task opening: its topics' IDs; "
        "RF 3, min ISR 2)",
        does="a request unanswered (create: 5 s; describe: 10 s) asks for fresh metadata, which names a "
        "live broker, and is sent again",
        shown=f"created {created} in {took:.1f} s, described in {took_ids:.1f} s",
    )
    # [] when a try left unanswered did create it: the next one was told it exists.
    assert created in ([topic], [])
    assert len(creator.list_topics(topic, timeout=30).topics[topic].partitions) == 3
    assert list(described) == [topic] and described[topic]


def test_an_admin_request_waiting_on_a_broker_just_killed_leaves_the_cpu_idle(
    replicated: list[KafkaCluster], reliability: Record
) -> None:
    """librdkafka (2.16) with sparse connections, its default, spins while an admin request waits
    for a broker that is down: every failed connect wakes the request, which asks for a connection
    at once. One request kept a core busy until its timeout; in a CI run of the broker-loss drill
    every process of the run (and the test's own sampler) did so, the two-core machine starved both
    clusters, and the copy stopped for a minute. mirror's admin clients keep a connection to every
    broker (ADMIN_CONNECTIONS), whose reconnects back off. Last in the module: the node it kills
    need not be started again."""
    source = replicated[0]
    assert source.nodes is not None
    admin = admin_client(source.properties())
    # The broker killed is one this client's metadata names, so the request goes to it too.
    victim = max(admin.list_topics(timeout=30).brokers)
    source.nodes.kill_broker(victim)
    # A request made before the client has read the dead broker's closed socket is written to that
    # socket and fails at once with a transport error (0.01 s in one CI run): nothing waited, so
    # nothing was measured. The next request finds the broker down and waits for it.
    tries = 0
    while tries < 3:
        tries += 1
        began, cpu_began = time.monotonic(), time.process_time()
        # ListGroups goes to every broker the metadata names: it waits for the dead one until its timeout.
        listed = admin.list_consumer_groups(request_timeout=5)
        with contextlib.suppress(KafkaException):
            listed.result(timeout=30)
        waited = time.monotonic() - began
        # This process's CPU meanwhile, its librdkafka threads included (nothing else runs in it now).
        cpu = time.process_time() - cpu_began
        if waited > 3:
            break
    reliability(
        "fault",
        "A broker SIGKILLed just before an admin request that goes to every broker (RF 3, min ISR 2)",
        does="the request waits for the dead broker until its timeout, with the CPU idle",
        shown=f"waited {waited:.1f} s, using {cpu:.2f} s of CPU (request {tries})",
    )
    assert waited > 3, f"the request did not wait for broker {victim} ({waited:.1f} s): nothing was measured"
    # Spinning, the client used about as much CPU as it waited (4.7 s in 5 s, by hand).
    assert cpu < 0.25 * waited, f"the admin client used {cpu:.1f} s of CPU in {waited:.1f} s of waiting"

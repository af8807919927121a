"""`mirror run` as a real process in tests: config files, start, SIGKILL, SIGTERM, waiting on positions."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from mirror.kafka.clients import admin_client
from mirror.local.ports import free_port
from mirror.spark.jvm import class_archive
from tests.helpers import assert_eventually, retrying
from tests.kafka_backends import KafkaCluster

T = TypeVar("T")


def write_config(
    directory: Path,
    source: KafkaCluster,
    target: KafkaCluster,
    topics: list[str],
    *,
    name: str = "mm2.yaml",
    clusters: Mapping[str, Mapping[str, Any]] | None = None,
    spark: Mapping[str, Any] | None = None,
    logging: Mapping[str, str] | None = None,
    **flow: Any,
) -> Path:
    """An mm2.yaml with one flow source->target; `clusters` adds keys per alias (properties, ...),
    `spark` keys of the spark section (epoch_seconds, ...), `logging` levels per logger."""
    extra = clusters or {}
    config = {
        "clusters": {
            cluster.alias: {"bootstrap_servers": cluster.bootstrap_servers, **extra.get(cluster.alias, {})}
            for cluster in (source, target)
        },
        "flows": {
            f"{source.alias}->{target.alias}": {
                "topics": topics,
                "refresh_topics_interval_seconds": 2,
                # Groups a test creates after the start get their first checkpoint within seconds,
                # not after the 10 s default.
                "refresh_groups_interval_seconds": 2,
                **flow,
            }
        },
        "spark": {"master": "local[2]", "checkpoint_dir": str(directory / "state"), **(spark or {})},
        "metrics": {"port": free_port()},
    }
    if logging:
        config["logging"] = dict(logging)
    path = directory / name
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


class MirrorRun:
    """One `mirror run` process; its output goes to a log file the test can show on failure."""

    def __init__(
        self, config: Path, log: Path, *, build: Path | None = None, options: tuple[str, ...] = ()
    ) -> None:
        """`build`: a directory holding another build's `mirror` package to run instead of this
        checkout's (its Spark workers import it too: they inherit PYTHONPATH). `options`: more
        `mirror run` options, such as ("--log-format", "json")."""
        self.log = log
        handle = log.open("ab")
        env = {**os.environ, "PYTHONPATH": str(build)} if build is not None else None
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mirror", "run", *options, str(config)],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            cwd=build,
        )
        handle.close()

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON log lines of a run started with --log-format json (anything else skipped)."""
        records = []
        for line in self.output().splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    records.append(record)
        return records

    def errors(self) -> list[str]:
        """The one-line errors the run printed (`mirror: ...`)."""
        return [line for line in self.output().splitlines() if line.startswith("mirror: ")]

    def kill(self) -> None:
        """SIGKILL the mirror process only: its Spark JVM and workers die after it, as in a crash."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout: float = 120) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def cleanup(self) -> None:
        """Whatever the test did, leave no process of this run behind."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        archive = class_archive()
        if self.process.returncode >= 0 and archive is not None and not archive.exists():
            # After a run that ended by itself, the Spark JVM writes the class archive later runs
            # start from (mirror.spark.jvm) as it exits, a moment after the driver: killed then,
            # as the runs of a CI were, it left none, and each run loaded Spark's classes anew.
            # A run killed stays a crash: what it left behind dies at once.
            _wait_for_group_to_end(self.process.pid, timeout=ARCHIVE_WRITE_SECONDS)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


ARCHIVE_WRITE_SECONDS = 30.0


def _wait_for_group_to_end(group: int, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.2)


def source_ends(source: KafkaCluster, topics: list[str]) -> dict[tuple[str, int], int]:
    """Last stable offset of every partition of `topics` on the source, in one ListOffsets
    request per leader (asked again while a leader moves)."""
    admin = admin_client(source.properties())  # connections to every broker: see ADMIN_CONNECTIONS
    partitions = source_partitions(source, topics)

    def ask() -> dict[tuple[str, int], int]:
        futures = admin.list_offsets(
            {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions},
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=30,
        )
        ends = {(tp.topic, tp.partition): int(future.result().offset) for tp, future in futures.items()}
        if any(end < 0 for end in ends.values()):
            # librdkafka answers -1 without an error when the request to a lost leader failed.
            raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE))
        return ends

    return retrying(ask)


def source_partitions(source: KafkaCluster, topics: list[str]) -> list[tuple[str, int]]:
    """Every partition of `topics` on the source (callers poll with the list). Asked again until
    every topic is there: a broker of a replicated cluster may not know a topic just created yet."""
    admin = admin_client(source.properties())
    deadline = time.monotonic() + 30
    while True:
        metadata = admin.list_topics(timeout=30)
        missing = [topic for topic in topics if topic not in metadata.topics]
        if not missing:
            return [(topic, p) for topic in topics for p in metadata.topics[topic].partitions]
        if time.monotonic() > deadline:
            raise AssertionError(f"{source.alias} does not know {missing[:3]} 30 s after they were made")
        time.sleep(0.2)


def committed_positions(
    target: KafkaCluster, remote: dict[tuple[str, int], tuple[str, int]], group_flow: str = "A-B"
) -> dict[tuple[str, int], int]:
    """The flow's positions group on the target, keyed by source partition."""
    reader = Consumer(
        target.properties(
            **{"group.id": f"__mirror-positions.{group_flow}", "isolation.level": "read_committed"}
        )
    )
    try:
        result = reader.committed([TopicPartition(t, p) for t, p in remote.values()], timeout=30)
    finally:
        reader.close()
    by_remote = {(tp.topic, tp.partition): tp.offset for tp in result}
    return {source_tp: by_remote[remote_tp] for source_tp, remote_tp in remote.items()}


def total_copied(
    source: KafkaCluster,
    target: KafkaCluster,
    topics: list[str],
    remote_prefix: str = "A.",
    partitions: list[tuple[str, int]] | None = None,
) -> int:
    """Sum of the flow's committed source positions over `topics` (0 before anything is committed).
    Given `partitions`, it asks only the target (a caller sampling through a source outage)."""
    partitions = partitions if partitions is not None else source_partitions(source, topics)
    try:
        positions = committed_positions(target, {(t, p): (f"{remote_prefix}{t}", p) for t, p in partitions})
    except Exception:  # noqa: BLE001 - remote topics may not exist yet
        return 0
    return sum(max(0, offset) for offset in positions.values())


def wait_until_copying(
    source: KafkaCluster,
    target: KafkaCluster,
    topics: list[str],
    run: MirrorRun,
    *,
    more: int = 1,
    timeout: float = 120,
) -> None:
    """Return once this run has committed `more` records: it is past start-up, in the middle of copying."""
    # The partitions listed once, not at every poll: the polls span a Spark start-up on a busy
    # machine, and a client made to list a cluster five times a second costs its cores.
    partitions = source_partitions(source, topics)
    before = total_copied(source, target, topics, partitions=partitions)

    def copying() -> None:
        assert_alive(run)
        copied = total_copied(source, target, topics, partitions=partitions) - before
        assert copied >= more, f"{copied} of {more} records copied so far:\n{run.output()[-3000:]}"

    assert_eventually(copying, timeout=timeout, interval=0.5)


def wait_until_caught_up(
    source: KafkaCluster,
    target: KafkaCluster,
    topics: list[str],
    run: MirrorRun,
    *,
    remote_prefix: str | None = None,
    group_flow: str | None = None,
    timeout: float = 300,
) -> None:
    """Wait until the flow source->target has committed every partition of `topics` to its end;
    remote topics are `<source alias>.<topic>` unless `remote_prefix` says otherwise."""
    remote_prefix = f"{source.alias}." if remote_prefix is None else remote_prefix
    group_flow = group_flow or f"{source.alias}-{target.alias}"
    ends = source_ends(source, topics)
    remote = {(t, p): (f"{remote_prefix}{t}", p) for t, p in ends}

    def caught_up() -> None:
        assert_alive(run)
        try:
            positions = committed_positions(target, remote, group_flow)
        except Exception:  # noqa: BLE001 - remote topics may not exist yet
            positions = {}
        behind = {tp: positions.get(tp, -1) for tp, end in ends.items() if positions.get(tp, -1) < end}
        assert not behind, f"not caught up: {behind} < {ends}\n{run.output()[-3000:]}"

    assert_eventually(caught_up, timeout=timeout, interval=1)


def assert_alive(run: MirrorRun) -> None:
    """Fail at once (not an AssertionError, which assert_eventually would retry) if the run ended."""
    if run.process.poll() is not None:
        pytest.fail(f"mirror run exited with {run.process.returncode}:\n{run.output()[-3000:]}")


def replicate_until_caught_up(
    config: Path,
    log: Path,
    source: KafkaCluster,
    target: KafkaCluster,
    topics: list[str],
    *,
    timeout: float = 300,
) -> MirrorRun:
    """Run `mirror run` until the target holds everything `topics` had, then stop it cleanly (exit 0)."""
    run = MirrorRun(config, log)
    try:
        wait_until_caught_up(source, target, topics, run, timeout=timeout)
        exit_code = run.stop()
        assert exit_code == 0, f"exit code {exit_code}:\n{run.output()[-3000:]}"
    finally:
        run.cleanup()
    return run

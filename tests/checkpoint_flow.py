"""A running A->B flow for checkpoint tests: groups moved from A to B through its checkpoints."""

from __future__ import annotations

import dataclasses
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from mirror.client import MirrorClient
from mirror.errors import WireFormatError
from mirror.flow.tail import PartitionTail
from mirror.kafka.wire import Checkpoint, OffsetSync
from tests.groups import committed, consume_and_commit, produce, resume
from tests.helpers import assert_eventually, create_topic
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, write_config

OFFSET_LAG_MAX = 100  # the flow's default: a sync at least every 101 records


class Flow:
    """The module's running A->B flow: topics and groups named `<prefix>...` are its own."""

    def __init__(
        self,
        source: KafkaCluster,
        target: KafkaCluster,
        directory: Path,
        *,
        aliases: tuple[str, str] | None = None,
        **settings: Any,
    ) -> None:
        """`aliases`: cluster aliases of its own instead of A and B, so that the flow's internal topics,
        positions group and transactional ids are its own too. `settings`: more keys of the flow
        (exactly_once, offset_syncs_topic_location, ...)."""
        if aliases is not None:
            source = dataclasses.replace(source, alias=aliases[0])
            target = dataclasses.replace(target, alias=aliases[1])
        self.source, self.target = source, target
        self.prefix = f"ckpt-{uuid.uuid4().hex[:6]}-"
        self.config = write_config(
            directory,
            source,
            target,
            [f"{self.prefix}.*"],
            groups=[f"{self.prefix}.*"],
            emit_checkpoints_interval_seconds=1,
            sync_group_offsets_interval_seconds=1,
            **settings,
        )
        self.started = time.time()  # what this run writes is stamped after this
        self.run = MirrorRun(self.config, directory / "run.log")

    def name(self, what: str) -> str:
        return f"{self.prefix}{what}"

    def remote(self, topic: str) -> str:
        """`topic`'s copy on the target (the default policy)."""
        return f"{self.source.alias}.{topic}"

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the run's samples `name` whose labels include `labels` (0 if none yet)."""
        port = yaml.safe_load(self.config.read_text(encoding="utf-8"))["metrics"]["port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode("utf-8")
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )

    def client(self) -> MirrorClient:
        return MirrorClient.from_config(self.config, self.target.alias)

    def moved_group(self, what: str, records: list[bytes], consumed: int) -> tuple[str, str]:
        """Topic `what` holding `records` on A, and a group that consumed the first `consumed` of
        them there; returns (topic, group) once B holds the group's translated position."""
        topic, group = self.name(what), self.name(f"{what}-group")
        create_topic(self.source.bootstrap_servers, topic, security=self.source.security)
        produce(self.source, topic, records)
        position = consume_and_commit(self.source, group, topic, 0, consumed)
        self.wait_until_copied(topic)
        self.wait_until_synced(group, topic, upstream=position)
        return topic, group

    def assert_a_caught_up_group_re_reads_nothing(self, what: str, old: int, new: int) -> str:
        """A group that consumed all `old` records on A moves to B and reads exactly the `new` ones
        written afterwards; returns the topic."""
        topic, group = self.moved_group(what, values("old", 0, old), consumed=old)
        # The group fails over to B; what A gets from now on reaches it through B.
        produce(self.source, topic, values("new", 0, new))
        self.wait_until_copied(topic)
        read = resume(self.target, group, self.remote(topic), expected=new)
        assert read == values("new", 0, new), f"re-read or skipped: got {len(read)} records"
        return topic

    def assert_a_mid_stream_group_skips_nothing(self, what: str, total: int, consumed: int) -> None:
        """A group that consumed `consumed` of `total` records on A resumes on B: nothing skipped,
        in order, and less than one sync interval read again."""
        topic, group = self.moved_group(what, values("r", 0, total), consumed=consumed)
        read = resume(self.target, group, self.remote(topic), expected=total - consumed)
        unread = values("r", consumed, total)
        re_read = len(read) - len(unread)
        assert read[re_read:] == unread, "the group skipped records or read them out of order"
        assert read[:re_read] == values("r", consumed - re_read, consumed)
        assert 0 <= re_read <= OFFSET_LAG_MAX + 1

    def active_skips(self) -> float:
        """Group syncs the run left out so far because the group had members on B (its metric)."""
        return self.metric("mirror_group_offset_syncs_total", outcome="active")

    def wait_until_copied(self, topic: str) -> None:
        wait_until_caught_up(self.source, self.target, [topic], self.run)

    def wait_until_synced(self, group: str, topic: str, upstream: int, partition: int = 0) -> int:
        """Wait until B's `group` holds the checkpoint of upstream offset `upstream`; returns it.
        One read of the checkpoints topic names both offsets: read twice, a round in between
        paired the downstream offset of one checkpoint with the upstream offset of the next."""
        remote = self.remote(topic)

        def synced() -> int:
            assert self.run.process.poll() is None, self.run.output()[-3000:]
            checkpoint = self.newest_checkpoint(group, remote, partition)
            assert checkpoint is not None, f"no checkpoint yet for {group}"
            assert checkpoint.upstream_offset == upstream, f"newest checkpoint {checkpoint}"
            on_target = committed(self.target, group, remote, partition + 1).get(partition)
            assert on_target == checkpoint.downstream_offset, f"target group at {on_target}, {checkpoint}"
            return checkpoint.downstream_offset

        return assert_eventually(synced, timeout=120, interval=0.5)

    def checkpoint_upstream(self, group: str, topic: str, partition: int) -> int | None:
        """The upstream offset of the newest checkpoint of `group` for remote `topic`-`partition`."""
        checkpoint = self.newest_checkpoint(group, topic, partition)
        return None if checkpoint is None else checkpoint.upstream_offset

    def newest_checkpoint(self, group: str, topic: str, partition: int) -> Checkpoint | None:
        """The newest checkpoint of `group` for remote `topic`-`partition`, None if none."""
        tail = PartitionTail(self.target.properties(), f"{self.source.alias}.checkpoints.internal")
        try:
            newest = None
            for record in tail.catch_up():
                try:
                    checkpoint = Checkpoint.decode(record.key, record.value)
                except WireFormatError:
                    continue  # a test may have written records that are not checkpoints
                if (checkpoint.group, checkpoint.topic, checkpoint.partition) == (group, topic, partition):
                    newest = checkpoint
            return newest
        finally:
            tail.close()


def values(prefix: str, start: int, stop: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(start, stop)]


def offset_syncs_of(cluster: KafkaCluster, syncs_topic: str, topic: str) -> list[OffsetSync]:
    """The OffsetSyncs of `topic` in `syncs_topic` on `cluster` (none if that topic does not exist)."""
    if syncs_topic not in AdminClient(cluster.properties()).list_topics(timeout=30).topics:
        return []
    tail = PartitionTail(cluster.properties(), syncs_topic)
    try:
        decoded = (OffsetSync.decode(record.key, record.value) for record in tail.catch_up())
        return [sync for sync in decoded if sync.topic == topic]
    finally:
        tail.close()

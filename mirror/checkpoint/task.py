"""The checkpoint task (MM2's MirrorCheckpointTask): translate group offsets, emit checkpoints, sync groups.

Runs on Spark executors, one round per micro-batch of the flow's checkpoint query. A round:
  1. takes the flow's checkpoint transactional id (fencing any older writer of checkpoints);
  2. catches up on the checkpoints topic (the state: what was emitted last, per group and
     partition) and then on the offset-syncs topic (the translation store);
  3. lists the selected source groups' committed offsets and translates them;
  4. emits, in one transaction, the checkpoints that move a group forward plus their records in
     the component's own offsets topic;
  5. every sync_group_offsets interval, writes the checkpoints into target groups without members.

State lives in Kafka, so any worker can run any round: the per-worker caches only save re-reading.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from mirror.checkpoint.checkpoints import CheckpointStore, plan_group_sync
from mirror.checkpoint.sync_store import OffsetSyncStore
from mirror.config.flow_settings import FlowSettings
from mirror.errors import KafkaClientError, MirrorError, ProducerFencedError, WireFormatError
from mirror.flow.ownership import flow_mark_reader, stop_if_flow_taken_over
from mirror.flow.source_offsets import FIXED_OFFSET, encode_checkpoint_key, encode_value
from mirror.flow.tail import PartitionTail
from mirror.kafka.clients import admin_client
from mirror.kafka.group_admin import (
    CommittedOffset,
    alter_group_offsets,
    group_offsets,
    groups_with_members,
    list_group_ids,
)
from mirror.kafka.offsets import last_stable_offsets
from mirror.kafka.transactions import (
    AbortableError,
    RetriableError,
    abort_quietly,
    call,
    commit,
    small_writer,
)
from mirror.kafka.wire import Checkpoint, OffsetSync
from mirror.policy import should_replicate_topic

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_ATTEMPTS = 6
TRANSACTION_TIMEOUT_MS = "60000"


@dataclass
class CheckpointRow:
    """One translated partition of one group (kind "checkpoint"), or one group's sync (kind "group")."""

    kind: str
    group: str
    topic: str = ""
    partition: int = -1
    upstream: int = -1
    downstream: int = -1
    remote_end: int = -1
    emitted: bool = False
    # Checkpoint rows: when the group's source offsets were listed (epoch seconds), and how long
    # until their checkpoints were committed (or confirmed unchanged) on the target.
    listed_at: float = 0.0
    round_seconds: float = 0.0
    # Group rows: "synced", "active", "unchanged" or "failed"; partitions written.
    # Skipped rows (kind "skipped"): `topic` is the internal topic, `partitions` how many of its
    # records did not decode and were left out.
    outcome: str = ""
    partitions: int = 0


@dataclass
class _FlowState:
    """One flow's translation state in this worker, rebuilt from Kafka whenever it is lost."""

    settings: FlowSettings
    sync_tail: PartitionTail
    checkpoint_tail: PartitionTail
    syncs: OffsetSyncStore = field(default_factory=OffsetSyncStore)
    checkpoints: CheckpointStore = field(default_factory=CheckpointStore)
    groups: list[str] = field(default_factory=list)
    groups_listed_at: float = -math.inf
    groups_synced_at: float = -math.inf
    producer: Producer | None = None
    selected: dict[str, bool] = field(default_factory=dict)
    # Records of the internal topics that did not decode since the last round reported them.
    skipped: dict[str, int] = field(default_factory=dict)

    def catch_up(self) -> None:
        # Checkpoints first: with them restored, the syncs' full history may be used (KAFKA-15905).
        for record in self._decodable(self.checkpoint_tail, Checkpoint.decode):
            self.checkpoints.restore(record)
        for sync in self._decodable(self.sync_tail, OffsetSync.decode):
            self.syncs.add(sync)
        self.syncs.mark_loaded()

    def _decodable(self, tail: PartitionTail, decode: Callable[[bytes | None, bytes | None], T]) -> list[T]:
        """What is new in `tail`, decoded. Records that do not decode (written by hand, or by a
        tool that got the format wrong) are skipped as MM2 skips them, but counted and logged:
        a checkpoint lost this way is a group that fails over to an older position."""
        decoded: list[T] = []
        first: tuple[int, WireFormatError] | None = None
        skipped = 0
        for record in tail.catch_up():
            try:
                decoded.append(decode(record.key, record.value))
            except WireFormatError as exc:
                skipped += 1
                first = first or (record.offset, exc)
        if first is not None:
            self.skipped[tail.topic] = self.skipped.get(tail.topic, 0) + skipped
            log.warning(
                "flow %s: skipped %d records of %s that do not decode; the first, at offset %d: %s",
                self.settings.name,
                skipped,
                tail.topic,
                first[0],
                first[1],
            )
        return decoded

    def is_selected(self, topic: str) -> bool:
        if topic not in self.selected:
            s = self.settings
            self.selected[topic] = should_replicate_topic(
                topic,
                topic_filter=s.topic_filter(),
                policy=s.policy(),
                target_alias=s.target,
                heartbeats_replication_enabled=s.heartbeats_replication,
            )
        return self.selected[topic]


_STATES: dict[str, _FlowState] = {}
_ADMINS: dict[tuple[str, str], AdminClient] = {}
_LEASE_READERS: dict[str, Consumer] = {}


def _state(settings: FlowSettings) -> _FlowState:
    state = _STATES.get(settings.name)
    if state is None:
        syncs_reader = (
            settings.target_consumer
            if settings.offset_syncs_location == "target"
            else settings.source_consumer
        )
        state = _FlowState(
            settings,
            sync_tail=PartitionTail(syncs_reader, settings.offset_syncs_topic()),
            checkpoint_tail=PartitionTail(settings.target_consumer, settings.checkpoints_topic()),
        )
        _STATES[settings.name] = state
    return state


def _drop_state(settings: FlowSettings) -> None:
    state = _STATES.pop(settings.name, None)
    if state is not None:
        state.sync_tail.close()
        state.checkpoint_tail.close()
        if state.producer is not None:
            state.producer.purge(in_queue=True, in_flight=True)


def _admin(settings: FlowSettings, side: str) -> AdminClient:
    key = (settings.name, side)
    if key not in _ADMINS:
        _ADMINS[key] = admin_client(settings.source_admin if side == "source" else settings.target_admin)
    return _ADMINS[key]


def _writer(state: _FlowState) -> Producer:
    if state.producer is None:
        s = state.settings
        # Initialising fences an older writer of checkpoints and ends its open transaction, so
        # the catch-up that follows sees every checkpoint committed before ours.
        state.producer = small_writer(
            s.target_producer,
            s.checkpoint_transactional_id() if s.exactly_once else None,
            timeout_ms=TRANSACTION_TIMEOUT_MS,
            doing=f"flow {s.name}: initialising the checkpoint writer",
        )
    return state.producer


def run_checkpoint_round(settings: FlowSettings) -> list[CheckpointRow]:
    """One round; safe to repeat, and safe to run on any worker."""
    last: Exception | None = None
    for attempt in range(1, MAX_ATTEMPTS + 1):
        state = _state(settings)
        try:
            return _round(state)
        except ProducerFencedError as exc:
            # Another worker of ours took the id for a later round, or another run took the flow.
            _drop_state(settings)
            reader = _LEASE_READERS.get(settings.name)
            if reader is None:
                reader = _LEASE_READERS[settings.name] = flow_mark_reader(settings)
            stop_if_flow_taken_over(settings, reader)
            last = exc
            continue
        except (AbortableError, RetriableError) as exc:
            log.warning("aborting the round's transaction (attempt %d): %s", attempt, exc)
            if state.producer is not None and not abort_quietly(state.producer):
                _drop_state(settings)
            last = exc
        except MirrorError:
            # Whatever the cause (a cluster away), the next round starts from Kafka again.
            _drop_state(settings)
            raise
        time.sleep(min(0.2 * attempt, 2.0))
    raise KafkaClientError(
        f"flow {settings.name}: a checkpoint round failed {MAX_ATTEMPTS} times; last: {last}"
    )


def _round(state: _FlowState) -> list[CheckpointRow]:
    s = state.settings
    writer = _writer(state)
    state.catch_up()
    source = f"source cluster {s.source}"
    listed_at = time.time()
    committed = group_offsets(_admin(s, "source"), _selected_groups(state), what=source)
    translated = _translate(state, committed)
    news = [checkpoint for checkpoint in translated if state.checkpoints.is_news(checkpoint)]
    if news:
        _emit(state, writer, news, timestamp_ms=int(listed_at * 1000))
        for checkpoint in news:
            state.checkpoints.restore(checkpoint)
    done = time.time()
    log.debug(
        "round: %d group partitions translated, %d checkpoints emitted in %.0f ms",
        len(translated),
        len(news),
        (done - listed_at) * 1000,
    )
    rows = [CheckpointRow("skipped", "", topic, partitions=count) for topic, count in state.skipped.items()]
    state.skipped.clear()
    ends = _remote_ends(state, {(c.topic, c.partition) for c in translated})
    emitted = {(c.group, c.topic, c.partition) for c in news}
    rows += [
        CheckpointRow(
            "checkpoint",
            c.group,
            c.topic,
            c.partition,
            c.upstream_offset,
            c.downstream_offset,
            remote_end=ends.get((c.topic, c.partition), -1),
            emitted=(c.group, c.topic, c.partition) in emitted,
            listed_at=listed_at,
            round_seconds=done - listed_at,
        )
        for c in translated
    ]
    if (
        s.sync_group_offsets
        and time.monotonic() - state.groups_synced_at >= s.sync_group_offsets_interval_seconds
    ):
        rows += _sync_groups(state, ends)
        state.groups_synced_at = time.monotonic()
    return rows


def _selected_groups(state: _FlowState) -> list[str]:
    s = state.settings
    if time.monotonic() - state.groups_listed_at >= s.refresh_groups_interval_seconds:
        group_filter = s.group_filter()
        try:
            listed = list_group_ids(_admin(s, "source"), what=f"source cluster {s.source}")
        except KafkaClientError as exc:
            if math.isinf(state.groups_listed_at):
                raise  # no list yet to go on with
            # A broker that did not answer (down, loading) would leave its groups out: the list
            # from before stands until every broker answers again.
            log.warning("flow %s: %s; keeping the %d groups listed before", s.name, exc, len(state.groups))
            return state.groups
        state.groups = [group for group in listed if group_filter.matches(group)]
        state.groups_listed_at = time.monotonic()
    return state.groups


def _translate(
    state: _FlowState, committed: dict[str, dict[tuple[str, int], CommittedOffset]]
) -> list[Checkpoint]:
    s = state.settings
    checkpoints = []
    for group, offsets in sorted(committed.items()):
        for (topic, partition), offset in sorted(offsets.items()):
            if not state.is_selected(topic):
                continue
            downstream = state.syncs.translate(topic, partition, offset.offset)
            if downstream is None or downstream < 0:
                continue  # no sync for it yet, or the group is older than the kept history
            checkpoints.append(
                Checkpoint(
                    group,
                    s.checkpoint_topic_name(topic),
                    partition,
                    offset.offset,
                    downstream,
                    offset.metadata,
                )
            )
    return checkpoints


def _emit(state: _FlowState, writer: Producer, checkpoints: list[Checkpoint], *, timestamp_ms: int) -> None:
    s = state.settings
    where = f"flow {s.name}: checkpoints"
    if s.exactly_once:
        call(writer.begin_transaction, f"{where}: beginning a transaction")
    try:
        for checkpoint in checkpoints:
            call(
                lambda c=checkpoint: writer.produce(  # type: ignore[misc]
                    s.checkpoints_topic(), key=c.key(), value=c.value(), partition=0, timestamp=timestamp_ms
                ),
                f"{where}: producing",
            )
            call(
                lambda c=checkpoint: writer.produce(  # type: ignore[misc]
                    s.checkpoint_offsets_topic(),
                    key=encode_checkpoint_key(c.group, c.topic, c.partition),
                    value=encode_value(FIXED_OFFSET),
                ),
                f"{where}: producing their offsets",
            )
        if s.exactly_once:
            commit(writer, where)
        else:
            remaining = writer.flush(60)
            if remaining:
                raise RetriableError(f"{where}: {remaining} records not delivered within 60s")
    except BaseException:
        if s.exactly_once:
            abort_quietly(writer)
        raise


def _remote_ends(state: _FlowState, partitions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Last stable offsets of the remote partitions; those that cannot be read are left out."""
    try:
        return last_stable_offsets(_admin(state.settings, "target"), sorted(partitions))
    except KafkaClientError as exc:
        log.warning("flow %s: reading remote partition ends failed: %s", state.settings.name, exc)
        return {}


def _sync_groups(state: _FlowState, ends: dict[tuple[str, int], int]) -> list[CheckpointRow]:
    s = state.settings
    target = f"target cluster {s.target}"
    admin = _admin(s, "target")
    group_filter = s.group_filter()
    groups = [group for group in state.checkpoints.groups() if group_filter.matches(group)]
    if not groups:
        return []
    active = groups_with_members(admin, groups, what=target)
    current = group_offsets(admin, [g for g in groups if g not in active], what=target)
    rows = []
    for group in groups:
        checkpoints = state.checkpoints.for_group(group)
        plan = plan_group_sync(
            group,
            checkpoints,
            active=group in active,
            target_offsets={tp: offset.offset for tp, offset in current.get(group, {}).items()},
            remote_ends={tp: end for tp, end in ends.items() if tp in checkpoints},
        )
        if plan.active:
            rows.append(CheckpointRow("group", group, outcome="active"))
            continue
        if not plan.write:
            rows.append(CheckpointRow("group", group, outcome="unchanged"))
            continue
        try:
            alter_group_offsets(admin, group, plan.write, what=target)
        except KafkaClientError as exc:
            # Typically a consumer joined since the describe; the next interval tries again.
            log.warning("flow %s: group %s not synced: %s", s.name, group, exc)
            rows.append(CheckpointRow("group", group, outcome="failed"))
            continue
        rows.append(CheckpointRow("group", group, outcome="synced", partitions=len(plan.write)))
    return rows

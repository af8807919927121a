"""`mirror status mm2.yaml`: each flow's state read from the clusters themselves, so it answers
whether or not `mirror run` is running: who owns the flow (its lease mark), lag per topic (source
end vs the committed position), when it last committed a copy (the offsets topic's newest record),
the age of its newest heartbeat on the target, the last checkpoint per group, and warnings.

Every read is a batch (one request per kind for all partitions), so a flow of 1,000 partitions
takes about as long as one of 10.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from mirror.client.mirror_client import HeartbeatWatch, MirrorClient
from mirror.config.flow_settings import FlowSettings
from mirror.errors import (
    ClusterAuthenticationError,
    ClusterTlsError,
    KafkaClientError,
    MirrorError,
    NotAuthorizedError,
    WireFormatError,
)
from mirror.flow.mark import FlowMark
from mirror.flow.tail import PartitionTail, newest_timestamp
from mirror.kafka.admin import list_topics
from mirror.kafka.clients import admin_client
from mirror.kafka.group_admin import groups_with_members
from mirror.kafka.wire import Checkpoint
from mirror.source.offsets_admin import last_owner, list_positions

# A running flow emits a heartbeat every second or so; this much silence means nobody runs it.
ALIVE_SECONDS = 60.0
MARK_WAIT_SECONDS = 5.0
WAIT_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class TopicStatus:
    topic: str
    partitions: int
    lag: int  # records on the source after the flow's position, over the partitions it copied
    never_copied: int  # partitions the flow has no position for yet


@dataclass(frozen=True)
class GroupStatus:
    group: str
    partitions: int
    last_checkpoint_age_seconds: float  # since its newest checkpoint was listed on the source
    active_on_target: bool  # members on the target: group sync leaves it alone


@dataclass
class FlowStatus:
    flow: str
    state: str  # starting, running, stalled, stopped, down, never-run
    detail: str  # what the state rests on, in words
    owner: str | None
    lag: int
    last_copy_age_seconds: float | None
    heartbeat_age_seconds: float | None
    topics: list[TopicStatus] = field(default_factory=list)
    groups: list[GroupStatus] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def flow_status(settings: FlowSettings, target: MirrorClient) -> FlowStatus:
    """`target`: a client of the flow's target cluster (heartbeats)."""
    now = time.time()
    positions = list_positions(settings, not_yet_on_target=True)
    topics: dict[str, list[int | None]] = defaultdict(list)
    for row in positions:
        topics[row.topic].append(row.lag)
    topic_rows = [
        TopicStatus(t, len(lags), sum(lag for lag in lags if lag is not None), lags.count(None))
        for t, lags in sorted(topics.items())
    ]
    owner = last_owner(settings, wait_seconds=MARK_WAIT_SECONDS)
    written = newest_timestamp(settings.target_consumer, settings.offsets_topic)
    heartbeat = _heartbeat_age(settings, target)
    state, detail = _state(
        settings, owner, heartbeat, has_positions=any(r.position is not None for r in positions)
    )
    status = FlowStatus(
        settings.name,
        state,
        detail,
        owner.instance if owner is not None else None,
        sum(row.lag for row in topic_rows),
        None if written is None else max(0.0, now - written),
        heartbeat,
        topic_rows,
        _groups(settings, now) if settings.emit_checkpoints else [],
    )
    status.warnings = _warnings(settings, status)
    return status


def wait_for_flow(settings: FlowSettings, *, lag: int | None, stopped: bool, timeout: float) -> None:
    """Return once the flow has at most `lag` records left to copy and, with `stopped`, its last owner
    stopped cleanly; MirrorError after `timeout` seconds, saying what was still missing."""
    deadline = time.monotonic() + timeout
    while True:
        missing = []
        try:
            if lag is not None:
                left = sum(row.to_copy for row in list_positions(settings, not_yet_on_target=True))
                if left > lag:
                    missing.append(f"{left} records left to copy (waiting for at most {lag})")
            if stopped:
                owner = last_owner(settings, wait_seconds=MARK_WAIT_SECONDS)
                if owner is None or not owner.stopping:
                    missing.append("its last owner has not stopped cleanly")
        except (NotAuthorizedError, ClusterAuthenticationError, ClusterTlsError):
            raise  # only the user can fix these: waiting would not
        except KafkaClientError as exc:
            # A cluster just back from an outage (a coordinator still loading, a leader moving)
            # answers within the wait: asked again, and named if the wait runs out.
            missing.append(f"a read failed ({exc})")
        if not missing:
            return
        if time.monotonic() > deadline:
            raise MirrorError(
                f"flow {settings.name}: after {timeout:g}s, {' and '.join(missing)}; is its `mirror run` "
                "running (or stopping)? `mirror status` without --until-* shows its state"
            )
        time.sleep(WAIT_POLL_SECONDS)


def _state(
    settings: FlowSettings, owner: FlowMark | None, heartbeat: float | None, *, has_positions: bool
) -> tuple[str, str]:
    if owner is None:
        if not has_positions:
            return "never-run", "no instance has owned this flow and nothing was copied"
        # The lease mark could not be read: a renewal's transaction is open, its writer killed.
        return "down", "its lease is held by a killed instance; the next `mirror run` takes it over"
    if owner.stopping:
        return "stopped", "its last owner stopped cleanly"
    if not owner.renewed_ms:  # a mark from mirror before marks carried their time
        return _state_by_heartbeats(settings, heartbeat)
    # Ages across two hosts' clocks: a small skew only shifts them; a negative one reads as 0.
    renewed = max(0.0, time.time() - owner.renewed_ms / 1000)
    if renewed > ALIVE_SECONDS:
        return "down", f"not stopped cleanly, and its owner last renewed its lease {renewed:.0f} s ago"
    return _state_of_live_owner(settings, owner, heartbeat, renewed)


def _state_of_live_owner(
    settings: FlowSettings, owner: FlowMark, heartbeat: float | None, renewed: float
) -> tuple[str, str]:
    """The owner renews its lease: heartbeats through the flow tell whether records flow."""
    lease = f"its owner renews its lease (last {renewed:.0f} s ago)"
    if not settings.heartbeats_through:
        return "running", f"{lease}; the flow copies no heartbeats that could show records flowing"
    if heartbeat is not None and heartbeat < ALIVE_SECONDS:
        return "running", f"heartbeats arrive through it (the newest {heartbeat:.0f} s old)"
    started = max(0.0, time.time() - owner.started_ms / 1000)
    # Heartbeats older than the owner came through a previous run: they say nothing about this one.
    if started < ALIVE_SECONDS and (heartbeat is None or heartbeat >= started):
        return "starting", f"{lease}; it took the flow {started:.0f} s ago, no heartbeat came through yet"
    return "stalled", (
        f"{lease}, but {_silence(heartbeat)}: records are not flowing; is the source cluster up? "
        "`mirror run`'s output says what it waits for"
    )


def _state_by_heartbeats(settings: FlowSettings, heartbeat: float | None) -> tuple[str, str]:
    if not settings.heartbeats_through:
        return "running", "not stopped; the flow copies no heartbeats that could confirm it is alive"
    if heartbeat is not None and heartbeat < ALIVE_SECONDS:
        return "running", f"heartbeats arrive through it (the newest {heartbeat:.0f} s old)"
    return "down", f"not stopped cleanly, and {_silence(heartbeat)}"


def _silence(heartbeat: float | None) -> str:
    return (
        "no heartbeat came through it"
        if heartbeat is None
        else f"the newest heartbeat is {heartbeat:.0f} s old"
    )


def _heartbeat_age(settings: FlowSettings, target: MirrorClient) -> float | None:
    """The age of the newest heartbeat that came through the flow: in the source's heartbeats topic's
    copy on the target, and only there (the target may hold many heartbeats topics)."""
    if not settings.heartbeats_through:
        return None
    watch = HeartbeatWatch(target, only={settings.remote_topic(settings.policy().heartbeats_topic())})
    try:
        watch.poll(timeout_seconds=30)
        ages = [p.age_seconds for p in watch.paths()]
    finally:
        watch.close()
    return min(ages) if ages else None


def _groups(settings: FlowSettings, now: float) -> list[GroupStatus]:
    admin = admin_client(settings.target_admin)
    what = f"target cluster {settings.target}"
    if settings.checkpoints_topic() not in list_topics(admin, what=what):
        return []  # the flow has not run yet
    tail = PartitionTail(settings.target_consumer, settings.checkpoints_topic())
    try:
        records = tail.catch_up(timeout_seconds=30)
    finally:
        tail.close()
    newest: dict[str, float] = {}
    partitions: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for record in records:
        try:
            checkpoint = Checkpoint.decode(record.key, record.value)
        except WireFormatError:
            continue  # counted by the checkpoint component's metrics
        newest[checkpoint.group] = max(newest.get(checkpoint.group, 0.0), record.timestamp_ms / 1000)
        partitions[checkpoint.group].add((checkpoint.topic, checkpoint.partition))
    active = groups_with_members(admin, newest, what=what)
    return [
        GroupStatus(group, len(partitions[group]), max(0.0, now - newest[group]), group in active)
        for group in sorted(newest)
    ]


def _warnings(settings: FlowSettings, status: FlowStatus) -> list[str]:
    warnings = []
    policy = settings.policy()
    # Heartbeats topics are copied whatever the filter says; they do not count as a match.
    if all(policy.is_heartbeats_topic(t.topic) for t in status.topics):
        warnings.append(
            f"no topic on {settings.source} matches topics {settings.topics} "
            f"(topics_exclude {settings.topics_exclude}): nothing to copy"
        )
    never = sum(t.never_copied for t in status.topics)
    if never and status.state == "running":
        warnings.append(
            f"{never} partitions have no position yet (new, or nothing copied since they appeared)"
        )
    if status.lag and status.state != "running":
        warnings.append(f"{status.lag:,} records wait on {settings.source} while the flow is not running")
    for group in status.groups:
        if group.active_on_target:
            warnings.append(
                f"group {group.group} has members on {settings.target}: its offsets there are not synced "
                "while it is active"
            )
    return warnings


def render(status: FlowStatus) -> str:
    """The one screen `mirror status` prints for a flow."""

    def age(seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds:,.1f} s ago"

    lines = [
        f"flow {status.flow}: {status.state}: {status.detail}"
        + (f" (owner {status.owner})" if status.owner else ""),
        f"  lag {status.lag:,} records   last copy {age(status.last_copy_age_seconds)}   "
        f"newest heartbeat {age(status.heartbeat_age_seconds)}",
    ]
    if status.topics:
        lines.append(f"  {'TOPIC':<40} {'PARTITIONS':>10} {'LAG':>12} {'NO POSITION':>12}")
        lines += [
            f"  {t.topic:<40} {t.partitions:>10} {t.lag:>12,} {t.never_copied:>12}" for t in status.topics
        ]
    if status.groups:
        lines.append(f"  {'GROUP':<40} {'PARTITIONS':>10} {'LAST CHECKPOINT':>20} {'ON TARGET':>10}")
        lines += [
            f"  {g.group:<40} {g.partitions:>10} {age(g.last_checkpoint_age_seconds):>20} "
            f"{'active' if g.active_on_target else 'idle':>10}"
            for g in status.groups
        ]
    lines += [f"  warning: {warning}" for warning in status.warnings]
    return "\n".join(lines)

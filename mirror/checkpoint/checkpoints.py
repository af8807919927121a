"""Which checkpoints to emit, and which target group offsets to write (MM2.md 3.4, 3.5).

Checkpoints move forward only: a new one for a partition is emitted when its downstream offset
is past the last one emitted, or when the group's upstream offset went back (the group was reset
on the source, which it is entitled to do). Target groups are only ever moved forward, never
past the end of the remote partition, and never while they have members.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mirror.kafka.wire import Checkpoint

Partition = tuple[str, int]


class CheckpointStore:
    """The last checkpoint per (group, remote topic, partition), as the checkpoints topic holds it."""

    def __init__(self) -> None:
        self._last: dict[str, dict[Partition, Checkpoint]] = {}

    def restore(self, checkpoint: Checkpoint) -> None:
        """Take a record read back from the checkpoints topic (the topic is the state)."""
        self._last.setdefault(checkpoint.group, {})[(checkpoint.topic, checkpoint.partition)] = checkpoint

    def is_news(self, checkpoint: Checkpoint) -> bool:
        """Whether emitting `checkpoint` moves the group forward (or follows an upstream reset)."""
        last = self._last.get(checkpoint.group, {}).get((checkpoint.topic, checkpoint.partition))
        return (
            last is None
            or checkpoint.upstream_offset < last.upstream_offset
            or checkpoint.downstream_offset > last.downstream_offset
        )

    def last(self, group: str, topic: str, partition: int) -> Checkpoint | None:
        return self._last.get(group, {}).get((topic, partition))

    def groups(self) -> list[str]:
        return sorted(self._last)

    def for_group(self, group: str) -> dict[Partition, Checkpoint]:
        return dict(self._last.get(group, {}))


@dataclass(frozen=True)
class GroupSyncPlan:
    """What to write into one target group, and why the rest is left alone."""

    group: str
    write: dict[Partition, int] = field(default_factory=dict)
    active: bool = False
    # Target already at or past the translated offset: never rewound.
    ahead: list[Partition] = field(default_factory=list)
    # Translated offset beyond the remote partition's end (remote topic re-created or truncated).
    beyond_end: list[Partition] = field(default_factory=list)


def plan_group_sync(
    group: str,
    checkpoints: Mapping[Partition, Checkpoint],
    *,
    active: bool,
    target_offsets: Mapping[Partition, int],
    remote_ends: Mapping[Partition, int],
) -> GroupSyncPlan:
    """Offsets to write into `group` on the target, given its checkpoints and its current state there."""
    if active:
        return GroupSyncPlan(group, active=True)
    write: dict[Partition, int] = {}
    ahead: list[Partition] = []
    beyond_end: list[Partition] = []
    for partition, checkpoint in sorted(checkpoints.items()):
        offset = checkpoint.downstream_offset
        end = remote_ends.get(partition)
        if end is None or offset > end:
            beyond_end.append(partition)
            continue
        current = target_offsets.get(partition)
        if current is not None and current >= offset:
            ahead.append(partition)
            continue
        write[partition] = offset
    return GroupSyncPlan(group, write=write, ahead=ahead, beyond_end=beyond_end)

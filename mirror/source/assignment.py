"""Which copy task owns which source partitions: balanced by partition count, and sticky.

Pure: no Kafka, no Spark. The supervisor recomputes the assignment whenever the set of replicated
partitions (or `tasks_max`) changes, from the previous one, so an added partition or topic moves
no partition that already had an owner unless balance requires it. Without a previous assignment
(first start, or its file was deleted) partitions are dealt round-robin in sorted order, as MM2's
MirrorSourceConnector does, so the same inputs always give the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SourcePartition = tuple[str, int]


@dataclass(frozen=True)
class Assignment:
    """Task i copies `tasks[i]`; a new `generation` fences every task of the older ones."""

    generation: int
    tasks: tuple[tuple[SourcePartition, ...], ...]

    @property
    def partitions(self) -> set[SourcePartition]:
        return {partition for task in self.tasks for partition in task}

    def to_json(self) -> dict[str, object]:
        return {"generation": self.generation, "tasks": [[list(p) for p in task] for task in self.tasks]}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Assignment:
        tasks = data["tasks"]
        generation = data["generation"]
        if not isinstance(tasks, list) or not isinstance(generation, int):
            raise ValueError(f"not an assignment: {data!r}")
        return cls(generation, tuple(tuple((str(t), int(p)) for t, p in task) for task in tasks))


def assign(
    partitions: Iterable[SourcePartition],
    tasks_max: int,
    previous: Sequence[Sequence[SourcePartition]] | None = None,
) -> tuple[tuple[SourcePartition, ...], ...]:
    """`tasks_max` task partition lists (some may be empty) covering `partitions` exactly once.

    Sizes differ by at most one. Partitions keep the owner `previous` gave them as long as that
    owner still exists and stays within its share; the rest go, in sorted order, to the task with
    the most room left (the lowest index on ties).
    """
    if tasks_max < 1:
        raise ValueError("tasks_max must be at least 1")
    wanted = sorted(set(partitions))
    if not previous:
        return tuple(tuple(wanted[i::tasks_max]) for i in range(tasks_max))

    remaining = set(wanted)
    kept: list[list[SourcePartition]] = []
    for index in range(tasks_max):
        own = sorted(p for p in (previous[index] if index < len(previous) else ()) if p in remaining)
        remaining.difference_update(own)
        kept.append(own)

    base, extra = divmod(len(wanted), tasks_max)
    # The tasks holding most keep the larger shares, so balancing moves as little as possible.
    ranked = sorted(range(tasks_max), key=lambda i: (-len(kept[i]), i))
    share = {index: base + (1 if rank < extra else 0) for rank, index in enumerate(ranked)}
    for index, own in enumerate(kept):
        while len(own) > share[index]:
            remaining.add(own.pop())

    for partition in sorted(remaining):
        index = max(range(tasks_max), key=lambda i: (share[i] - len(kept[i]), -i))
        kept[index].append(partition)
    return tuple(tuple(sorted(own)) for own in kept)


def moved(before: Sequence[Sequence[SourcePartition]], after: Sequence[Sequence[SourcePartition]]) -> int:
    """How many partitions present in both assignments changed owner."""
    owner_before = {p: i for i, task in enumerate(before) for p in task}
    owner_after = {p: i for i, task in enumerate(after) for p in task}
    return sum(1 for p, i in owner_after.items() if p in owner_before and owner_before[p] != i)

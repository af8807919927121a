"""Which copy task owns which partitions: balanced, deterministic, and sticky when partitions come."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mirror.flow.mark import FlowMark
from mirror.source.assignment import Assignment, assign, moved
from mirror.source.partition_copy import PartitionCopy

partitions_strategy = st.sets(
    st.tuples(st.sampled_from(["a", "b", "orders", "x.y"]), st.integers(0, 40)), max_size=120
)


def _owners(tasks: tuple[tuple[tuple[str, int], ...], ...]) -> list[tuple[str, int]]:
    return [p for task in tasks for p in task]


@given(partitions_strategy, st.integers(1, 9))
def test_every_partition_has_exactly_one_task_and_sizes_differ_by_at_most_one(
    partitions: set[tuple[str, int]], tasks_max: int
) -> None:
    tasks = assign(partitions, tasks_max)
    assert len(tasks) == tasks_max
    assert sorted(_owners(tasks)) == sorted(partitions)
    sizes = [len(task) for task in tasks]
    assert max(sizes) - min(sizes) <= 1


def test_a_fresh_assignment_deals_sorted_partitions_round_robin_as_mm2_does() -> None:
    partitions = [("t", 2), ("t", 0), ("s", 0), ("t", 1)]
    assert assign(partitions, 2) == ((("s", 0), ("t", 1)), (("t", 0), ("t", 2)))
    assert assign(partitions, 2) == assign(reversed(partitions), 2)


@given(partitions_strategy, partitions_strategy, st.integers(1, 9))
def test_adding_partitions_moves_none_that_had_an_owner(
    before: set[tuple[str, int]], added: set[tuple[str, int]], tasks_max: int
) -> None:
    first = assign(before, tasks_max)
    second = assign(before | added, tasks_max, first)
    assert moved(first, second) == 0
    sizes = [len(task) for task in second]
    assert max(sizes) - min(sizes) <= 1
    assert sorted(_owners(second)) == sorted(before | added)


@given(partitions_strategy, st.integers(1, 9), st.integers(1, 9))
def test_changing_tasks_max_keeps_balance_and_moves_only_what_balance_needs(
    partitions: set[tuple[str, int]], before_tasks: int, after_tasks: int
) -> None:
    first = assign(partitions, before_tasks)
    second = assign(partitions, after_tasks, first)
    assert sorted(_owners(second)) == sorted(partitions)
    sizes = [len(task) for task in second]
    assert max(sizes) - min(sizes) <= 1
    # A partition moves only off a task that is gone or over its share; the larger shares go to
    # the tasks that hold most.
    base, extra = divmod(len(partitions), after_tasks)
    kept = sorted((len(task) for task in first[:after_tasks]), reverse=True)
    shares = [base + 1] * extra + [base] * (after_tasks - extra)
    gone = sum(len(task) for task in first[after_tasks:])
    assert moved(first, second) <= gone + sum(max(0, k - s) for k, s in zip(kept, shares, strict=False))


def test_removed_partitions_leave_and_the_rest_stay_put() -> None:
    first = assign([("t", p) for p in range(8)], 2)
    second = assign([("t", p) for p in range(6)], 2, first)
    assert moved(first, second) == 0
    assert sorted(_owners(second)) == [("t", p) for p in range(6)]


def test_an_assignment_round_trips_through_json() -> None:
    assignment = Assignment(7, assign([("a.b-c", 0), ("a.b-c", 1), ("d", 0)], 2))
    assert Assignment.from_json(assignment.to_json()) == assignment


def test_the_flow_mark_round_trips_and_reads_the_legacy_bare_instance_id() -> None:
    mark = FlowMark("abc", generation=3, task_ids=4, stopping=True)
    assert FlowMark.decode(mark.encode()) == mark
    assert FlowMark.decode("0123456789abcdef") == FlowMark("0123456789abcdef", legacy=True)
    assert FlowMark.decode("") is None


def test_a_transaction_straddling_a_remote_topic_re_creation_is_recognised() -> None:
    part = PartitionCopy("A->B", "t", 0, "A.t", 100)
    part.last_downstream = 2499
    part.downstream = [2500, 2501, 2502]
    assert not part.recreated_remote()
    part.downstream = [2500, 2501, 0, 1, 2]  # the first records went to the old topic
    assert part.recreated_remote()
    part.downstream = [0, 1]  # all of them to the new one
    assert part.recreated_remote()

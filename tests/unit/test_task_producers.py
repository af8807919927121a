"""A copy task's several transactional producers: their ids, how many a task gets, and what one
commit round does when some producers commit and one fails (mirror.source.transaction)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror.errors import ProducerFencedError
from mirror.kafka.transactions import RetriableError
from mirror.source.partition_copy import PartitionCopy
from mirror.source.stats import TaskStats
from mirror.source.task_producers import TaskProducers
from mirror.source.transaction import Writers, commit_moved
from tests.unit.flows import flow_a_to_b


def test_a_tasks_first_producer_keeps_the_tasks_own_id_and_no_two_producers_share_one() -> None:
    settings = flow_a_to_b(["t"], tasks_max=3, producers_per_task=4)
    ids = [settings.copy_task_transactional_id(task, producer) for task in range(3) for producer in range(4)]
    assert [settings.copy_task_transactional_id(task) for task in range(3)] == [
        "mirror-A-B-task:0",
        "mirror-A-B-task:1",
        "mirror-A-B-task:2",
    ]
    # Every id within the range the connector fences, each once.
    assert sorted(ids) == sorted(f"mirror-A-B-task:{n}" for n in range(settings.copy_task_ids()))


@pytest.mark.parametrize("partitions", [1, 8, 1000, 10_000])
def test_by_default_a_task_writes_through_one_producer_and_the_fence_covers_one_id_per_task(
    partitions: int,
) -> None:
    settings = flow_a_to_b(["t"], tasks_max=2)
    assert settings.task_producers(partitions) == 1
    assert settings.copy_task_ids() == 2


def test_a_set_producer_count_is_kept_unless_the_task_has_fewer_partitions() -> None:
    settings = flow_a_to_b(["t"], tasks_max=2, producers_per_task=8)
    assert settings.task_producers(1000) == 8
    assert settings.task_producers(3) == 3
    assert settings.copy_task_ids() == 16


def test_at_least_once_writes_through_one_producer_and_fences_nothing_more() -> None:
    settings = flow_a_to_b(["t"], tasks_max=2, exactly_once=False, producers_per_task=4)
    assert settings.task_producers(5000) == 1
    assert settings.copy_task_ids() == 2


class _Producer:
    """Records what the commit asks of it, in one log shared by every producer."""

    def __init__(self, index: int, log: list[tuple[str, int]], fail: Exception | None = None) -> None:
        self.index, self.log, self.fail = index, log, fail

    def flush(self, timeout: float = -1) -> int:
        self.log.append(("flush", self.index))
        return 0

    def produce(self, topic: str, **_: Any) -> None:
        self.log.append(("produce " + topic, self.index))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def send_offsets_to_transaction(self, offsets: Any, metadata: Any, timeout: float) -> None:
        self.log.append(("send_offsets", self.index))

    def commit_transaction(self, timeout: float = -1) -> None:
        if self.fail is not None:
            raise self.fail
        self.log.append(("commit", self.index))


class _Positions:
    def consumer_group_metadata(self) -> object:
        return object()


def _parts(count: int, producers: int) -> list[PartitionCopy]:
    parts = []
    for n in range(count):
        part = PartitionCopy("A->B", "t", n, "A.t", 100, position=10, committed=5)
        part.producer = n % producers
        part.upstream, part.downstream = [8, 9], [0, 1]
        parts.append(part)
    return parts


def _commit(
    producers: list[_Producer], parts: list[PartitionCopy], pool: ThreadPoolExecutor
) -> tuple[Writers, TaskStats, int | Exception]:
    writers = Writers(producers, _Positions(), None, pool, [False] * len(producers))  # type: ignore[arg-type]
    stats = TaskStats("A->B", 0)
    try:
        return writers, stats, commit_moved(flow_a_to_b(["t"]), parts, writers, stats, in_transaction=True)
    except Exception as exc:  # noqa: BLE001 - the test looks at which
        return writers, stats, exc


def test_every_producer_is_flushed_before_any_commits() -> None:
    log: list[tuple[str, int]] = []
    producers = [_Producer(i, log) for i in range(3)]
    with ThreadPoolExecutor(3) as pool:
        writers, _, records = _commit(producers, _parts(6, 3), pool)
    first_commit_step = min(i for i, (what, _) in enumerate(log) if what in {"send_offsets", "commit"})
    assert [what for what, _ in log[:3]] == ["flush"] * 3
    assert all(what != "flush" for what, _ in log[first_commit_step:])
    assert sorted(i for what, i in log if what == "commit") == [0, 1, 2]
    assert records == 12
    assert writers.committed == [True, True, True]


def test_one_producer_failing_its_commit_leaves_the_others_committed_and_its_own_open() -> None:
    log: list[tuple[str, int]] = []
    refused = KafkaException(KafkaError(KafkaError._TIMED_OUT, "coordinator away", txn_requires_abort=True))
    producers = [_Producer(0, log), _Producer(1, log, fail=refused), _Producer(2, log)]
    parts = _parts(6, 3)
    with ThreadPoolExecutor(3) as pool:
        writers, stats, outcome = _commit(producers, parts, pool)
    assert isinstance(outcome, Exception)
    assert writers.committed == [True, False, True]
    # The committed producers' partitions count as committed; the failed one's are left for the
    # task to abort and read back from the target.
    assert [part.committed for part in parts] == [10, 5, 10, 10, 5, 10]
    assert [bool(part.upstream) for part in parts] == [False, True, False, False, True, False]
    assert sum(records for records, _ in stats.records.values()) == 8


def test_a_fence_outranks_a_transient_failure_of_another_producer() -> None:
    log: list[tuple[str, int]] = []
    timeout = KafkaException(KafkaError(KafkaError._TIMED_OUT, "coordinator away", txn_requires_abort=True))
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer producer", fatal=True))
    producers = [_Producer(0, log, fail=timeout), _Producer(1, log, fail=fenced)]
    with ThreadPoolExecutor(2) as pool:
        _, _, outcome = _commit(producers, _parts(4, 2), pool)
    assert isinstance(outcome, ProducerFencedError)


def test_a_flush_that_leaves_records_undelivered_commits_nothing() -> None:
    log: list[tuple[str, int]] = []

    class _Stuck(_Producer):
        def flush(self, timeout: float = -1) -> int:
            return 3  # records still queued after the wait

    producers = [_Producer(0, log), _Stuck(1, log)]
    with ThreadPoolExecutor(2) as pool:
        writers, _, outcome = _commit(producers, _parts(4, 2), pool)
    assert isinstance(outcome, RetriableError)
    assert writers.committed == [False, False]
    assert not [what for what, _ in log if what in {"send_offsets", "commit"}]


class _InFlight:
    """A producer whose records stay unreported for `unreported` more flushes."""

    def __init__(self, unreported: int) -> None:
        self.unreported = unreported
        self.flushes = 0

    def flush(self, timeout: float = -1) -> int:
        self.flushes += 1
        return self.unreported


@pytest.mark.parametrize(("unreported", "kept"), [(0, True), (3, False)])
def test_an_abort_keeps_its_producers_only_once_every_report_is_served(unreported: int, kept: bool) -> None:
    settings = flow_a_to_b(["t"], exactly_once=False)
    producers = TaskProducers(settings, 0, _parts(2, 1))
    in_flight = _InFlight(unreported)
    producers.producers = [in_flight]  # type: ignore[list-item]
    producers.abort()
    assert in_flight.flushes == 1
    assert producers.ready is kept  # dropped: never polled again, so no report comes late
    assert not producers.in_transaction

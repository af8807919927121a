"""Which partitions a copy task of thousands stops fetching, and when it fetches them again
(mirror.source.idle_pause). The source's answers come from a stand-in here; a real broker's, and
librdkafka's pause and resume, in tests/integration/test_split_reads.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror.kafka.offsets import Partition
from mirror.source.idle_pause import IdlePause
from mirror.source.partition_copy import PartitionCopy
from mirror.source.split_reader import PARTITIONS_PER_CONSUMER
from tests.unit.clock import Clock

IDLE, CHECK, ANSWER = 30.0, 5.0, 5.0


@dataclass
class Source:
    """The task's reads: which partitions are paused now, and every resume in order."""

    paused: set[Partition] = field(default_factory=set)
    resumed: list[list[Partition]] = field(default_factory=list)

    def pause(self, partitions: Sequence[Partition]) -> None:
        self.paused.update(partitions)

    def resume(self, partitions: Sequence[Partition]) -> None:
        self.paused.difference_update(partitions)
        self.resumed.append(sorted(partitions))


@dataclass
class Answered:
    """A TopicPartition as offsets_for_times hands it back (one with an error cannot be built)."""

    topic: str
    partition: int
    offset: int
    error: KafkaError | None = None


@dataclass
class Asker:
    """The source's read_committed ends as offsets_for_times answers them; `failing`: it raises."""

    ends: dict[int, int]
    failing: bool = False
    errors: set[int] = field(default_factory=set)  # partitions answered with an error
    asked: list[list[int]] = field(default_factory=list)
    closed: bool = False
    answered: threading.Event = field(default_factory=threading.Event)

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float) -> list[Answered]:
        self.asked.append([tp.partition for tp in partitions])
        try:
            if self.failing:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
            answer = []
            for tp in partitions:
                if tp.partition in self.errors:
                    answer.append(Answered(tp.topic, tp.partition, -1, KafkaError(KafkaError._TIMED_OUT)))
                else:
                    answer.append(Answered(tp.topic, tp.partition, self.ends[tp.partition]))
            return answer
        finally:
            self.answered.set()

    def close(self) -> None:
        self.closed = True


@dataclass
class Task:
    pause: IdlePause
    clock: Clock
    parts: list[PartitionCopy]
    source: Source
    asker: Asker

    def after(self, seconds: float) -> None:
        """`seconds` later, a look (every look finds each partition where the test left it)."""
        self.clock.now += seconds
        self.pause.look(self.parts, self.source)

    def answer(self) -> None:
        """An answer the asking thread asked for after everything the test set, then a look at it.
        The third ask from now: the first may have begun before, and each is stored only after
        the asker returns, which the next ask follows."""
        for _ in range(3):
            self.asker.answered.clear()
            assert self.asker.answered.wait(10), "the asking thread stopped asking"
        self.pause.look(self.parts, self.source)


@pytest.fixture
def task() -> Iterator[Task]:
    """Partitions t-0..2, each read to 10; the source holds nothing more."""
    clock = Clock()
    asker = Asker({0: 10, 1: 10, 2: 10})
    pause = IdlePause(
        lambda: asker,  # a stand-in for the consumer: offsets_for_times and close
        idle_seconds=IDLE,
        ask_seconds=0.005,
        answer_seconds=ANSWER,
        check_seconds=CHECK,
        clock=clock,
    )
    parts = [PartitionCopy("A->B", "t", p, "A.t", 100, position=10) for p in range(3)]
    yield Task(pause, clock, parts, Source(), asker)
    pause.close()


def _idle_all(task: Task) -> None:
    task.after(CHECK)  # positions first seen
    task.after(IDLE)


def test_only_tasks_of_more_partitions_than_one_consumer_reads_pause_idle_ones() -> None:
    assert not IdlePause.wanted(PARTITIONS_PER_CONSUMER)
    assert IdlePause.wanted(PARTITIONS_PER_CONSUMER + 1)


def test_a_partition_whose_position_stayed_put_for_the_idle_time_is_paused(task: Task) -> None:
    task.after(CHECK)  # positions first seen
    task.after(IDLE - CHECK)
    assert task.source.paused == set()
    task.parts[1].position = 12  # t-1 read two records meanwhile
    task.parts[2].upstream = [10]  # t-2 has a record in the open transaction
    task.after(CHECK)
    assert task.source.paused == {("t", 0)}
    assert set(task.pause.paused) == {("t", 0)}


def test_a_paused_partition_the_source_holds_more_of_is_resumed_and_stays_fetched_until_it_moves(
    task: Task,
) -> None:
    _idle_all(task)
    assert task.source.paused == {("t", 0), ("t", 1), ("t", 2)}
    task.answer()
    assert task.source.resumed == []  # the source holds nothing past where they were paused
    task.asker.ends[1] = 11
    task.answer()
    assert task.source.paused == {("t", 0), ("t", 2)}
    task.after(IDLE * 3)  # no record came (librdkafka fetched nothing): the fetch watch's to judge
    assert ("t", 1) not in task.source.paused
    task.parts[1].position = 11
    task.after(CHECK)
    task.after(IDLE)
    assert ("t", 1) in task.source.paused


def test_a_paused_partition_the_source_does_not_answer_for_is_resumed_and_paused_again_later(
    task: Task,
) -> None:
    task.asker.failing = True
    _idle_all(task)
    task.answer()
    assert task.source.paused == {("t", 0), ("t", 1), ("t", 2)}  # within the answer time
    task.after(ANSWER)
    assert task.source.paused == set()
    task.asker.failing = False
    task.after(IDLE)
    assert task.source.paused == {("t", 0), ("t", 1), ("t", 2)}


def test_paused_partitions_are_resumed_when_answers_stop_coming_though_an_older_one_came(
    task: Task,
) -> None:
    # librdkafka's offsets_for_times fails whole when one leader does not answer: the last good
    # answer grows old, and judging by it would leave every partition paused before it unread.
    _idle_all(task)
    task.answer()
    task.asker.failing = True
    task.after(ANSWER - 1)
    assert task.source.paused == {("t", 0), ("t", 1), ("t", 2)}
    task.after(1)
    assert task.source.paused == set()


def test_a_paused_partition_whose_source_end_fell_below_its_position_is_resumed(task: Task) -> None:
    # Its topic deleted and made again, or its log cut: reading it again finds out which.
    _idle_all(task)
    task.asker.ends[0] = 3
    task.answer()
    assert task.source.paused == {("t", 1), ("t", 2)}


def test_a_partition_answered_with_an_error_is_resumed_at_once(task: Task) -> None:
    task.asker.errors = {2}
    _idle_all(task)
    task.answer()
    assert task.source.paused == {("t", 0), ("t", 1)}
    assert task.source.resumed == [[("t", 2)]]


def test_only_paused_partitions_are_asked_for(task: Task) -> None:
    _idle_all(task)
    task.pause.wake([("t", 0), ("t", 9)], task.source)
    task.answer()
    assert task.asker.asked[-1] == [1, 2]
    assert task.source.resumed == [[("t", 0)]]


def test_new_consumers_have_nothing_paused_and_idle_time_starts_again(task: Task) -> None:
    _idle_all(task)
    task.pause.restart()
    task.source.paused.clear()  # SplitReader.assign made new consumers
    assert list(task.pause.paused) == []
    task.after(CHECK)
    task.after(IDLE - 1)
    assert task.source.paused == set()


def test_the_asking_thread_closes_its_consumer_when_the_task_closes(task: Task) -> None:
    _idle_all(task)
    task.answer()
    task.pause.close()
    deadline = time.monotonic() + 10
    while not task.asker.closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert task.asker.closed

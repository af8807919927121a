"""flush() of the packing producer against a report that lands between its serve and its wait,
and the reports of one turn of the loop waking the caller once.

The loop thread appends a report, then (at the end of its turn) notifies under the condition.
If that happens after flush() served the reports and before it took the condition, the
notification is already spent: flush() must serve the report rather than wait for another that
never comes (it slept to its deadline, and a 10,000-partition commit waited 60 s). Built without
a broker: the interleaving is the point, and only a stand-in for the loop thread can place it
exactly.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable

from confluent_kafka import KafkaError

from mirror.kafka.packing_producer import PackingProducer
from mirror.kafka.produced import Produced


class _Watched(threading.Condition):
    """The producer's condition, noting whether a wait began with a report already in."""

    def __init__(self, reports: deque[object]) -> None:
        super().__init__()
        self.reports = reports
        self.slept_past_a_report = False
        self.notified = 0

    def notify_all(self) -> None:
        self.notified += 1
        super().notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        self.slept_past_a_report |= bool(self.reports)
        return super().wait(timeout)


class _Turn:
    """A stand-in for the loop: what is scheduled runs when the test ends the turn."""

    def __init__(self) -> None:
        self.scheduled: list[Callable[[], None]] = []

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.scheduled.append(callback)

    def end(self) -> None:
        scheduled, self.scheduled = self.scheduled, []
        for callback in scheduled:
            callback()


def _idle_producer(outstanding: int, loop: object = None) -> tuple[PackingProducer, _Watched]:
    producer = PackingProducer.__new__(PackingProducer)  # no loop thread, no broker: only its bookkeeping
    producer._loop = loop if loop is not None else _Turn()  # type: ignore[assignment]
    producer._pending = []
    producer._queue = None
    producer._reports = deque()
    producer._settled = watched = _Watched(producer._reports)  # type: ignore[arg-type]
    producer._outstanding = outstanding
    producer._unsettled = 0
    producer._failed = None
    return producer, watched


def test_a_report_that_lands_just_before_flush_waits_is_served_without_waiting() -> None:
    delivered: list[tuple[KafkaError | None, int]] = []
    record = Produced(
        "t", 0, b"k", b"v", 0, None, lambda error, message: delivered.append((error, message.offset()))
    )
    producer, watched = _idle_producer(outstanding=1)
    serve = producer._serve
    served_once = False

    def serve_then_report() -> int:
        nonlocal served_once
        count = serve()
        if not served_once:
            served_once = True
            producer._report([record], None, 41)  # the loop thread, right after the serve...
            producer._loop.end()  # type: ignore[attr-defined] # ...and the end of its turn
        return count

    producer._serve = serve_then_report  # type: ignore[method-assign]
    assert producer.flush(30) == 0
    assert delivered == [(None, 41)]
    assert not watched.slept_past_a_report


def test_flush_still_says_how_many_are_unreported_at_its_deadline() -> None:
    producer, _ = _idle_producer(outstanding=3)
    assert producer.flush(0.05) == 3


def test_the_reports_of_one_turn_of_the_loop_wake_the_caller_once() -> None:
    records = [Produced("t", p, None, b"v", 0, None, None) for p in range(500)]
    loop = asyncio.new_event_loop()
    producer, watched = _idle_producer(outstanding=len(records), loop=loop)
    outstanding_in_the_turn: list[int] = []

    async def answer_each_batch() -> None:
        for record in records:  # a commit's answer: a batch, so a report, per partition
            producer._report([record], None, 7)
        outstanding_in_the_turn.append(producer._outstanding)
        await asyncio.sleep(0)  # the turn ends

    try:
        loop.run_until_complete(answer_each_batch())
    finally:
        loop.close()
    assert outstanding_in_the_turn == [500]
    assert watched.notified == 1
    assert producer._outstanding == 0
    assert producer.flush(0) == 0

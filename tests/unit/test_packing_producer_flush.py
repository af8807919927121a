"""flush() of the packing producer against a report that lands between its serve and its wait.

The loop thread appends a report, then notifies under the condition. If that happens after
flush() served the reports and before it took the condition, the notification is already
spent: flush() must serve the report rather than wait for another that never comes (it slept
to its deadline, and a 10,000-partition commit waited 60 s). Built without a broker: the
interleaving is the point, and only a stand-in for the loop thread can place it exactly.
"""

from __future__ import annotations

import threading
from collections import deque

from confluent_kafka import KafkaError

from mirror.kafka.packing_producer import PackingProducer
from mirror.kafka.produced import Produced


class _Watched(threading.Condition):
    """The producer's condition, noting whether a wait began with a report already in."""

    def __init__(self, reports: deque[object]) -> None:
        super().__init__()
        self.reports = reports
        self.slept_past_a_report = False

    def wait(self, timeout: float | None = None) -> bool:
        self.slept_past_a_report |= bool(self.reports)
        return super().wait(timeout)


def _idle_producer(outstanding: int) -> tuple[PackingProducer, _Watched]:
    producer = PackingProducer.__new__(PackingProducer)  # no loop, no broker: only its bookkeeping
    producer._pending = []
    producer._queue = None
    producer._reports = deque()
    producer._settled = watched = _Watched(producer._reports)  # type: ignore[arg-type]
    producer._outstanding = outstanding
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
            producer._report([record], None, 41)  # the loop thread, right after the serve
        return count

    producer._serve = serve_then_report  # type: ignore[method-assign]
    assert producer.flush(30) == 0
    assert delivered == [(None, 41)]
    assert not watched.slept_past_a_report


def test_flush_still_says_how_many_are_unreported_at_its_deadline() -> None:
    producer, _ = _idle_producer(outstanding=3)
    assert producer.flush(0.05) == 3

"""What a copy task counts as an aborted transaction when the target or a leader is away."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from mirror.kafka.transactions import AbortableError, RetriableError
from mirror.source import task as task_module
from mirror.source.stats import TaskStats
from mirror.source.task_reports import TaskReports
from mirror.source.task_spec import CopyTaskSpec, TaskSummary


@dataclass
class FakeWriters:
    """TaskProducers as run() sees them: open or not, a transaction open or not."""

    ready: bool = True
    in_transaction: bool = False
    aborts: int = 0

    def abort(self) -> None:
        self.aborts += 1
        self.in_transaction = False


@dataclass
class FakeStats:
    current: TaskStats = field(default_factory=lambda: TaskStats("A->B", 0))

    def send(self) -> None:
        pass


def _task(failures: Iterator[tuple[Exception, bool]]) -> task_module._CopyTask:
    """A copy task whose copy loop fails as `failures` say (the error, whether a transaction was
    open when it came), then ends its window."""
    task = object.__new__(task_module._CopyTask)
    task.writers = FakeWriters()  # type: ignore[assignment]
    task.stats = FakeStats()  # type: ignore[assignment]
    task.spec = CopyTaskSpec(0, 1, (("t", 0),), deadline=0.0, stats_address=None)
    task.parts = []
    task.summary = TaskSummary(0, 1, 0)
    task.reports = TaskReports(task.stats)  # type: ignore[arg-type]

    def copy() -> str:
        for error, open_transaction in failures:
            task.writers.in_transaction = open_transaction
            raise error
        return "window"

    task._copy = copy  # type: ignore[method-assign]
    task._rewind = lambda: None  # type: ignore[method-assign]
    return task


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_module.time, "sleep", lambda _: None)


def test_waits_without_a_transaction_open_are_not_counted_as_aborts() -> None:
    # A leader away for a while: every try fails before anything was written.
    task = _task(iter([(RetriableError("no leader for t-0"), False)] * 50))
    assert task.run().ended == "window"
    assert task.stats.current.aborted == 0
    assert [kind for kind, _ in task.stats.current.events] == ["waiting"]  # said once, not 50 times


def test_each_open_transaction_given_up_counts_once() -> None:
    failures = [
        (AbortableError("transaction timed out"), True),
        (RetriableError("coordinator loading"), False),
        (RetriableError("not enough replicas"), True),
    ]
    task = _task(iter(failures))
    task.run()
    assert task.stats.current.aborted == 2
    assert task.writers.aborts == 3  # each try still ends with an abort call: a no-op without one open

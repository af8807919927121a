"""When a copy task commits its open transaction: at the commit interval while it keeps up, up to
BEHIND_SECONDS later while its reads fill their batch (it is behind, and every commit costs each
partition it touches a batch, a marker and a position), and always at the size limits."""

from __future__ import annotations

from mirror.source.transaction import (
    BEHIND_SECONDS,
    MAX_TRANSACTION_BYTES,
    MAX_TRANSACTION_RECORDS,
    OpenTransaction,
)

INTERVAL = 0.1


def test_nothing_is_due_before_the_transaction_took_anything() -> None:
    assert not OpenTransaction().due(1e9, INTERVAL, behind=False)


def test_a_task_keeping_up_commits_once_the_interval_passed() -> None:
    open_one = OpenTransaction(opened_at=10.0, records=5)
    assert not open_one.due(10.05, INTERVAL, behind=False)
    assert open_one.due(10.2, INTERVAL, behind=False)


def test_a_task_behind_stays_open_past_the_interval_until_a_limit() -> None:
    behind = OpenTransaction(opened_at=10.0, records=40_000)
    assert not behind.due(10.0 + BEHIND_SECONDS / 2, INTERVAL, behind=True)
    assert behind.due(10.0 + BEHIND_SECONDS, INTERVAL, behind=True)  # a retry meets no larger one
    assert OpenTransaction(opened_at=10.0, records=MAX_TRANSACTION_RECORDS).due(10.0, INTERVAL, behind=True)
    full = OpenTransaction(opened_at=10.0, records=1, size=MAX_TRANSACTION_BYTES)
    assert full.due(10.0, INTERVAL, behind=True)

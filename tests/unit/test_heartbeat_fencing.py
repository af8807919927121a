"""A heartbeat write fenced by this run's own newer writer: rounds move between Spark's Python
workers, each with a writer of its own for the pair's one transactional id (mirror.heartbeat.task)."""

from __future__ import annotations

import time

import pytest

from mirror.config.flow_settings import FlowSettings
from mirror.errors import KafkaClientError, ProducerFencedError
from mirror.heartbeat import task
from tests.unit.flows import flow_a_to_b


def flow() -> FlowSettings:
    return flow_a_to_b(["orders"])


@pytest.fixture
def fenced_writes(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every write is fenced; returns when each was tried. The flow is still this run's."""
    tried: list[float] = []

    def fenced(*_: object) -> None:
        tried.append(time.time())
        raise ProducerFencedError("committing: producer fenced")

    monkeypatch.setattr(task, "_write", fenced)
    monkeypatch.setattr(task, "_stop_if_flow_taken_over", lambda _settings: None)
    monkeypatch.setattr(task.time, "sleep", lambda _seconds: None)
    monkeypatch.setattr(task, "_EMITTERS", {})
    return tried


def test_a_write_fenced_after_its_round_gives_way_without_fencing_the_newer_writer_back(
    fenced_writes: list[float],
) -> None:
    assert task._emit(flow(), "A", "B", {}, round_ends=time.monotonic() - 1) is None
    assert len(fenced_writes) == 1  # no second writer initialised to fence the newer one


def test_a_write_fenced_within_its_round_is_tried_again_with_a_new_writer_then_reported(
    fenced_writes: list[float],
) -> None:
    with pytest.raises(KafkaClientError, match="heartbeat A->B failed 2 times"):
        task._emit(flow(), "A", "B", {}, round_ends=time.monotonic() + 60)
    assert len(fenced_writes) == task.MAX_ATTEMPTS

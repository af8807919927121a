"""Reading a flow's last owner: a mark that cannot be read for now reads as no owner once the wait
is over; a refused permission is said, not taken for "no owner"."""

from __future__ import annotations

from typing import Any

import pytest

from mirror.config.flow_settings import FlowSettings
from mirror.errors import NotAuthorizedError
from mirror.kafka.transactions import RetriableError
from mirror.source import offsets_admin
from tests.unit.flows import flow_a_to_b


class Reader:
    def close(self) -> None:
        pass


def _settings() -> FlowSettings:
    return flow_a_to_b([], offsets_topic="mm2-offsets.A.internal")


def _reading(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def read(*_: Any) -> None:
        raise error

    monkeypatch.setattr(offsets_admin, "flow_mark_reader", lambda _: Reader())
    monkeypatch.setattr(offsets_admin, "read_flow_mark", read)
    monkeypatch.setattr(offsets_admin.time, "sleep", lambda _: None)


def test_a_mark_unreadable_for_the_whole_wait_reads_as_no_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    _reading(monkeypatch, RetriableError("the lease transaction is still open"))
    assert offsets_admin.last_owner(_settings(), wait_seconds=0) is None


def test_a_refused_read_of_the_mark_is_said_not_taken_for_no_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    refused = NotAuthorizedError("not authorized to read topic mm2-offsets.A.internal on B; grant Read")
    _reading(monkeypatch, refused)
    with pytest.raises(NotAuthorizedError, match="grant Read"):
        offsets_admin.last_owner(_settings(), wait_seconds=0)

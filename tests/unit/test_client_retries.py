"""`retrying`: which broker answers are asked again and which end the call with one line."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror.errors import KafkaClientError
from mirror.kafka.clients import COORDINATOR_CODES, retrying


def _failing_then(
    code: int, failures: int, *, retriable: bool = False
) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def action() -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise KafkaException(KafkaError(code, retriable=retriable))
        return "answered"

    return calls, action


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    ],
)
def test_a_group_coordinator_that_moved_or_is_loading_is_asked_again(code: int) -> None:
    # A broker that just started answers committed() with these until its offsets log is loaded.
    calls, action = _failing_then(code, failures=2)
    assert retrying(action, doing="reading committed positions") == "answered"
    assert len(calls) == 3


def test_a_lasting_coordinator_error_ends_with_what_was_being_done() -> None:
    calls, action = _failing_then(KafkaError.NOT_COORDINATOR, failures=1_000)
    with pytest.raises(KafkaClientError, match=r"^reading committed positions: "):
        retrying(action, doing="reading committed positions", timeout_seconds=0.5)
    assert len(calls) > 1


def test_an_error_that_will_not_pass_is_not_asked_again() -> None:
    calls, action = _failing_then(KafkaError.INVALID_CONFIG, failures=1_000)
    with pytest.raises(KafkaClientError):
        retrying(action, doing="reading committed positions")
    assert len(calls) == 1


def test_a_future_that_times_out_ends_with_one_line_naming_what_was_being_done() -> None:
    def action() -> str:
        raise TimeoutError

    with pytest.raises(KafkaClientError, match=r"^listing partition offsets: no answer in time; check "):
        retrying(action, doing="listing partition offsets")


def test_a_write_retries_only_the_codes_it_names() -> None:
    # A refusal that reflects a new state of the group (a member joined) reaches the caller at once.
    calls, action = _failing_then(KafkaError.REBALANCE_IN_PROGRESS, failures=2, retriable=True)
    assert retrying(action, doing="reading offsets") == "answered"  # a read may ask again
    calls, action = _failing_then(KafkaError.REBALANCE_IN_PROGRESS, failures=1_000, retriable=True)
    with pytest.raises(KafkaClientError):
        retrying(action, doing="writing offsets", only=COORDINATOR_CODES)
    assert len(calls) == 1
    calls, action = _failing_then(KafkaError.NOT_COORDINATOR, failures=2)
    assert retrying(action, doing="writing offsets", only=COORDINATOR_CODES) == "answered"

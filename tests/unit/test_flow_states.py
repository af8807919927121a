"""`mirror status`'s state of a flow: from its owner's lease mark (when taken, when last renewed) and
the heartbeats that come through the flow."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from mirror.config.flow_settings import FlowSettings, flow_settings
from mirror.config.models import MirrorConfig
from mirror.errors import KafkaClientError, MirrorError, NotAuthorizedError
from mirror.flow.mark import FlowMark
from mirror.runner import status
from mirror.runner.status import _state


def _settings(flows: dict[str, dict[str, Any]]) -> FlowSettings:
    config = MirrorConfig(clusters={a: {"bootstrap_servers": f"{a.lower()}:9092"} for a in "AB"}, flows=flows)
    return flow_settings(config, "A", "B", config.flows["A->B"])


ONE_WAY = _settings({"A->B": {}})
BOTH_WAYS = _settings({"A->B": {}, "B->A": {}})


def _owner(started_ago: float, renewed_ago: float, *, stopping: bool = False) -> FlowMark:
    now_ms = time.time() * 1000
    return FlowMark("i", 1, 1, stopping, int(now_ms - started_ago * 1000), int(now_ms - renewed_ago * 1000))


def test_a_flow_just_taken_with_no_heartbeat_through_it_yet_is_starting() -> None:
    state, detail = _state(ONE_WAY, _owner(10, 1), None, has_positions=False)
    assert state == "starting" and "no heartbeat came through yet" in detail


def test_a_flow_whose_heartbeats_arrive_is_running() -> None:
    assert _state(ONE_WAY, _owner(600, 1), 2.0, has_positions=True)[0] == "running"


def test_an_owner_that_renews_but_carries_no_heartbeats_for_long_is_stalled() -> None:
    # The source cluster is down, say: `mirror run` lives and waits, records do not flow.
    state, detail = _state(ONE_WAY, _owner(600, 1), 300.0, has_positions=True)
    assert state == "stalled" and "is the source cluster up?" in detail


def test_an_owner_that_stopped_renewing_its_lease_is_down_whatever_heartbeats_say() -> None:
    # Both flows of a pair in one run: the reverse flow's heartbeats would still arrive for a while.
    state, detail = _state(BOTH_WAYS, _owner(600, 120), 1.0, has_positions=True)
    assert state == "down" and "last renewed its lease 120 s ago" in detail


def test_with_both_flows_of_a_pair_enabled_heartbeats_still_show_the_flow_alive() -> None:
    # The flow B->A writes the heartbeats into A that A->B carries to B: A->B emits no reverse ones.
    assert not BOTH_WAYS.reverse_heartbeats and BOTH_WAYS.heartbeats_through
    assert _state(BOTH_WAYS, _owner(600, 1), 300.0, has_positions=True)[0] == "stalled"
    assert _state(BOTH_WAYS, _owner(600, 1), 2.0, has_positions=True)[0] == "running"


def test_a_clean_stop_and_a_mark_from_an_older_mirror() -> None:
    assert _state(ONE_WAY, _owner(600, 100, stopping=True), None, has_positions=True)[0] == "stopped"
    old = FlowMark("i", 1, 1)  # no times: heartbeats alone decide, as before
    assert _state(ONE_WAY, old, None, has_positions=True)[0] == "down"
    assert _state(ONE_WAY, old, 3.0, has_positions=True)[0] == "running"


def test_a_restarted_flow_is_starting_while_only_the_previous_runs_heartbeats_are_there() -> None:
    # Restarted 10 minutes after its last run: the newest heartbeat predates the new owner.
    state, _ = _state(ONE_WAY, _owner(20, 1), 600.0, has_positions=True)
    assert state == "starting"
    assert _state(ONE_WAY, _owner(20, 1), 3.0, has_positions=True)[0] == "running"


def test_a_flow_that_does_not_copy_heartbeats_is_judged_by_its_lease_alone() -> None:
    quiet = _settings({"A->B": {"heartbeats_replication": False}})
    assert not quiet.heartbeats_through
    assert _state(quiet, _owner(600, 1), None, has_positions=True)[0] == "running"
    assert _state(quiet, _owner(600, 300), None, has_positions=True)[0] == "down"


def test_waiting_for_the_lag_rides_out_a_read_that_times_out_and_names_it_if_the_wait_runs_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The target just back from an outage: its coordinator answers the second ask, not the first.
    answers: list[Exception | list[Any]] = [
        KafkaClientError("reading committed positions: Failed to get committed offsets: Local: Timed out"),
        [SimpleNamespace(to_copy=10)],
    ]
    monkeypatch.setattr(status, "list_positions", lambda *_a, **_k: _next(answers))
    monkeypatch.setattr(status, "WAIT_POLL_SECONDS", 0.0)
    status.wait_for_flow(ONE_WAY, lag=1000, stopped=False, timeout=60)
    assert answers == []

    def always_timing_out(*_a: object, **_k: object) -> list[Any]:
        raise KafkaClientError(
            "reading committed positions: Failed to get committed offsets: Local: Timed out"
        )

    monkeypatch.setattr(status, "list_positions", always_timing_out)
    with pytest.raises(
        MirrorError, match=r"after 0s, a read failed \(reading committed positions: .*Timed out\)"
    ):
        status.wait_for_flow(ONE_WAY, lag=1000, stopped=False, timeout=0)


def test_waiting_for_the_lag_stops_at_once_on_a_refused_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_a: object, **_k: object) -> list[Any]:
        raise NotAuthorizedError(
            "reading committed positions: not authorized to describe group __mirror-positions.A-B"
        )

    monkeypatch.setattr(status, "list_positions", refused)
    with pytest.raises(NotAuthorizedError):
        status.wait_for_flow(ONE_WAY, lag=1000, stopped=False, timeout=60)


def _next(answers: list[Exception | list[Any]]) -> list[Any]:
    answer = answers.pop(0)
    if isinstance(answer, Exception):
        raise answer
    return answer

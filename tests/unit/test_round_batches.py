from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from mirror import logs
from mirror.spark import rounds
from mirror.spark.rounds import Schedule, rounds_per_batch, run_rounds
from tests.unit.flows import flow_a_to_b

SETTINGS = flow_a_to_b(["orders"]).to_json()


@dataclass
class Row:
    n: int


def test_short_intervals_run_several_rounds_per_micro_batch_and_long_ones_one() -> None:
    assert rounds_per_batch(1.0) == 10  # MM2's default heartbeat interval
    assert rounds_per_batch(3.0) == 3
    assert rounds_per_batch(60.0) == 1  # MM2's default checkpoint interval
    assert rounds_per_batch(0.1) == 100


def test_rounds_keep_their_interval_and_stop_early_once_the_stop_file_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop_file = tmp_path / "stop"
    started: list[float] = []

    def round_(_settings: object) -> list[Row]:
        started.append(time.monotonic())
        if len(started) == 3:
            stop_file.touch()
        return [Row(len(started))]

    tick = pa.RecordBatch.from_pylist([{"tick": 0}])
    begun = time.monotonic()
    out = list(run_rounds(round_, Row, SETTINGS, Schedule(10, 0.05, str(stop_file)), iter([tick])))
    assert [batch.to_pylist() for batch in out] == [[{"n": 1}], [{"n": 2}], [{"n": 3}]]
    # Each round starts on its slot of the schedule (never before it). The slots count from the
    # batch's start, which is after `begun` but before round 0 records its time: measuring from
    # round 0 instead would put round 1 a few microseconds "early" (CI, stop 30).
    offsets = [at - begun for at in started]
    assert all(offset >= index * 0.05 for index, offset in enumerate(offsets)), offsets
    assert rounds.MIN_BATCH_SECONDS >= 1


def test_a_round_blocked_on_a_cluster_is_abandoned_once_the_stop_file_appears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A round waiting on a cluster that is down must not hold up shutdown for its client timeouts.
    monkeypatch.setattr(rounds, "ROUND_STOP_GRACE_SECONDS", 0.5)
    stop_file = tmp_path / "stop"
    release, returned = threading.Event(), threading.Event()

    def round_(_settings: object) -> list[Row]:
        stop_file.touch()  # shutdown begins while the round waits
        release.wait(30)
        returned.set()
        return [Row(1)]

    tick = pa.RecordBatch.from_pylist([{"tick": 0}])
    out = list(run_rounds(round_, Row, SETTINGS, Schedule(3, 0.05, str(stop_file)), iter([tick])))
    assert out == [] and not returned.is_set(), "the batch ended while its round still waited"
    release.set()


def test_a_round_running_when_the_stop_file_appears_finishes_within_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A healthy round is not cut off mid-transaction by a stop.
    monkeypatch.setattr(rounds, "ROUND_STOP_GRACE_SECONDS", 30.0)
    stop_file = tmp_path / "stop"

    def round_(_settings: object) -> list[Row]:
        stop_file.touch()
        time.sleep(0.5)  # several stop checks pass while it runs
        return [Row(1)]

    tick = pa.RecordBatch.from_pylist([{"tick": 0}])
    out = list(run_rounds(round_, Row, SETTINGS, Schedule(3, 0.05, str(stop_file)), iter([tick])))
    assert [batch.to_pylist() for batch in out] == [[{"n": 1}]]


def test_a_round_that_fails_fails_the_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    def round_(_settings: object) -> list[Row]:
        raise KeyError("the broker said no")

    tick = pa.RecordBatch.from_pylist([{"tick": 0}])
    with pytest.raises(KeyError, match="the broker said no"):
        list(run_rounds(round_, Row, SETTINGS, Schedule(1, 0.05, str(tmp_path / "stop")), iter([tick])))


def test_a_round_logs_json_lines_naming_its_flow_and_component_with_the_flows_levels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The worker process knows nothing of the driver's logging: the settings carry it.
    settings = flow_a_to_b(["orders"], log_format="json", log_levels={"mirror.checkpoint": "WARNING"})

    def round_(_settings: object) -> list[Row]:
        logging.getLogger("mirror.checkpoint.task").info("not shown: below the flow's level")
        logging.getLogger("mirror.checkpoint.task").warning("group %s not synced", "billing")
        return [Row(1)]

    tick = pa.RecordBatch.from_pylist([{"tick": 0}])
    try:
        schedule = Schedule(1, 0.05, str(tmp_path / "stop"), "checkpoint")
        list(run_rounds(round_, Row, settings.to_json(), schedule, iter([tick])))
    finally:
        logs.configure("text")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(line["level"], line["logger"], line["message"]) for line in lines] == [
        ("WARNING", "mirror.checkpoint.task", "group billing not synced")
    ]
    assert lines[0]["flow"] == "A->B" and lines[0]["component"] == "checkpoint"
    assert "time" in lines[0]

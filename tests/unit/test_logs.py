"""mirror.logs: the one set-up of the driver and of every Spark worker, and the lines it writes."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import threading
from collections.abc import Iterator

import pytest

from mirror import logs
from mirror.spark import gateway


@pytest.fixture(autouse=True)
def text_logs_after() -> Iterator[None]:
    yield
    logs.configure("text")


def test_a_json_line_names_its_flow_component_task_and_partition_with_a_utc_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("json")
    with logs.log_context(flow="A->B", component="source", task=1):
        logging.getLogger("mirror.source.start").warning("moved", extra={"partition": "orders-3"})
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record == {
        "time": record["time"],
        "level": "WARNING",
        "logger": "mirror.source.start",
        "message": "moved",
        "flow": "A->B",
        "component": "source",
        "task": 1,
        "partition": "orders-3",
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"]), record["time"]


def test_a_text_line_names_a_few_of_many_partitions_and_their_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("text")
    partitions = [f"orders-{p}" for p in range(8)]
    with logs.log_context(flow="A->B", component="source", task=0):
        logging.getLogger("mirror.source.task").info("took 8 partitions", extra={"partitions": partitions})
    logging.getLogger("mirror.runner").info("outside any flow")
    took, outside = capsys.readouterr().err.splitlines()
    assert took.endswith(
        " INFO mirror.source.task: [A->B source task 0 orders-0,orders-1,orders-2 +5] took 8 partitions"
    )
    assert outside.endswith(" INFO mirror.runner: outside any flow")


def test_levels_from_the_configuration_apply_and_a_new_set_up_undoes_the_old_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("text", {"mirror.source": "DEBUG", "mirror.checkpoint": "WARNING"})
    logging.getLogger("mirror.source.task").debug("a transaction")
    logging.getLogger("mirror.checkpoint.task").info("a round")
    logs.configure("text", {"mirror.heartbeat": "DEBUG"})
    logging.getLogger("mirror.source.task").debug("not shown any more")
    logging.getLogger("mirror.checkpoint.task").info("shown again")
    messages = [line.split(": ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    assert messages == ["a transaction", "shown again"]


def test_context_reaches_threads_only_when_handed_over(capsys: pytest.CaptureFixture[str]) -> None:
    # The heartbeat round hands its context to its writer threads (contextvars.copy_context).
    logs.configure("json")
    with logs.log_context(flow="A->B", component="heartbeat"):
        context = contextvars.copy_context()
    thread = threading.Thread(
        target=context.run, args=(logging.getLogger("mirror.heartbeat").info, "written")
    )
    thread.start()
    thread.join()
    (line,) = capsys.readouterr().err.splitlines()
    assert json.loads(line)["component"] == "heartbeat"


def test_the_jvms_lines_become_json_lines_at_their_own_level_when_the_run_logs_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("json")
    worker_line = json.dumps({"level": "INFO", "logger": "mirror.source.task", "message": "took"})
    for line in (
        "04:50:01 spark ERROR TaskSchedulerImpl: Lost executor 0\n",
        "\tat org.apache.spark.scheduler.Task.run(Task.scala:141)\n",
        worker_line + "\n",
    ):
        gateway._write_through(line)
    lines = capsys.readouterr().err.splitlines()
    wrapped = [json.loads(line) for line in lines[:2]]
    assert [(r["level"], r["logger"]) for r in wrapped] == [
        ("ERROR", "mirror.spark.jvm"),
        ("WARNING", "mirror.spark.jvm"),
    ]
    assert wrapped[0]["message"] == "04:50:01 spark ERROR TaskSchedulerImpl: Lost executor 0"
    assert lines[2] == worker_line  # a worker's own JSON line passes through as it is

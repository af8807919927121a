from mirror.runner.components import failure_line

PYTHON_WORKER_FAILURE = (
    "[PYTHON_EXCEPTION] An exception was thrown from the Python worker: "
    "Traceback (most recent call last):\n"
    """  File "/work/main/mirror/source/task.py", line 267, in _commit
    print(max(ages))
          ^^^^^^^^^
ValueError: max() arg is an empty sequence

JVM stacktrace:
org.apache.spark.SparkException: Job aborted due to stage failure
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2935)
"""
)


def test_a_python_workers_failure_is_named_by_its_exception_line_not_by_traceback() -> None:
    assert failure_line(PYTHON_WORKER_FAILURE) == (
        "a Python worker raised ValueError: max() arg is an empty sequence"
    )


def test_other_failures_are_named_by_their_first_line() -> None:
    assert failure_line("\n  org.apache.spark.SparkException: boom\n\tat x\n") == (
        "org.apache.spark.SparkException: boom"
    )

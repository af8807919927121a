import logging

import pytest

from mirror.spark.gateway import forward_lines

TRACEBACK = [
    "Traceback (most recent call last):\n",
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n',
    "    with get_sock_file_to_executor(timeout=None) as sock_file:\n",
    "pyspark.errors.exceptions.base.PySparkRuntimeError: [CANNOT_OPEN_SOCKET] Can not open socket\n",
]


def test_a_python_traceback_on_the_jvms_stderr_becomes_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    written: list[str] = []
    with caplog.at_level(logging.WARNING, logger="mirror.spark.gateway"):
        forward_lines(["WARN before\n", *TRACEBACK, "after\n"], written.append)
    assert written == ["WARN before\n", "after\n"]
    assert [r.getMessage() for r in caplog.records] == [
        "a Spark Python process failed: pyspark.errors.exceptions.base.PySparkRuntimeError: "
        "[CANNOT_OPEN_SOCKET] Can not open socket"
    ]


def test_a_traceback_cut_off_by_the_jvm_exiting_is_still_reported(caplog: pytest.LogCaptureFixture) -> None:
    written: list[str] = []
    with caplog.at_level(logging.WARNING, logger="mirror.spark.gateway"):
        forward_lines(TRACEBACK[:2], written.append)
    assert written == []
    assert len(caplog.records) == 1


def test_a_chained_traceback_is_one_warning_per_exception_and_nothing_raw(
    caplog: pytest.LogCaptureFixture,
) -> None:
    written: list[str] = []
    chained = [
        *TRACEBACK,
        "\n",
        "During handling of the above exception, another exception occurred:\n",
        "\n",
        "Traceback (most recent call last):\n",
        '  File "x.py", line 1, in <module>\n',
        "ConnectionResetError: [Errno 104] Connection reset by peer\n",
        "after\n",
    ]
    with caplog.at_level(logging.WARNING, logger="mirror.spark.gateway"):
        forward_lines(chained, written.append)
    assert written == ["after\n"]
    assert len(caplog.records) == 2

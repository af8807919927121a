from __future__ import annotations

from pathlib import Path

from tests.module_seconds import module_order, seconds_from_junit

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.reliability.test_copy_tasks" name="test_a" time="400.5"/>
<testcase classname="tests.reliability.test_copy_tasks" name="test_b[x]" time="100.0"/>
<testcase classname="tests.unit.test_config.TestFlows" name="test_c" time="0.25"/>
</testsuite></testsuites>
"""


def test_modules_run_longest_first_and_unrecorded_ones_before_all() -> None:
    seconds = {"tests/a.py": 10.0, "tests/b.py": 300.0, "tests/c.py": 0.1}
    order = module_order(["tests/a.py", "tests/b.py", "tests/new.py", "tests/c.py"], seconds)
    assert order == ["tests/new.py", "tests/b.py", "tests/a.py", "tests/c.py"]


def test_a_junit_report_sums_per_module_and_a_test_class_counts_for_its_module(tmp_path: Path) -> None:
    first, second = tmp_path / "parallel.xml", tmp_path / "solo.xml"
    first.write_text(REPORT, encoding="utf-8")
    second.write_text(REPORT.replace("400.5", "1.0"), encoding="utf-8")
    assert seconds_from_junit([first, second]) == {
        "tests/reliability/test_copy_tasks.py": 601.5,
        "tests/unit/test_config.py": 0.5,
    }

"""docs/reliability.md's table: what each case checked, and a result that cannot hide a loss."""

from __future__ import annotations

import pytest

from tests.records import Comparison
from tests.reliability.report import ReliabilityReport


def test_a_fault_row_shows_its_counts_and_fails_on_any_loss_even_if_its_test_passed() -> None:
    report = ReliabilityReport()
    kill, stall = "tests/reliability/test_f.py::test_kill", "tests/reliability/test_f.py::test_stall[2]"
    report.record("fault", "kill", kill, comparison=Comparison(1000, 0, 0, 0), shown="exit 0", does="resumes")
    report.record("fault", "stall", stall, comparison=Comparison(500, 2, 1, 0), shown="a | b", does="waits")
    report.outcomes.update({kill: "passed", stall: "passed"})
    table = report.markdown()
    assert "| kill | resumes | `test_f.py::test_kill` | 1,000 | 0 | 0 | 0 | exit 0 | pass |" in table
    assert "| stall | waits | `test_f.py::test_stall` | 500 | 2 | 1 | 0 | a \\| b | **FAILED** |" in table


def test_a_bad_input_row_shows_exit_code_and_message_and_the_test_outcome() -> None:
    report = ReliabilityReport()
    report.record("bad input", "bad yaml", "t::c", shown="mirror: x.yaml:4:4: not valid YAML", exit_code=2)
    report.outcomes["t::c"] = "failed"
    assert "| bad yaml | `t::c` | 2 | mirror: x.yaml:4:4: not valid YAML | **FAILED** |" in report.markdown()


def test_unknown_sections_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown report section"):
        ReliabilityReport().record("faults", "x", "t::d")


def test_a_fault_that_does_not_say_what_mirror_does_is_refused() -> None:
    with pytest.raises(ValueError, match="say what mirror does"):
        ReliabilityReport().record("fault", "kill", "t::e", comparison=Comparison(1, 0, 0, 0))

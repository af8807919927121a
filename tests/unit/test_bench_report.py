"""The benchmark report: ratios against the right MirrorMaker 2 row and the ceiling, honest gaps."""

from __future__ import annotations

from typing import Any

from bench.report import markdown
from bench.workloads import Values


def _catch_up(rate: float, *, complete: bool = True, duplicated: int = 0) -> dict[str, Any]:
    verdict = {"missing": 0 if complete else 5, "duplicated": duplicated}
    return {
        "records_per_second": rate,
        "megabytes_per_second": rate / 1e4,
        "complete": complete,
        "verdict": verdict,
    }


def _results() -> dict[str, Any]:
    latency = {"records": 100, "received": 100, "p50_ms": 5.0, "p99_ms": 40.0, "max_ms": 50.0}
    return {
        "mode": "quick",
        "machine": {"cpus": 2},
        "kafka_version": "4.3.1",
        "mirror_commit": "abc",
        "started": "now",
        "steady": {"rate": 100, "seconds": 1},
        "contenders": [
            {
                "name": "ceiling",
                "label": "ceiling",
                "catch_up": {"100b": _catch_up(400.0)},
                "latency": latency,
            },
            {"name": "mm2-alo", "label": "mm2 alo", "catch_up": {"100b": _catch_up(100.0, duplicated=7)}},
            {"name": "mm2-eos", "label": "mm2 eos", "catch_up": {"100b": _catch_up(80.0)}},
            {
                "name": "mirror-eos",
                "label": "mirror eos",
                "catch_up": {"100b": _catch_up(120.0, complete=False)},
                "latency": {**latency, "p99_ms": 20.0},
                "translation": {"synced": False},
            },
        ],
    }


def _row(table: str, label: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_mirror_is_compared_with_mm2_in_the_same_mode_and_with_the_ceiling() -> None:
    row = _row(markdown(_results()), "mirror eos")
    assert row[4] == "1.50x"  # 120 / mm2 exactly-once's 80, not at-least-once's 100
    assert row[5] == "0.30x"  # 120 / 400


def test_incomplete_copies_and_duplicates_are_shown_not_hidden() -> None:
    table = markdown(_results())
    assert _row(table, "mirror eos")[-1] == "NO (5 missing)"
    assert _row(table, "mm2 alo")[-1] == "yes, 7 duplicates"


def test_a_group_never_synced_is_reported_as_such() -> None:
    latency_table = markdown(_results()).split("\n\n")[-1]
    row = _row(latency_table, "mirror eos")
    assert row[-1] == "not synced"
    assert row[6] == "-"  # MM2 exactly-once has no latency result to compare with


def test_workload_values_are_unique_and_rebuilt_identically() -> None:
    values, again = Values(100), Values(100)
    assert len({values(i) for i in range(5000)}) == 5000
    assert all(values(i) == again(i) and len(values(i)) == 100 for i in range(0, 5000, 97))

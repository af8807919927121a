"""A bench run of several rounds: the contenders' order alternates, and the tables give medians."""

from __future__ import annotations

from typing import Any

from bench.report import markdown
from bench.rounds import medians, order, run_name


def test_the_order_alternates_and_the_ceiling_runs_in_the_first_round_only() -> None:
    names = ["ceiling", "mirror-eos", "mm2-eos"]
    assert [order(names, index) for index in range(3)] == [
        ["ceiling", "mirror-eos", "mm2-eos"],
        ["mm2-eos", "mirror-eos"],
        ["mirror-eos", "mm2-eos"],
    ]


def test_each_later_round_runs_under_names_of_its_own() -> None:
    assert [run_name("mirror-eos", index) for index in range(3)] == [
        "mirror-eos",
        "mirror-eos-r2",
        "mirror-eos-r3",
    ]


def _row(name: str, p99: float, *, complete: bool = True, error: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"records_per_second": p99 * 10, "complete": complete}
    if error is not None:
        result = {"error": error, "complete": False}
    return {
        "name": name,
        "label": name,
        "catch_up": {"100b": result},
        "latency": {"records": 100, "received": 100, "p50_ms": p99 / 2, "p99_ms": p99, "max_ms": p99},
    }


def test_each_figure_is_the_median_of_the_rounds_in_the_first_rounds_order() -> None:
    rounds = [
        [_row("mirror-eos", 300.0), _row("mm2-eos", 100.0)],
        [_row("mm2-eos", 500.0), _row("mirror-eos", 100.0)],
        [_row("mirror-eos", 200.0), _row("mm2-eos", 200.0)],
    ]
    merged = medians(rounds)
    assert [row["name"] for row in merged] == ["mirror-eos", "mm2-eos"]
    assert merged[0]["latency"]["p99_ms"] == 200.0
    assert merged[1]["latency"]["p99_ms"] == 200.0
    assert merged[0]["latency"]["received"] == 100 and isinstance(merged[0]["latency"]["received"], int)
    assert merged[0]["catch_up"]["100b"]["records_per_second"] == 2000.0


def test_a_round_that_failed_shows_in_the_medians() -> None:
    rounds = [
        [_row("mirror-eos", 300.0), _row("mm2-eos", 100.0)],
        [_row("mm2-eos", 500.0), _row("mirror-eos", 100.0, error="stalled at 60%")],
    ]
    merged = medians(rounds)
    # The failure, not the other round's figures.
    assert merged[0]["catch_up"]["100b"] == {"error": "stalled at 60%", "complete": False}


def test_a_defect_in_any_round_shows_in_the_medians() -> None:
    def verdict(duplicated: int, received: int) -> dict[str, Any]:
        row = _row("mirror-eos", 100.0)
        row["catch_up"]["100b"]["verdict"] = {"missing": 0, "duplicated": duplicated}
        row["latency"]["received"] = received
        return row

    merged = medians([[verdict(0, 100)], [verdict(7, 99)], [verdict(0, 100)]])[0]
    assert merged["catch_up"]["100b"]["verdict"] == {"missing": 0, "duplicated": 7}
    assert merged["latency"]["received"] == 99


def test_whole_numbers_stay_whole_over_an_even_number_of_rounds() -> None:
    first, second = _row("mirror-eos", 100.0), _row("mirror-eos", 100.0)
    first["latency"]["records"], second["latency"]["records"] = 11_999, 12_000
    assert medians([[first], [second]])[0]["latency"]["records"] == 11_999


def test_a_steady_load_that_failed_in_one_round_is_failed_in_the_medians() -> None:
    failed = _row("mirror-eos", 100.0)
    del failed["latency"]
    failed["latency_error"] = "stopped answering"
    merged = medians([[_row("mirror-eos", 100.0)], [failed]])[0]
    assert "latency" not in merged
    assert merged["latency_error"] == "stopped answering"


def test_the_report_gives_the_medians_then_each_round_with_its_order() -> None:
    first = [_row("mirror-eos", 300.0), _row("mm2-eos", 100.0)]
    second = [_row("mm2-eos", 100.0), _row("mirror-eos", 50.0)]
    results = {
        "mode": "quick",
        "machine": {"cpus": 2},
        "kafka_version": "4.3.1",
        "mirror_commit": "abc",
        "started": "now",
        "steady": {"rate": 100, "seconds": 1},
        "contenders": medians([first, second]),
        "rounds": [
            {"order": ["mirror-eos", "mm2-eos"], "contenders": first},
            {"order": ["mm2-eos", "mirror-eos"], "contenders": second},
        ],
    }
    text = markdown(results)
    assert (
        "Medians of 2 rounds, the contenders' order alternating "
        "(round 1: mirror-eos, mm2-eos; 2: mm2-eos, mirror-eos)" in text
    )
    ratios = [line.split(" | ")[6] for line in text.splitlines() if line.startswith("| mirror-eos | 100/s")]
    assert ratios == ["1.75x", "3.00x", "0.50x"]  # the medians (175 / 100), round 1, round 2

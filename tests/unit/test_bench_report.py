"""The benchmark report: ratios against the right MirrorMaker 2 row and the ceiling, honest gaps."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from bench.report import markdown
from bench.workloads import FULL, QUICK, Values


def _catch_up(rate: float, *, complete: bool = True, duplicated: int = 0) -> dict[str, Any]:
    verdict = {"missing": 0 if complete else 5, "duplicated": duplicated}
    return {
        "records_per_second": rate,
        "megabytes_per_second": rate / 1e4,
        "peak_rss_megabytes": rate * 7,
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


def _steady_many(p99_ms: float, *, delivered: int = 120_000) -> dict[str, Any]:
    return {
        "records": 120_000,
        "received": delivered,
        "delivered": delivered,
        "delivered_within_seconds": 90,
        "p50_ms": p99_ms / 4,
        "p99_ms": p99_ms,
        "max_ms": p99_ms * 2,
        "peak_rss_megabytes": p99_ms * 3,
    }


def _many_results() -> dict[str, Any]:
    """The quick fixture plus the 1,000-partition workload: catch-up and steady load."""
    results = _results()
    results["workloads"] = [{"name": "100b"}, {"name": "1000p-100b"}]
    results["steady_many"] = {"rate": 2000, "seconds": 60, "wait_seconds": 90, "partitions": 1000}
    rows = {row["name"]: row for row in results["contenders"]}
    rows["mm2-alo"]["catch_up"]["1000p-100b"] = _catch_up(50.0)
    rows["mm2-alo"]["latency_many"] = _steady_many(300.0)
    rows["mm2-eos"]["catch_up"]["1000p-100b"] = _catch_up(20.0)
    rows["mm2-eos"]["latency_many"] = _steady_many(500.0)
    rows["mirror-eos"]["catch_up"]["1000p-100b"] = _catch_up(30.0)
    rows["mirror-eos"]["latency_many"] = _steady_many(1000.0)
    results["contenders"].append(
        {
            "name": "mirror-alo",
            "label": "mirror alo",
            "catch_up": {"1000p-100b": _catch_up(60.0)},
            "latency_many": _steady_many(2000.0, delivered=33_600),
        }
    )
    return results


def _rows(table: str, label: str) -> list[list[str]]:
    lines = [line for line in table.splitlines() if line.startswith(f"| {label} |")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def _catch_up_row(table: str, label: str, workload: str) -> list[str]:
    return next(row for row in _rows(table, label) if row[1] == workload)


def _many_steady_row(table: str, label: str) -> list[str]:
    return next(row for row in _rows(table, label) if row[1].endswith("over 1,000 partitions"))


def test_the_many_partitions_catch_up_is_compared_with_the_same_workload_and_mode() -> None:
    table = markdown(_many_results())
    assert _catch_up_row(table, "mirror eos", "1000p-100b")[4] == "1.50x"  # 30 / mm2 eos's 20, not 50 or 80
    assert _catch_up_row(table, "mirror alo", "1000p-100b")[4] == "1.20x"  # 60 / mm2 alo's 50
    assert _catch_up_row(table, "mirror eos", "100b")[4] == "1.50x"  # the 8-partition row is unchanged


def test_the_many_partitions_workload_has_no_ceiling_and_says_so() -> None:
    table = markdown(_many_results())
    assert _catch_up_row(table, "mirror eos", "1000p-100b")[5] == "-"
    ceiling = _catch_up_row(table, "ceiling", "1000p-100b")
    assert ceiling[2:9] == ["-"] * 7
    assert ceiling[-1] == "not measured"
    assert "No broker ceiling for 1000p-100b" in table


def test_the_many_partitions_steady_p99_goes_to_the_same_mode_many_partitions_row() -> None:
    latency_table = markdown(_many_results()).split("\n\n")[-1]
    row = _many_steady_row(latency_table, "mirror eos")
    assert row[1] == "2,000/s x 60 s over 1,000 partitions"
    assert row[6] == "2.00x"  # 1,000 ms / mm2 eos's 500 ms: not mm2 alo's 300, not the 8-partition 40
    assert row[-1] == "-"  # translation is measured on the 8-partition load only
    assert _row(latency_table, "mirror eos")[6] == "-"  # the 8-partition row still has no MM2 eos peer


def test_a_contender_that_delivered_part_of_the_load_is_shown_as_such() -> None:
    latency_table = markdown(_many_results()).split("\n\n")[-1]
    row = _many_steady_row(latency_table, "mirror alo")
    assert row[5] == "33,600/120,000"
    assert row[12] == "28.0% in 90 s"
    assert _many_steady_row(latency_table, "mm2 alo")[12] == "100.0% in 90 s"


def test_the_steady_window_shows_its_own_peak_memory_not_the_catch_ups() -> None:
    latency_table = markdown(_many_results()).split("\n\n")[-1]
    assert _many_steady_row(latency_table, "mirror eos")[11] == "3,000"  # its own, not the catch-up's
    assert _catch_up_row(markdown(_many_results()), "mirror eos", "1000p-100b")[8] == "210"


def test_delivery_is_rounded_down_so_a_missing_record_never_reads_100_percent() -> None:
    results = _many_results()
    results["contenders"][1]["latency_many"] = _steady_many(300.0, delivered=119_999)
    latency_table = markdown(results).split("\n\n")[-1]
    assert _many_steady_row(latency_table, "mm2 alo")[12] == "99.9% in 90 s"


def test_what_the_load_cost_the_brokers_is_shown_and_so_is_a_full_gc_on_either() -> None:
    results = _many_results()
    results["contenders"][1]["latency_many"] |= {
        "source_broker_cpu_seconds_per_million": 30.0,
        "target_broker_cpu_seconds_per_million": 45.5,
        "source_broker_full_gcs": 375,
        "target_broker_full_gcs": 0,
    }
    results["contenders"][2]["latency_many"] |= {
        "source_broker_cpu_seconds_per_million": 12.0,
        "target_broker_cpu_seconds_per_million": 20.0,
        "source_broker_full_gcs": 0,
        "target_broker_full_gcs": 0,
    }
    latency_table = markdown(results).split("\n\n")[-1]
    assert _many_steady_row(latency_table, "mm2 alo")[10] == "30.0, 45.5 (full GCs: source 375)"
    assert _many_steady_row(latency_table, "mm2 eos")[10] == "12.0, 20.0"
    assert _many_steady_row(latency_table, "mirror eos")[10] == "-"  # measured before brokers were


def test_latency_from_the_source_append_is_shown_beside_the_one_from_send_and_compared_with_mms() -> None:
    results = _many_results()
    rows = {row["name"]: row for row in results["contenders"]}
    rows["mm2-eos"]["latency_many"] |= {"from_append_p50_ms": 250.0, "from_append_p99_ms": 600.0}
    rows["mirror-eos"]["latency_many"] |= {"from_append_p50_ms": 100.0, "from_append_p99_ms": 300.0}
    latency_table = markdown(results).split("\n\n")[-1]
    row = _many_steady_row(latency_table, "mirror eos")
    assert row[6] == "2.00x"  # from send, as before
    assert row[7:9] == ["100.0, 300.0", "0.50x"]  # 300 / mm2 eos's 600
    assert _many_steady_row(latency_table, "mirror alo")[7:9] == ["-", "-"]  # not measured in that run


def test_a_steady_load_that_failed_is_listed_not_dropped() -> None:
    results = _many_results()
    row = results["contenders"][-1]
    del row["latency_many"]
    row["latency_many_error"] = "exited with 1"
    failed = _many_steady_row(markdown(results).split("\n\n")[-1], "mirror alo")
    assert failed[5] == "failed"


def test_many_partitions_topics_are_spread_evenly_and_selected_exactly() -> None:
    many = QUICK.many
    layout = many.catch_up.topic_set
    assert (layout.topics, layout.partitions, layout.total) == (100, 10, 1000)
    counts = Counter(layout.place(i) for i in range(many.catch_up.records))
    assert len(counts) == 1000
    assert set(counts.values()) == {100}
    steady_topics = many.steady_topics("mm2-alo")
    others = [
        *(w.topic for w in FULL.catch_up),
        "steady-mm2-alo",
        *many.steady_topics("mirror-eos").names,
    ]
    for pattern, names in ((layout.pattern, layout.names), (steady_topics.pattern, steady_topics.names)):
        assert all(re.fullmatch(pattern, name) for name in names)
        assert not any(re.fullmatch(pattern, name) for name in others)
    assert not any(re.fullmatch(layout.pattern, name) for name in steady_topics.names)
    for pattern in (layout.pattern, steady_topics.pattern):  # MM2 reads them from a .properties file
        assert "\\" not in pattern
        assert "," not in pattern


def test_the_warm_up_is_said_with_its_latency_or_its_failure() -> None:
    load = {"rate": 2000, "seconds": 15, "partitions": 1000}
    warmed = {"seconds": 60, "latency": {"p50_ms": 1234.4, "p99_ms": 2500.0}}
    said = markdown({**_results(), "steady_many": load, "warm_up": warmed})
    copied = "the floor copied 2,000 records/s over 1,000 partitions for 60 s before the first contender"
    assert copied in said
    assert "(its p50/p99 1,234/2,500 ms)" in said
    failed = markdown({**_results(), "steady_many": load, "warm_up": {"seconds": 60, "error": "it died"}})
    assert "and failed: it died" in failed
    assert "Warm-up" not in markdown({**_results(), "warm_up": None})

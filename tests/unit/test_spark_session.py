"""How mirror turns the configured Spark master into the one it starts."""

from __future__ import annotations

import os

from mirror.spark.session import local_master


def test_local_masters_get_round_slots_and_task_retries() -> None:
    assert local_master("local[2]") == "local[4,4]"
    assert local_master("local") == "local[3,4]"
    assert local_master("local[*]") == f"local[{(os.cpu_count() or 1) + 2},4]"


def test_explicit_local_settings_and_cluster_masters_are_kept() -> None:
    assert local_master("local[3,2]") == "local[3,2]"
    assert local_master("spark://10.0.0.1:7077") == "spark://10.0.0.1:7077"
    assert local_master("yarn") == "yarn"

"""How mirror turns the configured Spark master into the one it starts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mirror.spark import jvm
from mirror.spark.session import local_master


def test_local_masters_get_round_slots_and_task_retries() -> None:
    assert local_master("local[2]") == "local[4,4]"
    assert local_master("local") == "local[3,4]"
    assert local_master("local[*]") == f"local[{(os.cpu_count() or 1) + 2},4]"


def test_explicit_local_settings_and_cluster_masters_are_kept() -> None:
    assert local_master("local[3,2]") == "local[3,2]"
    assert local_master("spark://10.0.0.1:7077") == "spark://10.0.0.1:7077"
    assert local_master("yarn") == "yarn"


def test_one_run_at_a_time_writes_the_class_archive_and_later_runs_map_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jvm, "cache_root", lambda: tmp_path)
    first, second = jvm.driver_java_options(), jvm.driver_java_options()
    assert "-XX:ArchiveClassesAtExit=" in first
    assert "ArchiveClassesAtExit" not in second and "SharedArchiveFile" not in second
    archive = Path(first.split("-XX:ArchiveClassesAtExit=")[1].split()[0])
    archive.write_bytes(b"classes")  # what the first run's JVM leaves when it exits
    assert f"-XX:SharedArchiveFile={archive}" in jvm.driver_java_options()


def test_a_claim_to_write_the_archive_left_by_a_killed_run_expires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jvm, "cache_root", lambda: tmp_path)
    assert "ArchiveClassesAtExit" in jvm.driver_java_options()
    (claim,) = tmp_path.glob("jvm/*.writing")
    old = time.time() - 3600
    os.utime(claim, (old, old))
    assert "ArchiveClassesAtExit" in jvm.driver_java_options()

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


def _written_part(options: str) -> Path:
    return Path(options.split("-XX:ArchiveClassesAtExit=")[1].split(maxsplit=1)[0])


def test_runs_without_a_class_archive_each_write_their_own_and_a_later_run_maps_a_finished_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jvm, "cache_root", lambda: tmp_path)
    first = _written_part(jvm.driver_java_options())
    first.write_bytes(b"classes")  # what the run's JVM leaves as it exits
    monkeypatch.setattr(jvm.os, "getpid", lambda: 4242)  # a run started beside the first
    second = _written_part(jvm.driver_java_options())
    assert second != first and second.name.endswith(".4242.part")
    settled = time.time() - 60
    os.utime(first, (settled, settled))
    options = jvm.driver_java_options()
    archive = first.with_name(first.name.rsplit(".", 2)[0])
    assert f"-XX:SharedArchiveFile={archive}" in options and "ArchiveClassesAtExit" not in options
    assert archive.read_bytes() == b"classes" and not first.exists()


def test_a_part_still_being_written_is_not_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jvm, "cache_root", lambda: tmp_path)
    _written_part(jvm.driver_java_options()).write_bytes(b"half")
    assert "SharedArchiveFile" not in jvm.driver_java_options()

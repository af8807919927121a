"""Class data sharing for the JVMs mirror starts: who writes the archive, and when it is mapped."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mirror.local import class_archive
from mirror.local.broker import BrokerSpec, LocalBroker
from mirror.spark import jvm


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(class_archive, "cache_root", lambda: tmp_path)


def _written_part(options: list[str]) -> Path:
    (written,) = [o.split("=", 1)[1] for o in options if o.startswith("-XX:ArchiveClassesAtExit=")]
    return Path(written)


def _settled(part: Path) -> None:
    """As a part looks once its JVM has finished writing it."""
    then = time.time() - class_archive.PART_SETTLED_SECONDS - 1
    os.utime(part, (then, then))


def test_jvms_started_side_by_side_without_an_archive_each_write_their_own_and_a_later_one_maps_it(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "jvm" / "kafka-x.jsa"
    first = _written_part(class_archive.archive_options(archive))
    second = _written_part(class_archive.archive_options(archive))  # same process: a cluster's nodes
    assert first != second and first.parent == second.parent == archive.parent
    first.write_bytes(b"classes")  # what its JVM leaves as it exits
    second.write_bytes(b"classes too")
    _settled(first)
    _settled(second)
    options = class_archive.archive_options(archive)
    assert f"-XX:SharedArchiveFile={archive}" in options and "-Xshare:auto" in options
    assert not class_archive.writes_archive(options)
    assert archive.read_bytes() in {b"classes", b"classes too"}  # whichever was settled first
    assert not first.exists() and not second.exists()  # the other finished part is removed


def test_a_part_still_being_written_is_not_mapped(tmp_path: Path) -> None:
    archive = tmp_path / "jvm" / "spark.jsa"
    _written_part(class_archive.archive_options(archive)).write_bytes(b"half")
    options = class_archive.archive_options(archive)
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in options)
    assert class_archive.writes_archive(options)


def test_a_short_tool_run_maps_the_archive_but_never_writes_one(tmp_path: Path) -> None:
    archive = tmp_path / "jvm" / "kafka-y.jsa"
    assert class_archive.archive_options(archive, write=False) == []
    archive.write_bytes(b"classes")
    assert f"-XX:SharedArchiveFile={archive}" in class_archive.archive_options(archive, write=False)


def test_the_spark_driver_keeps_c1_and_writes_then_maps_its_archive() -> None:
    first = jvm.driver_java_options("-Dx=1")
    assert first.startswith("-XX:TieredStopAtLevel=1") and first.endswith("-Dx=1")
    part = Path(first.split("-XX:ArchiveClassesAtExit=")[1].split()[0])
    part.write_bytes(b"classes")
    _settled(part)
    assert f"-XX:SharedArchiveFile={jvm.class_archive()}" in jvm.driver_java_options()


def test_a_short_lived_broker_runs_on_c1_and_a_bench_broker_keeps_c2(tmp_path: Path) -> None:
    spec = BrokerSpec("A", tmp_path / "A", 1, 2)
    libs = tmp_path / "libs"
    short = LocalBroker(spec, libs, short_lived=True)._jvm_args()
    bench = LocalBroker(spec, libs)._jvm_args()
    assert "-XX:TieredStopAtLevel=1" in short and "-XX:TieredStopAtLevel=1" not in bench
    # Both brokers write (neither has an archive yet); the storage tool only ever maps one.
    assert class_archive.writes_archive(short) and class_archive.writes_archive(bench)
    assert not class_archive.writes_archive(LocalBroker(spec, libs)._jvm_args(tool=True))

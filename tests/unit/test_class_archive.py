"""Class data sharing for the JVMs mirror starts: who writes the archive, and when it is mapped."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mirror.local import class_archive
from mirror.local.broker import BrokerSpec, LocalBroker
from mirror.local.cluster import LocalCluster, NodePorts, cluster_specs
from mirror.spark import jvm


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(class_archive, "cache_root", lambda: tmp_path)


WHOLE = bytes.fromhex("a8ab0bf0")  # how a dynamic archive begins once its JVM wrote it all


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
    first.write_bytes(WHOLE + b"classes")  # what its JVM leaves as it exits
    second.write_bytes(WHOLE + b"classes too")
    _settled(first)
    _settled(second)
    options = class_archive.archive_options(archive)
    assert f"-XX:SharedArchiveFile={archive}" in options and "-Xshare:auto" in options
    assert not class_archive.writes_archive(options)
    assert archive.read_bytes() in {WHOLE + b"classes", WHOLE + b"classes too"}  # whichever was settled first
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
    archive.write_bytes(WHOLE + b"classes")
    assert f"-XX:SharedArchiveFile={archive}" in class_archive.archive_options(archive, write=False)


def test_the_spark_driver_keeps_c1_and_writes_then_maps_its_archive() -> None:
    first = jvm.driver_java_options("-Dx=1")
    assert first.startswith("-XX:TieredStopAtLevel=1") and first.endswith("-Dx=1")
    part = Path(first.split("-XX:ArchiveClassesAtExit=")[1].split()[0])
    part.write_bytes(WHOLE + b"classes")
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


def test_a_part_cut_short_by_a_kill_is_never_mapped_and_a_later_jvm_writes_a_whole_one(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "jvm" / "kafka-z.jsa"
    cut = _written_part(class_archive.archive_options(archive))
    cut.write_bytes(b"\0" * 64)  # the header comes last: a JVM killed while writing leaves none
    _settled(cut)
    options = class_archive.archive_options(archive)
    assert class_archive.writes_archive(options) and not archive.exists() and not cut.exists()
    # One such archive settled before parts were checked is removed, not mapped for good.
    archive.write_bytes(b"\0" * 64)
    assert class_archive.writes_archive(class_archive.archive_options(archive)) and not archive.exists()


def test_an_unwritable_cache_starts_the_jvm_without_an_archive(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory", encoding="utf-8")
    assert class_archive.archive_options(blocked / "jvm" / "kafka.jsa") == []


def test_jars_replaced_at_the_same_path_key_another_archive(tmp_path: Path) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "kafka_2.13-4.3.1.jar").write_bytes(b"one")
    java = tmp_path / "java"
    java.write_bytes(b"")
    before = class_archive.archive_path("kafka", java, str(libs), class_archive.jars_identity(libs))
    (libs / "kafka_2.13-4.3.1.jar").write_bytes(b"upgraded")
    after = class_archive.archive_path("kafka", java, str(libs), class_archive.jars_identity(libs))
    assert before != after


def _stand_in(broker: LocalBroker, signalled: Path, *, writes: bool) -> None:
    """A process in place of the broker's JVM that notes a SIGTERM (a clean exit) in `signalled`."""
    code = (
        "import pathlib, signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path({str(signalled)!r}).touch(), sys.exit(0)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert process.stdout is not None
    with process.stdout:
        assert process.stdout.readline() == b"ready\n"  # its handler is in place
    broker._process = process
    broker._writes_archive = writes


def test_a_discarded_broker_is_killed_unless_it_writes_the_archive_which_needs_a_clean_exit(
    tmp_path: Path,
) -> None:
    for writes in (False, True):
        broker = LocalBroker(BrokerSpec("A", tmp_path / "A", 1, 2), tmp_path / "libs")
        signalled = tmp_path / f"terminated-{writes}"
        _stand_in(broker, signalled, writes=writes)
        assert broker.writes_archive is writes
        broker.discard()
        assert broker.pid is None and signalled.exists() is writes


def test_a_cluster_with_one_node_writing_the_archive_stops_every_node_together(tmp_path: Path) -> None:
    specs = cluster_specs("A", tmp_path / "A", [NodePorts(n, 10 * n, 10 * n + 1) for n in (1, 2, 3)])
    cluster = LocalCluster(specs, tmp_path / "libs")
    for node, broker in cluster.brokers.items():
        _stand_in(broker, tmp_path / f"terminated-{node}", writes=node == 3)
    cluster.discard()
    # Killed at once, nodes 1 and 2 would leave node 3 no quorum for its controlled shutdown.
    assert all((tmp_path / f"terminated-{node}").exists() for node in (1, 2, 3))

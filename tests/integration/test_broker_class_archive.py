"""A local broker's class archive: the first broker on a machine writes it as it stops, the next maps it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.local import class_archive
from mirror.local.broker import BrokerSpec
from mirror.local.environment import start_brokers
from mirror.local.jars import kafka_libs
from mirror.local.ports import free_port

pytestmark = [pytest.mark.integration]


def _mapped(pid: int, archive: Path) -> bool:
    return str(archive) in Path(f"/proc/{pid}/maps").read_text(encoding="utf-8")


def test_the_first_broker_writes_the_class_archive_as_it_is_discarded_and_the_next_one_maps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    libs = kafka_libs()  # resolved before the cache moves: the jars stay where they are
    monkeypatch.setattr(class_archive, "cache_root", lambda: tmp_path / "cache")
    monkeypatch.setattr(class_archive, "PART_SETTLED_SECONDS", 0.0)
    archives = tmp_path / "cache" / "jvm"

    def broker(name: str) -> tuple[int, bool]:
        spec = BrokerSpec(name, tmp_path / name, free_port(), free_port())
        (started,) = start_brokers([spec], libs=libs, short_lived=True)
        assert started.pid is not None
        pid, writes = started.pid, started.writes_archive
        mapped = [archive for archive in archives.glob("kafka-*.jsa") if _mapped(pid, archive)]
        started.discard()
        return len(mapped), writes

    assert broker("first") == (0, True)
    (part,) = archives.glob("kafka-*.jsa.*.part")  # written as it stopped (SIGTERM), not killed
    assert part.stat().st_size > 1_000_000
    assert broker("second") == (1, False)  # the part settled into place, and mapped
    assert not list(archives.glob("*.part"))

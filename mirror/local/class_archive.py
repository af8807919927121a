"""Class data sharing for the JVMs mirror starts (Spark's driver, local Kafka brokers).

The first JVM of a kind on a machine archives the classes it loaded as it exits
(`-XX:ArchiveClassesAtExit`); later ones map that archive instead of loading and verifying the
same classes (Spark's driver: 7.7 s -> ~4 s of start-up; a Kafka broker: 3.4 -> 2.0 CPU-s on 2
cores). An archive is keyed by the java binary and by what the JVM runs, and an unusable one is
ignored by the JVM (`-Xshare:auto`), never fatal. Each JVM that finds none writes a part file of its
own (JVMs started side by side, such as test workers' or a cluster's nodes, would otherwise write
one file at once), and a later start renames a finished part into place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
from pathlib import Path

from mirror.local.jars import cache_root

_QUIET_CDS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
# A JVM writes its archive in a second or two as it exits: a part file untouched this long is done.
PART_SETTLED_SECONDS = 15.0
# The first bytes of a dynamic archive (HotSpot's CDS_DYNAMIC_ARCHIVE_MAGIC, little-endian). The
# JVM writes the header last, so a part without them was cut short (its JVM killed while writing):
# mapped, the JVM would take it for the base archive, reject it and share no classes at all.
_DYNAMIC_MAGIC = bytes.fromhex("a8ab0bf0")


def java_binary() -> Path | None:
    """The java a JVM of mirror's runs: JAVA_HOME's, else the first on PATH; None if neither."""
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else shutil.which("java")
    if java is None or not Path(java).exists():
        return None
    return Path(java).resolve()


def archive_path(kind: str, java: Path | None, *runs: str) -> Path | None:
    """Where JVMs of `kind` started from `java` and running `runs` (versions, class paths) keep
    their archive; None without a java."""
    if java is None:
        return None
    real = java.resolve()
    key = ":".join([str(real), str(real.stat().st_mtime_ns), *runs])
    return cache_root() / "jvm" / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def jars_identity(libs: Path) -> str:
    """The jars of `libs` as the JVM checks them against an archive (name, size, time): jars
    replaced at the same path (an upgraded MIRROR_KAFKA_LIBS) key a new archive, not a stale one
    the JVM would refuse every time."""
    jars = sorted(libs.glob("*.jar"))
    return ",".join(f"{jar.name}:{jar.stat().st_size}:{jar.stat().st_mtime_ns}" for jar in jars)


def archive_options(archive: Path | None, *, write: bool = True) -> list[str]:
    """Options that map `archive` once it exists; until then, with `write`, options that have this
    JVM write a part of its own as it exits (without, a JVM that loads only some of the classes,
    such as a short tool run, leaves the archive to a full one). None if the cache cannot be
    written: an archive only saves time."""
    if archive is None:
        return []
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        _settle(archive)
        if archive.exists() and not _whole(archive):
            archive.unlink()  # settled by a build before parts were checked
        if archive.exists():
            return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", *_QUIET_CDS]
    except OSError:
        return []
    if not write:
        return []
    part = archive.with_name(f"{archive.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part")
    return [f"-XX:ArchiveClassesAtExit={part}", *_QUIET_CDS]


def writes_archive(options: list[str]) -> bool:
    """True if a JVM started with `options` writes its class archive as it exits."""
    return any(option.startswith("-XX:ArchiveClassesAtExit=") for option in options)


def _settle(archive: Path) -> None:
    """Rename a finished part into place as `archive` (atomic), and remove finished parts once
    there is one; parts still being written are left to their JVMs."""
    now = time.time()
    for part in sorted(archive.parent.glob(f"{archive.name}.*.part")):
        try:
            if now - part.stat().st_mtime < PART_SETTLED_SECONDS:
                continue
            if archive.exists() or not _whole(part):
                part.unlink()
            else:
                part.rename(archive)
        except OSError:
            continue  # another start settled it first


def _whole(archive: Path) -> bool:
    with archive.open("rb") as file:
        return file.read(len(_DYNAMIC_MAGIC)) == _DYNAMIC_MAGIC

"""Options for the driver's JVM that cut Spark's start-up, the largest part of `mirror run`'s.

- C1 only (`-XX:TieredStopAtLevel=1`): the driver JVM plans, schedules and talks to Python; records
  never pass through it, so C2's peak speed buys nothing, while its compile threads compete with
  start-up for the cores (measured on 2 cores: Spark session 10.7 s -> 7.7 s).
- Class data sharing: the first run on a machine has the JVM archive the classes it loaded when it
  exits (`-XX:ArchiveClassesAtExit`); later runs map that archive instead of loading and verifying
  the same ~10,000 classes (7.7 s -> ~4 s). The archive is keyed by the JVM and pyspark it was
  made with; an unusable one is ignored by the JVM (`-Xshare:auto`), never fatal. Each run that
  finds none writes a part file of its own (runs side by side, such as test workers, would
  otherwise write one file at once), and a later run renames a finished part into place.
- A SPARK_HOME without `python/lib/pyspark.zip` (local masters): Spark puts that zip first on
  every Python process's path, and the zip holds no bytecode, so each planner and worker process
  compiled pyspark anew (~1 s each on 2 cores). Without it they import the installed package.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import pyspark

from mirror.local.jars import cache_root

_QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# A JVM writes its archive in a second or two as it exits: a part file untouched this long is whole.
_PART_SETTLED_SECONDS = 15.0


def driver_java_options(extra: str = "") -> str:
    options = ["-XX:TieredStopAtLevel=1"]
    archive = class_archive()
    if archive is not None:
        archive.parent.mkdir(parents=True, exist_ok=True)
        _settle(archive)
        if archive.exists():
            options += [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
        else:
            options.append(f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}.part")
        options.append(_QUIET_CDS)
    return " ".join([*options, extra]).strip()


def _settle(archive: Path) -> None:
    """Rename a finished part into place as `archive` (atomic), and remove finished parts once
    there is one; parts still being written are left to their JVMs."""
    now = time.time()
    for part in sorted(archive.parent.glob(f"{archive.name}.*.part")):
        try:
            if now - part.stat().st_mtime < _PART_SETTLED_SECONDS:
                continue
            if archive.exists():
                part.unlink()
            else:
                part.rename(archive)
        except OSError:
            continue  # another run settled it first


def class_archive() -> Path | None:
    """Where this JVM and pyspark keep their class archive; None if the JVM cannot be found."""
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else shutil.which("java")
    if java is None or not Path(java).exists():
        return None
    real = Path(java).resolve()
    key = f"{real}:{real.stat().st_mtime_ns}:{pyspark.__version__}:{Path(pyspark.__file__).parent}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_root() / "jvm" / f"spark-{pyspark.__version__}-{digest}.jsa"


def spark_home_without_zip() -> Path | None:
    """A SPARK_HOME of links to the installed pyspark's, minus pyspark.zip; None if not pip-installed."""
    real = Path(pyspark.__file__).parent
    if not (real / "bin" / "spark-submit").exists() or not (real / "jars").is_dir():
        return None
    home = (
        cache_root()
        / "spark-home"
        / f"{pyspark.__version__}-{hashlib.sha256(str(real).encode()).hexdigest()[:12]}"
    )
    if (home / "bin").exists():
        return home
    building = home.with_name(f"{home.name}.{os.getpid()}")
    (building / "python" / "lib").mkdir(parents=True, exist_ok=True)
    for entry in real.iterdir():
        if entry.name != "python":
            (building / entry.name).symlink_to(entry)
    for entry in (real / "python" / "lib").iterdir():
        if entry.name != "pyspark.zip":
            (building / "python" / "lib" / entry.name).symlink_to(entry)
    try:
        building.rename(home)
    except OSError:
        shutil.rmtree(building, ignore_errors=True)  # another run built it first
    return home

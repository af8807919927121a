"""Options for the driver's JVM that cut Spark's start-up, the largest part of `mirror run`'s.

- C1 only (`-XX:TieredStopAtLevel=1`): the driver JVM plans, schedules and talks to Python; records
  never pass through it, so C2's peak speed buys nothing, while its compile threads compete with
  start-up for the cores (measured on 2 cores: Spark session 10.7 s -> 7.7 s).
- Class data sharing (mirror.local.class_archive): later runs map the classes the first run's JVM
  archived as it exited (7.7 s -> ~4 s); the archive is keyed by the JVM and pyspark.
- A SPARK_HOME without `python/lib/pyspark.zip` (local masters): Spark puts that zip first on
  every Python process's path, and the zip holds no bytecode, so each planner and worker process
  compiled pyspark anew (~1 s each on 2 cores). Without it they import the installed package.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pyspark

from mirror.local.class_archive import archive_options, archive_path, java_binary
from mirror.local.jars import cache_root


def driver_java_options(extra: str = "") -> str:
    return " ".join(["-XX:TieredStopAtLevel=1", *archive_options(class_archive()), extra]).strip()


def class_archive() -> Path | None:
    """Where this JVM and pyspark keep their class archive; None if the JVM cannot be found."""
    return archive_path(
        f"spark-{pyspark.__version__}", java_binary(), pyspark.__version__, str(Path(pyspark.__file__).parent)
    )


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

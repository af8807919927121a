"""Resolve the Apache Kafka jars (broker, tools, MirrorMaker 2) from Maven Central with `mvn`."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from mirror.errors import JarResolutionError

KAFKA_VERSION = os.environ.get("MIRROR_KAFKA_VERSION", "4.3.1")
# Kafka's clients log through the slf4j 1.7 API; this is the log4j2 binding for it.
LOG4J_VERSION = "2.24.3"

_ARTIFACTS = (
    ("org.apache.kafka", "kafka_2.13"),  # the broker and kafka.tools.StorageTool
    ("org.apache.kafka", "kafka-tools"),  # ConsoleConsumer, perf tests
    ("org.apache.kafka", "connect-mirror"),  # MirrorMaker 2 and its formatters
    ("org.apache.kafka", "connect-mirror-client"),  # RemoteClusterUtils, MirrorClient
)

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.mirror</groupId>
  <artifactId>kafka-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
_DEPENDENCY = (
    "    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
    "<version>{version}</version></dependency>"
)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mirror"


def kafka_libs(version: str = KAFKA_VERSION, *, cache_dir: Path | None = None) -> Path:
    """A directory holding every jar Kafka `version` needs; resolved once, then reused.

    MIRROR_KAFKA_LIBS points at an existing directory of jars instead (an unpacked Kafka
    distribution's libs/, for example).
    """
    override = os.environ.get("MIRROR_KAFKA_LIBS")
    if override:
        libs = Path(override)
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise JarResolutionError(
                f"MIRROR_KAFKA_LIBS={override} holds no kafka_2.13-*.jar; point it at a Kafka libs/ directory"
            )
        return libs
    libs = (cache_dir or cache_root()) / f"kafka-{version}" / "libs"
    if (libs / ".complete").exists():
        return libs
    _resolve_with_maven(version, libs)
    return libs


def classpath(libs: Path) -> str:
    return str(libs / "*")


def _resolve_with_maven(version: str, libs: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarResolutionError(
            "mvn is not on PATH; install Maven (apt-get install maven) or set MIRROR_KAFKA_LIBS "
            "to a directory of Kafka jars"
        )
    deps = [_DEPENDENCY.format(group=g, artifact=a, version=version) for g, a in _ARTIFACTS]
    deps += [
        _DEPENDENCY.format(group="org.apache.logging.log4j", artifact=a, version=LOG4J_VERSION)
        for a in ("log4j-slf4j-impl", "log4j-core")
    ]
    libs.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=libs.parent, prefix=".resolving-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_POM.format(dependencies="\n".join(deps)), encoding="utf-8")
        staging = Path(work) / "libs"
        result = subprocess.run(
            [
                mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        if result.returncode != 0:
            tail = " | ".join((result.stdout + result.stderr).strip().splitlines()[-3:])
            raise JarResolutionError(
                f"mvn could not resolve Apache Kafka {version} from Maven Central ({tail}); "
                "check network access to Maven Central or set MIRROR_KAFKA_LIBS"
            )
        (staging / ".complete").write_text(version, encoding="utf-8")
        if libs.exists():
            shutil.rmtree(libs)
        # A rename is atomic: a concurrent or interrupted resolve never leaves a half-filled libs/.
        staging.rename(libs)

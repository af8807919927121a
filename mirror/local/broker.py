"""One KRaft Apache Kafka node (broker and controller in one JVM) as a local process on 127.0.0.1:
a single-node cluster by itself, or one node of a replicated cluster (mirror.local.cluster)."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from mirror.errors import ClusterUnreachableError, LocalClusterError
from mirror.kafka.clients import wait_until_reachable
from mirror.local.class_archive import archive_options, archive_path, jars_identity, writes_archive
from mirror.local.ports import HOST, port_in_use
from mirror.local.sasl import SaslUsers
from mirror.local.tls import TlsFiles

_MARKER = "-Dmirror.local.cluster="
# How much of a broker's server.log is read for the error it exited with, and how much of it is shown.
_LOG_TAIL_BYTES = 256 * 1024
_ERROR_CHARS = 240

# What one broker needs for transactions and consumer groups to work with a single replica.
SINGLE_NODE_SETTINGS: Mapping[str, str] = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "10",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "min.insync.replicas": "1",
    "default.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    # Replicating into a topic that does not exist must be an error we report, not a silent create.
    "auto.create.topics.enable": "false",
}

# A replicated cluster as operators run them: RF 3 and min ISR 2 for internal and new topics, so
# one node may be down while every partition still takes writes.
REPLICATED_SETTINGS: Mapping[str, str] = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "10",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    # Six JVMs share two cores here: fewer threads each than a production node needs.
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.replica.fetchers": "1",
    "background.threads": "4",
    # ... and a node may get no CPU for seconds. With KRaft's defaults (2 s fetch timeout, 60 s to
    # register) a node restarted in such a stall called elections while it replayed the metadata
    # log, then gave up registering and exited (a CI run of the broker-loss drill).
    "controller.quorum.fetch.timeout.ms": "6000",
    "controller.quorum.election.timeout.ms": "2000",
    "initial.broker.registration.timeout.ms": "300000",
}


@dataclass(frozen=True)
class BrokerSpec:
    """Where a local cluster lives and listens; enough to start it again after a stop."""

    alias: str
    directory: Path
    port: int
    controller_port: int
    overrides: Mapping[str, str] = field(default_factory=dict)
    sasl: SaslUsers | None = None
    tls: TlsFiles | None = None  # an SSL listener (SASL_SSL with `sasl`) instead of a plaintext one
    # One node of a replicated cluster: its id, every voter's (id, controller port), and the id all
    # nodes are formatted with. Alone (the default), the node is the whole cluster.
    node_id: int = 1
    voters: tuple[tuple[int, int], ...] = ()
    cluster_id: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def replicated(self) -> bool:
        return len(self.voters) > 1

    @property
    def listener(self) -> str:
        """The client listener's security protocol."""
        return ("SASL_" if self.sasl is not None else "") + ("SSL" if self.tls is not None else "PLAINTEXT")

    def client_properties(self) -> dict[str, str]:
        """What a client of the launcher's own (readiness checks) connects with: admin when secured."""
        security = self.sasl.client_properties() if self.sasl is not None else {}
        if self.tls is not None:
            security = {**security, **self.tls.client_properties(), "security.protocol": self.listener}
        return {"bootstrap.servers": self.bootstrap_servers, **security}

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def gc_log(self) -> Path:
        """The JVM's GC log (the current file; the JVM rotates it beside, as gc.log.N)."""
        return self.log_dir / "gc.log"

    @property
    def properties_file(self) -> Path:
        return self.directory / "server.properties"


class LocalBroker:
    """Formats, starts, waits for and stops one broker process. Runs on the caller's machine only."""

    def __init__(self, spec: BrokerSpec, libs: Path, *, heap: str = "1g", short_lived: bool = False) -> None:
        """`short_lived`: a broker that runs for minutes (a test module's) runs on C1 alone: over
        its start, 40,000 records and a minute idle, C2's compiles cost more than they saved (15.1
        -> 10.4 CPU-s on 2 cores). Brokers a bench measures against keep C2."""
        self.spec = spec
        self._libs = libs
        self._heap = heap
        self._short_lived = short_lived
        self._process: subprocess.Popen[bytes] | None = None
        self._writes_archive = False

    @property
    def bootstrap_servers(self) -> str:
        return self.spec.bootstrap_servers

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _java(self) -> str:
        java = shutil.which("java")
        if java is None:
            raise LocalClusterError(
                "java is not on PATH; install a JDK 17 or newer to run local Kafka clusters"
            )
        return java

    def _jvm_args(self, *, tool: bool = False) -> list[str]:
        """`tool`: a run of seconds (StorageTool) on C1 alone, C2's compiles wasted (1.9 -> 1.0 CPU-s).
        Both map the class archive of brokers run from these jars (mirror.local.class_archive);
        only a broker writes it, a tool loading a fraction of the classes."""
        log4j = resources.files("mirror.local") / "log4j2.properties"
        java = self._java()
        archive = archive_path("kafka", Path(java), str(self._libs.resolve()), jars_identity(self._libs))
        return [
            java,
            *(["-XX:TieredStopAtLevel=1"] if tool or self._short_lived else []),
            *archive_options(archive, write=not tool),
            f"-Xmx{self._heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.spec.log_dir}",
            f"-Dlog4j2.configurationFile={log4j}",
            # Tags the process so status/stop never act on an unrelated process that reused the pid.
            f"{_MARKER}{self.spec.directory.resolve()}",
            "-cp",
            str(self._libs / "*"),
        ]

    def write_properties(self) -> None:
        spec = self.spec
        listener = spec.listener
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(spec.node_id),
            "controller.quorum.voters": ",".join(
                f"{node}@{HOST}:{port}"
                for node, port in spec.voters or ((spec.node_id, spec.controller_port),)
            ),
            "listeners": f"{listener}://{HOST}:{spec.port},CONTROLLER://{HOST}:{spec.controller_port}",
            "advertised.listeners": f"{listener}://{HOST}:{spec.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": listener,
            "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:PLAINTEXT",
            "log.dirs": str(spec.data_dir.resolve()),
            **(REPLICATED_SETTINGS if spec.replicated else SINGLE_NODE_SETTINGS),
            **(spec.sasl.broker_settings(listener) if spec.sasl is not None else {}),
            **(spec.tls.broker_settings() if spec.tls is not None else {}),
            **spec.overrides,
        }
        spec.directory.mkdir(parents=True, exist_ok=True)
        spec.log_dir.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{key}={value}\n" for key, value in settings.items())
        spec.properties_file.write_text(text, encoding="utf-8")

    def format_storage(self) -> None:
        """Format KRaft storage once; a formatted directory keeps its data across restarts."""
        if (self.spec.data_dir / "meta.properties").exists():
            return
        command = [
            *self._jvm_args(tool=True), "kafka.tools.StorageTool", "format",
            f"--cluster-id={self.spec.cluster_id or new_cluster_id()}", "-c", str(self.spec.properties_file),
            *(self.spec.sasl.scram_arguments() if self.spec.sasl is not None else []),
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise LocalClusterError(
                f"cluster {self.spec.alias}: formatting KRaft storage in {self.spec.data_dir} failed "
                f"({_last_line(result.stderr or result.stdout)}); delete the directory and retry"
            )

    def start(self) -> None:
        for port in (self.spec.port, self.spec.controller_port):
            if port_in_use(port):
                raise LocalClusterError(
                    f"cluster {self.spec.alias}: port {port} on {HOST} is already in use; stop what holds it "
                    "or choose other ports"
                )
        self.write_properties()
        self.format_storage()
        arguments = self._jvm_args()
        self._writes_archive = writes_archive(arguments)
        with (self.spec.log_dir / "stdout.log").open("ab") as out:
            self._process = subprocess.Popen(
                [
                    *arguments,
                    # As kafka-server-start.sh does: a pause in server.log can be told from a GC pause.
                    f"-Xlog:gc:file={self.spec.gc_log}:time,uptime:filecount=2,filesize=5M",
                    "kafka.Kafka",
                    str(self.spec.properties_file),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C meant for the launcher does not reach a running broker.
                start_new_session=True,
            )

    def wait_until_ready(self, timeout_seconds: float = 120.0) -> None:
        """Return once the broker answers a metadata request. A node restarted after a SIGKILL first
        waits out its old registration's session (DUPLICATE_BROKER_REGISTRATION, 9 s idle); on a
        loaded CI machine such a restart ran past 60 s."""
        deadline = time.monotonic() + timeout_seconds
        properties = self.spec.client_properties()
        while True:
            if self._process is not None and self._process.poll() is not None:
                server_log = self.spec.log_dir / "server.log"
                raise LocalClusterError(
                    f"cluster {self.spec.alias}: broker {self.spec.node_id} exited with code "
                    f"{self._process.returncode} while starting ({_last_error(server_log)}); see {server_log}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LocalClusterError(
                    f"cluster {self.spec.alias}: broker {self.spec.node_id} did not answer on "
                    f"{self.bootstrap_servers} within {timeout_seconds:g}s (last logged: "
                    f"{self.last_step()}); see {self.spec.log_dir / 'server.log'}"
                )
            try:
                wait_until_reachable(properties, timeout_seconds=min(remaining, 2.0), what=self.spec.alias)
                return
            except ClusterUnreachableError:
                continue

    def last_step(self) -> str:
        """The broker's last warning, error or lifecycle step logged, in one line."""
        return _last_step(self.spec.log_dir / "server.log")

    def kill(self) -> None:
        """SIGKILL the broker, as a crash would; start() brings it back with its data."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=30)
            self._process = None

    @property
    def writes_archive(self) -> bool:
        """True while this broker runs and will write the class archive as it exits."""
        return self._writes_archive and self._process is not None and self._process.poll() is None

    def discard(self) -> None:
        """End a broker whose data is thrown away: SIGKILL, unless it is writing the class archive
        later brokers start from, which it does only as it exits cleanly (SIGTERM)."""
        if self.writes_archive:
            self.stop()
        else:
            self.kill()  # through Popen: a process already reaped is not signalled by its old pid

    def terminate(self) -> None:
        """SIGTERM without waiting: stop() then waits (several nodes shut down side by side)."""
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGTERM)

    def stop(self, timeout_seconds: float = 30.0) -> None:
        if self._process is not None:
            stop_process(self._process.pid, timeout_seconds)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=1)
            self._process = None


def is_local_broker(pid: int, directory: Path) -> bool:
    """True if `pid` is alive and is the broker of `directory` (not a process that reused the pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    marker = f"{_MARKER}{directory.resolve()}".encode()
    return marker in cmdline


def stop_process(pid: int, timeout_seconds: float = 30.0) -> None:
    """SIGTERM (a clean broker shutdown), then SIGKILL if it is still there after the timeout."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    # A child of ours that exited stays a zombie until reaped; reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def new_cluster_id() -> str:
    """A Kafka-style cluster id: 16 random bytes, URL-safe base64, never starting with '-'.

    Kafka's own Uuid.randomUuid() redraws ids that start with '-' because command-line parsers
    read them as options (an id like "-Xq..." made `kafka-storage format -t` fail in CI).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not cluster_id.startswith("-"):
            return cluster_id


def _last_error(server_log: Path) -> str:
    """The broker's last ERROR or FATAL line, without its timestamp: why it exited, in one line."""
    return _last_logged(server_log, (" ERROR ", " FATAL "), "no error logged")


def _last_step(server_log: Path) -> str:
    """Where a broker that does not answer is stuck, in one line: its last warning, error or
    lifecycle step (a restarted node waits out its old registration's session, for one)."""
    return _last_logged(
        server_log, (" WARN ", " ERROR ", " FATAL ", "BrokerLifecycleManager"), "nothing logged"
    )


def _last_logged(server_log: Path, markers: tuple[str, ...], otherwise: str) -> str:
    try:
        with server_log.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - _LOG_TAIL_BYTES))
            tail = log.read().decode("utf-8", "replace")
    except OSError:
        return "no server.log"
    lines = [line for line in tail.splitlines() if any(marker in line for marker in markers)]
    if not lines:
        return otherwise
    message = lines[-1].split("] ", 1)[-1].strip()
    return message if len(message) <= _ERROR_CHARS else message[: _ERROR_CHARS - 3] + "..."


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"

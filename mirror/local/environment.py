"""A set of local clusters that outlives the command that started it (`mirror local up|down|status`).

State lives in `<dir>/state.json`: alias, ports and pid per cluster, so `down` and `status` work
from another shell and a second `up` finds the running pair instead of starting another.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from mirror.errors import LocalClusterError
from mirror.local.broker import BrokerSpec, LocalBroker, is_local_broker, stop_process
from mirror.local.jars import kafka_libs

DEFAULT_DIR = Path(".mirror-local")
DEFAULT_ALIASES = ("A", "B")
DEFAULT_BASE_PORT = 19092
_PORT_STRIDE = 10000  # A: 19092/19093, B: 29092/29093


def start_brokers(
    specs: Sequence[BrokerSpec], *, libs: Path, timeout_seconds: float = 90.0
) -> list[LocalBroker]:
    """Start every broker, then wait for all; if any fails (or Ctrl-C arrives) stop those started."""
    brokers = [LocalBroker(spec, libs) for spec in specs]
    started: list[LocalBroker] = []
    try:
        for broker in brokers:
            broker.start()
            started.append(broker)
        for broker in brokers:
            broker.wait_until_ready(timeout_seconds)
    except BaseException:
        for broker in started:
            broker.stop()
        raise
    return brokers


@dataclass(frozen=True)
class ClusterStatus:
    alias: str
    bootstrap_servers: str
    pid: int | None
    running: bool
    directory: Path


@dataclass
class _Entry:
    """One cluster in state.json."""

    port: int
    controller_port: int
    pid: int | None = None


class LocalEnvironment:
    """The local clusters under one directory."""

    def __init__(self, directory: Path = DEFAULT_DIR) -> None:
        self.directory = directory
        self._state_file = directory / "state.json"

    def _read_state(self) -> dict[str, _Entry]:
        if not self._state_file.exists():
            return {}
        try:
            clusters = json.loads(self._state_file.read_text(encoding="utf-8"))["clusters"]
            return {alias: _Entry(**entry) for alias, entry in clusters.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LocalClusterError(
                f"{self._state_file} is unreadable ({exc}); stop any brokers by hand and delete the directory"
            ) from exc

    def _write_state(self, clusters: dict[str, _Entry]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        state = {"clusters": {alias: asdict(entry) for alias, entry in clusters.items()}}
        self._state_file.write_text(json.dumps(state, indent=2), encoding="utf-8")

    def _spec(self, alias: str, entry: _Entry) -> BrokerSpec:
        return BrokerSpec(alias, self.directory / alias, entry.port, entry.controller_port)

    def _running(self, alias: str, entry: _Entry) -> bool:
        return entry.pid is not None and is_local_broker(entry.pid, self._spec(alias, entry).directory)

    def status(self) -> list[ClusterStatus]:
        statuses = []
        for alias, entry in self._read_state().items():
            spec = self._spec(alias, entry)
            running = self._running(alias, entry)
            statuses.append(
                ClusterStatus(
                    alias, spec.bootstrap_servers, entry.pid if running else None, running, spec.directory
                )
            )
        return statuses

    def up(
        self, aliases: Sequence[str] = DEFAULT_ALIASES, *, base_port: int = DEFAULT_BASE_PORT
    ) -> tuple[list[ClusterStatus], bool]:
        """Start the clusters unless they already run; returns their status and whether it started any.

        A cluster started before keeps its ports and data, so mm2.local.yaml stays right.
        """
        state = self._read_state()
        for index, alias in enumerate(aliases):
            port = base_port + index * _PORT_STRIDE
            state.setdefault(alias, _Entry(port=port, controller_port=port + 1))
        specs = [
            self._spec(alias, state[alias]) for alias in aliases if not self._running(alias, state[alias])
        ]
        if not specs:
            return self.status(), False
        for broker in start_brokers(specs, libs=kafka_libs()):
            state[broker.spec.alias].pid = broker.pid
        self._write_state(state)
        return self.status(), True

    def down(self, *, purge: bool = False) -> list[str]:
        """Stop every running cluster; with `purge`, also delete their data. Returns the aliases stopped."""
        stopped = []
        state = self._read_state()
        for alias, entry in state.items():
            if entry.pid is not None and self._running(alias, entry):
                stop_process(entry.pid)
                stopped.append(alias)
            entry.pid = None
        if purge and self.directory.exists():
            shutil.rmtree(self.directory)
        elif state:
            self._write_state(state)
        return stopped


def write_local_config(path: Path, clusters: Sequence[ClusterStatus], state_dir: Path) -> None:
    """A ready mm2.yaml: one enabled flow from the first cluster to the second, default filters."""
    source, target = clusters[0], clusters[1]
    text = (
        "# Written by `mirror local up` for the local clusters it started; safe to edit or delete.\n"
        "# Every key and its default: config/mm2.example.yaml\n"
        "clusters:\n"
        f"  {source.alias}:\n"
        f"    bootstrap_servers: {source.bootstrap_servers}\n"
        f"  {target.alias}:\n"
        f"    bootstrap_servers: {target.bootstrap_servers}\n"
        "flows:\n"
        f"  {source.alias}->{target.alias}:\n"
        "    enabled: true\n"
        "spark:\n"
        f"  checkpoint_dir: {state_dir / 'spark-state'}\n"
    )
    path.write_text(text, encoding="utf-8")

"""The local launcher's pure parts: what it hands to Kafka's command-line tools."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path

import pytest

from mirror.errors import LocalClusterError
from mirror.local import broker
from mirror.local.environment import LocalEnvironment
from mirror.local.ports import LOWEST_PORT, free_port


def test_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 encodes to '-' as the first URL-safe base64 character; kafka-storage then reads
    # the id as an option ("argument --cluster-id/-t: expected one argument").
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(int=1)])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))

    cluster_id = broker.new_cluster_id()

    assert cluster_id == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_cluster_id_is_22_characters_of_url_safe_base64() -> None:
    cluster_id = broker.new_cluster_id()

    assert len(cluster_id) == 22
    assert set(cluster_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_free_ports_are_never_handed_out_twice_and_stay_out_of_the_ephemeral_range() -> None:
    # A port from the kernel's ephemeral range can go to any client socket before the server binds it.
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii").split()[0])
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(LOWEST_PORT <= port < ephemeral for port in ports), sorted(ports)[-5:]
    for port in ports[:20]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))  # nothing else holds it


def test_state_written_before_clusters_had_several_brokers_reads_as_one_broker(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(
        json.dumps({"clusters": {"A": {"port": 19092, "controller_port": 19093, "pid": None}}}),
        encoding="utf-8",
    )
    (cluster,) = LocalEnvironment(tmp_path).status()
    assert (cluster.alias, cluster.bootstrap_servers, cluster.running) == ("A", "127.0.0.1:19092", False)
    assert [broker.node_id for broker in cluster.brokers] == [1]
    assert cluster.directory == tmp_path / "A"  # a single broker keeps its layout


def test_up_with_another_broker_count_than_the_clusters_have_names_the_fix(tmp_path: Path) -> None:
    nodes = [
        {"node_id": n, "port": 19090 + 2 * n, "controller_port": 19091 + 2 * n, "pid": None}
        for n in (1, 2, 3)
    ]
    (tmp_path / "state.json").write_text(
        json.dumps({"clusters": {"A": {"nodes": nodes, "cluster_id": "x"}}}), encoding="utf-8"
    )
    with pytest.raises(LocalClusterError, match=r"has 3 broker\(s\), not 1; run `mirror local down --purge`"):
        LocalEnvironment(tmp_path).up(("A",), brokers=1)


def test_a_broker_that_exits_while_starting_is_reported_with_the_last_error_it_logged(tmp_path: Path) -> None:
    server_log = tmp_path / "server.log"
    server_log.write_text(
        "[2026-11-26 15:56:57,100] INFO [RaftManager id=2] Completed transition to FollowerState\n"
        "[2026-11-26 15:56:57,178] ERROR [BrokerLifecycleManager id=2] Shutting down because we were "
        "unable to register with the controller quorum. (org.apache.kafka.server.BrokerLifecycleManager)\n"
        "\tat some.java.Frame(Frame.java:1)\n"
        "[2026-11-26 15:56:57,196] INFO [broker-2-heartbeat-channel-manager]: Shutdown completed\n",
        encoding="utf-8",
    )

    assert broker._last_error(server_log) == (
        "ERROR [BrokerLifecycleManager id=2] Shutting down because we were unable to register with the "
        "controller quorum. (org.apache.kafka.server.BrokerLifecycleManager)"
    )
    assert broker._last_error(tmp_path / "absent.log") == "no server.log"


def test_a_broker_that_does_not_answer_is_reported_with_the_lifecycle_step_it_is_stuck_at(
    tmp_path: Path,
) -> None:
    server_log = tmp_path / "server.log"
    server_log.write_text(
        "[2026-12-02 13:10:08,281] INFO [GroupCoordinator id=1] Loaded classic group invoicing\n"
        "[2026-12-02 13:10:09,121] INFO [BrokerLifecycleManager id=1] Unable to register broker 1 because "
        "the controller returned error DUPLICATE_BROKER_REGISTRATION "
        "(org.apache.kafka.server.BrokerLifecycleManager)\n"
        "[2026-12-02 13:10:09,200] INFO [TransactionCoordinator id=1] Startup complete.\n",
        encoding="utf-8",
    )

    assert broker._last_step(server_log) == (
        "INFO [BrokerLifecycleManager id=1] Unable to register broker 1 because the controller returned "
        "error DUPLICATE_BROKER_REGISTRATION (org.apache.kafka.server.BrokerLifecycleManager)"
    )
    assert broker._last_step(tmp_path / "absent.log") == "no server.log"

"""dashboards/ proven on a live run: a real Prometheus scrapes `mirror run` (with traffic and a
consumer group) and the independent heartbeat monitor, and evaluates a copy of dashboards/alerts.yaml
with short `for:` and a 15 s RPO threshold. Every dashboard panel's query returns data, every metric
the dashboards and alerts name is on a live page, `promtool check metrics` passes on both pages, and
three faults make their alerts fire: records deleted on the source before they were copied
(MirrorSourceTruncated), the source frozen (MirrorHeartbeatStale), `mirror run` killed (MirrorDown,
while the monitor's heartbeat age keeps growing). The overview's picture is drawn from the same data.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mirror.local.ports import free_port
from tests import dashboards
from tests.groups import commit, produce
from tests.helpers import assert_eventually, create_topic
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, write_config
from tests.prometheus import Prometheus
from tests.reliability.traffic import Traffic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RPO_SECONDS = 15  # MirrorHeartbeatStale's threshold in the test copy of the rules (300 s in the real one)
TRUNCATED = 400


def fast_rules(directory: Path) -> Path:
    """dashboards/alerts.yaml with every `for:` at 3 s and the RPO threshold at RPO_SECONDS."""
    rules = yaml.safe_load((ROOT / "dashboards" / "alerts.yaml").read_text(encoding="utf-8"))
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "3s"
            if rule["alert"] == "MirrorHeartbeatStale":
                rule["expr"] = rule["expr"].replace("> 300", f"> {RPO_SECONDS}")
    path = directory / "alerts.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    return path


@dataclass
class Live:
    source: KafkaCluster
    target: KafkaCluster
    flow: str
    truncated: str  # the topic whose older records were deleted before the second run
    run: MirrorRun
    monitor: subprocess.Popen[bytes]
    prometheus: Prometheus
    pages: dict[str, str]  # job -> host:port of its /metrics
    directory: Path


@pytest.fixture(scope="module")
def live(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    directory = tmp_path_factory.mktemp("live")
    tag = uuid.uuid4().hex[:4]
    source = dataclasses.replace(source_cluster, alias=f"S{tag}")
    target = dataclasses.replace(target_cluster, alias=f"T{tag}")
    orders, truncated, group = f"live-orders-{tag}", f"live-trunc-{tag}", f"live-group-{tag}"
    create_topic(source.bootstrap_servers, orders, partitions=4)
    create_topic(source.bootstrap_servers, truncated)
    produce(source, truncated, [b"%d" % i for i in range(100)])
    config = write_config(
        directory,
        source,
        target,
        [orders, truncated],
        groups=[group],
        emit_checkpoints_interval_seconds=1,
        sync_group_offsets_interval_seconds=1,
        verify_interval_seconds=5,
        spark={"epoch_seconds": 5},
    )
    # A first run copies what is there and stops; then records are written and the older ones
    # deleted before any run copied them: the second run finds them gone.
    first = MirrorRun(config, directory / "first.log")
    try:
        wait_until_caught_up(source, target, [truncated], first)
        assert first.stop() == 0, first.output()[-3000:]
    finally:
        first.cleanup()
    produce(source, truncated, [b"%d" % i for i in range(100, 100 + 2 * TRUNCATED)])
    admin = AdminClient(source.properties())
    next(iter(admin.delete_records([TopicPartition(truncated, 0, 100 + TRUNCATED)]).values())).result(
        timeout=30
    )
    produce(source, orders, [b"%d" % i for i in range(200)], partition=0)
    commit(source, group, {(orders, 0): 150})

    metrics_port = yaml.safe_load(config.read_text(encoding="utf-8"))["metrics"]["port"]
    pages = {"mirror": f"127.0.0.1:{metrics_port}", "mirror-heartbeats": f"127.0.0.1:{free_port()}"}
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(with_resumed, source_cluster)
        with (directory / "monitor.log").open("ab") as log:
            monitor = subprocess.Popen(
                [sys.executable, "-m", "mirror", "heartbeats", "--cluster", target.alias, "-c", str(config),
                 "--serve-metrics", pages["mirror-heartbeats"]],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        cleanup.callback(_end, monitor)
        prometheus = Prometheus(directory / "prometheus", pages, [fast_rules(directory)])
        cleanup.callback(prometheus.stop)
        traffic = Traffic(source, {orders: 4}, per_second=200).start()
        cleanup.callback(traffic.stop)
        run = MirrorRun(config, directory / "run.log")
        cleanup.callback(run.cleanup)
        flow = f"{source.alias}->{target.alias}"
        yield Live(source, target, flow, truncated, run, monitor, prometheus, pages, directory)


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(timeout=30)


def with_resumed(cluster: KafkaCluster) -> None:
    """Never leave the shared source frozen, whatever failed."""
    if cluster.pid is not None:
        os.kill(cluster.pid, signal.SIGCONT)


def panel_queries(flow: str) -> list[tuple[str, str, str]]:
    return dashboards.panel_queries({"$__rate_interval": "15s", "$flow": flow})


def page(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        return response.read().decode("utf-8")


def test_every_panel_query_returns_data_through_prometheus(live: Live) -> None:
    queries = panel_queries(live.flow)

    def all_answer() -> None:
        empty = [(name, title, expr) for name, title, expr in queries if not live.prometheus.query(expr)]
        assert not empty, f"{len(empty)} of {len(queries)} panel queries return nothing: {empty[:5]}"

    assert_eventually(all_answer, timeout=150, interval=3)


def test_every_metric_named_by_dashboards_and_alerts_is_live_and_promtool_accepts_the_pages(
    live: Live,
) -> None:
    pages = {job: page(address) for job, address in live.pages.items()}
    # From the TYPE lines: a labelled counter of rare events (errors) is declared before its first sample.
    # (The text format names a counter's family with its _total; a histogram's without suffixes.)
    suffixes = {"histogram": ["_bucket", "_sum", "_count"]}
    declared = re.findall(r"^# TYPE (\S+) (\S+)$", "\n".join(pages.values()), flags=re.MULTILINE)
    live_names = {name + suffix for name, kind in declared for suffix in suffixes.get(kind, [""])}
    rules = (ROOT / "dashboards" / "alerts.yaml").read_text(encoding="utf-8")
    named = set(re.findall(r"\b(mirror_[a-z_]+)\b", rules))
    named |= {
        name for _, _, expr in panel_queries(live.flow) for name in re.findall(r"\b(mirror_[a-z_]+)\b", expr)
    }
    assert named - live_names == set()
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: apt-get install prometheus (.ci/run does)"
    for job, text in pages.items():
        result = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, (job, result.stdout + result.stderr)


def test_records_deleted_on_the_source_before_their_copy_fire_the_truncation_alert(live: Live) -> None:
    def fired() -> None:
        firing = live.prometheus.firing("MirrorSourceTruncated")
        assert {(a["flow"], a["topic"]) for a in firing} == {(live.flow, live.truncated)}, firing

    assert_eventually(fired, timeout=60, interval=1)
    counted = live.prometheus.query(f'sum(mirror_source_truncated_records_total{{flow="{live.flow}"}})')
    assert float(counted[0]["value"][1]) == TRUNCATED


def test_a_frozen_source_fires_heartbeat_stale_and_it_resolves_after(live: Live) -> None:
    path = live.flow
    assert live.source.pid is not None
    os.kill(live.source.pid, signal.SIGSTOP)
    try:

        def stale() -> None:
            firing = live.prometheus.firing("MirrorHeartbeatStale")
            assert path in {a["path"] for a in firing}, firing

        assert_eventually(stale, timeout=90, interval=1)
    finally:
        os.kill(live.source.pid, signal.SIGCONT)

    def resolved() -> None:
        assert path not in {a["path"] for a in live.prometheus.firing("MirrorHeartbeatStale")}

    assert_eventually(resolved, timeout=120, interval=1)


def test_mirror_run_killed_fires_mirror_down_while_the_monitor_reports_a_growing_age(live: Live) -> None:
    os.killpg(live.run.process.pid, signal.SIGKILL)  # the driver and Spark's JVM
    killed_at = time.monotonic()

    def down() -> None:
        firing = live.prometheus.firing("MirrorDown")
        assert [a["instance"] for a in firing] == [live.pages["mirror"]], firing

    assert_eventually(down, timeout=60, interval=1)
    age = f'mirror_heartbeat_age_seconds{{job="mirror-heartbeats", path="{live.flow}"}}'

    def monitor_sees_it_stale() -> None:
        # mirror run's own series went stale with its last failed scrape: this is the monitor's.
        assert live.monitor.poll() is None, (live.directory / "monitor.log").read_text()
        assert live.flow in {a["path"] for a in live.prometheus.firing("MirrorHeartbeatStale")}

    assert_eventually(monitor_sees_it_stale, timeout=90, interval=1)
    since_kill = time.monotonic() - killed_at
    first = float(live.prometheus.query(age)[0]["value"][1])
    assert first >= since_kill - 5, (first, since_kill)

    def age_keeps_growing() -> None:
        second = float(live.prometheus.query(age)[0]["value"][1])
        assert second - first >= 3, (first, second)

    assert_eventually(age_keeps_growing, timeout=30, interval=1)
    polls = live.prometheus.query('mirror_heartbeat_monitor_polls_total{outcome="ok"}')
    assert float(polls[0]["value"][1]) > 10, polls


def test_the_overview_picture_is_drawn_from_the_live_data(live: Live) -> None:
    build, render = dashboards.load("build"), dashboards.load("render")
    picture = live.directory / "overview.png"
    render.render(
        build.overview(),
        lambda expr: live.prometheus.query_range(expr, seconds=600),
        picture,
        {"$__rate_interval": "15s", "$flow": live.flow},
    )
    assert picture.stat().st_size > 20_000
    live.monitor.send_signal(signal.SIGTERM)  # the monitor stops cleanly, as under systemd
    assert live.monitor.wait(timeout=30) == 0, (live.directory / "monitor.log").read_text()
    wanted = os.environ.get("MIRROR_DASHBOARD_PICTURE")
    if wanted:  # `make dashboard-picture`: keep it as dashboards/overview.png
        shutil.copyfile(picture, wanted)

"""dashboards/: the committed JSON is what dashboards/build.py builds, every query parses and names
only metrics mirror exports, and every alert fires and stays quiet as tests/promtool/alerts_test.yaml
says, with a runbook of four sections (promtool: Debian's `prometheus` package, installed by .ci/run).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from mirror.cli.entry import build_parser
from mirror.metrics import CheckpointMetrics, HeartbeatMetrics, RunMetrics, SourceMetrics
from tests import dashboards

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "dashboards" / "alerts.yaml"
RUNBOOK_SECTIONS = ["## Meaning", "## Impact", "## Diagnosis", "## Mitigation"]
# What a panel's template variables stand for when its query is checked or run outside Grafana.
VARIABLES = {"$__rate_interval": "1m", "$flow": ".*"}


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is not installed: apt-get install prometheus (.ci/run does)"
    return found


def exported_samples() -> set[str]:
    """Every sample name mirror's `/metrics` can show, from the metric families it registers."""
    registry = CollectorRegistry()
    for metrics in (SourceMetrics, CheckpointMetrics, HeartbeatMetrics, RunMetrics):
        metrics(registry)
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"], "info": ["_info"]}
    return {
        family.name + suffix for family in registry.collect() for suffix in suffixes.get(family.type, [""])
    }


def panel_queries() -> list[tuple[str, str, str]]:
    return dashboards.panel_queries(VARIABLES)


def alert_rules() -> list[dict[str, object]]:
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(mirror_[a-z_]+)\b", expr))


def test_the_committed_dashboards_are_what_build_py_builds() -> None:
    assert dashboards.load("build").main(["--check"]) == 0, (
        "run `python dashboards/build.py` and commit the JSON"
    )


def test_every_dashboard_query_names_only_metrics_mirror_exports() -> None:
    exported = exported_samples()
    unknown = {
        (dashboard, title, name)
        for dashboard, title, expr in panel_queries()
        for name in metric_names(expr)
        if name not in exported
    }
    assert not unknown, unknown


def test_every_alert_names_only_metrics_mirror_exports() -> None:
    exported = exported_samples()
    unknown = {
        (r["alert"], name)
        for r in alert_rules()
        for name in metric_names(str(r["expr"]))
        if name not in exported
    }
    assert not unknown, unknown


def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    # promtool parses PromQL offline only inside rule files: each query becomes a recording rule.
    rules = {
        "groups": [
            {
                "name": "dashboard-queries",
                "rules": [
                    {"record": f"query:{i}", "expr": expr} for i, (_, _, expr) in enumerate(panel_queries())
                ],
            }
        ]
    }
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    result = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboards_select_flows_with_a_variable_and_rates_use_the_rate_interval() -> None:
    module = dashboards.load("build")
    for build in module.DASHBOARDS.values():
        dashboard = build().to_json()
        assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "flow"}
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                ranges = re.findall(r"\[([^\]]+)\]", target["expr"])
                assert all(r in ("$__rate_interval", "1h") for r in ranges), (panel["title"], target["expr"])


def test_the_alert_rules_pass_promtool_check_rules() -> None:
    result = subprocess.run(
        [promtool(), "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_every_alert_fires_and_stays_quiet_as_its_promtool_unit_test_says() -> None:
    tests = ROOT / "tests" / "promtool" / "alerts_test.yaml"
    result = subprocess.run(
        [promtool(), "test", "rules", tests.name],
        cwd=tests.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tested = set(re.findall(r"alertname: (\w+)", tests.read_text(encoding="utf-8")))
    assert tested == {str(rule["alert"]) for rule in alert_rules()}


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: str(rule["alert"]))
def test_every_alert_has_a_severity_a_summary_and_a_runbook_of_four_sections(rule: dict[str, object]) -> None:
    labels, annotations = rule["labels"], rule["annotations"]
    assert isinstance(labels, dict) and labels["severity"] in ("critical", "warning")
    assert isinstance(annotations, dict) and annotations["summary"]
    assert annotations["runbook_url"] == f"docs/runbooks/{rule['alert']}.md"
    runbook = (ROOT / str(annotations["runbook_url"])).read_text(encoding="utf-8")
    assert runbook.startswith(f"# {rule['alert']}\n")
    assert [line for line in runbook.splitlines() if line.startswith("## ")] == RUNBOOK_SECTIONS


def test_the_mirror_commands_the_runbooks_give_exist() -> None:
    (subcommands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    commands = set(subcommands.choices)
    used = {
        match
        for runbook in (ROOT / "docs" / "runbooks").glob("Mirror*.md")
        for match in re.findall(r"`mirror ([a-z-]+)", runbook.read_text(encoding="utf-8"))
    }
    assert used and used <= commands, used - commands


def test_no_metric_uses_a_label_prometheus_keeps_for_its_targets() -> None:
    # A `job` or `instance` label of ours would be renamed exported_job on scrape, and every query
    # grouping by it would group by the scrape job instead.
    registry = CollectorRegistry()
    containers = [
        metrics(registry) for metrics in (SourceMetrics, CheckpointMetrics, HeartbeatMetrics, RunMetrics)
    ]
    labels = {
        name: set(getattr(metric, "_labelnames", ()))
        for container in containers
        for name, metric in vars(container).items()
    }
    assert not {name for name, names in labels.items() if names & {"job", "instance"}}, labels
    assert labels["jobs"] == {"flow", "operation", "outcome"}

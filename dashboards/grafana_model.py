"""Grafana's dashboard JSON model (schemaVersion 39) as a few dataclasses, and the PromQL pieces the
panels share.

Plain Python data, no builder library: three dashboards of a few panel kinds do not need one, and
the JSON stays reviewable. Every query is a `Query`, so tests can list them, substitute the template
variables and run them against a live Prometheus (tests/integration/test_live_observability.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False


@dataclass
class Panel:
    title: str
    kind: str  # timeseries, stat, table
    queries: list[Query]
    unit: str = "short"
    description: str = ""
    width: int = 12
    height: int = 8
    thresholds: list[tuple[float, str]] = field(default_factory=list)

    def to_json(self, panel_id: int, x: int, y: int) -> dict[str, Any]:
        steps = [{"color": "green", "value": None}] + [
            {"color": color, "value": value} for value, color in self.thresholds
        ]
        panel: dict[str, Any] = {
            "id": panel_id,
            "type": self.kind,
            "title": self.title,
            "description": self.description,
            "datasource": DATASOURCE,
            "gridPos": {"x": x, "y": y, "w": self.width, "h": self.height},
            "fieldConfig": {
                "defaults": {"unit": self.unit, "thresholds": {"mode": "absolute", "steps": steps}},
                "overrides": [],
            },
            "targets": [
                {
                    "refId": chr(ord("A") + i),
                    "datasource": DATASOURCE,
                    "expr": q.expr,
                    "legendFormat": q.legend,
                    "instant": q.instant or self.kind == "table",
                    "range": not (q.instant or self.kind == "table"),
                    **({"format": "table"} if self.kind == "table" else {}),
                }
                for i, q in enumerate(self.queries)
            ],
            "options": {},
        }
        if self.kind == "stat":
            panel["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"}
        if self.kind == "table":
            panel["transformations"] = [{"id": "merge"}]
            panel["options"] = {"sortBy": [{"displayName": "Value", "desc": True}]}
        return panel


@dataclass
class Dashboard:
    uid: str
    title: str
    description: str
    panels: list[Panel]
    variables: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        laid_out, x, y, row_height = [], 0, 0, 0
        for panel_id, panel in enumerate(self.panels, start=1):
            if x + panel.width > 24:
                x, y, row_height = 0, y + row_height, 0
            laid_out.append(panel.to_json(panel_id, x, y))
            x, row_height = x + panel.width, max(row_height, panel.height)
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": ["mirror", "kafka", "replication"],
            "schemaVersion": 39,
            "version": 1,
            "editable": True,
            "refresh": "30s",
            "time": {"from": "now-1h", "to": "now"},
            "timezone": "utc",
            "templating": {"list": self.variables},
            "annotations": {"list": []},
            "links": [
                {"title": other.title, "type": "link", "url": f"/d/{other.uid}", "keepTime": True}
                for other in DASHBOARD_LINKS
                if other.uid != self.uid
            ],
            "panels": laid_out,
        }

    def queries(self) -> Iterator[tuple[str, Query]]:
        for panel in self.panels:
            for query in panel.queries:
                yield panel.title, query


@dataclass(frozen=True)
class Link:
    uid: str
    title: str


DASHBOARD_LINKS = [
    Link("mirror-overview", "mirror: overview"),
    Link("mirror-flow", "mirror: flow"),
    Link("mirror-groups", "mirror: consumer groups"),
]


def datasource_variable() -> dict[str, Any]:
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"}


def label_variable(name: str, label: str, metric: str, *, multi: bool) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": f"label_values({metric}, {name})", "refId": name},
        "definition": f"label_values({metric}, {name})",
        "refresh": 2,
        "multi": multi,
        "includeAll": multi,
        "allValue": ".*" if multi else None,
        "current": {},
        "sort": 1,
    }


def flows_variable(*, multi: bool) -> dict[str, Any]:
    # Flows are named source->target (A->B): one variable selects source and target together, and
    # the same names label heartbeat paths.
    return label_variable("flow", "Flow (source->target)", "mirror_component_up", multi=multi)


def or_zero(expr: str, selector: str) -> str:
    """`expr`, or 0 per flow while it has no series: counters of rare events (errors, records
    truncated) exist only once one happened, and a panel should show 0 rather than "No data"."""
    return f"{expr} or (sum by (flow) (mirror_component_up{{{selector}}}) * 0)"


def quantile(q: float, metric: str, selector: str, by: str = "flow") -> str:
    return f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{selector}}}[{RATE}])))"

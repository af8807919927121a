"""A picture of a dashboard for people without Grafana: every time-series and stat panel of it, drawn
with matplotlib from the same queries, run against a Prometheus that scraped a real `mirror run`.

    render(build.overview(), prometheus_range_query, Path("dashboards/overview.png"), variables)

tests/integration/test_live_observability.py draws dashboards/overview.png this way.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display here
import matplotlib.pyplot as plt  # after choosing the backend

# expr -> Prometheus' query_range result: [{"metric": {...}, "values": [[t, "v"], ...]}, ...]
RangeQuery = Callable[[str], list[dict[str, Any]]]


def render(dashboard: Any, query_range: RangeQuery, path: Path, variables: Mapping[str, str]) -> None:
    panels = [p for p in dashboard.panels if p.kind in ("timeseries", "stat")]
    columns = 4
    rows = math.ceil(len(panels) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(columns * 5, rows * 3.2), squeeze=False)
    started = time.time()
    for axis, panel in zip(axes.flat, panels, strict=False):
        unit = "" if panel.unit == "short" else f" ({panel.unit})"
        axis.set_title(panel.title + unit, fontsize=9)
        axis.tick_params(labelsize=7)
        drawn = 0
        for query in panel.queries:
            expr = query.expr
            for name, value in variables.items():
                expr = expr.replace(name, value)
            for series in query_range(expr):
                times = [float(t) - started for t, _ in series["values"]]
                values = [float(v) for _, v in series["values"]]
                label = query.legend
                for key, value in series["metric"].items():
                    label = label.replace("{{" + key + "}}", value)
                label = re.sub(r"\s*\{\{\w+\}\}", "", label)  # as Grafana: a missing label shows nothing
                axis.plot(times, values, linewidth=1, label=label or None)
                drawn += 1
        if drawn and drawn <= 6 and any(q.legend for q in panel.queries):
            axis.legend(fontsize=6, loc="upper left")
        axis.set_xlabel("seconds (0: when drawn)", fontsize=7)
    for axis in list(axes.flat)[len(panels) :]:
        axis.axis("off")
    figure.suptitle(f"{dashboard.title} (from Prometheus, a real run)", fontsize=12)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)

"""dashboards/ for tests: its scripts loaded as modules, and every panel query ready to run."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

DASHBOARDS = Path(__file__).resolve().parents[1] / "dashboards"


def load(name: str) -> ModuleType:
    """dashboards/<name>.py (not a package: it is run as a script). A script imports its sibling
    modules from its own directory, which Python puts on sys.path for it: so does this."""
    if str(DASHBOARDS) not in sys.path:
        sys.path.append(str(DASHBOARDS))
    spec = importlib.util.spec_from_file_location(f"dashboards_{name}", DASHBOARDS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def panel_queries(variables: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(dashboard, panel title, expression with the template `variables` substituted)."""
    queries = []
    for name, build in load("build").DASHBOARDS.items():
        for title, query in build().queries():
            expr = query.expr
            for variable, value in variables.items():
                expr = expr.replace(variable, value)
            queries.append((name, title, expr))
    return queries

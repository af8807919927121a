"""Grafana dashboards for mirror, as code: `python dashboards/build.py` writes the JSON beside it,
`--check` fails if the committed JSON differs from what this file builds (CI runs it).

The panels of each dashboard are in dashboard_panels.py, written in the JSON model of
grafana_model.py; both are imported from beside this file, which `python dashboards/build.py` puts
on sys.path (tests/dashboards.py does the same when it loads this file as a module).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dashboard_panels import flow, groups, overview

HERE = Path(__file__).resolve().parent
DASHBOARDS = {"mirror-overview.json": overview, "mirror-flow.json": flow, "mirror-groups.json": groups}


def rendered() -> dict[str, str]:
    return {name: json.dumps(build().to_json(), indent=2) + "\n" for name, build in DASHBOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if the committed JSON is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name, text in rendered().items():
        path = HERE / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"dashboards out of date: {', '.join(stale)}; run `python dashboards/build.py` and commit")  # noqa: T201 - a script's answer
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long each test module took in a recorded run, so `make test` starts the longest first.

`make test` spreads whole modules over its workers (`--dist loadfile`). xdist queues them by
number of tests unless told not to, which sends the fault drills (few tests, many minutes each)
last: one worker then runs a 20-minute module while the other has long finished. Longest first,
the tail is made of short modules and the workers end together.

Refresh after a `make test` (each pass writes a JUnit report to .pytest-reports/):
    .venv/bin/python -m tests.module_seconds .pytest-reports/parallel.xml .pytest-reports/solo.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

RECORDED = Path(__file__).with_name("module_seconds.json")


def recorded() -> dict[str, float]:
    """Module path (tests/...py) -> seconds, as last recorded; empty if never."""
    if not RECORDED.exists():
        return {}
    return {str(path): float(seconds) for path, seconds in json.loads(RECORDED.read_text()).items()}


def module_order(modules: list[str], seconds: dict[str, float]) -> list[str]:
    """Longest first; a module with no record (new, or renamed) before all others, as it may be long."""
    return sorted(modules, key=lambda module: (module in seconds, -seconds.get(module, 0.0), module))


def seconds_from_junit(reports: list[Path]) -> dict[str, float]:
    """Per module, the seconds its test cases took (setup and teardown included), over `reports`."""
    totals: Counter[str] = Counter()
    for report in reports:
        for case in ET.parse(report).iter("testcase"):  # noqa: S314 - our own pytest run's report
            module = case.get("classname", "").split(".")
            while module and not module[-1].startswith("test_"):
                module.pop()  # a test class's name: the module is before it
            if module:
                totals["/".join(module) + ".py"] += float(case.get("time", 0.0))
    return {module: round(seconds, 1) for module, seconds in sorted(totals.items())}


def main(arguments: list[str]) -> int:
    if not arguments:
        print(__doc__, file=sys.stderr)  # noqa: T201
        return 2
    seconds = seconds_from_junit([Path(argument) for argument in arguments])
    RECORDED.write_text(json.dumps(seconds, indent=1) + "\n", encoding="utf-8")
    print(f"{RECORDED}: {len(seconds)} modules, {sum(seconds.values()):,.0f} s")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

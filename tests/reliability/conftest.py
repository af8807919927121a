"""The reliability suite's report: every test records what it checked; the session writes it."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.report import ReliabilityReport

REPORT = ReliabilityReport()
Record = Callable[..., None]


@pytest.fixture
def reliability(request: pytest.FixtureRequest) -> Record:
    """`reliability(section, case, comparison=..., shown=..., exit_code=...)` adds a report row."""
    nodeid = request.node.nodeid

    def record(section: str, case: str, **details: Any) -> None:
        REPORT.record(section, case, nodeid, **details)

    return record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if report.when == "call" or (report.when == "setup" and not report.passed):
        REPORT.outcomes[item.nodeid] = report.outcome
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get("MIRROR_RELIABILITY_REPORT")
    if target and REPORT.entries:
        REPORT.write(Path(target))

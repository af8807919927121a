"""The runbooks' commands are real: every `mirror` line of their shell blocks parses, and every hook
has a meaning in the test that runs them (tests/integration/test_runbooks.py runs them for real)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from mirror.cli.entry import build_parser
from tests.runbooks import extract_steps

RUNBOOKS = sorted((Path(__file__).resolve().parents[2] / "docs" / "runbooks").glob("[a-z]*.md"))
HOOKS = (
    {
        f"{action}-{role} {cluster}"
        for action in ("start", "stop")
        for role in ("consumers", "producers")
        for cluster in ("A", "B")
    }
    | {f"{action}-cluster {cluster}" for action in ("fail", "restart") for cluster in ("A", "B")}
    | {"keep-working A"}
)
_SHELL = {">", ">>", "2>&1", "&", "|", "&&", ";"}


def _mirror_commands(code: str) -> list[list[str]]:
    found = []
    for line in code.splitlines():
        words = shlex.split(os.path.expandvars(line), comments=True)
        if "mirror" not in words:
            continue
        args = words[words.index("mirror") + 1 :]
        end = next((i for i, word in enumerate(args) if word in _SHELL or word.startswith(">")), len(args))
        found.append(args[:end])
    return found


def test_the_runbooks_are_found() -> None:
    assert [path.name for path in RUNBOOKS] == [
        "active-active.md",
        "failover-and-failback.md",
        "migrate-a-to-b.md",
    ]


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=lambda path: path.stem)
def test_every_mirror_command_of_a_runbook_parses_and_every_hook_is_known(
    runbook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORK", "/work-dir")
    steps = extract_steps(runbook.read_text(encoding="utf-8"))
    commands = [args for step in steps if step.code for args in _mirror_commands(step.code)]
    assert len(commands) >= 5
    parser = build_parser()
    for args in commands:
        parser.parse_args(args)  # SystemExit (and the test fails) on an unknown command or option
    assert {step.hook for step in steps if step.hook} <= HOOKS

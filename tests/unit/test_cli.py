"""The `mirror` command as a user runs it: a subprocess, its exit code and what it prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_mirror

FIXTURES = Path(__file__).parent.parent / "fixtures"
VALID = "clusters:\n  A: {bootstrap_servers: a:1}\n  B: {bootstrap_servers: b:1}\nflows:\n  A->B: {}\n"


def test_help_lists_the_commands() -> None:
    result = run_mirror("--help")
    assert result.returncode == 0
    for command in ("run", "validate", "config", "local"):
        assert command in result.stdout


def _unreachable_clusters(tmp_path: Path) -> Path:
    """An mm2.yaml whose clusters are a closed loopback port, given 2 s to answer."""
    config = tmp_path / "mm2.yaml"
    config.write_text(
        "clusters:\n"
        "  A: {bootstrap_servers: '127.0.0.1:1', connect_timeout_seconds: 2}\n"
        "  B: {bootstrap_servers: '127.0.0.1:1', connect_timeout_seconds: 2}\n"
        "flows:\n  A->B: {}\n",
        encoding="utf-8",
    )
    return config


def test_run_reports_an_unreachable_cluster_in_one_line_within_its_timeout(tmp_path: Path) -> None:
    config = _unreachable_clusters(tmp_path)
    result = run_mirror("run", str(config), timeout=60)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("mirror: ")]
    assert len(errors) == 1, result.stderr
    assert "cluster A: no Kafka broker answered at 127.0.0.1:1 within 2s" in errors[0]
    assert "Traceback" not in result.stderr


def test_status_waiting_for_the_lag_says_an_unreachable_cluster_at_once_not_after_its_wait(
    tmp_path: Path,
) -> None:
    # The wait rides out failed reads for up to --timeout; a wrong address is no such read.
    config = _unreachable_clusters(tmp_path)
    result = run_mirror("status", str(config), "--until-lag", "0", "--timeout", "600", timeout=60)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("mirror: ")]
    assert len(errors) == 1, result.stderr
    assert "cluster B: no Kafka broker answered at 127.0.0.1:1 within 2s" in errors[0]


@pytest.mark.parametrize("fixture", ["01-bad-yaml.yaml", "02-unknown-key.yaml", "19-several-problems.yaml"])
def test_run_rejects_a_bad_config_without_a_traceback(fixture: str) -> None:
    result = run_mirror("run", str(FIXTURES / "bad_configs" / fixture))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert all(line.startswith("mirror: ") for line in result.stderr.splitlines())


def test_unknown_command_is_a_usage_error() -> None:
    result = run_mirror("replicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_status_without_local_clusters_says_how_to_start_them(tmp_path: Path) -> None:
    result = run_mirror("local", "status", "--dir", str(tmp_path / "none"))
    assert result.returncode == 1
    assert "mirror local up" in result.stdout


def test_a_crash_in_native_code_prints_the_python_stack_it_happened_in(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(
        "import argparse, ctypes\n"
        "from mirror.cli import entry\n"
        "def crash_in_native_code(args):\n"
        "    ctypes.string_at(0)\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.set_defaults(handler=crash_in_native_code, debug=False)\n"
        "entry.build_parser = lambda: parser\n"
        "entry.main([])\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode < 0, result.stderr
    assert "Fatal Python error: Segmentation fault" in result.stderr
    assert "in crash_in_native_code" in result.stderr

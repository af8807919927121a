"""A real Prometheus server (Debian's `prometheus` package) on 127.0.0.1 for tests: it scrapes
given targets every second, evaluates given rule files, and answers through its HTTP API."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mirror.local.ports import free_port
from tests.helpers import assert_eventually


class Prometheus:
    def __init__(self, directory: Path, targets: Mapping[str, str], rule_files: list[Path]) -> None:
        """`targets`: job name -> host:port of a /metrics endpoint."""
        binary = shutil.which("prometheus")
        assert binary, "prometheus is not installed: apt-get install prometheus (.ci/run does)"
        directory.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(path) for path in rule_files],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": [target]}]}
                for job, target in targets.items()
            ],
        }
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
        self.port = free_port()
        self.log = directory / "prometheus.log"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={directory / 'prometheus.yml'}",
                 f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            assert_eventually(self._ready, timeout=60, interval=0.5)
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> None:
        assert self.process.poll() is None, self.log.read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5) as response:
                assert response.status == 200
        except OSError as exc:  # not listening yet
            raise AssertionError(f"prometheus is not ready: {exc}") from exc

    def _get(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=30) as response:
            answer = json.loads(response.read())
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one sample) `expr` evaluates to now."""
        data = self._get("/api/v1/query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def query_range(self, expr: str, seconds: float, step: float = 2.0) -> list[dict[str, Any]]:
        end = time.time()
        data = self._get(
            "/api/v1/query_range", query=expr, start=str(end - seconds), end=str(end), step=str(step)
        )
        return list(data["result"])

    def firing(self, alert: str) -> list[dict[str, str]]:
        """The label sets of `alert`'s firing instances."""
        alerts = self._get("/api/v1/alerts")["alerts"]
        return [a["labels"] for a in alerts if a["labels"]["alertname"] == alert and a["state"] == "firing"]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)

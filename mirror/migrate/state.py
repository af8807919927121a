"""A cutover's state file: which steps are done, what they did; written atomically after each step.

It makes `mirror migrate cutover` resumable: run again after a crash, a timeout or a failed check,
it skips the steps marked done and runs the rest (every step is safe to run twice). A lock next to
it keeps two cutovers of one flow from running at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from mirror.errors import ConfigError, FlowInUseError

STEPS = ("lag_gate", "fence", "verify_fence", "drain", "verify", "groups", "report")
Status = Literal["pending", "running", "done", "failed"]


class StepRecord(BaseModel):
    status: Status = "pending"
    started_at: float | None = None
    finished_at: float | None = None
    detail: str = ""


class CutoverState(BaseModel):
    flow: str
    config_sha256: str
    steps: dict[str, StepRecord] = Field(default_factory=lambda: {step: StepRecord() for step in STEPS})
    fence: Literal["acl", "operator"] | None = None
    fenced_principals: list[str] = Field(default_factory=list)
    ends_at_fence: dict[str, int] = Field(default_factory=dict)  # "topic:partition" -> end offset
    groups_moved: dict[str, dict[str, int]] = Field(
        default_factory=dict
    )  # group -> "topic:partition" -> offset
    groups_not_moved: dict[str, str] = Field(default_factory=dict)  # group -> why

    def start(self, step: str) -> None:
        self.steps[step] = StepRecord(status="running", started_at=time.time())

    def finish(self, step: str, detail: str, status: Status = "done") -> None:
        record = self.steps[step]
        record.status, record.finished_at, record.detail = status, time.time(), detail


def state_path(directory: Path, flow: str) -> Path:
    return directory / f"{flow.replace('->', '_to_')}.json"


def config_digest(config: Path) -> str:
    return hashlib.sha256(config.read_bytes()).hexdigest()


def load_state(path: Path) -> CutoverState | None:
    if not path.exists():
        return None
    try:
        return CutoverState.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise ConfigError(
            [f"{path} is not a cutover state file ({exc.error_count()} problems); move it away to start over"]
        ) from exc


def save_state(path: Path, state: CutoverState) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(state.model_dump_json(indent=2), encoding="utf-8")
    partial.replace(path)  # a crash leaves the old file or the new one, never half of one


@contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_suffix(".lock").open("w", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise FlowInUseError(
                f"another `mirror migrate cutover` holds {path.with_suffix('.lock')}; wait for it to end"
            ) from exc
        yield

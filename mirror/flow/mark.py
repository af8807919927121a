"""The flow mark: the committed metadata of the flow's lease group, naming who owns the flow now.

Written by the `mirror run` instance holding the flow's lease, in a transaction, every renewal;
read (read_committed) by every copy task, checkpoint and heartbeat round of the flow. It says:
- `instance`: the owner; a fenced writer of any other instance is a zombie and stops;
- `generation`: the current copy-task assignment; a copy task of an older one ends;
- `task_ids`: how many copy-task transactional ids may hold transactions (ids 0..task_ids-1),
  so the next owner knows which ids to fence even after `tasks_max` or `producers_per_task` shrank;
- `stopping`: the owner is shutting down; copy tasks commit what they hold and return;
- `started_ms`, `renewed_ms`: when the owner took the flow and when it committed this mark (wall
  clock, ms; 0 from mirror before they existed): `mirror status` tells a starting, running or
  dead owner apart by them, whatever heartbeats say.
mirror before copy tasks wrote the bare instance id and used one transactional id per source
partition; such a mark decodes with `legacy=True`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class FlowMark:
    instance: str
    generation: int = 0
    task_ids: int = 0
    stopping: bool = False
    started_ms: int = 0
    renewed_ms: int = 0
    legacy: bool = False

    def encode(self) -> str:
        fields = asdict(self)
        del fields["legacy"]
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str | None) -> FlowMark | None:
        if not text:
            return None
        if not text.startswith("{"):
            return cls(instance=text, legacy=True)
        fields = json.loads(text)
        return cls(
            instance=str(fields["instance"]),
            generation=int(fields.get("generation", 0)),
            task_ids=int(fields.get("task_ids", 0)),
            stopping=bool(fields.get("stopping", False)),
            started_ms=int(fields.get("started_ms", 0)),
            renewed_ms=int(fields.get("renewed_ms", 0)),
        )

"""Convert an MM2 dedicated-mode `mm2.properties` into an equivalent `mm2.yaml`.

Resolution follows MirrorMakerConfig: top-level keys apply to every flow (connector settings)
or every cluster (security settings, below a cluster's own); `<A>.` keys configure cluster A and
`<A>.consumer.` (producer, admin) one client role of it; `<A>-><B>.` keys override for one flow.
Java client properties become librdkafka ones where an equivalent exists; the rest is listed as
not carried over, never dropped silently. Only what MM2 itself applies is carried: it hands its
replication clients security.protocol, ssl.* and sasl.* from the top and cluster levels and
everything else only from the role level, so the imported file replicates as MM2 did.

This module reads the file, refuses what cannot be converted and validates the result;
mm2_placement decides where each property lands, mm2_document writes the draft as mm2.yaml.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jproperties import Properties
from pydantic import ValidationError

from mirror.config.loader import validation_problems
from mirror.config.mm2_document import as_document, match_mm2_heartbeats
from mirror.config.mm2_keys import FLOW_PROPERTIES, comma_list
from mirror.config.mm2_placement import FLOW_KEY, Draft, place
from mirror.config.models import MirrorConfig
from mirror.errors import PropertiesImportError

_END_OF_LINE_COMMENT = re.compile(r"\s(#.*)$")


@dataclass
class ImportResult:
    yaml: str
    not_carried_over: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_properties(path: Path) -> dict[str, str]:
    properties = Properties()
    try:
        with path.open("rb") as handle:
            properties.load(handle, "utf-8")
    except FileNotFoundError:
        raise PropertiesImportError([f"{path}: no such file; check the path"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PropertiesImportError(
            [f"{path}: cannot be read ({exc}); make it a readable text file"]
        ) from None
    return {key: value for key, (value, _) in properties.items()}


def import_properties(path: Path) -> ImportResult:
    """The mm2.yaml equivalent of an MM2 properties file, validated before it is returned."""
    raw = read_properties(path)
    problems = [problem for key, value in raw.items() if (problem := _comment_in_value(path, key, value))]
    aliases = comma_list(_END_OF_LINE_COMMENT.sub("", raw.get("clusters", "")))
    if not aliases:
        problems.append(f"{path}: no 'clusters' property; MM2 files list their aliases as clusters = A, B")
    problems += [
        _missing_bootstrap(path, alias, raw) for alias in aliases if f"{alias}.bootstrap.servers" not in raw
    ]
    if problems:
        raise PropertiesImportError(problems)
    bootstraps = {alias: raw[f"{alias}.bootstrap.servers"].strip() for alias in aliases}
    draft = Draft(
        clusters={alias: {"bootstrap_servers": bootstrap} for alias, bootstrap in bootstraps.items()},
        truststore_types={
            key.removesuffix("ssl.truststore.type"): value.strip().upper()
            for key, value in raw.items()
            if key.endswith("ssl.truststore.type")
        },
    )
    for key, value in raw.items():
        if key != "clusters":
            place(key, value, aliases, draft)
    document = as_document(draft)
    config = _validated(path, document)
    if match_mm2_heartbeats(config, document, draft, aliases):
        config = _validated(path, document)
    text = (
        "# Converted by `mirror config import` from "
        + path.name
        + "\n"
        + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    )
    return ImportResult(text, draft.dropped, draft.notes)


def _comment_in_value(path: Path, key: str, value: str) -> str | None:
    """A problem if `value` ends in a "# ..." comment and the importer parses it (a name, list or number)."""
    flow_match = FLOW_KEY.match(key)
    name = flow_match.group(3) if flow_match else key
    match = _END_OF_LINE_COMMENT.search(value)
    if match is None or not (
        name in FLOW_PROPERTIES or key == "clusters" or key.endswith(".bootstrap.servers")
    ):
        return None
    return (
        f"{path}: {key}: {match.group(1)!r} is part of the value, as .properties files have no "
        "end-of-line comments (MM2 reads it so too); move the comment to a line of its own"
    )


def _missing_bootstrap(path: Path, alias: str, raw: dict[str, str]) -> str:
    wanted = f"{alias}.bootstrap.servers"
    other = next((key for key in raw if key.lower() == wanted.lower()), None)
    hint = f" ({other} is another alias: aliases are case-sensitive, in MM2 too)" if other else ""
    return f"{path}: cluster {alias}: no {wanted} in the properties file; add it{hint}"


def _validated(path: Path, document: dict[str, Any]) -> MirrorConfig:
    try:
        return MirrorConfig(**document)
    except ValidationError as exc:
        problems = validation_problems(exc)
        raise PropertiesImportError(
            [f"{path}: the converted configuration is not valid: {problem}" for problem in problems]
        ) from None

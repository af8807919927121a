"""Load `mm2.yaml` into a MirrorConfig, turning every mistake into one line: file, field, problem, fix."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from mirror.config.models import MirrorConfig, flow_problems
from mirror.errors import ConfigError

Loc = tuple[str | int, ...]

_EXAMPLE = "config/mm2.example.yaml"


def load_config(path: str | os.PathLike[str]) -> MirrorConfig:
    """The validated configuration in `path`, with MIRROR_* environment overrides applied."""
    file = Path(path)
    data, lines = _read_yaml(file)
    problems = _flow_problems(file, data, lines)
    try:
        config = MirrorConfig(**data)
    except ValidationError as exc:
        # Errors at the top level come from the cross-flow check, already in `problems`.
        problems += [_describe(file, error, lines) for error in exc.errors() if error["loc"]]
    if problems:
        raise ConfigError([text for _, text in sorted(problems, key=lambda p: p[0])])
    return config


Problem = tuple[int, str]  # (line for ordering, the message)


def _flow_problems(file: Path, data: Mapping[str, Any], lines: Mapping[Loc, int]) -> list[Problem]:
    flows, clusters = data.get("flows"), data.get("clusters")
    if not isinstance(flows, dict) or not isinstance(clusters, dict):
        return []
    problems = []
    for key, problem in flow_problems(flows, clusters):
        line = _line_of(("flows", key), lines) or 0
        problems.append((line, f"{file}:{line}: flows.{key}: {problem}"))
    return problems


def validation_problems(exc: ValidationError) -> list[str]:
    """One `field: problem and fix` line per error, for a configuration that has no file lines."""
    problems: list[str] = []
    for error in exc.errors():
        loc = _model_loc(error["loc"])
        if loc:
            problems.append(f"{_dotted(loc)}: {_problem_and_fix(error, loc)}")
        else:  # the cross-flow check joins one line per problem
            problems += error["msg"].removeprefix("Value error, ").splitlines()
    return problems


def render_effective_config(config: MirrorConfig) -> str:
    """The configuration as YAML with every secret masked, defaults included."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def _read_yaml(file: Path) -> tuple[dict[str, Any], dict[Loc, int]]:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{file}: no such file; check the path (an example is in {_EXAMPLE})"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{file}: cannot be read ({exc}); make it a readable UTF-8 text file"]) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_problem(file, exc)]) from None
    if node is None or data is None:
        raise ConfigError([f"{file}: the file is empty; define clusters and flows (see {_EXAMPLE})"])
    if not isinstance(data, dict):
        raise ConfigError(
            [f"{file}:1: the top level is a {type(data).__name__}, not a mapping; start with 'clusters:'"]
        )
    lines: dict[Loc, int] = {}
    duplicates: list[str] = []
    _index_lines(node, (), lines, duplicates, file)
    if duplicates:
        raise ConfigError(duplicates)
    return data, lines


def _yaml_problem(file: Path, exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(file)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{where}: not valid YAML ({problem}); fix the indentation or quote the value"


def _index_lines(node: yaml.Node, loc: Loc, lines: dict[Loc, int], dups: list[str], file: Path) -> None:
    """Record the line of every key path, and report keys a mapping repeats (PyYAML keeps the last)."""
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                dups.append(
                    f"{file}:{key_node.start_mark.line + 1}: {_dotted((*loc, key))}: key appears twice; "
                    "keep one (YAML would silently use the last)"
                )
            seen.add(key)
            _index_lines(value_node, (*loc, key), lines, dups, file)
            # Point at the key, not at its value, which may start on the next line.
            lines[(*loc, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index_lines(item, (*loc, index), lines, dups, file)


def _dotted(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _line_of(loc: Loc, lines: Mapping[Loc, int]) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def _describe(file: Path, error: ErrorDetails, lines: Mapping[Loc, int]) -> Problem:
    loc = _model_loc(error["loc"])
    line = _line_of(loc, lines) if error["type"] != "missing" else _line_of(loc[:-1], lines)
    where = f"{file}:{line}" if line is not None else f"{file} (or a MIRROR_* environment variable)"
    return line or 0, f"{where}: {_dotted(loc)}: {_problem_and_fix(error, loc)}"


def _model_loc(loc: tuple[int | str, ...]) -> Loc:
    # pydantic appends validator-internal steps for union and constrained types; they mean nothing
    # to someone editing the YAML, so only the path of keys and indexes is kept.
    return tuple(p for p in loc if isinstance(p, int) or not _is_type_step(p))


def _is_type_step(part: str) -> bool:
    return part in {
        "[key]",
        "str",
        "SecretStr",
        "constrained-str",
        "int",
        "float",
        "bool",
    } or part.startswith(("function-", "json-or-python", "lax-or-strict", "is-instance", "constrained-"))


def _problem_and_fix(error: ErrorDetails, loc: Loc) -> str:
    kind, value = error["type"], error.get("input")
    message = error["msg"].removeprefix("Value error, ")
    shown = _short(value)
    if kind == "extra_forbidden":
        known = _known_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
        return f"unknown key {loc[-1]!r}; remove it or fix the spelling ({hint})"
    if kind == "missing":
        return f"required key {loc[-1]!r} is missing; add it (see {_EXAMPLE})"
    if kind == "literal_error":
        expected = message.removeprefix("Input should be ")
        return f"{shown} is not allowed; use {expected}"
    if kind in {"bool_parsing", "bool_type"}:
        return f"{shown} is not a boolean; use true or false"
    if kind in {"int_parsing", "int_type", "int_from_float"}:
        return f"{shown} is not a whole number; write an integer such as 100"
    if kind in {"float_parsing", "float_type"}:
        return f"{shown} is not a number; write seconds as a number such as 5 or 0.5"
    if kind in {"greater_than", "greater_than_equal", "less_than_equal", "less_than"}:
        return f"{shown} is out of range: {message.lower()}"
    if kind == "string_pattern_mismatch" and len(loc) >= 2 and loc[0] == "clusters":
        return (
            f"cluster alias {loc[1]!r} is not valid; use letters, digits, '_' and '-' only "
            "(it becomes part of topic names)"
        )
    if kind in {"dict_type", "model_type", "model_attributes_type"}:
        return f"expected a mapping of keys, got {shown}; indent the keys under it"
    if kind in {"list_type"}:
        return f"expected a list, got {shown}; write it as [a, b] or one '- item' per line"
    if kind in {"string_type", "string_too_short"}:
        return f"expected a non-empty string, got {shown}; quote the value"
    return message


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _known_keys(parent: Loc) -> list[str]:
    """Field names of the model at `parent`, for spelling suggestions."""
    model: type[BaseModel] = MirrorConfig
    for part in _model_path(parent):
        field = model.model_fields.get(part)
        annotation = field.annotation if field is not None else None
        nested = _first_model(annotation)
        if nested is None:
            return []
        model = nested
    return list(model.model_fields)


def _model_path(loc: Loc) -> Iterator[str]:
    """The field names along `loc`, skipping dict keys (cluster aliases, flow names)."""
    dict_fields = {"clusters", "flows"}
    skip_next = False
    for part in loc:
        if skip_next:
            skip_next = False
            continue
        if isinstance(part, str):
            yield part
            skip_next = part in dict_fields


def _first_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _first_model(arg)
        if found is not None:
            return found
    return None

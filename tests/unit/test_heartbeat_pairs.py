"""Which heartbeats a configuration emits: `reverse_heartbeats`, and MM2's cluster pairs on import.

MM2 emits heartbeats X->Y into Y for every cluster pair whose `emit.heartbeats.enabled` is on, with
or without a flow (a heartbeats-only herder). mirror emits them only beside an enabled flow: X->Y's
own, or the reverse ones of flow Y->X. These tests pin that rule and what `mirror config import`
makes of MM2's pairs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mirror.config import load_config
from mirror.config.flow_settings import flow_settings, heartbeat_pairs
from mirror.config.mm2_properties import ImportResult, import_properties
from mirror.config.models import MirrorConfig

Pair = tuple[str, str]


def _config(flows: dict[str, dict[str, Any]], aliases: tuple[str, ...] = ("A", "B")) -> MirrorConfig:
    clusters = {alias: {"bootstrap_servers": f"{alias.lower()}:9092"} for alias in aliases}
    return MirrorConfig(clusters=clusters, flows=flows)


def _import(tmp_path: Path, text: str) -> tuple[MirrorConfig, ImportResult]:
    properties = tmp_path / "mm2.properties"
    properties.write_text(text, encoding="utf-8")
    result = import_properties(properties)
    converted = tmp_path / "mm2.yaml"
    converted.write_text(result.yaml, encoding="utf-8")
    return load_config(converted), result


def _bootstraps(*aliases: str) -> str:
    return f"clusters = {', '.join(aliases)}\n" + "".join(
        f"{a}.bootstrap.servers = {a}:9092\n" for a in aliases
    )


# flow B->A as configured (None: absent), A->B's emit_heartbeats -> A->B's reverse_heartbeats
REVERSE_HEARTBEATS = [
    pytest.param(None, True, True, id="reverse-absent"),
    pytest.param({"enabled": True}, True, False, id="reverse-enabled-emits-its-own"),
    pytest.param(
        {"enabled": True, "emit_heartbeats": False}, True, False, id="reverse-enabled-without-heartbeats"
    ),
    pytest.param({"enabled": False}, True, True, id="reverse-disabled-with-heartbeats"),
    pytest.param({"enabled": False, "emit_heartbeats": False}, True, False, id="reverse-disabled-without"),
    # Deliberately unlike MM2, whose pair B->A keeps its own default (on): in mirror a flow with
    # heartbeats off emits none in either direction.
    pytest.param(None, False, False, id="reverse-absent-flow-without-heartbeats"),
    pytest.param({"enabled": False}, False, False, id="reverse-disabled-with-heartbeats-flow-without"),
]


@pytest.mark.parametrize(("reverse", "emit_heartbeats", "expected"), REVERSE_HEARTBEATS)
def test_a_flow_emits_the_reverse_heartbeats_only_when_no_reverse_flow_does_or_declines_them(
    reverse: dict[str, Any] | None, emit_heartbeats: bool, expected: bool
) -> None:
    flows: dict[str, dict[str, Any]] = {"A->B": {"emit_heartbeats": emit_heartbeats}}
    if reverse is not None:
        flows["B->A"] = reverse
    config = _config(flows)
    settings = flow_settings(config, "A", "B", config.flows["A->B"])
    assert settings.emit_heartbeats is emit_heartbeats
    assert settings.reverse_heartbeats is expected


def test_an_active_active_pair_emits_each_direction_once_from_its_own_flow() -> None:
    config = _config({"A->B": {}, "B->A": {}})
    assert heartbeat_pairs(config) == {("A", "B"), ("B", "A")}
    assert not any(
        flow_settings(config, s, t, flow).reverse_heartbeats for s, t, flow in config.flow_endpoints()
    )


def test_one_enabled_flow_emits_both_directions_as_mm2s_two_herders_do(tmp_path: Path) -> None:
    # MM2 runs herder A->B (source + heartbeats) and, heartbeats being on by default, a
    # heartbeats-only herder B->A; mirror's flow A->B writes both.
    config, result = _import(tmp_path, _bootstraps("A", "B") + "A->B.enabled = true\n")
    assert heartbeat_pairs(config) == {("A", "B"), ("B", "A")}
    assert list(config.flows) == ["A->B"]
    assert not [note for note in result.notes if "heartbeats" in note and "MM2 emits them" in note]


def test_heartbeats_only_pairs_are_named_in_a_note_and_notheartbeat_pairs(tmp_path: Path) -> None:
    # MirrorMakerConfigTest.testClusterPairsWithTwoDisabledHeartbeats: MM2 keeps the 4 pairs whose
    # heartbeats are on (heartbeats-only herders); mirror has no such mode and says so.
    config, result = _import(
        tmp_path,
        _bootstraps("a", "b", "c")
        + "a->b.emit.heartbeats.enabled = false\na->c.emit.heartbeats.enabled = false\n",
    )
    assert heartbeat_pairs(config) == set()
    assert {name: (f.enabled, f.emit_heartbeats) for name, f in config.flows.items()} == {
        "a->b": (False, False),
        "a->c": (False, False),
    }
    [note] = [note for note in result.notes if note.startswith("heartbeats ")]
    assert note.startswith("heartbeats b->a, b->c, c->a, c->b: MM2 emits them")
    assert "not emitted" in note


def test_globally_disabled_heartbeats_import_as_flows_that_emit_none(tmp_path: Path) -> None:
    # MirrorMakerConfigTest.testClusterPairsWithGloballyDisabledHeartbeats: only the three enabled
    # pairs run, none with heartbeats, and the unset link b->a does not appear.
    config, result = _import(
        tmp_path,
        _bootstraps("a", "b", "c", "d", "e", "f")
        + "emit.heartbeats.enabled = false\n"
        + "".join(f"a->{t}.enabled = true\n" for t in "bcd")
        + "".join(f"a->{t}.enabled = false\n" for t in "ef"),
    )
    assert [name for name, flow in config.flows.items() if flow.enabled] == ["a->b", "a->c", "a->d"]
    assert "b->a" not in config.flows
    assert all(not flow.emit_heartbeats for flow in config.flows.values())
    assert heartbeat_pairs(config) == set()
    assert not [note for note in result.notes if note.startswith("heartbeats ")]


def test_a_heartbeats_only_pair_beside_globally_disabled_heartbeats_is_reported(tmp_path: Path) -> None:
    # MirrorMakerConfigTest.testClusterPairsWithGloballyDisabledHeartbeatsCentralLocal: MM2 runs
    # beats_emitter->central for heartbeats alone; mirror writes it as a disabled flow and says it
    # emits nothing.
    config, result = _import(
        tmp_path,
        _bootstraps("central", "local_one", "local_two", "beats_emitter")
        + "emit.heartbeats.enabled = false\n"
        + "central->local_one.enabled = true\ncentral->local_two.enabled = true\n"
        + "beats_emitter->central.emit.heartbeats.enabled = true\n",
    )
    pair = config.flows["beats_emitter->central"]
    assert (pair.enabled, pair.emit_heartbeats) == (False, True)
    assert heartbeat_pairs(config) == set()
    [note] = [note for note in result.notes if note.startswith("heartbeats ")]
    assert note.startswith("heartbeats beats_emitter->central: MM2 emits them")


def test_a_flow_with_heartbeats_on_against_a_global_off_gets_its_reverse_pair_written_off(
    tmp_path: Path,
) -> None:
    # MM2 emits only a->b here (b->a's heartbeats are off globally, and b->a is not enabled). Left
    # alone, mirror's a->b would also write b->a heartbeats into a, so the import writes b->a off.
    config, result = _import(
        tmp_path,
        _bootstraps("a", "b")
        + "emit.heartbeats.enabled = false\na->b.enabled = true\na->b.emit.heartbeats.enabled = true\n",
    )
    reverse = config.flows["b->a"]
    assert (reverse.enabled, reverse.emit_heartbeats) == (False, False)
    assert heartbeat_pairs(config) == {("a", "b")}
    assert any(note.startswith("b->a: written disabled with emit_heartbeats: false") for note in result.notes)


def test_a_flow_with_heartbeats_off_reports_the_reverse_heartbeats_mm2_would_still_emit(
    tmp_path: Path,
) -> None:
    # The Δ of the truth table above, made visible: MM2's pair b->a keeps heartbeats on.
    config, result = _import(
        tmp_path, _bootstraps("a", "b") + "a->b.enabled = true\na->b.emit.heartbeats.enabled = false\n"
    )
    assert heartbeat_pairs(config) == set()
    [note] = [note for note in result.notes if note.startswith("heartbeats ")]
    assert note.startswith("heartbeats b->a: MM2 emits them")


def test_mm2s_implicit_pairs_are_all_reported_and_none_when_heartbeats_are_off_globally(
    tmp_path: Path,
) -> None:
    # MirrorMakerConfigTest.testClusterPairsWithDefaultSettings (6 heartbeats-only pairs) and
    # .testEmptyClusterPairsWithGloballyDisabledHeartbeats (none).
    (tmp_path / "default").mkdir()
    config, result = _import(tmp_path / "default", _bootstraps("a", "b", "c"))
    assert config.flows == {}
    [note] = [note for note in result.notes if note.startswith("heartbeats ")]
    assert note.startswith("heartbeats a->b, a->c, b->a, b->c, c->a, c->b: MM2 emits them")
    (tmp_path / "off").mkdir()
    _, result = _import(tmp_path / "off", _bootstraps("a", "b", "c") + "emit.heartbeats.enabled = false\n")
    assert not [note for note in result.notes if note.startswith("heartbeats ")]

"""The registry's state: changed only by replaying `_schemas` records (Confluent's layout), ids never
handed out twice (not even after a permanent delete and compaction), and produce validation messages.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastavro")

from kafkalite.schemas import records as rec
from kafkalite.schemas.model import RegistryError
from kafkalite.schemas.registry import Record, RegistryState
from kafkalite.schemas.validation import FieldRule, check

R1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
R2 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "b", "type": "int"}]})


def apply(state: RegistryState, records: list[Record], log: list[Record] | None = None) -> None:
    for key, value in records:
        state.replay(key, value)
        if log is not None:
            log.append((key, value))


def compact(log: list[Record]) -> list[Record]:
    """What the cleaner leaves: the last record per key, tombstones dropped."""
    last: dict[bytes, bytes | None] = {}
    for key, value in log:
        last.pop(key, None)
        last[key] = value
    return [(k, v) for k, v in last.items() if v is not None]


def test_records_use_confluents_layout() -> None:
    state = RegistryState()
    schema_id, records = state.register("s", {"schema": R1}, normalize=False)
    assert schema_id == 1
    (key, value), = records  # fmt: skip
    assert json.loads(key) == {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}
    assert value is not None
    assert json.loads(value) == {"subject": "s", "version": 1, "id": 1, "schema": json.dumps(json.loads(R1), separators=(",", ":")), "deleted": False}  # fmt: skip
    assert json.loads(rec.config_key(None)) == {"keytype": "CONFIG", "subject": None, "magic": 0}


def test_state_changes_only_by_replay_and_ids_are_never_reused() -> None:
    state, log = RegistryState(), []
    sid, records = state.register("s", {"schema": R1}, normalize=False)
    assert state.subjects == {}  # nothing until replayed
    apply(state, records, log)
    _, config_record = state.set_config("s", {"compatibility": "NONE"})
    apply(state, [config_record], log)
    sid2, records = state.register("s", {"schema": R2}, normalize=False)
    apply(state, records, log)
    assert (sid, sid2) == (1, 2)
    # the same schema under another subject keeps its id
    assert state.register("t", {"schema": R2}, normalize=False)[0] == 2
    for permanent in (False, True):
        apply(state, state.delete_subject("s", permanent)[1], log)
    assert state.subject_names(deleted=True) == []
    rebuilt = RegistryState()
    apply(rebuilt, compact(log))
    assert rebuilt.max_id == 2  # the NOOP record kept the highest id through compaction
    assert rebuilt.register("u", {"schema": '"string"'}, normalize=False)[0] == 3


def test_deletes_follow_confluents_order() -> None:
    state = RegistryState()
    apply(state, state.register("s", {"schema": R1}, normalize=False)[1])
    with pytest.raises(RegistryError) as err:
        state.delete_version("s", "1", permanent=True)
    assert err.value.error_code == 40407
    apply(state, state.delete_version("s", "1", permanent=False)[1])
    with pytest.raises(RegistryError) as err:
        state.version("s", "1")
    assert err.value.error_code == 40401
    assert state.version("s", "1", deleted=True).deleted
    with pytest.raises(RegistryError) as err:
        state.delete_version("s", "1", permanent=False)
    assert err.value.error_code == 40406


def test_validation_messages() -> None:
    state = RegistryState()
    apply(state, state.register("t-value", {"schema": R1}, normalize=False)[1])
    apply(state, state.register("other", {"schema": '"string"'}, normalize=False)[1])
    value = FieldRule(False, "TopicNameStrategy", payload=True)
    good = b"\x00\x00\x00\x00\x01\x02"
    assert check(state, "t", value, good) is None
    assert "not framed" in (check(state, "t", value, b"hello") or "")
    assert "not framed" in (check(state, "t", value, None) or "")
    assert "999 is not registered" in (check(state, "t", value, b"\x00\x00\x00\x03\xe7\x02") or "")
    assert "under subject t-value" in (check(state, "t", value, b"\x00\x00\x00\x00\x02\x02a") or "")
    assert "does not match" in (check(state, "t", value, b"\x00\x00\x00\x00\x01") or "")
    by_record = FieldRule(False, "RecordNameStrategy", payload=False)
    assert "under subject R" in (check(state, "t", by_record, good) or "")
    apply(state, state.register("R", {"schema": R1}, normalize=False)[1])
    assert check(state, "t", by_record, good) is None


def test_import_mode_keeps_ids_and_versions() -> None:
    state = RegistryState()
    mode, record = state.set_mode(None, {"mode": "IMPORT"}, force=False)
    assert mode == "IMPORT"
    apply(state, [record])
    assert state.mode("s") == "IMPORT"
    sid, records = state.register("s", {"schema": R1, "id": 100, "version": 3}, normalize=False)
    apply(state, records)
    assert sid == 100 and state.version("s", "latest").version == 3
    with pytest.raises(RegistryError) as err:  # an id holding another schema is not overwritten
        state.register("t", {"schema": R2, "id": 100, "version": 1}, normalize=False)
    assert err.value.error_code == 42207
    apply(state, [state.set_mode(None, {"mode": "READWRITE"}, force=False)[1]])
    apply(state, [state.set_config("u", {"compatibility": "NONE"})[1]])
    assert state.register("u", {"schema": R2}, normalize=False)[0] == 101
    with pytest.raises(RegistryError) as err:  # IMPORT needs an empty registry (or force)
        state.set_mode(None, {"mode": "IMPORT"}, force=False)
    assert err.value.error_code == 42205

"""JSON Schema through `jsonschema`: the schema checked against its draft's meta-schema, references
resolved by name, payload validation, and Confluent's JSON Schema compatibility rules (a subset: types,
properties under open and closed content models, required properties, enums, items, numeric bounds).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from kafkalite.schemas.model import JSON, Incompatibility, ParsedSchema, invalid_schema

_JSON_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set(_JSON_TYPES) if schema is True else set()
    t = schema.get("type")
    if t is None:
        return set(_JSON_TYPES)
    return {t} if isinstance(t, str) else set(t)


class JsonSchema:
    """One parsed JSON Schema, with the schemas its references name."""

    schema_type = JSON

    def __init__(self, text: str, references: dict[str, str] | None = None) -> None:
        try:
            self.raw: Any = json.loads(text)
        except ValueError as exc:
            raise invalid_schema(f"{text[:200]}, details: not JSON: {exc}") from None
        if not isinstance(self.raw, (dict, bool)):
            raise invalid_schema(f"{text[:200]}, details: a JSON Schema is an object or a boolean")
        resources = []
        try:
            for name, ref_text in (references or {}).items():
                resources.append(
                    (
                        name,
                        Resource.from_contents(
                            json.loads(ref_text), default_specification=DRAFT202012
                        ),
                    )
                )
            cls = jsonschema.validators.validator_for(self.raw)
            cls.check_schema(self.raw)
            self.validator = cls(self.raw, registry=Registry().with_resources(resources))
        except (SchemaError, ValueError, TypeError) as exc:
            raise invalid_schema(f"{text[:200]}, details: {str(exc)[:300]}") from None
        self.text = json.dumps(self.raw, separators=(",", ":"), ensure_ascii=False)

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> str:
        return json.dumps(self.raw, separators=(",", ":"), sort_keys=True, ensure_ascii=False)

    def record_name(self, payload: bytes | None = None) -> str | None:
        title = self.raw.get("title") if isinstance(self.raw, dict) else None
        return title if isinstance(title, str) else None

    def formatted(self, fmt: str) -> str | None:
        return None

    def validate(self, payload: bytes) -> str | None:
        try:
            doc = json.loads(payload)
        except (ValueError, UnicodeDecodeError) as exc:
            return f"the payload is not JSON: {exc}"
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(doc))
        return (
            None
            if error is None
            else f"the JSON payload does not match the schema: {error.message:.200}"
        )

    def can_read(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, JsonSchema):
            return [Incompatibility("TYPE_CHANGED", "the other schema is not a JSON Schema")]
        out: list[Incompatibility] = []
        _check(self.raw, writer.raw, "#", out)
        return out


def _below(new: Any, old: Any) -> bool:
    return old is None or new < old


def _above(new: Any, old: Any) -> bool:
    return old is None or new > old


_BOUNDS = (
    ("maximum", "MAXIMUM_DECREASED", _below),
    ("maxLength", "MAX_LENGTH_DECREASED", _below),
    ("maxItems", "MAX_ITEMS_DECREASED", _below),
    ("maxProperties", "MAX_PROPERTIES_DECREASED", _below),
    ("minimum", "MINIMUM_INCREASED", _above),
    ("minLength", "MIN_LENGTH_INCREASED", _above),
    ("minItems", "MIN_ITEMS_INCREASED", _above),
    ("minProperties", "MIN_PROPERTIES_INCREASED", _above),
)


def _open(schema: dict[str, Any]) -> bool:
    extra = schema.get("additionalProperties", True)
    return extra is not False


def _check(reader: Any, writer: Any, path: str, out: list[Incompatibility]) -> None:
    """Can every document valid under `writer` be read under `reader`? (reasons as Confluent names them)"""
    if reader is True or reader == {}:
        return
    if writer is True or writer == {}:
        if reader is not True and reader != {}:
            out.append(Incompatibility("TYPE_NARROWED", f"the schema at {path} was narrowed", path))
        return
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        if reader != writer:
            out.append(Incompatibility("TYPE_CHANGED", f"the schema at {path} changed", path))
        return
    rt, wt = _types(reader), _types(writer)
    lost = wt - rt - ({"integer"} if "number" in rt else set())
    if lost:
        out.append(
            Incompatibility(
                "TYPE_NARROWED" if wt & rt else "TYPE_CHANGED",
                f"the type at {path} changed from {sorted(wt)} to {sorted(rt)}",
                path,
            )
        )
        return
    if "enum" in reader:
        missing = [v for v in writer.get("enum", [None]) if v not in reader["enum"]]
        if "enum" not in writer or missing:
            out.append(
                Incompatibility("ENUM_ARRAY_NARROWED", f"the enum at {path} was narrowed", path)
            )
    for bound, kind, tighter in _BOUNDS:
        if bound in reader and tighter(reader[bound], writer.get(bound)):
            out.append(Incompatibility(kind, f"{bound} at {path} was tightened", f"{path}/{bound}"))
    if "object" in rt & wt:
        rprops = reader.get("properties", {}) or {}
        wprops = writer.get("properties", {}) or {}
        required_new = set(reader.get("required", [])) - set(writer.get("required", []))
        for name in sorted(required_new):
            if name not in wprops or name not in set(writer.get("required", [])):
                out.append(
                    Incompatibility(
                        "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
                        if name not in wprops
                        else "REQUIRED_ATTRIBUTE_ADDED",
                        f"the property {name!r} at {path} is now required",
                        f"{path}/required",
                    )
                )
        for name, rschema in rprops.items():
            sub = f"{path}/properties/{name}"
            if name in wprops:
                _check(rschema, wprops[name], sub, out)
            elif _open(writer):
                out.append(
                    Incompatibility(
                        "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                        f"the property {name!r} was added at {path}, where the old schema allowed any property",
                        sub,
                    )
                )
        for name, wschema in wprops.items():
            if name not in rprops:
                extra = reader.get("additionalProperties", True)
                if extra is False:
                    out.append(
                        Incompatibility(
                            "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                            f"the property {name!r} was removed at {path}, where no other property is allowed",
                            f"{path}/properties/{name}",
                        )
                    )
                elif isinstance(extra, dict):
                    _check(extra, wschema, f"{path}/additionalProperties", out)
        if _open(writer) and not _open(reader):
            out.append(
                Incompatibility(
                    "ADDITIONAL_PROPERTIES_REMOVED",
                    f"additional properties are no longer allowed at {path}",
                    f"{path}/additionalProperties",
                )
            )
    if "array" in rt & wt and "items" in reader and isinstance(reader["items"], (dict, bool)):
        _check(reader["items"], writer.get("items", True), f"{path}/items", out)

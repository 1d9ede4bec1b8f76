"""Avro schemas through fastavro: parsing (with named types from references), the Parsing Canonical
Form and its CRC-64-AVRO fingerprint, and Avro's schema-resolution rules as a compatibility check.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType, to_parsing_canonical_form

from kafkalite.schemas.model import AVRO, Incompatibility, ParsedSchema, invalid_schema

_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class AvroSchema:
    """One parsed Avro schema; `names` holds every named type it (and its references) define."""

    schema_type = AVRO

    def __init__(self, text: str, references: dict[str, str] | None = None) -> None:
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise invalid_schema(f"{text[:200]}, details: not JSON: {exc}") from None
        named: dict[str, Any] = {}
        try:
            for ref_text in (references or {}).values():
                fastavro.parse_schema(json.loads(ref_text), named_schemas=named)
            self.parsed: Any = fastavro.parse_schema(raw, named_schemas=named)
            self.canonical_form = to_parsing_canonical_form(self.parsed)
        except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError) as exc:
            raise invalid_schema(f"{text[:200]}, details: {exc}") from None
        except Exception as exc:  # fastavro raises bare exceptions for some shapes
            raise invalid_schema(f"{text[:200]}, details: {exc}") from None
        self.raw = raw
        self.names: dict[str, Any] = named
        self.text = _compact(raw)

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> str:
        """The schema with its JSON keys sorted (field order, defaults and docs kept); equality of
        Avro meaning is the Parsing Canonical Form's, see `fingerprint`."""
        return json.dumps(self.raw, separators=(",", ":"), sort_keys=True, ensure_ascii=False)

    def record_name(self, payload: bytes | None = None) -> str | None:
        if isinstance(self.parsed, dict) and self.parsed.get("type") in ("record", "enum", "fixed"):
            return str(self.parsed["name"])
        return None

    def formatted(self, fmt: str) -> str | None:
        return None

    def fingerprint(self) -> str:
        return fastavro.schema.fingerprint(self.canonical_form, "CRC-64-AVRO")

    def can_read(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, AvroSchema):
            return [Incompatibility("TYPE_MISMATCH", "the other schema is not Avro")]
        out: list[Incompatibility] = []
        _check(self.parsed, writer.parsed, self.names, writer.names, "", out, set())
        return out

    def validate(self, payload: bytes) -> str | None:
        buf = io.BytesIO(payload)
        try:
            fastavro.schemaless_reader(buf, self.parsed, None)
        except Exception as exc:
            return f"the Avro payload does not match the schema: {exc!s:.200}"
        if buf.tell() != len(payload):
            return f"the Avro payload has {len(payload) - buf.tell()} byte(s) past the record"
        return None


# -- schema resolution (Avro 1.11 spec, "Schema Resolution"), as a list of reasons --------------------


def _resolve(schema: Any, names: dict[str, Any]) -> Any:
    if isinstance(schema, str) and schema not in _PRIMITIVES:
        return names.get(schema, schema)
    return schema


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return str(schema.get("type"))
    return str(schema)


def _fullname(schema: Any) -> str:
    return str(schema.get("name", "")) if isinstance(schema, dict) else ""


def _aliases(schema: Any) -> set[str]:
    return set(schema.get("aliases", ())) if isinstance(schema, dict) else set()


def _check(
    reader: Any,
    writer: Any,
    rnames: dict[str, Any],
    wnames: dict[str, Any],
    path: str,
    out: list[Incompatibility],
    seen: set[tuple[str, str]],
) -> None:
    reader, writer = _resolve(reader, rnames), _resolve(writer, wnames)
    rk, wk = _kind(reader), _kind(writer)
    if wk == "union":
        for i, branch in enumerate(writer):
            _check(reader, branch, rnames, wnames, f"{path}/{i}", out, seen)
        return
    if rk == "union":
        for branch in reader:
            trial: list[Incompatibility] = []
            _check(branch, writer, rnames, wnames, path, trial, set(seen))
            if not trial:
                return
        out.append(
            Incompatibility(
                "MISSING_UNION_BRANCH",
                f"The new schema is missing a type inside a union field at path '{path or '/'}'",
                path or "/",
            )
        )
        return
    if rk in _PRIMITIVES or wk in _PRIMITIVES:
        if wk == rk or rk in _PROMOTIONS.get(wk, ()):
            return
        out.append(
            Incompatibility(
                "TYPE_MISMATCH",
                f"The type (path '{path or '/'}') of a field in the new schema does not match "
                f"with the old schema",
                path or "/",
            )
        )
        return
    if rk != wk:
        out.append(
            Incompatibility(
                "TYPE_MISMATCH",
                f"The type (path '{path or '/'}') of a field in the new schema does not match "
                f"with the old schema",
                path or "/",
            )
        )
        return
    if rk in ("record", "enum", "fixed"):
        rn, wn = _fullname(reader), _fullname(writer)
        if (
            rn != wn
            and wn not in _aliases(reader)
            and rn.rsplit(".", 1)[-1] != wn.rsplit(".", 1)[-1]
        ):
            out.append(
                Incompatibility(
                    "NAME_MISMATCH",
                    f"The name of the schema has changed (path '{path or '/'}')",
                    f"{path}/name",
                )
            )
            return
    if rk == "record":
        key = (_fullname(reader), _fullname(writer))
        if key in seen:
            return
        seen.add(key)
        wfields = {f["name"]: f for f in writer.get("fields", [])}
        for i, rf in enumerate(reader.get("fields", [])):
            wf = wfields.get(rf["name"])
            if wf is None:
                wf = next((wfields[a] for a in rf.get("aliases", ()) if a in wfields), None)
            if wf is None:
                if "default" not in rf:
                    out.append(
                        Incompatibility(
                            "READER_FIELD_MISSING_DEFAULT_VALUE",
                            f"The field '{rf['name']}' at path '{path}/fields/{i}' in the new "
                            "schema has no default value and is missing in the old schema",
                            rf["name"],
                        )
                    )
                continue
            _check(rf["type"], wf["type"], rnames, wnames, f"{path}/fields/{i}/type", out, seen)
    elif rk == "enum":
        missing = [s for s in writer.get("symbols", []) if s not in reader.get("symbols", [])]
        if missing and "default" not in reader:
            out.append(
                Incompatibility(
                    "MISSING_ENUM_SYMBOLS",
                    f"The new schema is missing enum symbols '{missing}' at path "
                    f"'{path}/symbols' in the old schema",
                    f"{path}/symbols",
                )
            )
    elif rk == "fixed":
        if reader.get("size") != writer.get("size"):
            out.append(
                Incompatibility(
                    "FIXED_SIZE_MISMATCH",
                    f"The size of FIXED type field at path '{path}/size' in the old schema does "
                    "not match with the new schema",
                    f"{path}/size",
                )
            )
    elif rk == "array":
        _check(reader["items"], writer["items"], rnames, wnames, f"{path}/items", out, seen)
    elif rk == "map":
        _check(reader["values"], writer["values"], rnames, wnames, f"{path}/values", out, seen)

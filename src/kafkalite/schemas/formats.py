"""Parsing a schema of any format the registry knows, by its `schemaType`, with its references'
texts already resolved (reference name -> schema text, dependencies first).
"""

from __future__ import annotations

from kafkalite.schemas.model import AVRO, JSON, PROTOBUF, ParsedSchema, RegistryError, unprocessable


def parse(schema_type: str, text: str, references: dict[str, str] | None = None) -> ParsedSchema:
    """The parsed schema; RegistryError 42201 when it is not a valid schema of that type."""
    if schema_type == AVRO:
        from kafkalite.schemas.avro import AvroSchema

        return AvroSchema(text, references)
    if schema_type == JSON:
        from kafkalite.schemas.json_schema import JsonSchema

        return JsonSchema(text, references)
    if schema_type == PROTOBUF:
        from kafkalite.schemas.protobuf import ProtobufSchema

        return ProtobufSchema(text, references)
    raise unknown_type(schema_type)


def unknown_type(schema_type: object) -> RegistryError:
    return unprocessable(f"Unknown schema type: {schema_type}")

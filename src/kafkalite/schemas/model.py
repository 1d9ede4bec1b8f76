"""What every schema format shares: the parsed-schema interface, references, the formats' names and
the registry's error (a Confluent error code, an HTTP status and a message).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
SCHEMA_TYPES = (AVRO, JSON, PROTOBUF)


class RegistryError(Exception):
    """An answer that is an error, as Confluent's Schema Registry gives it: HTTP status, error_code."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


# Confluent's error codes (io.confluent.kafka.schemaregistry.rest.exceptions.Errors)
def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(what: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, what)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404,
        40404,
        f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to delete "
        "permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first before being permanently "
        "deleted",
    )


def subject_level_compat_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def subject_level_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
    )


def incompatible(message: str) -> RegistryError:
    return RegistryError(409, 409, message)


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema {message}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level(level: object) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level. Valid values are none, backward, forward, full, "
        f"backward_transitive, forward_transitive, and full_transitive (got {level!r})",
    )


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(
        422, 42204, f"Invalid mode. Valid values are READWRITE, READONLY, IMPORT (got {mode!r})"
    )


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def references_exist(message: str) -> RegistryError:
    return RegistryError(422, 42206, message)


def unprocessable(message: str) -> RegistryError:
    """A request body the registry cannot take (Confluent answers these 422 with its status as code)."""
    return RegistryError(422, 422, message)


def bad_request(message: str) -> RegistryError:
    return RegistryError(400, 400, message)


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store - {message}")


def operation_timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out - {message}")


def forward_error(message: str) -> RegistryError:
    return RegistryError(
        500, 50003, f"Error while forwarding the request to the primary - {message}"
    )


def read_only_mode(subject: str | None) -> RegistryError:
    target = f"Subject {subject}" if subject else "The registry"
    return RegistryError(422, 42205, f"{target} is in read-only mode")


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A reference from a schema to another subject's version, under the name the schema uses."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class Incompatibility:
    """One reason a schema cannot follow another: Confluent's error type, a description, the path."""

    error_type: str
    description: str
    path: str = "/"

    def render(self) -> str:
        return (
            f"{{errorType:'{self.error_type}', description:'{self.description}', "
            f"additionalInfo:'{self.path}'}}"
        )


class ParsedSchema(Protocol):
    """A schema of one format once parsed: its type, its canonical text (what equality and lookups
    compare), its normalized text, and the compatibility check against an older schema."""

    schema_type: str

    def canonical(self) -> str: ...

    def normalized(self) -> str: ...

    def can_read(self, writer: ParsedSchema) -> list[Incompatibility]:
        """Why a reader of this schema cannot read data written with `writer` (empty: it can)."""
        ...

    def validate(self, payload: bytes) -> str | None:
        """Why a serialized payload (after the framing) does not match this schema (None: it does)."""
        ...

    def record_name(self, payload: bytes | None = None) -> str | None:
        """The record's fully qualified name, for RecordNameStrategy (None: it has none); for
        Protobuf, the message the payload's indexes name (the first message without one)."""
        ...

    def formatted(self, fmt: str) -> str | None:
        """The schema's text in another format (`serialized` for Protobuf); None: as stored."""
        ...


@dataclass(slots=True)
class ResolvedReferences:
    """The schemas a schema's references name, resolved transitively: reference name -> text."""

    texts: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)

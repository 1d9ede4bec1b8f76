"""The Schema Registry's state, rebuilt only by replaying `_schemas` records, and its operations as
functions that check a request against the state and return the records to write (never mutate).
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field

from kafkalite.schemas import compatibility
from kafkalite.schemas import records as rec
from kafkalite.schemas.formats import parse
from kafkalite.schemas.model import (
    AVRO,
    SCHEMA_TYPES,
    ParsedSchema,
    RegistryError,
    SchemaReference,
    incompatible,
    invalid_compatibility_level,
    invalid_mode,
    invalid_version,
    read_only_mode,
    references_exist,
    schema_not_found,
    subject_not_found,
    subject_not_soft_deleted,
    subject_soft_deleted,
    unprocessable,
    version_not_found,
    version_not_soft_deleted,
    version_soft_deleted,
)

MODES = ("READWRITE", "READONLY", "IMPORT", "READONLY_OVERRIDE")
Record = tuple[bytes, bytes | None]
MAX_VERSION = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One version of one subject, as its SCHEMA record holds it."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = ()
    metadata: dict[str, object] | None = None
    rule_set: dict[str, object] | None = None
    deleted: bool = False

    def to_value(self) -> dict[str, object]:
        v: dict[str, object] = {
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
            "schema": self.schema,
            "deleted": self.deleted,
        }
        if self.schema_type != AVRO:
            v["schemaType"] = self.schema_type
        if self.references:
            v["references"] = [r.to_json() for r in self.references]
        if self.metadata is not None:
            v["metadata"] = self.metadata
        if self.rule_set is not None:
            v["ruleSet"] = self.rule_set
        return v

    def to_response(self) -> dict[str, object]:
        """The body Confluent answers for a subject's version (no `deleted`)."""
        body: dict[str, object] = {"subject": self.subject, "version": self.version, "id": self.id}
        body.update(content_fields(self))
        return body


def content_fields(sv: SchemaVersion) -> dict[str, object]:
    out: dict[str, object] = {}
    if sv.schema_type != AVRO:
        out["schemaType"] = sv.schema_type
    if sv.references:
        out["references"] = [r.to_json() for r in sv.references]
    if sv.metadata is not None:
        out["metadata"] = sv.metadata
    if sv.rule_set is not None:
        out["ruleSet"] = sv.rule_set
    out["schema"] = sv.schema
    return out


_GUIDS: dict[tuple[str, str], str] = {}


def guid_of(schema_id: int, sv: SchemaVersion) -> str:
    """A schema's GUID: a UUID derived from its content (the same content, the same GUID)."""
    key = (sv.schema_type, sv.schema)
    guid = _GUIDS.get(key)
    if guid is None:
        digest = hashlib.md5(f"{sv.schema_type}\0{sv.schema}".encode(), usedforsecurity=False)
        guid = str(uuid.UUID(bytes=digest.digest(), version=3))
        if len(_GUIDS) > 100_000:
            _GUIDS.clear()
        _GUIDS[key] = guid
    return guid


def _references(raw: object) -> tuple[SchemaReference, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise unprocessable("references must be a list")
    out = []
    for r in raw:
        if (
            not isinstance(r, dict)
            or not isinstance(r.get("name"), str)
            or not isinstance(r.get("subject"), str)
            or not isinstance(r.get("version"), int)
            or isinstance(r.get("version"), bool)
        ):
            raise unprocessable(f"a reference needs a name, a subject and a version: {r!r:.200}")
        out.append(SchemaReference(r["name"], r["subject"], r["version"]))
    return tuple(out)


def _from_value(v: dict[str, object]) -> SchemaVersion | None:
    try:
        md, rs = v.get("metadata"), v.get("ruleSet")
        return SchemaVersion(
            subject=str(v["subject"]),
            version=int(v["version"]),  # type: ignore[call-overload]
            id=int(v["id"]),  # type: ignore[call-overload]
            schema=str(v["schema"]),
            schema_type=str(v.get("schemaType") or AVRO),
            references=_references(v.get("references")),
            metadata=md if isinstance(md, dict) else None,
            rule_set=rs if isinstance(rs, dict) else None,
            deleted=bool(v.get("deleted", False)),
        )
    except (KeyError, TypeError, ValueError, RegistryError):
        return None


@dataclass(slots=True)
class RegistryState:
    """Subjects and their versions, schemas by id, configs and modes; `max_id` never goes down."""

    subjects: dict[str, dict[int, SchemaVersion]] = field(default_factory=dict)
    by_id: dict[int, SchemaVersion] = field(default_factory=dict)
    ids: dict[tuple[str, str, tuple[SchemaReference, ...]], int] = field(default_factory=dict)
    configs: dict[str | None, dict[str, object]] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    primary: tuple[int, str] | None = None  # kafkalite's NOOP announcement: (broker id, HTTP URL)
    _parsed: dict[int, ParsedSchema] = field(default_factory=dict)
    _live_ids: dict[str, frozenset[int]] = field(default_factory=dict)

    # -- replay ----------------------------------------------------------------------------------
    def replay(self, key_raw: bytes | None, value_raw: bytes | None) -> None:
        """Apply one `_schemas` record (the only way the state changes)."""
        key = rec.parse_key(key_raw)
        if key is None:
            return
        self._live_ids.clear()
        value = rec.parse_value(value_raw)
        if key.keytype == rec.SCHEMA and key.subject is not None and key.version is not None:
            versions = self.subjects.setdefault(key.subject, {})
            if value is None:
                gone = versions.pop(key.version, None)
                if not versions:
                    del self.subjects[key.subject]
                if gone is not None:
                    self._forget_unused(gone.id)
                return
            sv = _from_value(value)
            if sv is None:
                return
            versions[sv.version] = sv
            self.max_id = max(self.max_id, sv.id)
            if sv.id not in self.by_id:
                self.by_id[sv.id] = sv
                self.ids.setdefault((sv.schema_type, sv.schema, sv.references), sv.id)
        elif key.keytype == rec.CONFIG:
            if value is None:
                self.configs.pop(key.subject, None)
            else:
                self.configs[key.subject] = value
        elif key.keytype == rec.MODE:
            mode = value.get("mode") if value else None
            if isinstance(mode, str):
                self.modes[key.subject] = mode
            else:
                self.modes.pop(key.subject, None)
        elif key.keytype == rec.DELETE_SUBJECT and key.subject is not None and value:
            upto = value.get("version")
            for v, sv in list(self.subjects.get(key.subject, {}).items()):
                if isinstance(upto, int) and v <= upto and not sv.deleted:
                    self.subjects[key.subject][v] = _replace_deleted(sv)
        elif key.keytype == rec.NOOP and value:
            high = value.get("maxId")
            if isinstance(high, int):
                self.max_id = max(self.max_id, high)
            primary = value.get("primary")
            if isinstance(primary, dict):
                broker, url = primary.get("brokerId"), primary.get("url")
                if isinstance(broker, int) and isinstance(url, str):
                    self.primary = (broker, url)

    def _forget_unused(self, schema_id: int) -> None:
        """A permanently deleted version's id is forgotten once no version uses it (as a replay of
        the compacted topic would); `max_id` keeps it from being handed out again."""
        if any(sv.id == schema_id for vs in self.subjects.values() for sv in vs.values()):
            return
        gone = self.by_id.pop(schema_id, None)
        self._parsed.pop(schema_id, None)
        if gone is not None:
            self.ids.pop((gone.schema_type, gone.schema, gone.references), None)

    # -- reads -----------------------------------------------------------------------------------
    def parsed(self, schema_id: int) -> ParsedSchema:
        """The parsed schema of an id (parsed once)."""
        p = self._parsed.get(schema_id)
        if p is None:
            sv = self.by_id.get(schema_id)
            if sv is None:
                raise schema_not_found()
            p = parse(sv.schema_type, sv.schema, self.resolve_references(sv.references))
            self._parsed[schema_id] = p
        return p

    def live_ids(self, subject: str) -> frozenset[int]:
        """The ids of a subject's live versions (cached until the next replay)."""
        ids = self._live_ids.get(subject)
        if ids is None:
            versions = self.subjects.get(subject, {}).values()
            ids = frozenset(sv.id for sv in versions if not sv.deleted)
            self._live_ids[subject] = ids
        return ids

    def subject_names(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(
            s
            for s, vs in self.subjects.items()
            if s.startswith(prefix) and any(deleted or not v.deleted for v in vs.values())
        )

    def live_versions(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        """The versions of a subject, oldest first; 40401 when it has none (deleted ones count
        only with `deleted`)."""
        versions = [
            sv
            for _, sv in sorted(self.subjects.get(subject, {}).items())
            if deleted or not sv.deleted
        ]
        if not versions:
            raise subject_not_found(subject)
        return versions

    def version(self, subject: str, spec: str, deleted: bool = False) -> SchemaVersion:
        """`latest` (or -1), or a version number, of a subject."""
        number = parse_version(spec)
        versions = self.live_versions(subject, deleted)
        if number == -1:
            return versions[-1]
        for sv in versions:
            if sv.version == number:
                return sv
        raise version_not_found(number)

    def schema_by_id(self, schema_id: int) -> SchemaVersion:
        sv = self.by_id.get(schema_id)
        if sv is None:
            raise RegistryError(404, 40403, "Schema " + str(schema_id) + " not found")
        return sv

    def usages(self, schema_id: int, deleted: bool = False) -> list[SchemaVersion]:
        return [
            sv
            for s in sorted(self.subjects)
            for _, sv in sorted(self.subjects[s].items())
            if sv.id == schema_id and (deleted or not sv.deleted)
        ]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted(
            {
                sv.id
                for vs in self.subjects.values()
                for sv in vs.values()
                if not sv.deleted
                and any(r.subject == subject and r.version == version for r in sv.references)
            }
        )

    def compatibility(self, subject: str | None) -> str:
        for scope in (subject, None):
            level = self.configs.get(scope, {}).get("compatibilityLevel")
            if isinstance(level, str):
                return level
        return compatibility.DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or "READWRITE"

    def resolve_references(
        self, refs: tuple[SchemaReference, ...], _seen: set[tuple[str, int]] | None = None
    ) -> dict[str, str]:
        """Reference name -> schema text for refs and theirs, dependencies first; 42201 when one
        is missing."""
        out: dict[str, str] = {}
        seen = _seen if _seen is not None else set()
        for r in refs:
            if (r.subject, r.version) in seen:
                continue
            seen.add((r.subject, r.version))
            try:
                target = self.version(r.subject, str(r.version), deleted=True)
            except RegistryError:
                raise RegistryError(
                    422,
                    42201,
                    f"Invalid schema: reference {r.name!r} to {r.subject} version "
                    f"{r.version} does not exist",
                ) from None
            out.update(self.resolve_references(target.references, seen))
            out[r.name] = target.schema
        return out

    def lookup(
        self, subject: str, schema_type: str, text: str, refs: tuple[SchemaReference, ...],
        normalize: bool, deleted: bool = False,
    ) -> SchemaVersion:  # fmt: skip
        """The version of `subject` holding this schema (POST /subjects/{s})."""
        versions = self.live_versions(subject, deleted)
        parsed = parse(schema_type, text, self.resolve_references(refs))
        want = parsed.normalized() if normalize else parsed.canonical()
        for sv in reversed(versions):
            if sv.schema_type != schema_type or sv.references != refs:
                continue
            have = self.parsed(sv.id)
            if (have.normalized() if normalize else have.canonical()) == want:
                return sv
        raise schema_not_found()

    # -- operations: records to write ------------------------------------------------------------
    def check_compatibility(
        self, subject: str, parsed: ParsedSchema, against: list[SchemaVersion]
    ) -> list[str]:
        level = self.compatibility(subject)
        previous = [(sv.version, self.parsed(sv.id)) for sv in against]
        failures = compatibility.check(level, parsed, previous)
        return compatibility.describe(level, failures, {sv.version: sv.schema for sv in against})

    def register(
        self, subject: str, body: dict[str, object], normalize: bool
    ) -> tuple[int, list[Record]]:
        """POST /subjects/{s}/versions: the id, and the records to write (none when the subject
        already has this schema)."""
        mode = self.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise read_only_mode(subject)
        schema_type, text, refs = request_schema(body)
        parsed = parse(schema_type, text, self.resolve_references(refs))
        stored = parsed.normalized() if normalize else parsed.canonical()
        metadata, rule_set = body.get("metadata"), body.get("ruleSet")
        versions = sorted(self.subjects.get(subject, {}).values(), key=lambda sv: sv.version)
        live = [sv for sv in versions if not sv.deleted]
        for sv in reversed(live):
            if (
                sv.schema_type == schema_type
                and sv.references == refs
                and self.parsed(sv.id).canonical() == parsed.canonical()
                and (metadata is None or metadata == sv.metadata)
                and (rule_set is None or rule_set == sv.rule_set)
            ):
                return sv.id, []
        wanted_id = body.get("id")
        if mode != "IMPORT":
            reasons = self.check_compatibility(subject, parsed, live)
            if reasons:
                raise incompatible(
                    "Schema being registered is incompatible with an earlier schema for subject "
                    f'"{subject}", details: [{", ".join(reasons)}]'
                )
            wanted_id = None
        schema_id = self.ids.get((schema_type, stored, refs))
        if isinstance(wanted_id, int) and not isinstance(wanted_id, bool) and wanted_id > 0:
            if schema_id is not None and schema_id != wanted_id:
                raise RegistryError(
                    422, 42207, f"Schema already registered with id {schema_id} instead of input "
                    f"id {wanted_id}"
                )  # fmt: skip
            other = self.by_id.get(wanted_id)
            if other is not None and (other.schema_type, other.schema) != (schema_type, stored):
                raise RegistryError(
                    422, 42207, f"Overwrite new schema with id {wanted_id} is not permitted."
                )
            schema_id = wanted_id
        if schema_id is None:
            schema_id = self.max_id + 1
        wanted_version = body.get("version")
        version = (versions[-1].version + 1) if versions else 1
        if mode == "IMPORT" and isinstance(wanted_version, int) and wanted_version > 0:
            version = wanted_version
        sv = SchemaVersion(
            subject, version, schema_id, stored, schema_type, refs,
            metadata if isinstance(metadata, dict) else None,
            rule_set if isinstance(rule_set, dict) else None,
        )  # fmt: skip
        return schema_id, [(rec.schema_key(subject, version), rec.dump_value(sv.to_value()))]

    def delete_version(self, subject: str, spec: str, permanent: bool) -> tuple[int, list[Record]]:
        self._writable(subject)
        number = parse_version(spec)
        all_versions = self.live_versions(subject, deleted=True)
        if number == -1:
            live = [sv for sv in all_versions if not sv.deleted]
            if not live:
                raise subject_not_found(subject)
            sv = live[-1]
        else:
            found = next((v for v in all_versions if v.version == number), None)
            if found is None:
                raise version_not_found(number)
            sv = found
        if self.referenced_by(subject, sv.version):
            raise references_exist(
                f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,"
                f"subject={subject},version={sv.version}}}."
            )
        if permanent:
            if not sv.deleted:
                raise version_not_soft_deleted(subject, sv.version)
            return sv.version, [(rec.schema_key(subject, sv.version), None), *self._keep_max(sv.id)]
        if sv.deleted:
            raise version_soft_deleted(subject, sv.version)
        return sv.version, [
            (rec.schema_key(subject, sv.version), rec.dump_value(_replace_deleted(sv).to_value()))
        ]

    def delete_subject(self, subject: str, permanent: bool) -> tuple[list[int], list[Record]]:
        self._writable(subject)
        versions = self.live_versions(subject, deleted=True)
        live = [sv for sv in versions if not sv.deleted]
        for sv in versions:
            if self.referenced_by(subject, sv.version):
                raise references_exist(
                    f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,"
                    f"subject={subject},version={sv.version}}}."
                )
        if permanent:
            if live:
                raise subject_not_soft_deleted(subject)
            out: list[Record] = [(rec.schema_key(subject, sv.version), None) for sv in versions]
            out += [(rec.config_key(subject), None)] if subject in self.configs else []
            out += [(rec.mode_key(subject), None)] if subject in self.modes else []
            out += self._keep_max(max(sv.id for sv in versions))
            return [sv.version for sv in versions], out
        if not live:
            raise subject_soft_deleted(subject)
        writes: list[Record] = [
            (rec.delete_subject_key(subject),
             rec.dump_value({"subject": subject, "version": live[-1].version})),
        ]  # fmt: skip
        writes += [
            (rec.schema_key(subject, sv.version), rec.dump_value(_replace_deleted(sv).to_value()))
            for sv in live
        ]
        return [sv.version for sv in live], writes

    def announce(self, broker_id: int, url: str) -> Record:
        """kafkalite's NOOP record naming the primary (the leader of `_schemas`) and its HTTP URL, so
        the other brokers forward writes there; it carries `max_id` as every NOOP record does."""
        return rec.noop_key(), rec.dump_value(
            {"maxId": self.max_id, "primary": {"brokerId": broker_id, "url": url}}
        )

    def _keep_max(self, schema_id: int) -> list[Record]:
        """A permanent delete may drop the record holding the highest id: a NOOP record keeps
        `max_id` so compaction cannot make an id reusable."""
        if schema_id < self.max_id:
            return []
        return [self.announce(*self.primary) if self.primary else
                (rec.noop_key(), rec.dump_value({"maxId": self.max_id}))]  # fmt: skip

    def _writable(self, subject: str | None) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise read_only_mode(subject)

    def set_config(self, subject: str | None, body: dict[str, object]) -> tuple[str, Record]:
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str) or level.upper() not in compatibility.LEVELS:
            raise invalid_compatibility_level(level)
        value = dict(self.configs.get(subject, {}))
        value["compatibilityLevel"] = level.upper()
        for name in ("normalize", "alias", "compatibilityGroup", "validateFields"):
            if name in body:
                value[name] = body[name]
        return level.upper(), (rec.config_key(subject), rec.dump_value(value))

    def set_mode(
        self, subject: str | None, body: dict[str, object], force: bool
    ) -> tuple[str, Record]:
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise invalid_mode(mode)
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            has_schemas = (
                any(self.subjects.values()) if subject is None else bool(self.subjects.get(subject))
            )
            if has_schemas:
                raise RegistryError(422, 42205, "Cannot import since found existing subjects")
        return mode, (rec.mode_key(subject), rec.dump_value({"mode": mode}))


def _replace_deleted(sv: SchemaVersion) -> SchemaVersion:
    return SchemaVersion(
        sv.subject, sv.version, sv.id, sv.schema, sv.schema_type, sv.references,
        sv.metadata, sv.rule_set, True,
    )  # fmt: skip


def parse_version(spec: str) -> int:
    """`latest` or -1 -> -1; a number in [1, 2^31-1]; else 42202."""
    if spec == "latest":
        return -1
    try:
        n = int(spec)
    except (TypeError, ValueError):
        raise invalid_version(spec) from None
    if n == -1:
        return -1
    if not 1 <= n <= MAX_VERSION:
        raise invalid_version(spec)
    return n


def request_schema(body: dict[str, object]) -> tuple[str, str, tuple[SchemaReference, ...]]:
    """(schemaType, schema text, references) of a register / lookup / compatibility body."""
    text = body.get("schema")
    if not isinstance(text, str) or not text.strip():
        raise RegistryError(422, 42201, "Invalid schema: the body has no schema string")
    schema_type = body.get("schemaType") or AVRO
    if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
        raise unprocessable(f"Unknown schema type: {schema_type}")
    return schema_type.upper(), text, _references(body.get("references"))

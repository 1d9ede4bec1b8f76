"""The registry's routes, as confluent-kafka's SchemaRegistryClient and Confluent's docs call them:
schemas by id and GUID, subjects and versions, lookups, registration, deletes, config, mode and
compatibility tests. Reads answer from this broker's replayed state; writes go through the leader.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiohttp import web

from kafkalite.broker.coordinators.schema_registry import NotPrimary
from kafkalite.schemas.formats import parse
from kafkalite.schemas.model import (
    PROTOBUF,
    SCHEMA_TYPES,
    schema_not_found,
    subject_level_compat_not_configured,
    subject_level_mode_not_configured,
    subject_not_found,
    version_not_found,
)
from kafkalite.schemas.registry import (
    Record,
    RegistryState,
    SchemaVersion,
    content_fields,
    guid_of,
    request_schema,
)
from kafkalite.security.acl import AclOperation
from kafkalite.web.schema_registry._base import (
    body_of,
    flag,
    forward,
    registry_of,
    reply,
    subject_of,
)
from kafkalite.web.schema_registry.acl import may, require_cluster, require_schema, require_subject
from kafkalite.web.server import BROKER_KEY

_T = TypeVar("_T")


async def _state(request: web.Request) -> RegistryState:
    return await registry_of(request).current()


class Forwarded(Exception):
    """The primary's answer to a write this broker forwarded, to be sent back as it is."""

    def __init__(self, response: web.Response) -> None:
        super().__init__("forwarded")
        self.response = response


async def _write(
    request: web.Request, operation: Callable[[RegistryState], tuple[_T, list[Record]]]
) -> _T:
    try:
        return await registry_of(request).write(operation)
    except NotPrimary as exc:
        raise Forwarded(await forward(request, exc.leader)) from None


def forwarded(handler: Callable[[web.Request], Awaitable[web.Response]]) -> Callable[[web.Request], Awaitable[web.Response]]:  # fmt: skip
    """A write route whose request may be answered by the primary."""

    @functools.wraps(handler)
    async def run(request: web.Request) -> web.Response:
        try:
            return await handler(request)
        except Forwarded as done:
            return done.response

    return run


def _schema_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise schema_not_found(f"Schema {request.match_info['id']} not found") from None


def _shown(
    state: RegistryState, sv: SchemaVersion, body: dict[str, object], fmt: str | None
) -> None:
    """The schema text in the format asked for (Protobuf: `.proto` text unless `serialized`)."""
    if fmt or sv.schema_type == PROTOBUF:
        shown = state.parsed(sv.id).formatted(fmt or "")
        if shown is not None:
            body["schema"] = shown


def _id_body(state: RegistryState, sv: SchemaVersion, fmt: str | None) -> dict[str, object]:
    body = content_fields(sv)
    _shown(state, sv, body, fmt)
    body["guid"] = guid_of(sv.id, sv)
    return body


# -- /schemas -------------------------------------------------------------------------------------
async def schema_types(request: web.Request) -> web.Response:
    return reply(sorted(SCHEMA_TYPES, key=("JSON", "PROTOBUF", "AVRO").index))


async def schema_by_id(request: web.Request) -> web.Response:
    state = await _state(request)
    sv = state.schema_by_id(_schema_id(request))
    require_schema(request, state, sv.id)
    return reply(_id_body(state, sv, request.query.get("format")))


async def schema_text_by_id(request: web.Request) -> web.Response:
    state = await _state(request)
    sv = state.schema_by_id(_schema_id(request))
    require_schema(request, state, sv.id)
    return reply(sv.schema)


async def subjects_by_id(request: web.Request) -> web.Response:
    state = await _state(request)
    sid = _schema_id(request)
    state.schema_by_id(sid)
    require_schema(request, state, sid)
    subject = request.query.get("subject")
    usages = state.usages(sid, flag(request, "deleted"))
    return reply(sorted({u.subject for u in usages if subject is None or u.subject == subject}))


async def versions_by_id(request: web.Request) -> web.Response:
    state = await _state(request)
    sid = _schema_id(request)
    state.schema_by_id(sid)
    require_schema(request, state, sid)
    usages = state.usages(sid, flag(request, "deleted"))
    return reply([{"subject": u.subject, "version": u.version} for u in usages])


async def schema_by_guid(request: web.Request) -> web.Response:
    state = await _state(request)
    guid = request.match_info["guid"]
    for sid, sv in state.by_id.items():
        if guid_of(sid, sv) == guid:
            require_schema(request, state, sid)
            return reply(_id_body(state, sv, request.query.get("format")))
    raise schema_not_found(f"Schema {guid} not found")


async def list_schemas(request: web.Request) -> web.Response:
    """GET /schemas: the versions of every subject (`latestOnly`, `subjectPrefix`, `deleted`)."""
    state = await _state(request)
    deleted, latest = flag(request, "deleted"), flag(request, "latestOnly")
    out = []
    for subject in state.subject_names(deleted, request.query.get("subjectPrefix", "")):
        if not may(request, AclOperation.DESCRIBE, subject):
            continue
        versions = state.live_versions(subject, deleted)
        out += [sv.to_response() for sv in (versions[-1:] if latest else versions)]
    return reply(out)


# -- /subjects ------------------------------------------------------------------------------------
async def list_subjects(request: web.Request) -> web.Response:
    state = await _state(request)
    names = state.subject_names(flag(request, "deleted"), request.query.get("subjectPrefix", ""))
    return reply([s for s in names if may(request, AclOperation.DESCRIBE, s)])


async def list_versions(request: web.Request) -> web.Response:
    state = await _state(request)
    subject = subject_of(request)
    require_subject(request, AclOperation.DESCRIBE, subject)
    versions = state.live_versions(subject, flag(request, "deleted"))
    return reply([sv.version for sv in versions])


async def get_version(request: web.Request) -> web.Response:
    state = await _state(request)
    subject = subject_of(request)
    require_subject(request, AclOperation.DESCRIBE, subject)
    sv = state.version(subject, request.match_info["version"], flag(request, "deleted"))
    body = sv.to_response()
    _shown(state, sv, body, request.query.get("format"))
    return reply(body)


async def get_version_schema(request: web.Request) -> web.Response:
    state = await _state(request)
    subject = subject_of(request)
    require_subject(request, AclOperation.DESCRIBE, subject)
    sv = state.version(subject, request.match_info["version"], flag(request, "deleted"))
    return reply(sv.schema)


async def referenced_by(request: web.Request) -> web.Response:
    state = await _state(request)
    subject = subject_of(request)
    require_subject(request, AclOperation.DESCRIBE, subject)
    sv = state.version(subject, request.match_info["version"], deleted=True)
    return reply(state.referenced_by(sv.subject, sv.version))


async def subject_metadata(request: web.Request) -> web.Response:
    """The latest version whose metadata properties hold every key=value asked for."""
    state = await _state(request)
    subject = subject_of(request)
    require_subject(request, AclOperation.DESCRIBE, subject)
    keys, values = request.query.getall("key", []), request.query.getall("value", [])
    wanted = dict(zip(keys, values, strict=False))
    for sv in reversed(state.live_versions(subject, flag(request, "deleted"))):
        props = (sv.metadata or {}).get("properties")
        props = props if isinstance(props, dict) else {}
        if all(props.get(k) == v for k, v in wanted.items()):
            return reply(sv.to_response())
    raise version_not_found(f"with metadata {wanted}")


async def lookup(request: web.Request) -> web.Response:
    body = await body_of(request)
    state = await _state(request)
    subject = subject_of(request)
    require_subject(request, AclOperation.DESCRIBE, subject)
    schema_type, text, refs = request_schema(body)
    if not state.subjects.get(subject):
        raise subject_not_found(subject)
    sv = state.lookup(
        subject, schema_type, text, refs, flag(request, "normalize"), flag(request, "deleted")
    )
    return reply(sv.to_response())


async def register(request: web.Request) -> web.Response:
    body = await body_of(request)
    subject = subject_of(request)
    require_subject(request, AclOperation.WRITE, subject)
    normalize = flag(request, "normalize")
    schema_id = await _write(request, lambda s: s.register(subject, body, normalize))
    return reply({"id": schema_id})


async def delete_subject(request: web.Request) -> web.Response:
    subject = subject_of(request)
    require_subject(request, AclOperation.DELETE, subject)
    permanent = flag(request, "permanent")
    versions = await _write(request, lambda s: s.delete_subject(subject, permanent))
    return reply(versions)


async def delete_version(request: web.Request) -> web.Response:
    subject = subject_of(request)
    require_subject(request, AclOperation.DELETE, subject)
    permanent = flag(request, "permanent")
    spec = request.match_info["version"]
    version = await _write(request, lambda s: s.delete_version(subject, spec, permanent))
    return reply(version)


# -- /config and /mode ----------------------------------------------------------------------------
def _require_settings(request: web.Request, subject: str | None, operation: AclOperation) -> None:
    if subject is None:
        require_cluster(request, operation)
    else:
        require_subject(request, operation, subject)


def _config_body(value: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in value.items() if k != "compatibility"}


async def get_config(request: web.Request) -> web.Response:
    state = await _state(request)
    subject = request.match_info.get("subject")
    _require_settings(request, subject, AclOperation.DESCRIBE_CONFIGS)
    if subject is None:
        value = state.configs.get(None) or {}
        return reply({**_config_body(value), "compatibilityLevel": state.compatibility(None)})
    own = state.configs.get(subject)
    if own is None:
        if not flag(request, "defaultToGlobal"):
            raise subject_level_compat_not_configured(subject)
        return reply({"compatibilityLevel": state.compatibility(None)})
    return reply(_config_body(own))


async def put_config(request: web.Request) -> web.Response:
    body = await body_of(request)
    subject = request.match_info.get("subject")
    _require_settings(request, subject, AclOperation.ALTER_CONFIGS)
    level = await _write(request, lambda s: _one(s.set_config(subject, body)))
    return reply({"compatibility": level})


async def delete_config(request: web.Request) -> web.Response:
    subject = request.match_info.get("subject")
    _require_settings(request, subject, AclOperation.ALTER_CONFIGS)

    def op(s: RegistryState) -> tuple[str, list[Record]]:
        from kafkalite.schemas import records as rec

        if subject is not None and subject not in s.configs:
            if not s.subjects.get(subject):
                raise subject_not_found(subject)
            raise subject_level_compat_not_configured(subject)
        return s.compatibility(subject), [(rec.config_key(subject), None)]

    return reply({"compatibilityLevel": await _write(request, op)})


async def get_mode(request: web.Request) -> web.Response:
    state = await _state(request)
    subject = request.match_info.get("subject")
    _require_settings(request, subject, AclOperation.DESCRIBE_CONFIGS)
    if subject is not None and subject not in state.modes and not flag(request, "defaultToGlobal"):
        raise subject_level_mode_not_configured(subject)
    return reply({"mode": state.mode(subject)})


async def put_mode(request: web.Request) -> web.Response:
    body = await body_of(request)
    subject = request.match_info.get("subject")
    _require_settings(request, subject, AclOperation.ALTER_CONFIGS)
    force = flag(request, "force")
    mode = await _write(request, lambda s: _one(s.set_mode(subject, body, force)))
    return reply({"mode": mode})


async def delete_mode(request: web.Request) -> web.Response:
    subject = request.match_info["subject"]
    _require_settings(request, subject, AclOperation.ALTER_CONFIGS)

    def op(s: RegistryState) -> tuple[str, list[Record]]:
        from kafkalite.schemas import records as rec

        if subject not in s.modes:
            raise subject_level_mode_not_configured(subject)
        return s.mode(subject), [(rec.mode_key(subject), None)]

    return reply({"mode": await _write(request, op)})


def _one(result: tuple[_T, Record]) -> tuple[_T, list[Record]]:
    return result[0], [result[1]]


# -- /compatibility --------------------------------------------------------------------------------
async def test_compatibility(request: web.Request) -> web.Response:
    body = await body_of(request)
    state = await _state(request)
    subject = subject_of(request)
    require_subject(request, AclOperation.DESCRIBE, subject)
    schema_type, text, refs = request_schema(body)
    parsed = parse(schema_type, text, state.resolve_references(refs))
    spec = request.match_info.get("version")
    live = [sv for sv in sorted(state.subjects.get(subject, {}).values(), key=lambda v: v.version)]
    live = [sv for sv in live if not sv.deleted]
    if spec is not None:
        if not live and spec == "latest":
            return reply({"is_compatible": True})
        against = [state.version(subject, spec)]
    else:
        against = live
    messages = state.check_compatibility(subject, parsed, against)
    out: dict[str, object] = {"is_compatible": not messages}
    if flag(request, "verbose"):
        out["messages"] = messages
    return reply(out)


# -- metadata --------------------------------------------------------------------------------------
async def metadata_id(request: web.Request) -> web.Response:
    broker = request.app[BROKER_KEY]
    return reply(
        {
            "scope": {
                "path": [],
                "clusters": {
                    "kafka-cluster": broker.cluster_id,
                    "schema-registry-cluster": "schema-registry",
                },
            }
        }
    )


async def contexts(request: web.Request) -> web.Response:
    return reply(["."])


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/schemas", list_schemas)
    r.add_get("/schemas/types", schema_types)
    r.add_get("/schemas/ids/{id}", schema_by_id)
    r.add_get("/schemas/ids/{id}/schema", schema_text_by_id)
    r.add_get("/schemas/ids/{id}/subjects", subjects_by_id)
    r.add_get("/schemas/ids/{id}/versions", versions_by_id)
    r.add_get("/schemas/guids/{guid}", schema_by_guid)
    r.add_get("/subjects", list_subjects)
    r.add_post("/subjects/{subject}", lookup)
    r.add_delete("/subjects/{subject}", forwarded(delete_subject))
    r.add_get("/subjects/{subject}/versions", list_versions)
    r.add_post("/subjects/{subject}/versions", forwarded(register))
    r.add_get("/subjects/{subject}/versions/{version}", get_version)
    r.add_delete("/subjects/{subject}/versions/{version}", forwarded(delete_version))
    r.add_get("/subjects/{subject}/versions/{version}/schema", get_version_schema)
    r.add_get("/subjects/{subject}/versions/{version}/referencedby", referenced_by)
    r.add_get("/subjects/{subject}/metadata", subject_metadata)
    for path in ("/config", "/config/{subject}"):
        r.add_get(path, get_config)
        r.add_put(path, forwarded(put_config))
        r.add_delete(path, forwarded(delete_config))
    r.add_get("/mode", get_mode)
    r.add_put("/mode", forwarded(put_mode))
    r.add_get("/mode/{subject}", get_mode)
    r.add_put("/mode/{subject}", forwarded(put_mode))
    r.add_delete("/mode/{subject}", forwarded(delete_mode))
    r.add_post("/compatibility/subjects/{subject}/versions/{version}", test_compatibility)
    r.add_post("/compatibility/subjects/{subject}/versions", test_compatibility)
    r.add_get("/v1/metadata/id", metadata_id)
    r.add_get("/contexts", contexts)

"""A whole-request error response for any API, built from the message declarations (Kafka's
AbstractRequest.getErrorResponse): every topic / partition / group / resource the request names gets the error.
"""

from __future__ import annotations

from typing import Any

from kafkalite.protocol.schema import PRIMITIVE_TYPES, F, Message, Struct, Versions

# scalar fields that say WHICH entry an answer is about: copied from the request's entry
_IDENTITY_NAMES = frozenset(
    {
        "name",
        "topic",
        "key",
        "index",
        "entity_type",
        "partition",
        "resource_type",
        "pattern_type",
        "resource_pattern_type",
    }
)
_IDENTITY_SUFFIXES = ("_id", "_name", "_index", "_key")
# one identity under different names in a request and its response (Fetch: partition / partition_index)
_ALIASES: dict[str, tuple[str, ...]] = {
    "partition": ("partition_index", "partition_id"),
    "partition_index": ("partition", "partition_id"),
    "partition_id": ("partition", "partition_index"),
    "name": ("topic", "topic_name"),
    "topic": ("name", "topic_name"),
    "topic_name": ("name", "topic"),
}
# numbers an error answer leaves unknown (-1), as Kafka's error responses do, unless declared otherwise
_UNKNOWN_WORDS = ("offset", "epoch", "timestamp", "watermark", "leader_id", "node_id")
_INTS = frozenset({"int8", "int16", "int32", "int64"})


def _is_identity(fdecl: F) -> bool:
    name = fdecl.name
    return name in _IDENTITY_NAMES or name.endswith(_IDENTITY_SUFFIXES)


def _present(fdecl: F, version: int) -> bool:
    return version in Versions.parse(fdecl.versions)


def _element(fdecl: F) -> str:
    return fdecl.type[2:] if fdecl.type.startswith("[]") else fdecl.type


def _is_struct_array(fdecl: F) -> bool:
    return fdecl.type.startswith("[]") and _element(fdecl) not in PRIMITIVE_TYPES


class _Builder:
    def __init__(self, version: int, code: int, message: str | None) -> None:
        self.version = version
        self.code = code
        self.message = message
        self.errors = 0  # error_code fields set

    def build(self, cls: type[Struct], source: Struct | None) -> Struct:
        obj = cls()
        schema = cls._schema
        req_fields = source._schema.by_name if source is not None else {}
        used: set[str] = set()
        for fdecl in schema.fields:
            if not _present(fdecl, self.version):
                continue
            name, ftype = fdecl.name, fdecl.type
            if ftype == "int16" and name.endswith("error_code"):
                setattr(obj, name, self.code)
                self.errors += 1
            elif ftype == "string" and name.endswith("error_message"):
                if self.message is not None:
                    setattr(obj, name, self.message)
            elif _is_struct_array(fdecl):
                child = schema.children[name]
                setattr(
                    obj, name, self._array(child, source, req_fields, used, fdecl, schema.fields)
                )
            elif name in schema.children:  # a nested struct: filled from the same request entry
                nullable = Versions.parse(fdecl.nullable)
                if not (self.version in nullable and getattr(obj, name) is None):
                    setattr(obj, name, self.build(schema.children[name], source))
            elif source is not None and _is_identity(fdecl) and self._copy(obj, fdecl, source):
                pass
            elif ftype == "records" and self.version not in Versions.parse(fdecl.nullable):
                setattr(obj, name, b"")
            elif (
                ftype in _INTS and not fdecl.has_default and any(w in name for w in _UNKNOWN_WORDS)
            ):
                setattr(obj, name, -1)
        return obj

    @staticmethod
    def _copy(obj: Struct, fdecl: F, source: Struct) -> bool:
        """Copy an identity field from the request entry (under its name or an alias)."""
        req_fields = source._schema.by_name
        for alias in (fdecl.name, *_ALIASES.get(fdecl.name, ())):
            rdecl = req_fields.get(alias)
            if rdecl is not None and rdecl.type == fdecl.type:
                setattr(obj, fdecl.name, getattr(source, alias))
                return True
        return False

    def _array(
        self,
        child: type[Struct],
        source: Struct | None,
        req_fields: dict[str, F],
        used: set[str],
        fdecl: F,
        source_level: list[F],
    ) -> list[Any]:
        """The request array this response array answers, entry by entry (none found: empty)."""
        if source is None:
            return []
        best_score, found = 0, None
        child_fields = child._schema.by_name
        for rname, cand in req_fields.items():
            if rname in used or not cand.type.startswith("[]"):
                continue
            if not _present(cand, self.version):
                continue
            score = 0
            if _is_struct_array(cand):
                elem = source._schema.children[rname]._schema.by_name
                score = sum(
                    1
                    for n, d in child_fields.items()
                    if _is_identity(d)
                    and any(a in elem and elem[a].type == d.type for a in (n, *_ALIASES.get(n, ())))
                )
            elif _has_error_code(child._schema.fields, self.version) and (
                _primitive_target(child_fields, rname, _element(cand)) is not None
            ):
                score = 1
            if score and rname == fdecl.name:
                score += 10
            if score > best_score:
                best_score, found = score, cand
        rdecl = found
        if rdecl is None and not _has_error_code(source_level, self.version):
            rdecl = _lone_struct_array(child_fields, req_fields, used, self.version)
        if rdecl is None:
            return []
        rname = rdecl.name
        used.add(rname)
        items = getattr(source, rname) or []
        if _is_struct_array(rdecl):
            return [self.build(child, item) for item in items]
        target = _primitive_target(child_fields, rname, _element(rdecl))
        assert target is not None
        out = []
        for item in items:
            entry = self.build(child, None)
            setattr(entry, target, item)
            out.append(entry)
        return out


def _has_error_code(fields: list[F], version: int) -> bool:
    return any(
        d.type == "int16" and d.name.endswith("error_code") and _present(d, version) for d in fields
    )


def _lone_struct_array(
    child_fields: dict[str, F], req_fields: dict[str, F], used: set[str], version: int
) -> F | None:
    """Entries that carry an error but no identity (CreateAcls results answer creations in
    order): the request's only remaining array of structs, if there is exactly one."""
    if not _has_error_code(list(child_fields.values()), version):
        return None
    left = [
        d
        for n, d in req_fields.items()
        if n not in used and _is_struct_array(d) and _present(d, version)
    ]
    return left[0] if len(left) == 1 else None


def _primitive_target(fields: dict[str, F], array_name: str, elem_type: str) -> str | None:
    """The field of a response entry that holds one item of a request's primitive array
    (partition_indexes -> partition_index, groups -> group_id, coordinator_keys -> key)."""
    candidates = [n for n, d in fields.items() if d.type == elem_type and _is_identity(d)]
    if len(candidates) > 1:
        word = array_name.split("_")[0].removesuffix("s")
        candidates = [n for n in candidates if n.startswith(word)]
    return candidates[0] if len(candidates) == 1 else None


def error_response(
    response_cls: type[Message], request: Struct, version: int, code: int, message: str | None
) -> tuple[Any, int]:
    """The response of `version` answering every entry of `request` with `code` (and `message`
    where the response has an error message), plus how many error codes it carries (0: the
    response has nowhere to say so, and the caller should not pretend it succeeded)."""
    builder = _Builder(version, code, message)
    resp = builder.build(response_cls, request)
    return resp, builder.errors

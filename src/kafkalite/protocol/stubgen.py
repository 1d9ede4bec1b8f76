"""The typed view of the message declarations: writes, beside each protocol/messages module, the `.pyi`
stub mypy reads instead of it (one class per message, its nested structs, fields, keyword __init__).

Run `python -m kafkalite.protocol.stubgen` after changing a declaration (`--check`: exit 1 if a stub
is stale). Lines between the HAND_KEPT markers of a stub are kept as they are: they declare what a
module exports besides messages, Api objects and simple constants (helper functions).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from kafkalite.protocol.messages import _FAMILIES
from kafkalite.protocol.schema import Api, Data, F, Message, Request, Response, Struct, Versions

PACKAGE = "kafkalite.protocol.messages"
HAND_KEPT_BEGIN = "# --- hand-kept: declarations the generator keeps as they are"
HAND_KEPT_END = "# --- end of hand-kept"

_SCALARS = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "int64": "int",
    "float64": "float",
    "uuid": "uuid.UUID",
    "string": "str",
    "bytes": "bytes",
    "records": "Buffer",
}

# names a hand-kept section may use, and the import each needs
_HAND_IMPORTS = {
    "Any": ("typing", "Any"),
    "Iterator": ("collections.abc", "Iterator"),
    "overload": ("typing", "overload"),
    "p.": ("kafkalite.protocol", "primitives as p"),
}


def _nullable_somewhere(fdecl: F) -> bool:
    return not Versions.parse(fdecl.nullable).empty() or (
        fdecl.has_default and fdecl.default is None
    )


def _field_type(fdecl: F, owner: str, records_buffer: bool) -> str:
    """The Python type of a field's value as decoded, and as accepted on encode."""
    is_array = fdecl.type.startswith("[]")
    elem = fdecl.type[2:] if is_array else fdecl.type
    if elem == "records":  # None when absent; decoded as bytes, a request's encoded from any buffer
        base = "Buffer | None" if records_buffer else "bytes | None"
        return f"list[{base}]" if is_array else base
    name = _SCALARS.get(elem, f"{owner}.{elem}")
    if is_array:
        name = f"list[{name}]"
    if _nullable_somewhere(fdecl):
        name = f"{name} | None"
    return name


def _accepted(typ: str) -> str:
    """What __init__ takes for a field of type `typ`: a uuid may be None (encoded as the zero uuid)."""
    return "uuid.UUID | None" if typ == "uuid.UUID" else typ


def _struct_lines(cls: type[Struct], path: str, indent: str, records_buffer: bool) -> Iterator[str]:
    """The body of the stub class of `cls` (whose qualified name is `path`); `records_buffer`:
    its records fields take any buffer (a request's: the client hands over its batches uncopied)."""
    schema = cls._schema
    seen: dict[str, list[F]] = {}
    for fdecl in schema.fields:
        child = schema.children.get(fdecl.name)
        if child is None:
            continue
        elem = child._schema.name
        if elem in seen:
            if [(f.name, f.type) for f in seen[elem]] != [
                (f.name, f.type) for f in child._schema.fields
            ]:
                raise ValueError(f"{path}: two different structs named {elem}")
            continue
        seen[elem] = child._schema.fields
        yield f"{indent}class {elem}(Struct):"
        yield from _struct_lines(
            getattr(cls, elem), f"{path}.{elem}", indent + "    ", records_buffer
        )
    if isinstance(cls, type) and issubclass(cls, Request):
        yield f"{indent}RESPONSE: ClassVar[type[{cls.RESPONSE.__name__}]]"
    fields = [(f.name, _field_type(f, path, records_buffer)) for f in schema.fields]
    for name, typ in fields:
        yield f"{indent}{name}: {typ}"
    params = ", ".join(f"{name}: {_accepted(typ)} = ..." for name, typ in fields)
    one_line = f"{indent}def __init__(self, *, {params}) -> None: ..."
    if not fields:
        yield f"{indent}def __init__(self) -> None: ..."
    elif len(one_line) <= 100:
        yield one_line
    else:
        yield f"{indent}def __init__("
        yield f"{indent}    self,"
        yield f"{indent}    *,"
        for name, typ in fields:
            yield f"{indent}    {name}: {_accepted(typ)} = ...,"
        yield f"{indent}) -> None: ..."


def _hand_kept(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    try:
        lo, hi = lines.index(HAND_KEPT_BEGIN), lines.index(HAND_KEPT_END)
    except ValueError:
        return []
    return lines[lo + 1 : hi]


def _declared(lines: list[str]) -> set[str]:
    out = set()
    for line in lines:
        m = re.match(r"(?:def |class )?([A-Za-z_]\w*)\s*[:(=]", line)
        if m:
            out.add(m.group(1))
    return out


def render(module: ModuleType, hand_kept: list[str]) -> str:
    """The stub text of one messages module."""
    classes: list[type[Message]] = []
    apis: list[str] = []
    constants: list[str] = []
    missing: list[str] = []
    declared = _declared(hand_kept)
    for name, value in vars(module).items():
        if name.startswith("_") or name in declared:
            continue
        if isinstance(value, type) and issubclass(value, Message):
            classes.append(value)
        elif isinstance(value, Api):
            apis.append(f"{name}: Api")
        elif type(value) in (int, str, bool):
            constants.append(f"{name}: {type(value).__name__}")
        elif isinstance(value, dict) and all(
            type(k) is str and type(v) is int for k, v in value.items()
        ):
            constants.append(f"{name}: dict[str, int]")
        elif isinstance(value, ModuleType) or inspect.getmodule(value) is not module:
            continue  # imported names are not this module's exports
        else:
            missing.append(name)
    if missing:
        raise ValueError(f"{module.__name__}: declare {missing} in the stub's hand-kept section")
    bases = {c.__mro__[1].__name__ for c in classes}
    body: list[str] = []
    for cls in classes:
        base = f"Request[{cls.RESPONSE.__name__}]" if issubclass(cls, Request) else "Response"
        if issubclass(cls, Data):
            base = "Data"
        elif not issubclass(cls, (Request, Response)):
            raise ValueError(f"{cls.__name__}: not a Request, Response or Data")
        body.append("")
        body.append(f"class {cls.__name__}({base}):")
        body.extend(_struct_lines(cls, cls.__name__, "    ", issubclass(cls, Request)))
    text = "\n".join(body)
    hand_text = "\n".join(hand_kept)
    wanted = {
        pair for key, pair in _HAND_IMPORTS.items() if re.search(rf"\b{re.escape(key)}", hand_text)
    }
    if "ClassVar[" in text:
        wanted.add(("typing", "ClassVar"))
    if "Buffer" in text:
        wanted.add(("kafkalite.protocol.primitives", "Buffer"))
    wanted |= {
        ("kafkalite.protocol.schema", n)
        for n in bases
        | ({"Struct"} if "(Struct)" in text else set())
        | ({"Api"} if apis else set())
    }
    imports = _import_lines(wanted, "uuid.UUID" in text)
    head = [
        f'"""The typed view of the messages declared in {module.__name__}.',
        "",
        "Generated by `python -m kafkalite.protocol.stubgen` from the declarations; edit those, not this.",
        '"""',
        "",
        *imports,
        "",
        HAND_KEPT_BEGIN,
        *hand_kept,
        HAND_KEPT_END,
    ]
    tail = ["", *constants, *apis] if constants or apis else []
    return "\n".join([*head, *body, *tail]) + "\n"


def _import_lines(wanted: set[tuple[str, str]], with_uuid: bool) -> list[str]:
    """`from` imports merged per module in isort's order: standard library, a blank line, kafkalite."""
    modules: dict[str, list[str]] = {}
    for mod, name in wanted:
        modules.setdefault(mod, []).append(name)
    std = ["import uuid"] if with_uuid else []
    own: list[str] = []
    for mod in sorted(modules):
        line = f"from {mod} import {', '.join(sorted(modules[mod]))}"
        (own if mod.startswith("kafkalite") else std).append(line)
    return [*std, *([""] if std and own else []), *own]


def stub_path(module: ModuleType) -> Path:
    assert module.__file__ is not None
    return Path(module.__file__).with_suffix(".pyi")


def generate() -> dict[Path, str]:
    """Every messages module's stub path and its freshly generated text."""
    out: dict[Path, str] = {}
    for family in _FAMILIES:
        module = importlib.import_module(f"{PACKAGE}.{family}")
        path = stub_path(module)
        out[path] = render(module, _hand_kept(path))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkalite.protocol.stubgen")
    parser.add_argument("--check", action="store_true", help="exit 1 if a stub differs")
    args = parser.parse_args(argv)
    stale = []
    for path, text in generate().items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'} {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())

"""`kafkalite dump-log --files ...`, kafka-dump-log.sh's flags and line shapes: the batches (and with
--print-data-log the records) of .log segments, the entries of .index/.timeindex files, index checks.
"""

from __future__ import annotations

import argparse
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import crc32c

from kafkalite.cli.admin_common import (
    add_output_argument,
    exits_2,
    one_line_usage_errors,
    print_json,
    split_list,
)
from kafkalite.cli.wire import EXIT_ERROR, CliError
from kafkalite.protocol.exceptions import DecodeError
from kafkalite.records.batch import RecordBatch, decode_batch
from kafkalite.records.header import ATTRIBUTES_OFFSET, HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


@dataclass
class Batch:
    """A batch of a segment file with where it sits and whether its CRC holds."""

    position: int
    size: int
    batch: RecordBatch
    valid: bool


def read_batches(path: Path) -> tuple[list[Batch], str | None]:
    """Every batch of a .log segment; the second item tells why reading stopped early, if it did."""
    blob = _read(path)
    out: list[Batch] = []
    pos = 0
    while pos < len(blob):
        left = len(blob) - pos
        if left < LOG_OVERHEAD + 5:
            return out, f"{left} trailing bytes at position {pos} are too short for a batch"
        size = int.from_bytes(blob[pos + 8 : pos + 12], "big", signed=True) + LOG_OVERHEAD
        if size < LOG_OVERHEAD or size > left:
            return out, f"a batch of {size} bytes at position {pos} runs past the end ({left} left)"
        magic = blob[pos + MAGIC_OFFSET]
        try:
            if magic == 2:
                if size < HEADER_SIZE:
                    raise DecodeError(f"batch of {size} bytes is shorter than a v2 header")
                b = decode_batch(blob, pos)
                valid = crc32c.crc32c(blob[pos + ATTRIBUTES_OFFSET : pos + size]) == b.crc
                out.append(Batch(pos, size, b, valid))
            elif magic in (0, 1):
                from kafkalite.records.legacy import legacy_entry_to_batches

                for b in legacy_entry_to_batches(blob, pos):
                    out.append(Batch(pos, size, b, True))
            else:
                return out, f"unknown magic {magic} at position {pos}"
        except DecodeError as exc:
            return out, f"cannot decode the batch at position {pos}: {exc}"
        pos += size
    return out, None


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None


def _base_offset(path: Path) -> int:
    try:
        if path.stem == "segment":  # a segment in the directory remote store (KIP-405):
            return int(path.parent.name.split("-", 1)[0])  # <start offset>-<segment id>/segment.log
        return int(path.stem)
    except ValueError:
        raise CliError(f"{path.name}: segment files are named after their base offset") from None


def offset_index_entries(path: Path) -> list[tuple[int, int]]:
    """(absolute offset, position) entries; a zero-filled (preallocated) tail is ignored."""
    base, data = _base_offset(path), _read(path)
    out = []
    usable = len(data) - len(data) % _OFFSET_ENTRY.size
    for i, (rel, pos) in enumerate(_OFFSET_ENTRY.iter_unpack(data[:usable])):
        if i and rel == 0 and pos == 0:
            break
        out.append((base + rel, pos))
    return out


def time_index_entries(path: Path) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) entries; a zero-filled tail is ignored."""
    base, data = _base_offset(path), _read(path)
    out = []
    usable = len(data) - len(data) % _TIME_ENTRY.size
    for i, (ts, rel) in enumerate(_TIME_ENTRY.iter_unpack(data[:usable])):
        if i and ts == 0 and rel == 0:
            break
        out.append((ts, base + rel))
    return out


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="replace")


def _batch_doc(b: Batch) -> dict[str, Any]:
    rb = b.batch
    return {
        "baseOffset": rb.base_offset,
        "lastOffset": rb.last_offset,
        "count": rb.records_count,
        "baseSequence": rb.base_sequence,
        "lastSequence": rb.last_sequence,
        "producerId": rb.producer_id,
        "producerEpoch": rb.producer_epoch,
        "partitionLeaderEpoch": rb.partition_leader_epoch,
        "isTransactional": rb.is_transactional,
        "isControl": rb.is_control,
        "deleteHorizonMs": rb.delete_horizon_ms,
        "position": b.position,
        "timestampType": "LogAppendTime" if rb.timestamp_type == 1 else "CreateTime",
        "timestamp": rb.max_timestamp,
        "size": b.size,
        "magic": rb.magic,
        "compresscodec": CODECS.get(rb.compression, str(rb.compression)),
        "crc": rb.crc,
        "isvalid": b.valid,
    }


def _record_docs(b: Batch) -> list[dict[str, Any]]:
    rb = b.batch
    docs = []
    for i, r in enumerate(rb.records):
        doc: dict[str, Any] = {
            "offset": r.offset,
            "timestampType": "LogAppendTime" if rb.timestamp_type == 1 else "CreateTime",
            "timestamp": r.timestamp,
            "keySize": -1 if r.key is None else len(r.key),
            "valueSize": -1 if r.value is None else len(r.value),
            "sequence": rb.base_sequence + i if rb.base_sequence >= 0 else -1,
            "headerKeys": [k for k, _ in r.headers],
        }
        if rb.is_control and r.key is not None and len(r.key) >= 4:
            kind = int.from_bytes(r.key[2:4], "big", signed=True)
            epoch = (
                int.from_bytes(r.value[2:6], "big", signed=True)
                if r.value is not None and len(r.value) >= 6
                else -1
            )
            doc["endTxnMarker"] = {0: "ABORT", 1: "COMMIT"}.get(kind, f"type {kind}")
            doc["coordinatorEpoch"] = epoch
        else:
            if r.key is not None:
                doc["key"] = _text(r.key)
            if r.value is not None:
                doc["payload"] = _text(r.value)
        docs.append(doc)
    return docs


def _print_batch(d: dict[str, Any]) -> None:
    horizon = d["deleteHorizonMs"]
    print(
        f"baseOffset: {d['baseOffset']} lastOffset: {d['lastOffset']} count: {d['count']} "
        f"baseSequence: {d['baseSequence']} lastSequence: {d['lastSequence']} "
        f"producerId: {d['producerId']} producerEpoch: {d['producerEpoch']} "
        f"partitionLeaderEpoch: {d['partitionLeaderEpoch']} "
        f"isTransactional: {str(d['isTransactional']).lower()} "
        f"isControl: {str(d['isControl']).lower()} "
        f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'} "
        f"position: {d['position']} {d['timestampType']}: {d['timestamp']} size: {d['size']} "
        f"magic: {d['magic']} compresscodec: {d['compresscodec']} crc: {d['crc']} "
        f"isvalid: {str(d['isvalid']).lower()}"
    )


def _print_record(r: dict[str, Any]) -> None:
    line = (
        f"| offset: {r['offset']} {r['timestampType']}: {r['timestamp']} keySize: {r['keySize']} "
        f"valueSize: {r['valueSize']} sequence: {r['sequence']} "
        f"headerKeys: [{','.join(r['headerKeys'])}]"
    )
    if "endTxnMarker" in r:
        line += f" endTxnMarker: {r['endTxnMarker']} coordinatorEpoch: {r['coordinatorEpoch']}"
    if "key" in r:
        line += f" key: {r['key']}"
    if "payload" in r:
        line += f" payload: {r['payload']}"
    print(line)


def _dump_log(path: Path, a: argparse.Namespace) -> dict[str, Any]:
    batches, problem = read_batches(path)
    doc: dict[str, Any] = {"file": str(path), "startingOffset": _base_offset(path), "batches": []}
    text = a.output != "json"
    if text:
        print(f"Log starting offset: {doc['startingOffset']}")
    for b in batches:
        bd = _batch_doc(b)
        if a.print_data_log:
            bd["records"] = _record_docs(b)
        doc["batches"].append(bd)
        if text:
            _print_batch(bd)
            for r in bd.get("records", []):
                _print_record(r)
    if problem:
        doc["error"] = problem
        if text:
            print(f"Found an unreadable tail: {problem}")
    return doc


def _log_of(index: Path) -> Path:
    log = index.with_suffix(".log")
    if not log.exists():
        raise CliError(f"{index.name}: its segment {log.name} is not next to it")
    return log


def _check_offset_index(path: Path, entries: list[tuple[int, int]]) -> list[str]:
    batches, _ = read_batches(_log_of(path))
    at = {b.position: b.batch for b in batches}
    problems = []
    prev = -1
    for off, pos in entries:
        rb = at.get(pos)
        if rb is None:
            problems.append(f"Index position: {pos} has no batch in the log (index offset: {off})")
        elif not rb.base_offset <= off <= rb.last_offset:
            problems.append(
                f"Index offset: {off}, log offset: {rb.base_offset}-{rb.last_offset} "
                f"(position: {pos})"
            )
        if off <= prev:
            problems.append(f"Index offset: {off} is not above the previous entry's {prev}")
        prev = off
    return problems


def _check_time_index(path: Path, entries: list[tuple[int, int]]) -> list[str]:
    batches, _ = read_batches(_log_of(path))
    problems = []
    prev_ts = -(2**63)
    for ts, off in entries:
        rb = next(
            (b.batch for b in batches if b.batch.base_offset <= off <= b.batch.last_offset), None
        )
        if rb is None:
            problems.append(f"Index offset: {off} (timestamp: {ts}) is not in the log")
        elif rb.max_timestamp < ts:
            problems.append(
                f"Index timestamp: {ts}, log timestamp: {rb.max_timestamp} (offset: {off})"
            )
        if ts < prev_ts:
            problems.append(f"Index timestamp: {ts} is below the previous entry's {prev_ts}")
        prev_ts = ts
    return problems


def _dump_index(path: Path, a: argparse.Namespace) -> dict[str, Any]:
    time_index = path.suffix == ".timeindex"
    entries = time_index_entries(path) if time_index else offset_index_entries(path)
    keys = ("timestamp", "offset") if time_index else ("offset", "position")
    doc: dict[str, Any] = {"file": str(path)}
    if not a.verify_index_only:
        doc["entries"] = [dict(zip(keys, e)) for e in entries]
        if a.output != "json":
            for e in entries:
                print(f"{keys[0]}: {e[0]} {keys[1]}: {e[1]}")
    if a.verify_index_only or a.index_sanity_check:
        check = _check_time_index if time_index else _check_offset_index
        problems = check(path, entries)
        doc["mismatches"] = problems
        if a.output != "json":
            if problems:
                print(f"Mismatches in {path}:")
                for p in problems:
                    print(f"  {p}")
            else:
                print(f"{path} passed the check: {len(entries)} entries match the log")
    return doc


@exits_2
def _run(a: argparse.Namespace) -> int:
    files = [Path(f) for f in split_list(a.files)]
    if not files:
        raise CliError("name the segment files with --files F1[,F2...]")
    docs = []
    bad = False
    for path in files:
        if not path.exists():
            raise CliError(f"{path} does not exist")
        if a.output != "json":
            print(f"Dumping {path}")
        if path.suffix == ".log":
            if a.verify_index_only:
                continue
            doc = _dump_log(path, a)
        elif path.suffix in (".index", ".timeindex"):
            doc = _dump_index(path, a)
            bad = bad or bool(doc.get("mismatches"))
        else:
            raise CliError(f"{path.name}: dump-log reads .log, .index and .timeindex files")
        docs.append(doc)
    if a.output == "json":
        print_json(docs)
    return EXIT_ERROR if bad else 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "dump-log",
        help="print the batches and records of segment files and their indexes (kafka-dump-log.sh)",
    )
    one_line_usage_errors(p)
    p.add_argument("--files", action="append", required=True, metavar="F1,F2")
    p.add_argument("--print-data-log", action="store_true", help="print each record too")
    p.add_argument(
        "--verify-index-only", action="store_true", help="check index entries against the log"
    )
    p.add_argument(
        "--index-sanity-check", action="store_true", help="print the entries and check them"
    )
    p.add_argument(
        "--deep-iteration", action="store_true", help="accepted: records are always decoded"
    )
    add_output_argument(p)
    p.set_defaults(func=_run)

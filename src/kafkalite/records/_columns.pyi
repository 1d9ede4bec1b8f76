"""Type stub of the optional C accelerator `kafkalite.records._columns` (see `_columns.c`); its
pure-Python twin is `kafkalite.spark.columnar.Columns`.
"""

from collections.abc import Sequence

Buffer = bytes | bytearray | memoryview
BinaryBuffers = tuple[bytes | None, bytes, bytes, int]

class ColumnBuilder:
    def __init__(self, include_headers: bool = False) -> None: ...
    def __len__(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def offsets(self) -> list[int]: ...
    @property
    def keys(self) -> list[bytes | None]: ...
    @property
    def values(self) -> list[bytes | None]: ...
    @property
    def include_headers(self) -> bool: ...
    def add_v2(
        self,
        records: Buffer,
        count: int,
        base_offset: int,
        base_timestamp: int,
        max_timestamp: int,
        timestamp_type: int,
        start: int,
        until: int,
        /,
    ) -> int: ...
    def add(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        /,
    ) -> None: ...
    def buffers(
        self,
    ) -> tuple[
        int,
        BinaryBuffers,
        BinaryBuffers,
        bytes,
        bytes,
        bytes,
        tuple[bytes | None, bytes, int, BinaryBuffers, BinaryBuffers] | None,
    ]: ...

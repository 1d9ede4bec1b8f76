"""The fetch filter: a RocketMQ SQL92-subset expression over a record's key, timestamp, offset and headers,
parsed and checked once, compiled to a function, and applied by the broker's fetch or the client's fallback.

Grammar (keywords case-insensitive; full text in docs/fetch-filter.md)::

    expr      := or_expr
    or_expr   := and_expr { OR and_expr }
    and_expr  := not_expr { AND not_expr }
    not_expr  := NOT not_expr | predicate
    predicate := '(' expr ')'
               | field cmp literal | literal cmp field
               | field [NOT] IN '(' literal { ',' literal } ')'
               | field [NOT] BETWEEN number AND number
               | field IS [NOT] NULL
               | field [NOT] LIKE 'prefix%'        -- a prefix only: no '_', no inner '%'
               | field [NOT] STARTSWITH 'prefix'
    cmp       := '=' | '<>' | '!=' | '<' | '<=' | '>' | '>='
    field     := key | timestamp | offset | headers.NAME | headers['any name']
    literal   := number | 'string with '' for a quote'
    number    := [-] digits [ . digits ] [ e [+|-] digits ]

key (UTF-8 bytes) and header values compare as strings with a string literal (=, <>, IN, prefix) and as
decimal numbers with a number literal; timestamp and offset are numbers. A null key or a missing header
makes a comparison unknown (SQL's three-valued logic): the record is not selected, and NOT does not
select it either. At most 4096 characters, 64 levels of nesting, 1024 values in an IN list.
"""

from __future__ import annotations

from kafkalite.filters.batches import FilterStats, NotFilterable, filter_records, select_records
from kafkalite.filters.compiler import ALL, NONE, SOME, CompiledFilter, compile_filter
from kafkalite.filters.grammar import MAX_EXPRESSION_LENGTH, FilterError, parse

__all__ = [
    "ALL",
    "MAX_EXPRESSION_LENGTH",
    "NONE",
    "SOME",
    "CompiledFilter",
    "FilterError",
    "FilterStats",
    "NotFilterable",
    "compile_filter",
    "filter_records",
    "parse",
    "select_records",
]

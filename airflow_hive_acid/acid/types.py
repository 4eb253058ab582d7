"""Hive column types: parse Hive type strings and map them to Arrow.

Table schemas are stored and exchanged as Hive type strings (``bigint``, ``decimal(10,2)``,
``struct<a:int,b:string>``), the form Hive keeps in ``columns.types``; this module is the one
place that understands them.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import AcidInputError

if TYPE_CHECKING:
    import pyarrow as pa

PRIMITIVES = {
    "boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "string",
    "varchar", "char", "decimal", "date", "timestamp", "binary",
}
_ALIASES = {"integer": "int", "double precision": "double", "dec": "decimal", "numeric": "decimal"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_IDENTIFIER_LENGTH = 128


class TypeParseError(AcidInputError):
    """A Hive type or column list that does not parse."""


def validate_identifier(name: str, what: str = "identifier") -> str:
    """Return ``name`` lower-cased if it is a legal Hive identifier, else raise.

    Hive identifiers are case-insensitive; we store them lower-case, as the metastore does.
    """
    if not isinstance(name, str) or not _IDENT.match(name) or len(name) > MAX_IDENTIFIER_LENGTH:
        raise TypeParseError(
            f"bad {what} {name!r}: must match [A-Za-z_][A-Za-z0-9_]* and be at most "
            f"{MAX_IDENTIFIER_LENGTH} characters"
        )
    return name.lower()


@dataclass(frozen=True)
class HiveType:
    """A parsed Hive type: a primitive with its parameters, or array / map / struct."""

    name: str
    params: tuple[int, ...] = ()
    children: tuple[HiveType, ...] = ()
    field_names: tuple[str, ...] = field(default=())

    @property
    def is_primitive(self) -> bool:
        return self.name in PRIMITIVES

    def __str__(self) -> str:
        if self.name == "array":
            return f"array<{self.children[0]}>"
        if self.name == "map":
            return f"map<{self.children[0]},{self.children[1]}>"
        if self.name == "struct":
            inner = ",".join(f"{n}:{t}" for n, t in zip(self.field_names, self.children))
            return f"struct<{inner}>"
        if self.params:
            return f"{self.name}({','.join(str(p) for p in self.params)})"
        return self.name

    def to_arrow(self, timestamp_unit: str = "us") -> pa.DataType:
        """The Arrow type values of this Hive type travel as.

        Timestamps are microseconds by default: Spark's unit, and the only one that spans
        Hive's years 0001-9999 (nanoseconds in an int64 end at 1677 and 2262). The compactor
        asks for ``"ns"`` to carry Hive-written nanosecond digits unchanged when they fit."""
        import pyarrow as pa  # imported here: the catalog and CLI parse types without Arrow

        n = self.name
        if n == "array":
            return pa.list_(self.children[0].to_arrow(timestamp_unit))
        if n == "map":
            return pa.map_(self.children[0].to_arrow(timestamp_unit), self.children[1].to_arrow(timestamp_unit))
        if n == "struct":
            return pa.struct([pa.field(f, t.to_arrow(timestamp_unit))
                              for f, t in zip(self.field_names, self.children)])
        if n == "decimal":
            return pa.decimal128(*self.params)
        if n == "timestamp":
            return pa.timestamp(timestamp_unit)
        return {
            "boolean": pa.bool_(), "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(),
            "bigint": pa.int64(), "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
            "varchar": pa.string(), "char": pa.string(), "date": pa.date32(), "binary": pa.binary(),
        }[n]

    def walk(self) -> Iterator[HiveType]:
        """This type and every type nested in it, in ORC column-id order (pre-order: a struct,
        then each field's subtree; a list, then its element; a map, then key and value)."""
        yield self
        for child in self.children:
            yield from child.walk()

    @classmethod
    def from_arrow(cls, t: pa.DataType) -> HiveType:
        """The Hive type ``pyarrow.orc`` writes for an Arrow type (strings as ``string``)."""
        import pyarrow as pa

        if pa.types.is_struct(t):
            return cls("struct", children=tuple(cls.from_arrow(t.field(i).type) for i in range(t.num_fields)),
                       field_names=tuple(t.field(i).name for i in range(t.num_fields)))
        if pa.types.is_map(t):
            return cls("map", children=(cls.from_arrow(t.key_type), cls.from_arrow(t.item_type)))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return cls("array", children=(cls.from_arrow(t.value_type),))
        if pa.types.is_decimal(t):
            return cls("decimal", (t.precision, t.scale))
        if pa.types.is_timestamp(t):
            return cls("timestamp")
        for name, check in (("boolean", pa.types.is_boolean), ("tinyint", pa.types.is_int8),
                            ("smallint", pa.types.is_int16), ("int", pa.types.is_int32),
                            ("bigint", pa.types.is_int64), ("float", pa.types.is_float32),
                            ("double", pa.types.is_float64), ("date", pa.types.is_date32),
                            ("string", pa.types.is_string), ("string", pa.types.is_large_string),
                            ("binary", pa.types.is_binary), ("binary", pa.types.is_large_binary)):
            if check(t):
                return cls(name)
        raise TypeParseError(f"no Hive type for Arrow type {t}")


@dataclass(frozen=True)
class Column:
    """A named, typed column of a table."""

    name: str
    type: HiveType

    def __str__(self) -> str:
        return f"{self.name} {self.type}"


class _Parser:
    _TOKEN = re.compile(r"\s*(?:(double\s+precision)|([A-Za-z_][A-Za-z0-9_]*)|(\d+)|([<>(),:]))")

    def __init__(self, text: str):
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = self._TOKEN.match(text, pos)
            if not m:
                raise TypeParseError(f"unexpected character {text[pos:].strip()[:1]!r} in {text!r}")
            self.tokens.append(next(g for g in m.groups() if g is not None))
            pos = m.end()
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None:
            raise TypeParseError(f"unexpected end of {self.text!r}" + (f", expected {expected!r}" if expected else ""))
        if expected is not None and tok.lower() != expected:
            raise TypeParseError(f"expected {expected!r} but found {tok!r} in {self.text!r}")
        self.i += 1
        return tok

    def int_param(self) -> int:
        tok = self.take()
        if not tok.isdigit():
            raise TypeParseError(f"expected a number but found {tok!r} in {self.text!r}")
        return int(tok)

    def type(self) -> HiveType:
        raw = self.take().lower()
        name = _ALIASES.get(re.sub(r"\s+", " ", raw), raw)
        if name == "array":
            self.take("<")
            elem = self.type()
            self.take(">")
            return HiveType("array", children=(elem,))
        if name == "map":
            self.take("<")
            key = self.type()
            if not key.is_primitive:
                raise TypeParseError(f"map keys must be primitive in {self.text!r}")
            self.take(",")
            value = self.type()
            self.take(">")
            return HiveType("map", children=(key, value))
        if name == "struct":
            self.take("<")
            names, kids = [], []
            while True:
                names.append(validate_identifier(self.take(), "struct field name"))
                self.take(":")
                kids.append(self.type())
                if self.peek() == ",":
                    self.take(",")
                    continue
                self.take(">")
                break
            if len(set(names)) != len(names):
                raise TypeParseError(f"duplicate struct field name in {self.text!r}")
            return HiveType("struct", children=tuple(kids), field_names=tuple(names))
        if name not in PRIMITIVES:
            raise TypeParseError(f"unknown type {raw!r} in {self.text!r}")
        if name in ("varchar", "char"):
            self.take("(")
            length = self.int_param()
            self.take(")")
            limit = 65535 if name == "varchar" else 255
            if not 1 <= length <= limit:
                raise TypeParseError(f"{name} length must be 1..{limit}, got {length}")
            return HiveType(name, (length,))
        if name == "decimal":
            precision, scale = 10, 0
            if self.peek() == "(":
                self.take("(")
                precision = self.int_param()
                if self.peek() == ",":
                    self.take(",")
                    scale = self.int_param()
                self.take(")")
            if not 1 <= precision <= 38 or not 0 <= scale <= precision:
                raise TypeParseError(f"bad decimal({precision},{scale}): "
                                     "need 1 <= precision <= 38, 0 <= scale <= precision")
            return HiveType("decimal", (precision, scale))
        return HiveType(name)


def parse_type(text: str) -> HiveType:
    """Parse one Hive type string, e.g. ``decimal(10,2)`` or ``map<string,array<int>>``."""
    p = _Parser(text)
    t = p.type()
    if p.peek() is not None:
        raise TypeParseError(f"unexpected {p.peek()!r} after type in {text!r}")
    return t


def parse_columns(text: str) -> list[Column]:
    """Parse a column list ``"id bigint, name string, tags array<string>"``."""
    if not text or not text.strip():
        raise TypeParseError("empty column list")
    p = _Parser(text)
    cols: list[Column] = []
    while True:
        name = validate_identifier(p.take(), "column name")
        cols.append(Column(name, p.type()))
        if p.peek() is None:
            break
        p.take(",")
    seen: set[str] = set()
    for c in cols:
        if c.name in seen:
            raise TypeParseError(f"duplicate column name {c.name!r}")
        seen.add(c.name)
    return cols


def format_columns(cols: list[Column]) -> str:
    return ", ".join(str(c) for c in cols)

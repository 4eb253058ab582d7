"""A small part of Spark SQL, evaluated on Arrow arrays: what MERGE clauses mostly say.

``WHEN MATCHED AND t.email <> s.email THEN UPDATE SET email = s.email, n = t.n + 1`` needs no
JVM: column references of the target (``t.``) and source (``s.``) rows, literals, comparisons
(``= == <> != < <= > >= <=>``), ``AND OR NOT``, ``IS [NOT] NULL``, ``IN (...)`` of literals,
``+ - *`` on integers and floating point (overflow is an error, as in Spark's ANSI mode) and
``coalesce``. Operand types must be of one kind (numbers, strings, dates, timestamps, booleans,
one decimal type); a decimal literal only meets floating point. Anything else raises
:class:`Unsupported` and the statement's expressions are evaluated by Spark instead, so the
answer is always Spark's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


class Unsupported(Exception):
    """Outside the subset evaluated here."""


@dataclass(frozen=True)
class Node:
    op: str                      # col lit and or not cmp null notnull in add sub mul neg coalesce
    args: tuple[Node, ...] = ()
    value: Any = None            # col: (alias, name); lit: (python value, kind); cmp: operator


_TOKEN = re.compile(r"""\s*(?:
    (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[LlDd]?)
  | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*|`[^`]+`)
  | (?P<op><=>|<=|>=|<>|!=|==|[=<>+\-*(),.])
)""", re.VERBOSE)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "Z": "\x1a", "%": "\\%", "_": "\\_"}


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise Unsupported(f"cannot read {text[pos:pos + 10]!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str):
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, k: int = 0) -> tuple[str, str] | None:
        return self.toks[self.i + k] if self.i + k < len(self.toks) else None

    def word(self, k: int = 0) -> str:
        t = self.peek(k)
        return t[1].lower() if t is not None and t[0] == "ident" else ""

    def take_op(self, op: str) -> bool:
        t = self.peek()
        if t is not None and t[0] == "op" and t[1] == op:
            self.i += 1
            return True
        return False

    def expect_op(self, op: str) -> None:
        if not self.take_op(op):
            raise Unsupported(f"expected {op!r}")

    def parse(self) -> Node:
        node = self.or_()
        if self.peek() is not None:
            raise Unsupported(f"unexpected {self.peek()[1]!r}")
        return node

    def or_(self) -> Node:
        node = self.and_()
        while self.word() == "or":
            self.i += 1
            node = Node("or", (node, self.and_()))
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.word() == "and":
            self.i += 1
            node = Node("and", (node, self.not_()))
        return node

    def not_(self) -> Node:
        if self.word() == "not":
            self.i += 1
            return Node("not", (self.not_(),))
        return self.predicate()

    def predicate(self) -> Node:
        left = self.additive()
        t = self.peek()
        if t is not None and t[0] == "op" and t[1] in ("=", "==", "<>", "!=", "<", "<=", ">", ">=", "<=>"):
            self.i += 1
            op = {"==": "=", "!=": "<>"}.get(t[1], t[1])
            return Node("cmp", (left, self.additive()), op)
        if self.word() == "is":
            self.i += 1
            negated = self.word() == "not"
            self.i += negated
            if self.word() != "null":
                raise Unsupported("IS without NULL")
            self.i += 1
            return Node("notnull" if negated else "null", (left,))
        negated = self.word() == "not" and self.word(1) == "in"
        if negated or self.word() == "in":
            self.i += 1 + negated
            self.expect_op("(")
            values = [self.unary()]
            while self.take_op(","):
                values.append(self.unary())
            self.expect_op(")")
            if any(v.op != "lit" for v in values):
                raise Unsupported("IN takes literals here")
            node = Node("in", (left, *values))
            return Node("not", (node,)) if negated else node
        return left

    def additive(self) -> Node:
        node = self.multiplicative()
        while True:
            if self.take_op("+"):
                node = Node("add", (node, self.multiplicative()))
            elif self.take_op("-"):
                node = Node("sub", (node, self.multiplicative()))
            else:
                return node

    def multiplicative(self) -> Node:
        node = self.unary()
        while self.take_op("*"):
            node = Node("mul", (node, self.unary()))
        return node

    def unary(self) -> Node:
        if self.take_op("-"):
            inner = self.unary()
            if inner.op == "lit" and inner.value[1] in ("int", "bigint", "double", "decimal"):
                return Node("lit", value=(-inner.value[0], inner.value[1]))
            return Node("neg", (inner,))
        return self.primary()

    def primary(self) -> Node:
        t = self.peek()
        if t is None:
            raise Unsupported("unexpected end")
        kind, text = t
        self.i += 1
        if kind == "num":
            return Node("lit", value=_number(text))
        if kind == "str":
            nxt = self.peek()
            if nxt is not None and nxt[0] == "str":
                raise Unsupported("adjacent string literals")
            return Node("lit", value=(_unquote(text), "string"))
        if kind == "op":
            if text == "(":
                node = self.or_()
                self.expect_op(")")
                return node
            raise Unsupported(f"unexpected {text!r}")
        word = text.lower()
        if word in ("true", "false"):
            return Node("lit", value=(word == "true", "bool"))
        if word == "null":
            return Node("lit", value=(None, "null"))
        if word == "coalesce" and self.take_op("("):
            args = [self.or_()]
            while self.take_op(","):
                args.append(self.or_())
            self.expect_op(")")
            return Node("coalesce", tuple(args))
        if word not in ("t", "s") or not self.take_op("."):
            raise Unsupported(f"{text!r} is not t.<column> or s.<column>")
        t2 = self.peek()
        if t2 is None or t2[0] != "ident":
            raise Unsupported("expected a column name")
        self.i += 1
        if self.take_op("(") or self.peek() is not None and self.peek() == ("op", "."):
            raise Unsupported("nested field or function")
        return Node("col", value=(word, t2[1].strip("`").lower()))


def _number(text: str) -> tuple[Any, str]:
    suffix = text[-1].lower() if text[-1].isalpha() and text[-1].lower() != "e" else ""
    body = text[:-1] if suffix else text
    if suffix == "l":
        return int(body), "bigint"
    if suffix == "d" or "e" in body.lower():
        return float(body), "double"
    if "." in body:
        return Decimal(body), "decimal"
    v = int(body)
    return v, "int" if -2**31 <= v < 2**31 else "bigint" if -2**63 <= v < 2**63 else _too_big(text)


def _too_big(text: str) -> str:
    raise Unsupported(f"number {text} does not fit a bigint")


def _unquote(text: str) -> str:
    """Spark's string literal unescaping (``\\n``, ``\\'``, ...); unicode and octal escapes are
    left to Spark."""
    body = text[1:-1]
    if re.search(r"\\(u|[0-7]{3})", body):
        raise Unsupported("unicode or octal escape")
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def parse(text: str) -> Node:
    """The expression's tree, or :class:`Unsupported`."""
    return _Parser(text).parse()


# -- types and evaluation ----------------------------------------------------------------------
def _kind(t: pa.DataType) -> str:
    if t in _NUMERIC_ORDER:
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    for name, check in (("date", pa.types.is_date32), ("timestamp", pa.types.is_timestamp),
                        ("bool", pa.types.is_boolean), ("decimal", pa.types.is_decimal), ("null", pa.types.is_null)):
        if check(t):
            return name
    raise Unsupported(f"type {t}")


_NUMERIC_ORDER = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64()]
_LIT_TYPES = {"int": pa.int32(), "bigint": pa.int64(), "double": pa.float64(), "string": pa.string(),
              "bool": pa.bool_(), "null": pa.null()}


class Scope:
    """The rows an expression sees: ``t`` and ``s`` as struct arrays of equal length."""

    def __init__(self, structs: dict[str, pa.StructArray]):
        self.structs = structs
        self.types = {a: {f.name: f.type for f in arr.type} for a, arr in structs.items()}
        self.length = len(next(iter(structs.values())))

    @classmethod
    def of_types(cls, types: dict[str, pa.StructType]) -> Scope:
        return cls({a: pa.array([], t) for a, t in types.items()})


def type_of(node: Node, scope: Scope) -> pa.DataType:
    """The Arrow type ``node`` evaluates to, checking it is in the subset."""
    op = node.op
    if op == "col":
        alias, name = node.value
        try:
            return scope.types[alias][name]
        except KeyError:
            raise Unsupported(f"no column {alias}.{name}") from None
    if op == "lit":
        value, kind = node.value
        if kind == "decimal":
            return pa.float64()                     # only met with floating point, checked below
        return _LIT_TYPES[kind]
    if op in ("and", "or", "not"):
        for a in node.args:
            if _kind(type_of(a, scope)) not in ("bool", "null"):
                raise Unsupported(f"{op.upper()} of a non-boolean")
        return pa.bool_()
    if op in ("null", "notnull"):
        type_of(node.args[0], scope)
        return pa.bool_()
    if op in ("cmp", "in"):
        _comparable([node.args[0], *node.args[1:]], scope)
        return pa.bool_()
    if op in ("add", "sub", "mul", "neg"):
        types = [type_of(a, scope) for a in node.args]
        if any(_kind(t) not in ("number", "null") for t in types):
            raise Unsupported("arithmetic on non-numbers")
        if any(_is_decimal_lit(a) for a in node.args) and not all(
                pa.types.is_floating(t) or pa.types.is_null(t) for t in types):
            raise Unsupported("a decimal literal in arithmetic with other than floating point")
        numeric = [t for t in types if not pa.types.is_null(t)]
        # Spark's result type: the widest operand, double > float > bigint > int > smallint > tinyint
        return max(numeric, key=_NUMERIC_ORDER.index) if numeric else pa.null()
    if op == "coalesce":
        types = [type_of(a, scope) for a in node.args]
        kinds = {_kind(t) for t in types} - {"null"}
        concrete = [t for t in types if not pa.types.is_null(t)]
        if len(kinds) > 1 or kinds == {"decimal"} and len({str(t) for t in concrete}) > 1:
            raise Unsupported("coalesce of mixed types")
        if kinds == {"number"} and len({str(t) for t in concrete}) > 1:
            raise Unsupported("coalesce of mixed number types")
        return concrete[0] if concrete else pa.null()
    raise Unsupported(op)


def _is_decimal_lit(node: Node) -> bool:
    return node.op == "lit" and node.value[1] == "decimal"


def _comparable(nodes: list[Node], scope: Scope) -> None:
    types = [type_of(n, scope) for n in nodes]
    kinds = {_kind(t) for t in types} - {"null"}
    if len(kinds) > 1:
        raise Unsupported("comparison of different kinds")
    if any(_is_decimal_lit(n) for n in nodes) and not all(
            pa.types.is_floating(t) or pa.types.is_null(t) or _is_decimal_lit(n) for n, t in zip(nodes, types)):
        raise Unsupported("a decimal literal compared with other than floating point")
    if kinds & {"decimal", "timestamp"} and len({str(t) for t in types if not pa.types.is_null(t)}) > 1:
        raise Unsupported("comparison of different decimal or timestamp types")


def evaluate(node: Node, scope: Scope) -> pa.Array | pa.Scalar:
    """The values of ``node`` over the rows of ``scope`` (a scalar for a constant)."""
    op = node.op
    if op == "col":
        alias, name = node.value
        return scope.structs[alias].field(name)
    if op == "lit":
        value, kind = node.value
        return pa.scalar(float(value) if kind == "decimal" else value, type_of(node, scope))
    args = [evaluate(a, scope) for a in node.args]
    if op == "and":
        return pc.and_kleene(*(_bool(a) for a in args))
    if op == "or":
        return pc.or_kleene(*(_bool(a) for a in args))
    if op == "not":
        return pc.invert(_bool(args[0]))
    if op == "null":
        return pc.is_null(_array(args[0], scope))
    if op == "notnull":
        return pc.is_valid(_array(args[0], scope))
    if op == "cmp":
        a, b = args
        if node.value == "<=>":
            a, b = _array(a, scope), _array(b, scope)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b))
            return pc.or_(both_null, pc.fill_null(pc.equal(*_common(a, b)), False))
        fn = {"=": pc.equal, "<>": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
              ">": pc.greater, ">=": pc.greater_equal}[node.value]
        return fn(*_common(a, b))
    if op == "in":
        value = _array(args[0], scope)
        options = [a.as_py() for a in args[1:]]
        if value.type == pa.null() or not [o for o in options if o is not None]:
            return pa.nulls(len(value), pa.bool_())
        found = pc.is_in(value, value_set=pa.array([o for o in options if o is not None]).cast(value.type))
        # SQL: not found and a NULL among the options (or a NULL value) is NULL, not false
        if None in options:
            found = pc.if_else(found, True, pa.scalar(None, pa.bool_()))
        return pc.if_else(pc.is_null(value), pa.scalar(None, pa.bool_()), found)
    if op in ("add", "sub", "mul", "neg"):
        out_type = type_of(node, scope)
        if pa.types.is_null(out_type):
            return pa.nulls(scope.length, pa.null())
        args = [_cast(a, out_type) for a in args]
        fn = {"add": pc.add_checked, "sub": pc.subtract_checked, "mul": pc.multiply_checked,
              "neg": pc.negate_checked}[op]
        try:
            return fn(*args)
        except pa.ArrowInvalid as exc:
            raise ArithmeticError(f"arithmetic overflow: {exc}") from None
    if op == "coalesce":
        out_type = type_of(node, scope)
        return pc.coalesce(*(_cast(a, out_type) for a in args))
    raise Unsupported(op)


def _array(v: pa.Array | pa.Scalar, scope: Scope) -> pa.Array:
    if isinstance(v, pa.Scalar):
        return pa.array([v.as_py()] * scope.length, v.type)
    return v


def _bool(v: pa.Array | pa.Scalar) -> pa.Array | pa.Scalar:
    return v.cast(pa.bool_()) if v.type == pa.null() else v


def _cast(v: pa.Array | pa.Scalar, t: pa.DataType) -> pa.Array | pa.Scalar:
    return v if v.type.equals(t) else v.cast(t)


def _common(a: pa.Array | pa.Scalar, b: pa.Array | pa.Scalar) -> tuple:
    """Operands of one type for a comparison: numbers widened, timestamps to one unit."""
    if a.type.equals(b.type):
        return a, b
    if pa.types.is_null(a.type):
        return a.cast(b.type), b
    if pa.types.is_null(b.type):
        return a, b.cast(a.type)
    if pa.types.is_floating(a.type) or pa.types.is_floating(b.type):
        return _cast(a, pa.float64()), _cast(b, pa.float64())
    if pa.types.is_integer(a.type) and pa.types.is_integer(b.type):
        return _cast(a, pa.int64()), _cast(b, pa.int64())
    return a, b

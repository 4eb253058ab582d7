"""A small part of Spark SQL, evaluated on Arrow arrays: what MERGE clauses mostly say.

``WHEN MATCHED AND t.email <> s.email THEN UPDATE SET email = s.email, n = t.n + 1`` needs no
JVM: column references of the target (``t.``) and source (``s.``) rows, literals, comparisons
(``= == <> != < <= > >= <=>``), ``AND OR NOT``, ``IS [NOT] NULL``, ``[NOT] IN (...)`` of
literals, ``[NOT] BETWEEN``, ``+ - *`` on integers and floating point, ``coalesce`` and
``CASE WHEN ... THEN ... [ELSE ...] END``.

The answer must be Spark SQL's (ANSI mode, Spark's default), row for row; the differential test
``tests/test_arrowexpr_differential.py`` checks it against Spark on edge values:

- Operands are brought to the type Spark coerces them to (:func:`_common_type`): numbers to the
  widest, so ``t.i IN (1, 3000000000)`` compares as bigint; an integer rounds to the nearest
  double as in the JVM. Spark widens an integer meeting a float to double, which Arrow would not:
  refused. A decimal literal only meets floating point (converted exactly to the nearest double);
  decimals and timestamps compare only with their own type.
- Floating point compares as Spark does, not as IEEE: NaN equals NaN and is above every other
  value (+inf too); -0.0 equals 0.0 (:func:`_compare`).
- Integer overflow fails the statement, as ANSI Spark does, but only in a row where Spark
  evaluates that part: it skips the right side of AND/OR once the left decides, an operator's
  right side where the left is NULL, later coalesce arguments, and CASE branches not taken
  (:func:`evaluate`).
- Literals are typed as Spark's parser types them (``-2147483648`` is an int, ``1e400`` and a
  bigint out of range are Spark's to refuse); string escapes are unescaped as Spark does,
  unicode and octal ones are left to Spark, as is a ``--`` comment.

Anything else raises :class:`Unsupported` when the expression is parsed or typed (on the
driver, before any task runs), and the statement's expressions are evaluated by Spark instead.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class Unsupported(Exception):
    """Outside the subset evaluated here."""


@dataclass(frozen=True)
class Node:
    op: str                      # col lit and or not cmp null notnull in add sub mul neg coalesce case
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
        if kind is None:
            raise Unsupported(f"cannot read {text[pos:pos + 10]!r}")
        if kind == "op" and text.startswith("--", m.start(kind)):
            raise Unsupported("a -- comment")          # Spark reads the rest of the line as a comment
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
        extra = self.peek()
        if extra is not None:
            raise Unsupported(f"unexpected {extra[1]!r}")
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
        negated = self.word() == "not" and self.word(1) == "between"
        if negated or self.word() == "between":
            # Spark's BETWEEN is ``left >= low AND left <= high`` (RuntimeReplaceable)
            self.i += 1 + negated
            low = self.additive()
            if self.word() != "and":
                raise Unsupported("BETWEEN without AND")
            self.i += 1
            high = self.additive()
            node = Node("and", (Node("cmp", (left, low), ">="), Node("cmp", (left, high), "<=")))
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
            nxt = self.peek()
            if nxt is not None and nxt[0] == "num":      # Spark's literal ``MINUS? number``: -2147483648 is an int
                self.i += 1
                return Node("lit", value=_number("-" + nxt[1]))
            return Node("neg", (self.unary(),))
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
        if word == "case":
            return self.case()
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


    def case(self) -> Node:
        """``CASE WHEN c THEN v ... [ELSE e] END`` as (c1, v1, c2, v2, ..., e); ``CASE x WHEN``
        is Spark's."""
        args: list[Node] = []
        if self.word() != "when":
            raise Unsupported("CASE <value> WHEN")
        while self.word() == "when":
            self.i += 1
            args.append(self.or_())
            if self.word() != "then":
                raise Unsupported("WHEN without THEN")
            self.i += 1
            args.append(self.or_())
        if self.word() == "else":
            self.i += 1
            args.append(self.or_())
        else:
            args.append(Node("lit", value=(None, "null")))
        if self.word() != "end":
            raise Unsupported("CASE without END")
        self.i += 1
        return Node("case", tuple(args))


def _number(text: str) -> tuple[Any, str]:
    """A numeric literal as Spark types it: ``int`` (else ``bigint``) without a point, ``L``
    bigint, ``D`` or an exponent double, else decimal. What Spark refuses or types otherwise
    (a bigint out of range, an infinite double, a decimal over 38 digits) is Spark's."""
    suffix = text[-1].lower() if text[-1].isalpha() and text[-1].lower() != "e" else ""
    body = text[:-1] if suffix else text
    try:
        if suffix == "l":
            v: Any = int(body)
            kind = "bigint"
        elif suffix == "d" or "e" in body.lower():
            v, kind = float(body), "double"
            if math.isinf(v):
                raise Unsupported(f"double literal {text} out of range")
            return v, kind
        elif "." in body:
            v = Decimal(body)
            _decimal_type(v)
            return v, "decimal"
        else:
            v = int(body)
            kind = "int" if -2**31 <= v < 2**31 else "bigint"
    except (ValueError, ArithmeticError):
        raise Unsupported(f"number {text!r}") from None
    if not -2**63 <= v < 2**63:
        raise Unsupported(f"number {text} does not fit a bigint")
    return v, kind


def _decimal_type(v: Decimal) -> pa.Decimal128Type:
    """Spark's type of a decimal literal: as many digits as written, that many after the point."""
    _, digits, exponent = v.as_tuple()
    scale = max(0, -int(exponent))
    precision = max(len(digits) + max(0, int(exponent)), scale, 1)
    if precision > 38:
        raise Unsupported(f"decimal literal {v} has more than 38 digits")
    return pa.decimal128(precision, scale)


def _unquote(text: str) -> str:
    """Spark's string literal unescaping (``\\n``, ``\\'``, ...); unicode and octal escapes are
    left to Spark."""
    body = text[1:-1]
    if re.search(r"\\(u|U|[0-7]{3})", body):
        raise Unsupported("unicode or octal escape")
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def parse(text: str) -> Node:
    """The expression's tree, or :class:`Unsupported`."""
    return _Parser(text).parse()


# -- types --------------------------------------------------------------------------------------
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


# Spark's numeric precedence: operands meet in the later type (int with float is float)
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
        return _decimal_type(value) if kind == "decimal" else _LIT_TYPES[kind]
    if op in ("and", "or", "not"):
        for a in node.args:
            if _kind(type_of(a, scope)) not in ("bool", "null"):
                raise Unsupported(f"{op.upper()} of a non-boolean")
        return pa.bool_()
    if op in ("null", "notnull"):
        type_of(node.args[0], scope)
        return pa.bool_()
    if op in ("cmp", "in"):
        _common_type(node.args, scope)
        return pa.bool_()
    if op in ("add", "sub", "mul", "neg"):
        t = _common_type(node.args, scope)
        if _kind(t) not in ("number", "null"):
            raise Unsupported("arithmetic on other than integers and floating point")
        return t
    if op == "coalesce":
        return _common_type(node.args, scope)
    if op == "case":
        for cond in node.args[:-1:2]:
            if _kind(type_of(cond, scope)) not in ("bool", "null"):
                raise Unsupported("CASE WHEN of a non-boolean")
        return _common_type(node.args[1::2] + node.args[-1:], scope)
    raise Unsupported(op)


def _is_decimal_lit(node: Node) -> bool:
    return node.op == "lit" and node.value[1] == "decimal"


def _common_type(nodes: tuple[Node, ...] | list[Node], scope: Scope) -> pa.DataType:
    """The type Spark brings operands to (of a comparison, IN, arithmetic, coalesce), where
    Arrow then computes exactly what Spark does: numbers to the widest (tinyint < ... < bigint
    < float < double, but an integer never meets a float without a double); a decimal literal
    with floating point to double; otherwise operands of one type (decimals and timestamps too),
    NULL with anything."""
    types = [type_of(n, scope) for n in nodes]
    concrete = [t for t in types if not pa.types.is_null(t)]
    if not concrete:
        return pa.null()
    kinds = {_kind(t) for t in concrete}
    if kinds == {"number"}:
        widest = max(concrete, key=_NUMERIC_ORDER.index)
        if pa.types.is_float32(widest) and any(pa.types.is_integer(t) for t in concrete):
            raise Unsupported("an integer with a float (Spark's ANSI mode widens both to double)")
        return widest
    if kinds == {"number", "decimal"}:
        decimals_are_literals = all(_is_decimal_lit(n) for n, t in zip(nodes, types) if pa.types.is_decimal(t))
        if decimals_are_literals and any(pa.types.is_floating(t) for t in concrete):
            return pa.float64()
        raise Unsupported("a decimal with other than floating point, or a decimal column with a number")
    if len(kinds) > 1:
        raise Unsupported(f"operands of different kinds ({', '.join(sorted(kinds))})")
    if len({str(t) for t in concrete}) > 1:
        raise Unsupported(f"operands of different types ({', '.join(sorted({str(t) for t in concrete}))})")
    return concrete[0]


def assignable(node: Node, scope: Scope, target: pa.DataType) -> bool:
    """Can :func:`assign` store the value of ``node`` in a ``target`` column exactly as Spark's
    cast (``dml._typed``) does? Others are left to Spark."""
    source = type_of(node, scope)
    if source.equals(target) or pa.types.is_null(source):
        return True
    if pa.types.is_integer(source):
        return pa.types.is_integer(target) or pa.types.is_floating(target)
    if pa.types.is_float32(source):
        return pa.types.is_float64(target)
    if pa.types.is_decimal(source):                 # a decimal literal: to the nearest double
        return _is_decimal_lit(node) and pa.types.is_float64(target)
    if pa.types.is_date32(source):
        return pa.types.is_timestamp(target)
    return (pa.types.is_string(source) or pa.types.is_large_string(source)) and pa.types.is_string(target)


def assign(value: pa.Array | pa.Scalar, target: pa.DataType) -> pa.Array | pa.Scalar:
    """``value`` as a ``target`` column's values, as Spark's ANSI cast makes it: integers round
    to the nearest float, a narrower integer column that a value does not fit fails the
    statement (:class:`ArithmeticError`)."""
    if value.type.equals(target):
        return value
    if pa.types.is_integer(value.type) and pa.types.is_integer(target):
        try:
            return value.cast(target)
        except pa.ArrowInvalid as exc:
            raise ArithmeticError(f"cast overflow: a value does not fit {target}: {exc}") from None
    return _cast(value, target)


# -- evaluation ---------------------------------------------------------------------------------
def evaluate(node: Node, scope: Scope) -> pa.Array | pa.Scalar:
    """The values of ``node`` over the rows of ``scope`` (a scalar for a constant). An integer
    overflow raises :class:`ArithmeticError` as Spark's ANSI mode fails the query, and only in
    a row where Spark evaluates that part (it skips the right side of AND/OR once the left
    decides, of an operator once the left is NULL, and later coalesce arguments)."""
    value, errors = _eval(node, scope)
    if errors is not None and errors.any():
        raise ArithmeticError(f"arithmetic overflow in {int(errors.sum())} of {scope.length} rows "
                              "(as Spark's ANSI mode fails it)")
    return value


def _eval(node: Node, scope: Scope) -> tuple[pa.Array | pa.Scalar, np.ndarray | None]:
    op = node.op
    n = scope.length
    if op == "col":
        alias, name = node.value
        return scope.structs[alias].field(name), None
    if op == "lit":
        return pa.scalar(node.value[0], type_of(node, scope)), None
    if op == "in":           # IN takes literals: nothing on the right can fail
        value, err = _eval(node.args[0], scope)
        t = _common_type(node.args, scope)
        if pa.types.is_null(t):
            return pa.scalar(None, pa.bool_()), err
        value = _cast(value, t)
        found = None                   # SQL: true if one equals, else NULL if a NULL took part
        for option in node.args[1:]:
            eq = _compare("=", value, _cast(pa.scalar(option.value[0], type_of(option, scope)), t))
            found = eq if found is None else pc.or_kleene(found, eq)
        return found, err
    if op == "case":
        return _case(node, scope)
    evaluated = [_eval(a, scope) for a in node.args]
    args = [v for v, _ in evaluated]
    errs = [e for _, e in evaluated]
    if op in ("and", "or"):
        a, b = _bool(args[0]), _bool(args[1])
        # Spark evaluates the right side only where the left does not decide
        right_runs = _mask(a, n, null=True) if op == "and" else ~_mask(a, n, null=False)
        value = pc.and_kleene(a, b) if op == "and" else pc.or_kleene(a, b)
        return value, _either(errs[0], _where(errs[1], right_runs))
    if op == "not":
        return pc.invert(_bool(args[0])), errs[0]
    if op == "null":
        return pc.is_null(args[0]), errs[0]
    if op == "notnull":
        return pc.is_valid(args[0]), errs[0]
    if op == "coalesce":
        t = type_of(node, scope)
        acc, err = _cast(args[0], t), errs[0]
        for v, e in zip(args[1:], errs[1:]):
            err = _either(err, _where(e, _mask(pc.is_null(acc), n, null=False)))
            acc = pc.coalesce(acc, _cast(v, t))
        return acc, err
    t = _common_type(node.args, scope)
    args = [_cast(v, t) for v in args]
    if op == "neg" or node.value == "<=>":
        err = _either(*errs)
    else:                   # a binary operator evaluates its right side only where the left is not NULL
        err = _either(errs[0], _where(errs[1], _mask(pc.is_valid(args[0]), n, null=False)))
    if op == "cmp":
        if node.value == "<=>":
            a, b = args
            a_null, b_null = pc.is_null(a), pc.is_null(b)
            return pc.if_else(pc.or_(a_null, b_null), pc.and_(a_null, b_null), _compare("=", a, b)), err
        return _compare(node.value, *args), err
    if pa.types.is_null(t):
        return pa.scalar(None, pa.null()), err
    value, overflow = _arithmetic(op, args, t, n)
    return value, _either(err, overflow)


def _case(node: Node, scope: Scope) -> tuple[pa.Array | pa.Scalar, np.ndarray | None]:
    """CASE WHEN as Spark runs it: each condition only where no earlier one held, each value
    only where its condition holds, ELSE where none did."""
    n = scope.length
    t = type_of(node, scope)
    decided = np.zeros(n, dtype=bool)
    err = None
    chosen, values = [], []
    for cond, value in zip(node.args[:-1:2], node.args[1::2]):
        c, c_err = _eval(cond, scope)
        err = _either(err, _where(c_err, ~decided))
        holds = _mask(c, n, null=False) & ~decided
        v, v_err = _eval(value, scope)
        err = _either(err, _where(v_err, holds))
        chosen.append(holds)
        values.append(v)
        decided |= holds
    v, v_err = _eval(node.args[-1], scope)
    err = _either(err, _where(v_err, ~decided))
    values.append(v)
    if pa.types.is_null(t):
        return pa.nulls(n, pa.null()), err
    conds = pa.StructArray.from_arrays([pa.array(h) for h in chosen], names=[f"c{k}" for k in range(len(chosen))])
    return pc.case_when(conds, *(_array(_cast(v, t), n) for v in values)), err


def _compare(op: str, a: pa.Array | pa.Scalar, b: pa.Array | pa.Scalar) -> pa.Array | pa.Scalar:
    """``a op b`` of one type, as Spark compares: NaN equals NaN and is above every other
    float (+inf too); -0.0 equals 0.0."""
    fn = {"=": pc.equal, "<>": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
          ">": pc.greater, ">=": pc.greater_equal}[op]
    if not pa.types.is_floating(a.type):
        return fn(a, b)
    a_nan, b_nan = pc.is_nan(a), pc.is_nan(b)
    if_nan = {"=": pc.and_(a_nan, b_nan), "<>": pc.xor(a_nan, b_nan), "<": pc.and_(pc.invert(a_nan), b_nan),
              "<=": b_nan, ">": pc.and_(a_nan, pc.invert(b_nan)), ">=": a_nan}[op]
    return pc.if_else(pc.or_(a_nan, b_nan), if_nan, fn(a, b))


_INT_RANGE = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}


def _arithmetic(op: str, args: list, t: pa.DataType, n: int) -> tuple[pa.Array | pa.Scalar, np.ndarray | None]:
    """``+ - *`` or negation in type ``t``, with the rows where an integer overflows (their
    value NULL)."""
    if pa.types.is_floating(t):
        return {"add": pc.add, "sub": pc.subtract, "mul": pc.multiply, "neg": pc.negate}[op](*args), None
    fn = {"add": pc.add_checked, "sub": pc.subtract_checked, "mul": pc.multiply_checked,
          "neg": pc.negate_checked}[op]
    try:
        return fn(*args), None
    except pa.ArrowInvalid:
        pass
    # which rows overflow, computed exactly (only when one does)
    py: dict[str, Callable[..., int]] = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
                                         "mul": lambda x, y: x * y, "neg": lambda x: -x}
    exact = py[op]
    bits = _INT_RANGE[t]
    lo, hi = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    out, overflow = [], np.zeros(n, dtype=bool)
    for i, xs in enumerate(zip(*(_array(v, n).to_pylist() for v in args))):
        r = None if None in xs else exact(*xs)
        if r is not None and not lo <= r <= hi:
            overflow[i], r = True, None
        out.append(r)
    return pa.array(out, t), overflow


def _mask(v: pa.Array | pa.Scalar, n: int, null: bool) -> np.ndarray:
    """A boolean value as a NumPy mask of ``n`` rows, NULL taken as ``null``."""
    if isinstance(v, pa.Scalar):
        x = v.as_py()
        return np.full(n, null if x is None else bool(x))
    return pc.fill_null(v.cast(pa.bool_()), null).to_numpy(zero_copy_only=False)


def _either(*errs: np.ndarray | None) -> np.ndarray | None:
    present = [e for e in errs if e is not None]
    return None if not present else present[0] if len(present) == 1 else np.logical_or.reduce(present)


def _where(err: np.ndarray | None, mask: np.ndarray) -> np.ndarray | None:
    return None if err is None else err & mask


def _array(v: pa.Array | pa.Scalar, n: int) -> pa.Array:
    if isinstance(v, pa.Scalar):
        return pa.array([v.as_py()] * n, v.type)
    return v


def _bool(v: pa.Array | pa.Scalar) -> pa.Array | pa.Scalar:
    return v.cast(pa.bool_()) if v.type == pa.null() else v


def _cast(v: pa.Array | pa.Scalar, t: pa.DataType) -> pa.Array | pa.Scalar:
    """``v`` in type ``t``, as Spark converts: an integer to the nearest float (Arrow's safe
    cast refuses any it cannot hold exactly), a decimal literal to the nearest double."""
    if v.type.equals(t):
        return v
    if pa.types.is_decimal(v.type) and pa.types.is_floating(t) and isinstance(v, pa.Scalar):
        return pa.scalar(None if not v.is_valid else float(v.as_py()) + 0.0, t)    # + 0.0: Spark has no decimal -0
    if pa.types.is_integer(v.type) and pa.types.is_floating(t):
        return v.cast(t, safe=False)
    return v.cast(t)

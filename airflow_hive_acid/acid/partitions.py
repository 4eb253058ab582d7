"""Partition names as Hive writes them: ``ds=2024-01-01/hr=03``, values escaped like
``FileUtils.escapePathName`` so any value maps to one safe directory name.

Values containing ``/`` or ``..``, control characters, or empty values are refused outright: a
partition value must never steer a write outside its table directory.
"""
from __future__ import annotations

from .errors import AcidInputError

# Characters Hive's FileUtils.escapePathName escapes (besides control characters).
_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^')
DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"


class PartitionSpecError(AcidInputError):
    """A malformed partition spec or an unsafe partition value."""


def validate_value(column: str, value: str) -> str:
    if not isinstance(value, str):
        value = str(value)
    if value == "":
        raise PartitionSpecError(f"empty value for partition column {column!r}")
    if "/" in value or "\\" in value:
        raise PartitionSpecError(f"partition value {value!r} for {column!r} contains a path separator")
    if ".." in value:
        raise PartitionSpecError(f"partition value {value!r} for {column!r} contains '..'")
    if any(ord(ch) < 0x20 for ch in value):
        raise PartitionSpecError(f"partition value {value!r} for {column!r} contains a control character")
    return value


def escape(value: str) -> str:
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPE or ord(ch) < 0x20 else ch for ch in value)


def unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "%" and _is_hex(text[i + 1:i + 3]):
            out.append(chr(int(text[i + 1:i + 3], 16)))
            i += 3
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def make_part_name(columns: list[str], values: list[str] | dict[str, str]) -> str:
    """``["ds","hr"], ["2024-01-01","03"]`` -> ``ds=2024-01-01/hr=03`` (values validated, escaped)."""
    if isinstance(values, dict):
        missing = [c for c in columns if c not in values]
        extra = [k for k in values if k not in columns]
        if missing or extra:
            raise PartitionSpecError(
                f"partition spec {values} does not match partition columns {columns}"
                + (f": missing {missing}" if missing else "") + (f": unknown {extra}" if extra else ""))
        values = [values[c] for c in columns]
    if len(values) != len(columns):
        raise PartitionSpecError(f"{len(values)} partition values given for partition columns {columns}")
    return "/".join(f"{c}={escape(validate_value(c, v))}" for c, v in zip(columns, values))


def parse_part_name(name: str, columns: list[str] | None = None) -> dict[str, str]:
    """``ds=2024-01-01/hr=03`` -> ``{"ds": "2024-01-01", "hr": "03"}``, checked against ``columns``."""
    if not name:
        raise PartitionSpecError("empty partition name")
    spec: dict[str, str] = {}
    for part in name.split("/"):
        if "=" not in part:
            raise PartitionSpecError(f"malformed partition name {name!r}: {part!r} is not column=value")
        col, raw = part.split("=", 1)
        col = col.strip().lower()
        if col in spec:
            raise PartitionSpecError(f"partition column {col!r} given twice in {name!r}")
        spec[col] = validate_value(col, unescape(raw))
    if columns is not None and list(spec) != list(columns):
        raise PartitionSpecError(f"partition {name!r} does not match partition columns {columns}")
    return spec


def parse_spec(text: str) -> dict[str, str]:
    """A user's ``ds=2024-01-01,hr=03`` spec -> ``{"ds": "2024-01-01", "hr": "03"}``; a column
    named twice is refused (it would silently pick one value)."""
    items = [p for p in text.split(",") if p.strip()]
    if not items:
        raise PartitionSpecError("empty partition spec")
    spec: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise PartitionSpecError(f"malformed partition spec {text!r}: expected col=value[,col=value]")
        col, value = item.split("=", 1)
        col = col.strip().lower()
        if col in spec:
            raise PartitionSpecError(f"partition column {col!r} given twice in {text!r}")
        spec[col] = value.strip()
    return spec


def parse_spec_text(text: str, columns: list[str]) -> str:
    """A user's ``ds=2024-01-01,hr=03`` spec -> canonical partition name ``ds=2024-01-01/hr=03``."""
    return make_part_name(columns, parse_spec(text))

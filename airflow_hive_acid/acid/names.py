"""Directory and file names of an ACID table: ``base_W[_vT]``, ``[delete_]delta_A_B[_S][_vT]``,
``bucket_NNNNN[_attempt]`` and "original" files such as ``000000_0`` / ``000000_0_copy_1``.

Parsing follows Hive's ``AcidUtils`` (split on ``_``, never fixed offsets: ids wider than seven
digits just widen the field) and rejects anything else, so a stray directory is never taken for data.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import AcidInputError
from .writeids import LONG_MIN

BASE_PREFIX = "base_"
DELTA_PREFIX = "delta_"
DELETE_DELTA_PREFIX = "delete_delta_"
BUCKET_PREFIX = "bucket_"
ACID_VERSION_FILE = "_orc_acid_version"
METADATA_FILE = "_metadata_acid"
FLUSH_LENGTH_SUFFIX = "_flush_length"
ORC_ACID_VERSION = 2
MAX_STATEMENT_ID = 9999  # %04d field

_BASE_RE = re.compile(r"^base_(-?[0-9]+)(?:_v([0-9]+))?$")
_DELTA_RE = re.compile(r"^(delete_delta|delta)_([0-9]+)_([0-9]+)(?:_([0-9]+))?(?:_v([0-9]+))?$")
_BUCKET_RE = re.compile(r"^bucket_([0-9]+)(?:_([0-9]+))?$")
_ORIGINAL_RE = re.compile(r"^([0-9]+)_([0-9]+)(?:_copy_([0-9]+))?$")


class NameError_(AcidInputError):
    """A name that is not a valid ACID directory or file name."""


@dataclass(frozen=True, order=False)
class ParsedBase:
    """``base_<writeId>[_v<visibilityTxnId>]``."""

    write_id: int
    visibility_txn_id: int = 0
    name: str = ""

    @property
    def kind(self) -> str:
        return "base"


@dataclass(frozen=True)
class ParsedDelta:
    """``[delete_]delta_<min>_<max>[_<stmt>][_v<visibilityTxnId>]``; statement id -1 if absent."""

    min_write_id: int
    max_write_id: int
    statement_id: int = -1
    visibility_txn_id: int = 0
    is_delete: bool = False
    name: str = ""

    @property
    def kind(self) -> str:
        return "delete_delta" if self.is_delete else "delta"

    def sort_key(self) -> tuple:
        """Hive's ``ParsedDeltaLight.compareTo``: min ASC, max DESC, statement ASC, then name."""
        return (self.min_write_id, -self.max_write_id, self.statement_id, self.name)


def parse_base(name: str) -> ParsedBase:
    m = _BASE_RE.match(name)
    if not m:
        raise NameError_(f"not a base directory name: {name!r} (expected base_<writeId>[_v<txnId>])")
    wid = int(m.group(1))
    if wid < LONG_MIN:
        raise NameError_(f"base write id out of range in {name!r}")
    return ParsedBase(wid, int(m.group(2) or 0), name)


def parse_delta(name: str) -> ParsedDelta:
    m = _DELTA_RE.match(name)
    if not m:
        raise NameError_(
            f"not a delta directory name: {name!r} (expected [delete_]delta_<min>_<max>[_<stmt>][_v<txnId>])")
    lo, hi = int(m.group(2)), int(m.group(3))
    if hi < lo:
        raise NameError_(f"delta {name!r} has max write id {hi} below min write id {lo}")
    stmt = int(m.group(4)) if m.group(4) is not None else -1
    return ParsedDelta(lo, hi, stmt, int(m.group(5) or 0), m.group(1) == "delete_delta", name)


def parse_dir(name: str) -> ParsedBase | ParsedDelta:
    """Parse a base or (delete) delta directory name; anything else is an error."""
    if name.startswith(BASE_PREFIX):
        return parse_base(name)
    if name.startswith(DELTA_PREFIX) or name.startswith(DELETE_DELTA_PREFIX):
        return parse_delta(name)
    raise NameError_(f"not an ACID directory name: {name!r}")


def _ids(value: int, what: str) -> str:
    if value < 0:
        raise NameError_(f"{what} must be >= 0, got {value}")
    return f"{value:07d}"


def base_name(write_id: int, visibility_txn_id: int = 0) -> str:
    """``base_0000010`` or, for compactor output, ``base_0000010_v0000042``."""
    name = f"base_{write_id:07d}" if write_id >= 0 else f"base_{write_id}"
    return name + (f"_v{_ids(visibility_txn_id, 'visibility txn id')}" if visibility_txn_id else "")


def delta_name(min_write_id: int, max_write_id: int, statement_id: int = -1,
               visibility_txn_id: int = 0, delete: bool = False) -> str:
    """``delta_0000005_0000005_0000`` (DML) or ``delta_0000001_0000009_v0000042`` (compactor)."""
    if max_write_id < min_write_id:
        raise NameError_(f"delta max write id {max_write_id} is below min write id {min_write_id}")
    if statement_id > MAX_STATEMENT_ID:
        raise NameError_(f"statement id {statement_id} exceeds {MAX_STATEMENT_ID}")
    name = (DELETE_DELTA_PREFIX if delete else DELTA_PREFIX) + \
        f"{_ids(min_write_id, 'write id')}_{_ids(max_write_id, 'write id')}"
    if statement_id >= 0:
        name += f"_{statement_id:04d}"
    if visibility_txn_id:
        name += f"_v{_ids(visibility_txn_id, 'visibility txn id')}"
    return name


def bucket_file_name(bucket_id: int, attempt: int | None = None) -> str:
    if not 0 <= bucket_id <= 99999:
        raise NameError_(f"bucket id {bucket_id} out of range 0..99999")
    return f"bucket_{bucket_id:05d}" + (f"_{attempt}" if attempt is not None else "")


def parse_bucket_file(name: str) -> int:
    """Bucket id of ``bucket_00003`` / ``bucket_00003_1``; raises for other names."""
    m = _BUCKET_RE.match(name)
    if not m:
        raise NameError_(f"not a bucket file name: {name!r} (expected bucket_NNNNN[_attempt])")
    return int(m.group(1))


def is_bucket_file(name: str) -> bool:
    return bool(_BUCKET_RE.match(name))


@dataclass(frozen=True)
class OriginalFile:
    """A pre-ACID ("original") file ``000001_0[_copy_2]``: bucket id 1, copy number 2."""

    bucket_id: int
    copy: int
    name: str


def parse_original_file(name: str) -> OriginalFile | None:
    """Hive's ``ORIGINAL_PATTERN`` / ``ORIGINAL_PATTERN_COPY``, or None for other names."""
    m = _ORIGINAL_RE.match(name)
    if not m:
        return None
    return OriginalFile(int(m.group(1)), int(m.group(3) or 0), name)


def is_hidden(name: str) -> bool:
    """Hive's hidden-file filter: names starting with ``_`` or ``.``, except the ACID markers."""
    return (name.startswith("_") or name.startswith(".")) and name not in (ACID_VERSION_FILE, METADATA_FILE)

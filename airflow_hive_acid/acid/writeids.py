"""Snapshots in Hive's string forms: ValidTxnList and ValidWriteIdList.

A reader's snapshot is a high watermark plus the ids below it that are not committed (open or
aborted). The string forms are exactly Hive's (``storage-api`` ``ValidReadTxnList`` and
``ValidReaderWriteIdList``) so they can be passed to and taken from Hive tooling unchanged.
"""
from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, field

from .errors import AcidInputError

LONG_MAX = 9223372036854775807
LONG_MIN = -9223372036854775808
_MIN_RANGE_LENGTH = 5  # Hive 4 writes runs of at least this many ids as "a-b"


class SnapshotStringError(AcidInputError):
    """A malformed ValidTxnList / ValidWriteIdList string."""


class RangeResponse(enum.Enum):
    """How many ids of a range a snapshot considers valid (or aborted)."""

    NONE = "NONE"
    SOME = "SOME"
    ALL = "ALL"


def _parse_long(text: str, what: str, source: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise SnapshotStringError(f"malformed {what} {text!r} in {source!r}: not an integer") from None
    if not LONG_MIN <= value <= LONG_MAX:
        raise SnapshotStringError(f"{what} {text!r} in {source!r} does not fit in a 64-bit long")
    return value


def _parse_id_list(text: str, what: str, source: str, ranges: bool) -> list[int]:
    """Comma list of ids; with ``ranges`` also Hive 4's ``a-b`` runs."""
    if text == "":
        return []
    ids: list[int] = []
    for part in text.split(","):
        if ranges and "-" in part[1:]:
            lo_s, hi_s = part.split("-", 1)
            lo, hi = _parse_long(lo_s, what, source), _parse_long(hi_s, what, source)
            if hi < lo:
                raise SnapshotStringError(f"malformed {what} range {part!r} in {source!r}")
            ids.extend(range(lo, hi + 1))
        else:
            ids.append(_parse_long(part, what, source))
    return ids


def _format_ranges(ids: list[int]) -> str:
    out: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        if j - i + 1 >= _MIN_RANGE_LENGTH:
            out.append(f"{ids[i]}-{ids[j]}")
        else:
            out.extend(str(x) for x in ids[i : j + 1])
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True)
class _Exceptions:
    """Sorted invalid ids below the high watermark, each open or aborted."""

    high_watermark: int
    open_ids: tuple[int, ...] = ()
    aborted_ids: tuple[int, ...] = ()
    _sorted: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _aborted: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "open_ids", tuple(sorted(self.open_ids)))
        object.__setattr__(self, "aborted_ids", tuple(sorted(self.aborted_ids)))
        both = set(self.open_ids) & set(self.aborted_ids)
        if both:
            raise SnapshotStringError(f"ids {sorted(both)} are listed both open and aborted")
        object.__setattr__(self, "_sorted", tuple(sorted(self.open_ids + self.aborted_ids)))
        object.__setattr__(self, "_aborted", frozenset(self.aborted_ids))

    def _is_exception(self, x: int) -> bool:
        i = bisect.bisect_left(self._sorted, x)
        return i < len(self._sorted) and self._sorted[i] == x

    def _count_in(self, lo: int, hi: int, ids: tuple[int, ...]) -> int:
        return bisect.bisect_right(ids, hi) - bisect.bisect_left(ids, lo)

    @property
    def exceptions(self) -> tuple[int, ...]:
        return self._sorted


@dataclass(frozen=True)
class ValidTxnList(_Exceptions):
    """``<hwm>:<minOpenTxn>:<open>:<aborted>`` — which transactions a reader sees as committed."""

    min_open_txn: int = LONG_MAX

    def is_txn_valid(self, txn_id: int) -> bool:
        return txn_id <= self.high_watermark and not self._is_exception(txn_id)

    def is_txn_aborted(self, txn_id: int) -> bool:
        return txn_id in self._aborted

    def to_string(self) -> str:
        """Hive 4 form: runs of five or more ids are written ``a-b``."""
        return (f"{self.high_watermark}:{self.min_open_txn}:"
                f"{_format_ranges(list(self.open_ids))}:{_format_ranges(list(self.aborted_ids))}")

    __str__ = to_string

    @classmethod
    def parse(cls, text: str) -> ValidTxnList:
        """Parse Hive 3 (plain lists) or Hive 4 (``a-b`` runs) strings; "" means all valid."""
        if not isinstance(text, str):
            raise SnapshotStringError(f"ValidTxnList must be a string, got {type(text).__name__}")
        if text == "":
            return cls(LONG_MAX)
        parts = text.split(":")
        if len(parts) < 2 or len(parts) > 4:
            raise SnapshotStringError(
                f"malformed ValidTxnList {text!r}: expected <hwm>:<minOpenTxn>:<open>:<aborted>")
        hwm = _parse_long(parts[0], "high watermark", text)
        min_open = _parse_long(parts[1], "min open txn", text)
        open_ids = _parse_id_list(parts[2], "open txn id", text, True) if len(parts) > 2 else []
        aborted = _parse_id_list(parts[3], "aborted txn id", text, True) if len(parts) > 3 else []
        _check_below(hwm, open_ids + aborted, "txn", text)
        return cls(hwm, tuple(open_ids), tuple(aborted), min_open_txn=min_open)


def _check_below(hwm: int, ids: list[int], what: str, text: str) -> None:
    above = [x for x in ids if x > hwm]
    if above:
        raise SnapshotStringError(f"malformed snapshot {text!r}: {what} ids {above} above high watermark {hwm}")


@dataclass(frozen=True)
class ValidWriteIdList(_Exceptions):
    """``<db.table>:<hwm>:<minOpenWriteId>:<open>:<aborted>`` — a reader's view of one table.

    ``is_write_id_valid`` and the range checks follow ``ValidReaderWriteIdList``; the compactor
    and cleaner variants override only what Hive's subclasses override.
    """

    table: str | None = None
    min_open_write_id: int = LONG_MAX

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.open_ids:
            lowest_open = self.open_ids[0]
            if self.min_open_write_id == LONG_MAX or self.min_open_write_id > lowest_open:
                object.__setattr__(self, "min_open_write_id", lowest_open)
        elif not self._sorted:
            object.__setattr__(self, "min_open_write_id", LONG_MAX)

    def as_of(self, write_id: int) -> ValidWriteIdList:
        """The snapshot as it was when ``write_id`` was the high watermark: everything above it
        invisible (a read of an older version of the table)."""
        if write_id < 0 or write_id > self.high_watermark:
            raise AcidInputError(f"write id {write_id} is outside 0..{self.high_watermark} "
                                 f"(the high watermark of {self.table or 'the table'})")
        return ValidWriteIdList(write_id, tuple(i for i in self.open_ids if i <= write_id),
                                tuple(i for i in self.aborted_ids if i <= write_id), table=self.table)

    # -- reader semantics ----------------------------------------------------------------
    def is_write_id_valid(self, write_id: int) -> bool:
        return write_id <= self.high_watermark and not self._is_exception(write_id)

    def is_write_id_aborted(self, write_id: int) -> bool:
        return write_id in self._aborted

    def is_valid_base(self, write_id: int) -> bool:
        """A (compacted) base is usable only if no open write id lies at or below it."""
        return write_id < self.min_open_write_id and write_id <= self.high_watermark

    def is_write_id_range_valid(self, lo: int, hi: int) -> RangeResponse:
        if lo > self.high_watermark:
            return RangeResponse.NONE
        if self._sorted and self._sorted[0] > hi:
            return RangeResponse.ALL
        count = max(0, hi - self.high_watermark) + self._count_in(lo, hi, self._sorted)
        if count == 0:
            return RangeResponse.ALL
        if count == hi - lo + 1:
            return RangeResponse.NONE
        return RangeResponse.SOME

    def is_write_id_range_aborted(self, lo: int, hi: int) -> RangeResponse:
        if self.high_watermark < lo:
            return RangeResponse.NONE
        count = self._count_in(lo, hi, self.aborted_ids)
        if count == 0:
            return RangeResponse.NONE
        if count == hi - lo + 1:
            return RangeResponse.ALL
        return RangeResponse.SOME

    @property
    def min_open(self) -> int | None:
        return None if self.min_open_write_id == LONG_MAX else self.min_open_write_id

    # -- strings -----------------------------------------------------------------------
    def to_string(self) -> str:
        name = self.table if self.table is not None else "null"
        return (f"{name}:{self.high_watermark}:{self.min_open_write_id}:"
                f"{','.join(map(str, self.open_ids))}:{','.join(map(str, self.aborted_ids))}")

    __str__ = to_string

    @classmethod
    def parse(cls, text: str) -> ValidWriteIdList:
        """Parse ``db.table:hwm:minOpen:open:aborted`` (Hive's ``ValidReaderWriteIdList``)."""
        if not isinstance(text, str):
            raise SnapshotStringError(f"ValidWriteIdList must be a string, got {type(text).__name__}")
        if text == "":
            raise SnapshotStringError("empty ValidWriteIdList: a reader must know its table's snapshot")
        parts = text.split(":")
        if not 3 <= len(parts) <= 5:
            raise SnapshotStringError(
                f"malformed ValidWriteIdList {text!r}: expected <db.table>:<hwm>:<minOpenWriteId>:<open>:<aborted>")
        table = None if parts[0].lower() == "null" else parts[0]
        if table is not None and (table.count(".") != 1 or not all(table.split("."))):
            raise SnapshotStringError(f"malformed ValidWriteIdList {text!r}: table {table!r} is not db.table")
        hwm = _parse_long(parts[1], "high watermark", text)
        if hwm < 0:
            raise SnapshotStringError(f"malformed ValidWriteIdList {text!r}: high watermark {hwm} is below 0 "
                                      "(a table without writes has high watermark 0)")
        min_open = _parse_long(parts[2], "min open write id", text)
        open_ids = _parse_id_list(parts[3], "open write id", text, False) if len(parts) > 3 else []
        aborted = _parse_id_list(parts[4], "aborted write id", text, False) if len(parts) > 4 else []
        if len(set(open_ids + aborted)) != len(open_ids) + len(aborted):
            raise SnapshotStringError(f"malformed ValidWriteIdList {text!r}: an id is listed twice")
        _check_below(hwm, open_ids + aborted, "write", text)
        if open_ids and min_open != min(open_ids):
            raise SnapshotStringError(
                f"malformed ValidWriteIdList {text!r}: min open write id {min_open} is not the lowest open id")
        return cls(hwm, tuple(open_ids), tuple(aborted), table=table, min_open_write_id=min_open)

    # -- derived views -----------------------------------------------------------------
    def for_compactor(self) -> ValidCompactorWriteIdList:
        """What a compactor may compact: everything below the lowest open id, aborts excluded."""
        hwm = self.high_watermark if not self.open_ids else self.open_ids[0] - 1
        aborted = tuple(a for a in self.aborted_ids if a <= hwm)
        return ValidCompactorWriteIdList(hwm, (), aborted, table=self.table)

    def for_cleaner(self, highest_write_id: int) -> ValidCleanerWriteIdList:
        """The cleaner's view: a reader list capped at the compaction's highest write id."""
        hwm = min(self.high_watermark, highest_write_id)
        return ValidCleanerWriteIdList(
            hwm, tuple(o for o in self.open_ids if o <= hwm), tuple(a for a in self.aborted_ids if a <= hwm),
            table=self.table)


@dataclass(frozen=True)
class ValidCompactorWriteIdList(ValidWriteIdList):
    """Hive's ``ValidCompactorWriteIdList``: a range is ALL valid or NONE, never SOME. Ids above
    the high watermark are dropped, as Hive's constructor drops them: the compactor never sees
    them, and the string stays one its parser takes back."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "open_ids", tuple(i for i in self.open_ids if i <= self.high_watermark))
        object.__setattr__(self, "aborted_ids", tuple(i for i in self.aborted_ids if i <= self.high_watermark))
        super().__post_init__()

    def is_write_id_range_valid(self, lo: int, hi: int) -> RangeResponse:
        return RangeResponse.ALL if self.high_watermark >= hi else RangeResponse.NONE


@dataclass(frozen=True)
class ValidCleanerWriteIdList(ValidWriteIdList):
    """Hive 4's ``ValidCleanerWriteIdList``: nothing that spans past the cleaner's watermark."""

    def is_write_id_range_valid(self, lo: int, hi: int) -> RangeResponse:
        if hi > self.high_watermark:
            return RangeResponse.NONE
        return super().is_write_id_range_valid(lo, hi)

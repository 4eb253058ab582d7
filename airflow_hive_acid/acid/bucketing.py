"""Hive's bucketing hash: which ``bucket_N`` file a row belongs in.

A bucketed (``CLUSTERED BY (c1, ...) INTO n BUCKETS``) ACID table is only readable and
joinable by Hive/Trino if every row sits in the bucket *they* would compute, so this module
reproduces Hive's hash bit for bit:

* ``bucket = (hash & Integer.MAX_VALUE) % numBuckets``
  (``ObjectInspectorUtils.getBucketNumber(int, int)``);
* ``hash = 31 * hash + fieldHash(col)`` over the bucket columns, with Java ``int`` overflow;
* ``fieldHash`` is ``hashCodeMurmur`` for ``bucketing_version=2`` (Hive 3+ tables) and the
  old Java-style ``hashCode`` for ``bucketing_version=1``; NULL hashes to 0;
* ``hashCodeMurmur`` feeds big-endian bytes of the value to Hive's ``Murmur3.hash32``
  (x86_32, seed 104729, 1-3 tail bytes *sign-extended* instead of masked).

Semantics follow apache/hive ``serde/.../objectinspector/ObjectInspectorUtils.java``
(``getBucketNumber``, ``getBucketHashCode``, ``hashCodeMurmur``, ``hashCode``),
``storage-api/.../hive/common/util/Murmur3.java``, ``serde/.../io/TimestampWritableV2.java``
(``getBytes``), ``storage-api/.../io/HiveDecimalWritable.java`` (``getInternalStorage``,
``hashCode``) and were cross-checked with trinodb/trino ``HiveBucketingV1/V2.java``.
Quirks reproduced on purpose:

* FLOAT (v2): ``putFloat(Float.floatToIntBits(f))`` widens the *int* bit pattern to a float
  (round to nearest) and hashes that float's bits; DOUBLE (v2) likewise widens the ``long``
  from ``doubleToLongBits`` to a double.  NaNs are canonicalised first.
* TINYINT (v2) is not hashed: the value itself is the field hash.
* STRING (v1) starts the ``31*r + byte`` loop at 0, VARCHAR/CHAR/BINARY (v1, ``Text`` /
  ``BytesWritable.hashCode``) at 1; bytes are signed.  CHAR drops trailing spaces.
* DECIMAL: the value is normalised (trailing fractional zeros stripped) as Hive's
  ``HiveDecimalWritable`` keeps it; v2 hashes ``BigInteger.toByteArray()`` of the unscaled
  value, v1 is ``BigDecimal.hashCode()`` (``31 * BigInteger.hashCode() + scale``).
* TIMESTAMP: v2 hashes the ``TimestampWritableV2`` serialisation (4-byte seconds with a flag
  bit, reversed-nanos VInt, optional high-seconds VLong) of the wall-clock time taken as UTC;
  v1 is ``(int)(s ^ s >>> 32)`` of ``seconds << 30 | nanos`` (Hive goes through
  ``java.sql.Timestamp`` in the JVM's zone: this assumes the JVM runs in UTC).
* BINARY (v2): Hive hashes ``BytesWritable.getBytes()``, i.e. the whole backing array, which
  can be longer than the value when the writable was reused; this hashes exactly the value's
  bytes (what a freshly built ``BytesWritable`` gives).  Trino refuses binary bucketing.

The vectorised entry point :func:`bucket_ids` works on Arrow arrays; fixed-width types are
hashed with numpy ``uint32`` arithmetic, strings/binary with a block-parallel Murmur3 over
the Arrow data buffer, decimals up to 18 digits vectorised too; wide decimals, timestamps and
complex types loop in Python.  The scalar path (:func:`bucket_id`) is plain Python and
serves as the reference the vectorised path is tested against.
"""
from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import math
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from .errors import AcidInputError
from .types import HiveType, parse_type

__all__ = [
    "HIVE_MURMUR3_SEED",
    "BucketingError",
    "UnsupportedBucketTypeError",
    "murmur3_32",
    "hash_value",
    "bucket_hash_code",
    "bucket_number",
    "bucket_id",
    "column_hashes",
    "bucket_hash_codes",
    "bucket_ids",
]

HIVE_MURMUR3_SEED = 104729  # Murmur3.DEFAULT_SEED

HiveTypeLike = str | HiveType


class BucketingError(AcidInputError):
    """Bad input to the bucketing hash: bucket count, version, value or column mismatch."""


class UnsupportedBucketTypeError(BucketingError, NotImplementedError):
    """A Hive type whose bucketing hash is not implemented here."""


# --------------------------------------------------------------------------------------------
# Murmur3 x86_32, Hive flavour: scalar
# --------------------------------------------------------------------------------------------
_M32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_N = 0xE6546B64
_F1 = 0x85EBCA6B
_F2 = 0xC2B2AE35
_NP_BLOCKS_MIN = 32  # from this many 4-byte blocks on, the k-mixing of a scalar runs in numpy


def _signed32(x: int) -> int:
    x &= _M32
    return x - 0x100000000 if x & 0x80000000 else x


def _fmix32(h: int, length: int) -> int:
    h ^= length & _M32
    h ^= h >> 16
    h = (h * _F1) & _M32
    h ^= h >> 13
    h = (h * _F2) & _M32
    h ^= h >> 16
    return h


def _murmur3_u32(data: bytes, seed: int = HIVE_MURMUR3_SEED) -> int:
    n = len(data)
    h = seed & _M32
    nblocks = n >> 2
    if nblocks:
        if nblocks >= _NP_BLOCKS_MIN:
            ks = _np_mix_k(np.frombuffer(data, dtype="<u4", count=nblocks).copy()).tolist()
            for k in ks:
                h ^= k
                h = ((((h << 13) | (h >> 19)) & _M32) * 5 + _N) & _M32
        else:
            for k in struct.unpack_from(f"<{nblocks}I", data):
                k = (k * _C1) & _M32
                k = ((k << 15) | (k >> 17)) & _M32
                h ^= (k * _C2) & _M32
                h = ((((h << 13) | (h >> 19)) & _M32) * 5 + _N) & _M32
    tail = n & 3
    if tail:
        # Hive does ``k1 ^= data[i] << s`` on Java (signed) bytes: sign-extended, not masked.
        i = nblocks << 2
        k1 = 0
        if tail == 3:
            b = data[i + 2]
            k1 ^= ((b - 256) if b & 0x80 else b) << 16
        if tail >= 2:
            b = data[i + 1]
            k1 ^= ((b - 256) if b & 0x80 else b) << 8
        b = data[i]
        k1 ^= (b - 256) if b & 0x80 else b
        k1 = (k1 * _C1) & _M32
        k1 = ((k1 << 15) | (k1 >> 17)) & _M32
        h ^= (k1 * _C2) & _M32
    return _fmix32(h, n)


def murmur3_32(data: bytes, seed: int = HIVE_MURMUR3_SEED) -> int:
    """Hive's ``Murmur3.hash32`` as a signed Java int: the hash bucketing version 2 is built on."""
    if isinstance(data, str):
        raise TypeError("murmur3_32 hashes bytes; encode the str (Hive uses UTF-8)")
    return _signed32(_murmur3_u32(bytes(data), seed))


# --------------------------------------------------------------------------------------------
# Murmur3: vectorised (numpy uint32 arithmetic; integer overflow wraps silently on arrays)
# --------------------------------------------------------------------------------------------
def _np_rotl(x: np.ndarray, r: int) -> np.ndarray:
    t = x >> np.uint32(32 - r)
    x <<= np.uint32(r)
    x |= t
    return x


def _np_mix_k(k: np.ndarray) -> np.ndarray:
    """``k *= C1; k = rotl(k, 15); k *= C2`` in place on a uint32 array."""
    k *= np.uint32(_C1)
    _np_rotl(k, 15)
    k *= np.uint32(_C2)
    return k


def _np_mix_h(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    """One body block: ``h ^= mixK(k); h = rotl(h, 13) * 5 + N``; mutates both."""
    h ^= _np_mix_k(k)
    _np_rotl(h, 13)
    h *= np.uint32(5)
    h += np.uint32(_N)
    return h


def _np_fmix(h: np.ndarray, length: int | np.ndarray) -> np.ndarray:
    if isinstance(length, np.ndarray):
        h ^= length.astype(np.uint32)
    else:
        h ^= np.uint32(length)
    h ^= h >> np.uint32(16)
    h *= np.uint32(_F1)
    h ^= h >> np.uint32(13)
    h *= np.uint32(_F2)
    h ^= h >> np.uint32(16)
    return h


def _bswap32(x: np.ndarray) -> np.ndarray:
    """The uint32 Murmur3 reads (little-endian) from a value's 4 big-endian bytes."""
    return x.astype(np.uint32, copy=False).byteswap()


def _np_murmur_be32(v: np.ndarray) -> np.ndarray:
    """Murmur3 of each int32/uint32 value's 4 big-endian bytes (``putInt``)."""
    k = _bswap32(v.view(np.uint32) if v.dtype.itemsize == 4 else v.astype(np.uint32))
    h = np.full(k.shape, HIVE_MURMUR3_SEED, dtype=np.uint32)
    _np_mix_h(h, k)
    return _np_fmix(h, 4)


def _np_murmur_be64(v: np.ndarray) -> np.ndarray:
    """Murmur3 of each int64 value's 8 big-endian bytes (``putLong``)."""
    u = v.view(np.uint64)
    h = np.full(u.shape, HIVE_MURMUR3_SEED, dtype=np.uint32)
    _np_mix_h(h, (u >> np.uint64(32)).astype(np.uint32).byteswap())
    _np_mix_h(h, u.astype(np.uint32).byteswap())
    return _np_fmix(h, 8)


def _np_murmur_be16(v: np.ndarray) -> np.ndarray:
    """Murmur3 of each int16 value's 2 big-endian bytes (``putShort``): tail only."""
    v = v.astype(np.int16, copy=False)
    hi = (v >> np.int16(8)).astype(np.int32)            # byte 0, sign-extended
    lo = v.astype(np.int8).astype(np.int32)             # byte 1, sign-extended
    k = (hi ^ (lo << np.int32(8))).view(np.uint32)
    h = np.full(k.shape, HIVE_MURMUR3_SEED, dtype=np.uint32)
    h ^= _np_mix_k(k)
    return _np_fmix(h, 2)


_VEC_MAX_BLOCKS = 64  # rows longer than 256 bytes are hashed one at a time


class _RowBlocks:
    """Column-wise access to the 4-byte blocks of many byte strings in one buffer.

    Rows are sorted by (``start % 4``, descending block count): within an alignment class
    the rows that still have a block ``j`` are a prefix, and each block is one gather from a
    little-endian uint32 view of the buffer at that alignment.  ``data`` must extend at least
    4 bytes past the end of every row.
    """

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray):
        nblocks = lengths >> 2
        align = starts & 3
        max_nb = int(nblocks.max()) if starts.shape[0] else 0
        width = max_nb + 1
        key = (align * width + (max_nb - nblocks)).astype(np.uint16)  # radix-sortable
        self.order = np.argsort(key, kind="stable")
        skey = key[self.order]
        self.lengths = lengths[self.order]
        self.nblocks = self.lengths >> 2
        self.word_index = starts[self.order] >> 2  # the class's word view starts at byte a
        buf = data if data.flags.c_contiguous else np.ascontiguousarray(data)
        self.words = [np.frombuffer(buf, dtype="<u4", offset=a, count=(buf.shape[0] - a) >> 2) for a in range(4)]
        # Per alignment class: its row range and, for each block j, the end of the active prefix.
        self.classes: list[tuple[int, int, int, list[int]]] = []
        for a in range(4):
            lo = int(np.searchsorted(skey, a * width, side="left"))
            hi = int(np.searchsorted(skey, (a + 1) * width, side="left"))
            if lo == hi:
                continue
            ends = np.searchsorted(skey, a * width + max_nb - np.arange(int(self.nblocks[lo])), side="left")
            self.classes.append((a, lo, hi, ends.tolist()))

    def blocks(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield ``(lo, hi, k)``: block ``j`` (uint32, LE) of sorted rows ``lo:hi``, j ascending."""
        wi = self.word_index
        for a, lo, _hi, ends in self.classes:
            w = self.words[a]
            for j, hi in enumerate(ends):
                yield lo, hi, w[wi[lo:hi] + j]

    def tail_words(self) -> np.ndarray:
        """The 4 bytes (LE uint32) starting at each sorted row's tail."""
        out = np.empty(self.order.shape[0], dtype=np.uint32)
        for a, lo, hi, _ends in self.classes:
            out[lo:hi] = self.words[a][self.word_index[lo:hi] + self.nblocks[lo:hi]]
        return out

    def unsort(self, sorted_values: np.ndarray) -> np.ndarray:
        out = np.empty_like(sorted_values)
        out[self.order] = sorted_values
        return out


def _signed_byte_u32(w: np.ndarray, shift: int) -> np.ndarray:
    """Byte ``shift/8`` of each word sign-extended to 32 bits (a Java ``byte`` widened to int)."""
    b = (w >> np.uint32(shift)) & np.uint32(0xFF)
    return b - ((b & np.uint32(0x80)) << np.uint32(1))


def _split_long_rows(fn: Callable[..., np.ndarray], data: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                     one: Callable[..., int], *args: Any) -> np.ndarray:
    """Vectorised ``fn`` on rows of at most ``_VEC_MAX_BLOCKS`` blocks, scalar ``one`` on the rest."""
    long_rows = np.flatnonzero((lengths >> 2) > _VEC_MAX_BLOCKS)
    if not long_rows.size:
        return fn(data, starts, lengths, *args)
    short = np.ones(starts.shape[0], dtype=bool)
    short[long_rows] = False
    h = np.empty(starts.shape[0], dtype=np.uint32)
    h[short] = fn(data, starts[short], lengths[short], *args)
    for i in long_rows.tolist():
        s = int(starts[i])
        h[i] = one(data[s:s + int(lengths[i])].tobytes(), *args)
    return h


def _np_murmur_varlen(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Murmur3 (Hive flavour) of ``data[starts[i]:starts[i]+lengths[i]]`` for every row.

    ``data`` is uint8 and must extend at least 4 bytes past the end of every row (callers pad
    it).  Rows longer than ``4 * _VEC_MAX_BLOCKS`` bytes are hashed one by one.
    """
    return _split_long_rows(_np_murmur_varlen_short, data, starts, lengths, _murmur3_u32)


def _np_murmur_varlen_short(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    n = starts.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    rb = _RowBlocks(data, starts, lengths)
    h = np.full(n, HIVE_MURMUR3_SEED, dtype=np.uint32)
    for lo, hi, k in rb.blocks():
        _np_mix_h(h[lo:hi], k)
    tail = (rb.lengths & 3).astype(np.uint32)
    if tail.any():
        # Hive's tail: ``k1 ^= data[i] << 8i`` on signed Java bytes, i.e. sign-extended: a
        # byte >= 0x80 also sets every higher bit of k1.
        w = rb.tail_words()
        k1 = np.zeros(n, dtype=np.uint32)
        for i in range(3):
            part = _signed_byte_u32(w, 8 * i) << np.uint32(8 * i)
            k1 ^= np.where(tail > i, part, np.uint32(0))
        h ^= _np_mix_k(k1)  # mixK(0) == 0: rows without a tail keep h
    _np_fmix(h, rb.lengths)
    return rb.unsort(h)


def _java_bytes_hash(b: bytes, init: int) -> int:
    """``r = init; for b in bytes: r = 31*r + (signed) b`` (``Text``/``String``-style hash)."""
    r = init
    for x in b:
        r = (31 * r + (x - 256 if x & 0x80 else x)) & _M32
    return r


def _np_java_bytes_hash(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, init: int) -> np.ndarray:
    """:func:`_java_bytes_hash` of every row, vectorised (Java int overflow)."""
    return _split_long_rows(_np_java_bytes_hash_short, data, starts, lengths, _java_bytes_hash, init)


_P31 = np.uint32(31)
_P31_4 = np.uint32(31 ** 4)


def _np_java_bytes_hash_short(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, init: int) -> np.ndarray:
    n = starts.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    rb = _RowBlocks(data, starts, lengths)
    r = np.full(n, init & _M32, dtype=np.uint32)
    for lo, hi, w in rb.blocks():  # 4 bytes a step: r = 31^4 r + 31^3 b0 + 31^2 b1 + 31 b2 + b3
        acc = _signed_byte_u32(w, 0)
        for i in (1, 2, 3):
            acc *= _P31
            acc += _signed_byte_u32(w, 8 * i)
        rv = r[lo:hi]
        rv *= _P31_4
        rv += acc
    tail = rb.lengths & 3
    if tail.any():
        w = rb.tail_words()
        for i in range(3):
            r = np.where(tail > i, r * _P31 + _signed_byte_u32(w, 8 * i), r)
    return rb.unsort(r)


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------
_SUPPORTED_PRIMITIVES = {
    "boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "string",
    "varchar", "char", "date", "timestamp", "decimal", "binary",
}


@lru_cache(maxsize=256)
def _parse_cached(text: str) -> HiveType:
    return parse_type(text)


def _as_type(t: HiveTypeLike) -> HiveType:
    if isinstance(t, HiveType):
        ht = t
    elif isinstance(t, str):
        ht = _parse_cached(t.strip().lower())
    else:
        raise BucketingError(f"expected a Hive type string, got {t!r}")
    _check_supported(ht)
    return ht


def _check_supported(t: HiveType) -> None:
    if t.name in ("array", "map", "struct"):
        for c in t.children:
            _check_supported(c)
        return
    if t.name not in _SUPPORTED_PRIMITIVES:
        raise UnsupportedBucketTypeError(f"Hive bucketing hash is not implemented for type {t}")


def _check_version(v: int) -> bool:
    if v not in (1, 2):
        raise BucketingError(f"bucketing_version must be 1 or 2, got {v!r}")
    return v == 2


# --------------------------------------------------------------------------------------------
# Scalar hashing (reference implementation; unsigned 32-bit ints internally)
# --------------------------------------------------------------------------------------------
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_NAN_F32_BITS = 0x7FC00000
_NAN_F64_BITS = 0x7FF8000000000000


def _check_int(v: Any, bits: int, tname: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise BucketingError(f"{tname} value must be an int, got {v!r}")
    v = int(v)
    lim = 1 << (bits - 1)
    if not -lim <= v < lim:
        raise BucketingError(f"{tname} value {v} out of range")
    return v


def _float_bits(v: Any) -> int:
    """``Float.floatToIntBits``: float32 bit pattern, NaN canonicalised (signed int)."""
    f = float(v)
    if math.isnan(f):
        return _NAN_F32_BITS
    return struct.unpack("<i", struct.pack("<f", f))[0]


def _double_bits(v: Any) -> int:
    """``Double.doubleToLongBits``: float64 bit pattern, NaN canonicalised (signed long)."""
    f = float(v)
    if math.isnan(f):
        return _NAN_F64_BITS
    return struct.unpack("<q", struct.pack("<d", f))[0]


def _to_bytes(v: Any, tname: str) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise BucketingError(f"{tname} value must be str or bytes, got {v!r}")


def _date_days(v: Any) -> int:
    if isinstance(v, _dt.datetime):
        raise BucketingError(f"date value must be a datetime.date or days since epoch, got {v!r}")
    if isinstance(v, _dt.date):
        return v.toordinal() - _EPOCH_ORDINAL
    return _check_int(v, 32, "date")


def _timestamp_parts(v: Any) -> tuple[int, int]:
    """(epoch seconds, nanos) of a timestamp's wall-clock time taken as UTC."""
    if not isinstance(v, _dt.datetime):
        raise BucketingError(f"timestamp value must be a datetime.datetime, got {v!r}")
    if v.tzinfo is not None and v.utcoffset() is not None:
        v = v.astimezone(_dt.UTC)
    days = v.toordinal() - _EPOCH_ORDINAL
    seconds = days * 86400 + v.hour * 3600 + v.minute * 60 + v.second
    nanos = v.microsecond * 1000 + int(getattr(v, "nanosecond", 0) or 0)
    return seconds, nanos


def _vlong(i: int) -> bytes:
    """Hadoop ``WritableUtils.writeVLong`` / ``LazyBinaryUtils.writeVLongToByteArray``."""
    if -112 <= i <= 127:
        return bytes((i & 0xFF,))
    ln = -112
    if i < 0:
        i = ~i
        ln = -120
    tmp = i
    while tmp:
        tmp >>= 8
        ln -= 1
    nbytes = -(ln + 120) if ln < -120 else -(ln + 112)
    return bytes((ln & 0xFF,)) + i.to_bytes(nbytes, "big")


def _timestamp_bytes(seconds: int, nanos: int) -> bytes:
    """``TimestampWritableV2.getBytes()`` (``convertTimestampToBytes``)."""
    has_second_vint = seconds < 0 or seconds > 0x7FFFFFFF
    decimal = 0
    if nanos:
        n = nanos
        for _ in range(9):  # the 9-digit nanos, digits reversed
            decimal = decimal * 10 + n % 10
            n //= 10
    first = seconds & _M32
    if decimal or has_second_vint:
        first |= 0x80000000
    else:
        first &= 0x7FFFFFFF
    out = first.to_bytes(4, "big")
    if has_second_vint or decimal:
        out += _vlong(-decimal - 1 if has_second_vint else decimal)
    if has_second_vint:
        out += _vlong(seconds >> 31)
    return out


def _timestamp_old_hash(seconds: int, nanos: int) -> int:
    s = ((seconds << 30) | nanos) & 0xFFFFFFFFFFFFFFFF
    return (s ^ (s >> 32)) & _M32


def _normalize_decimal(unscaled: int, scale: int, t: HiveType) -> tuple[int, int]:
    """Round (HALF_UP) to the column scale, check precision, strip trailing fractional zeros."""
    precision, col_scale = t.params if t.params else (10, 0)
    if scale < 0:
        unscaled *= 10 ** (-scale)
        scale = 0
    if scale > col_scale:
        d = 10 ** (scale - col_scale)
        q, r = divmod(abs(unscaled), d)
        if 2 * r >= d:
            q += 1
        unscaled = -q if unscaled < 0 else q
        scale = col_scale
    if unscaled == 0:
        return 0, 0
    if len(str(abs(unscaled))) - scale > precision - col_scale:
        raise BucketingError(f"value {unscaled}E-{scale} does not fit {t}")
    while scale > 0 and unscaled % 10 == 0:
        unscaled //= 10
        scale -= 1
    return unscaled, scale


def _decimal_parts(v: Any, t: HiveType) -> tuple[int, int]:
    if isinstance(v, bool):
        raise BucketingError(f"decimal value must be a decimal.Decimal or int, got {v!r}")
    if isinstance(v, (int, np.integer)):
        return _normalize_decimal(int(v), 0, t)
    if isinstance(v, _decimal.Decimal):
        sign, digits, exponent = v.as_tuple()
        if not isinstance(exponent, int):       # 'n', 'N' or 'F': NaN, sNaN or Infinity
            raise BucketingError(f"decimal value must be finite, got {v!r}")
        unscaled = int("".join(map(str, digits)) or "0")
        return _normalize_decimal(-unscaled if sign else unscaled, -exponent, t)
    raise BucketingError(f"decimal value must be a decimal.Decimal or int, got {v!r}")


def _biginteger_bytes(unscaled: int) -> bytes:
    """``BigInteger.toByteArray()``: minimal big-endian two's complement."""
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def _biginteger_hash(unscaled: int) -> int:
    """``BigInteger.hashCode()``: 31-polynomial over the 32-bit magnitude words, times signum."""
    mag = abs(unscaled)
    words = []
    while mag:
        words.append(mag & _M32)
        mag >>= 32
    h = 0
    for w in reversed(words):
        h = (31 * h + w) & _M32
    return (-h) & _M32 if unscaled < 0 else h


def _struct_values(v: Any, t: HiveType) -> list:
    if isinstance(v, dict):
        return [v.get(name) for name in t.field_names]
    if isinstance(v, (list, tuple)) and len(v) == len(t.children):
        return list(v)
    raise BucketingError(f"{t} value must be a dict or a tuple of {len(t.children)} fields, got {v!r}")


def _map_items(v: Any) -> Iterable:
    if isinstance(v, dict):
        return v.items()
    return v  # a list of (key, value) pairs, as pyarrow returns maps


def _hash_u32(v: Any, t: HiveType, v2: bool) -> int:
    """Field hash of one value as an unsigned 32-bit int (``hashCodeMurmur`` / ``hashCode``)."""
    if v is None:
        return 0
    name = t.name
    if name == "boolean":
        return 1 if v else 0
    if name == "tinyint":
        return _check_int(v, 8, name) & _M32
    if name == "smallint":
        x = _check_int(v, 16, name)
        return _murmur3_u32(struct.pack(">h", x)) if v2 else x & _M32
    if name == "int":
        x = _check_int(v, 32, name)
        return _murmur3_u32(struct.pack(">i", x)) if v2 else x & _M32
    if name == "date":
        x = _date_days(v)
        return _murmur3_u32(struct.pack(">i", x)) if v2 else x & _M32
    if name == "bigint":
        x = _check_int(v, 64, name)
        if v2:
            return _murmur3_u32(struct.pack(">q", x))
        u = x & 0xFFFFFFFFFFFFFFFF
        return (u ^ (u >> 32)) & _M32
    if name == "float":
        bits = _float_bits(v)
        if v2:  # putFloat(int): the int bit pattern widened to float
            return _murmur3_u32(struct.pack(">f", float(bits)))
        return bits & _M32
    if name == "double":
        bits = _double_bits(v)
        if v2:  # putDouble(long): the long bit pattern widened to double
            return _murmur3_u32(struct.pack(">d", float(bits)))
        u = bits & 0xFFFFFFFFFFFFFFFF
        return (u ^ (u >> 32)) & _M32
    if name in ("string", "varchar", "char", "binary"):
        b = _to_bytes(v, name)
        if name == "char":
            b = b.rstrip(b" ")
        if v2:
            return _murmur3_u32(b)
        return _java_bytes_hash(b, 0 if name == "string" else 1)
    if name == "timestamp":
        seconds, nanos = _timestamp_parts(v)
        if v2:
            return _murmur3_u32(_timestamp_bytes(seconds, nanos))
        return _timestamp_old_hash(seconds, nanos)
    if name == "decimal":
        unscaled, scale = _decimal_parts(v, t)
        if v2:
            return _murmur3_u32(_biginteger_bytes(unscaled))
        return (31 * _biginteger_hash(unscaled) + scale) & _M32
    if name == "array":
        r = 0
        for e in v:
            r = (31 * r + _hash_u32(e, t.children[0], v2)) & _M32
        return r
    if name == "map":
        kt, vt = t.children
        r = 0
        for k, val in _map_items(v):
            # Hive (v2) hashes map keys with Murmur3 but map values with the old hashCode.
            r = (r + (_hash_u32(k, kt, v2) ^ _hash_u32(val, vt, False))) & _M32
        return r
    if name == "struct":
        r = 0
        for fv, ft in zip(_struct_values(v, t), t.children):
            r = (31 * r + _hash_u32(fv, ft, v2)) & _M32
        return r
    raise UnsupportedBucketTypeError(f"Hive bucketing hash is not implemented for type {t}")


def hash_value(value: Any, hive_type: HiveTypeLike, bucketing_version: int = 2) -> int:
    """One value's field hash (Hive ``hashCodeMurmur`` v2 / ``hashCode`` v1): the per-column term
    of a row's bucket hash."""
    return _signed32(_hash_u32(value, _as_type(hive_type), _check_version(bucketing_version)))


def bucket_hash_code(values: Sequence[Any], hive_types: Sequence[HiveTypeLike], bucketing_version: int = 2) -> int:
    """A row's bucket hash ``h = 31*h + fieldHash`` (signed int), as Hive combines the bucket columns."""
    v2 = _check_version(bucketing_version)
    if len(values) != len(hive_types):
        raise BucketingError(f"{len(values)} values for {len(hive_types)} bucket column types")
    h = 0
    for v, t in zip(values, hive_types):
        h = (31 * h + _hash_u32(v, _as_type(t), v2)) & _M32
    return _signed32(h)


def _check_num_buckets(num_buckets: Any) -> int:
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, (int, np.integer)):
        raise BucketingError(f"number of buckets must be an int, got {num_buckets!r}")
    if num_buckets <= 0:
        raise BucketingError(f"number of buckets must be > 0, got {num_buckets}")
    return int(num_buckets)


def bucket_number(hash_code: int, num_buckets: int) -> int:
    """Map a bucket hash to a bucket as ``ObjectInspectorUtils.getBucketNumber`` does (``(h & MAX_INT) % n``)."""
    return (int(hash_code) & 0x7FFFFFFF) % _check_num_buckets(num_buckets)


def bucket_id(values: Sequence[Any], hive_types: Sequence[HiveTypeLike], num_buckets: int,
              bucketing_version: int = 2) -> int:
    """The bucket Hive/Trino put one row in, so a single row can be routed (pure-Python reference path)."""
    n = _check_num_buckets(num_buckets)
    return bucket_number(bucket_hash_code(values, hive_types, bucketing_version), n)


# --------------------------------------------------------------------------------------------
# Vectorised hashing of Arrow arrays
# --------------------------------------------------------------------------------------------
def _as_array(col: Any) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if isinstance(col, pa.Array):
        return col
    if isinstance(col, np.ndarray):
        return pa.array(col)
    raise BucketingError(f"bucket columns must be pyarrow arrays, got {type(col).__name__}")


def _valid_mask(arr: pa.Array) -> np.ndarray | None:
    """Boolean validity per row, or None when the array has no nulls."""
    if arr.null_count == 0:
        return None
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _fixed_values(arr: pa.Array, dtype: Any) -> np.ndarray:
    """Zero-copy view of a fixed-width array's values (garbage under nulls)."""
    buf = arr.buffers()[1]
    n = len(arr)
    if buf is None or n == 0:
        return np.zeros(n, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=arr.offset + n)[arr.offset:]


def _bool_values(arr: pa.Array) -> np.ndarray:
    buf = arr.buffers()[1]
    n = len(arr)
    if buf is None or n == 0:
        return np.zeros(n, dtype=np.uint8)
    first, last = arr.offset // 8, (arr.offset + n + 7) // 8
    bits = np.unpackbits(np.frombuffer(buf, dtype=np.uint8)[first:last], bitorder="little")
    return bits[arr.offset - 8 * first:arr.offset - 8 * first + n]


def _cast(arr: pa.Array, target: pa.DataType, tname: str) -> pa.Array:
    if arr.type == target:
        return arr
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise BucketingError(f"cannot use an Arrow {arr.type} column as Hive {tname}: {e}") from e


def _varlen_parts(arr: pa.Array, tname: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uint8 data padded by 4 zero bytes, row starts, row lengths) of a string/binary array."""
    t = arr.type
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        arr = arr.cast(pa.large_binary())
        t = arr.type
    if pa.types.is_fixed_size_binary(t):
        n, w = len(arr), t.byte_width
        buf = arr.buffers()[1]
        raw = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
        data = np.concatenate([raw[arr.offset * w:(arr.offset + n) * w], np.zeros(4, np.uint8)])
        return data, np.arange(n, dtype=np.int64) * w, np.full(n, w, dtype=np.int64)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        odt: type[np.signedinteger[Any]] = np.int32
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        odt = np.int64
    else:
        raise BucketingError(f"cannot use an Arrow {t} column as Hive {tname}")
    n = len(arr)
    bufs = arr.buffers()
    if n == 0 or bufs[1] is None:
        return np.zeros(4, np.uint8), np.zeros(n, np.int64), np.zeros(n, np.int64)
    offs = np.frombuffer(bufs[1], dtype=odt, count=arr.offset + n + 1)[arr.offset:].astype(np.int64)
    lo, hi = int(offs[0]), int(offs[-1])
    raw = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    data = np.empty(hi - lo + 4, dtype=np.uint8)
    data[: hi - lo] = raw[lo:hi]
    data[hi - lo:] = 0
    return data, offs[:-1] - lo, np.diff(offs)


def _rstrip_spaces(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Row lengths with trailing ASCII spaces dropped (``HiveCharWritable.getStrippedValue``)."""
    lengths = lengths.copy()
    active = np.flatnonzero(lengths > 0)
    while active.size:
        ends = starts[active] + lengths[active]
        active = active[data[ends - 1] == 0x20]
        lengths[active] -= 1
        active = active[lengths[active] > 0]
    return lengths


def _pylist_hashes(values: list, t: HiveType, v2: bool) -> np.ndarray:
    return np.fromiter((_hash_u32(v, t, v2) for v in values), dtype=np.uint32, count=len(values))


def _bytes_rows_murmur(rows: list) -> np.ndarray:
    """Vectorised Murmur3 of a list of ``bytes`` (``None`` rows hash to 0)."""
    n = len(rows)
    parts = [b if b is not None else b"" for b in rows]
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=n)
    data = np.frombuffer(b"".join(parts) + b"\0\0\0\0", dtype=np.uint8)
    h = _np_murmur_varlen(data, np.cumsum(lengths) - lengths, lengths)
    h[np.fromiter((b is None for b in rows), dtype=bool, count=n)] = 0
    return h


_I64_POW10 = np.array([10 ** i for i in range(19)], dtype=np.int64)


def _decimal_hashes(arr: pa.Array, t: HiveType, v2: bool) -> np.ndarray:
    at = arr.type
    if pa.types.is_integer(at):
        arr = _cast(arr, pa.int64(), "decimal")
        scale, width = 0, 8
    elif pa.types.is_decimal(at):
        scale, width = at.scale, at.byte_width
    else:
        raise BucketingError(f"cannot use an Arrow {at} column as Hive {t}")
    n = len(arr)
    precision, col_scale = t.params if t.params else (10, 0)
    valid = _valid_mask(arr)
    buf = arr.buffers()[1]
    rawb = (np.frombuffer(buf, dtype=np.uint8, count=(arr.offset + n) * width)[arr.offset * width:]
            if buf is not None and n else np.zeros(n * width, np.uint8))
    # Fast path: every unscaled value fits an int64 and needs no rounding to the column scale.
    u = None
    if scale <= col_scale:
        if width <= 8:
            u = rawb.view({4: "<i4", 8: "<i8"}[width]).astype(np.int64)
        else:
            words = rawb.view("<u8").reshape(n, width // 8)
            lo = words[:, 0].view(np.int64)
            sign_ext = np.where(lo < 0, np.uint64(0xFFFFFFFFFFFFFFFF), np.uint64(0))
            if np.all(words[:, 1:] == sign_ext[:, None]):
                u = lo.copy()
        if u is not None:
            if valid is not None:
                u[~valid] = 0
            if np.any(u == np.iinfo(np.int64).min):
                u = None
    if u is None:
        # Wide values, or values to round: exact Python integers, one row at a time.
        vm = valid.tolist() if valid is not None else [True] * n
        parts = [
            _normalize_decimal(int.from_bytes(rawb[i * width:(i + 1) * width].tobytes(), "little", signed=True),
                               scale, t)
            if vm[i] else None
            for i in range(n)
        ]
        if v2:
            return _bytes_rows_murmur([None if x is None else _biginteger_bytes(x[0]) for x in parts])
        return np.fromiter(((31 * _biginteger_hash(x[0]) + x[1]) & _M32 if x is not None else 0 for x in parts),
                           dtype=np.uint32, count=n)
    au = np.abs(u)
    digits = np.ones(n, dtype=np.int64)
    for p in _I64_POW10[1:]:
        digits += au >= p
    if np.any((digits - scale > precision - col_scale) & (u != 0)):
        raise BucketingError(f"a value of the Arrow {at} column does not fit Hive {t}")
    sc = np.where(u == 0, 0, scale).astype(np.int64)
    for _ in range(scale):  # strip trailing fractional zeros, as HiveDecimal keeps values
        m = (sc > 0) & (u % 10 == 0) & (u != 0)
        if not m.any():
            break
        u[m] //= 10
        sc[m] -= 1
    if v2:  # Murmur3 of BigInteger.toByteArray(): the last nbytes of the 8 big-endian bytes
        x = np.where(u >= 0, u, ~u)
        nbytes = np.ones(n, dtype=np.int64)
        for b in range(1, 8):
            nbytes += x >= (np.int64(1) << np.int64(8 * b - 1))
        data = np.concatenate([u.astype(">i8").view(np.uint8), np.zeros(4, np.uint8)])
        h = _np_murmur_varlen(data, np.arange(n, dtype=np.int64) * 8 + (8 - nbytes), nbytes)
    else:  # BigDecimal.hashCode() = 31 * BigInteger.hashCode() + scale
        mag = np.abs(u).view(np.uint64)
        hb = (mag >> np.uint64(32)).astype(np.uint32) * np.uint32(31) + mag.astype(np.uint32)
        hb = np.where(u < 0, (np.uint32(0) - hb), hb).astype(np.uint32)
        h = hb * np.uint32(31) + sc.astype(np.uint32)
    if valid is not None:
        h[~valid] = 0
    return h


def _timestamp_arrays(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    unit = arr.type.unit
    per_sec = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    v = _fixed_values(arr, np.int64)
    seconds, frac = np.divmod(v, per_sec)
    return seconds, frac * (1_000_000_000 // per_sec)


def _np_vlong(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`_vlong`: (n x 9 uint8 matrix, encoded length per row)."""
    n = x.shape[0]
    small = (x >= -112) & (x <= 127)
    neg = x < 0
    y = np.where(neg, ~x, x)  # non-negative magnitude Hadoop writes
    nb = np.zeros(n, dtype=np.int64)
    for b in range(8):
        nb += y >= (np.int64(1) << np.int64(8 * b))
    out = np.zeros((n, 9), dtype=np.uint8)
    out[:, 0] = np.where(small, x, np.where(neg, -120 - nb, -112 - nb)).astype(np.uint8)
    for k in range(int(nb.max()) if n else 0):  # big-endian magnitude bytes (garbage past nb)
        out[:, 1 + k] = (y >> np.clip(8 * (nb - 1 - k), 0, 56)).astype(np.uint8)
    return out, np.where(small, 1, 1 + nb)


_TS_ROW = 24  # 4-byte int + up to 9 + 9 VLong bytes, padded


def _np_timestamp_murmur(seconds: np.ndarray, nanos: np.ndarray) -> np.ndarray:
    """Vectorised Murmur3 of ``TimestampWritableV2.getBytes()`` (see :func:`_timestamp_bytes`)."""
    n = seconds.shape[0]
    has2 = (seconds < 0) | (seconds > 0x7FFFFFFF)
    rev = np.zeros(n, dtype=np.int64)
    t = nanos.copy()
    for _ in range(9):  # the 9-digit nanos, digits reversed
        rev = rev * 10 + t % 10
        t //= 10
    first = (seconds & 0xFFFFFFFF).astype(np.uint32)
    flag = (rev != 0) | has2
    first = np.where(flag, first | np.uint32(0x80000000), first & np.uint32(0x7FFFFFFF)).astype(np.uint32)
    rows = np.zeros((n, _TS_ROW), dtype=np.uint8)
    rows[:, :4] = first.astype(">u4").view(np.uint8).reshape(n, 4)
    v1, len1 = _np_vlong(np.where(has2, -rev - 1, rev))
    len1 = np.where(flag, len1, 0)
    rows[:, 4:13] = v1
    flat = rows.reshape(-1)
    len2 = np.zeros(n, dtype=np.int64)
    if has2.any():  # before 1970 or after 2038: the high seconds bits follow the nanos VInt
        idx = np.flatnonzero(has2)
        v2b, l2 = _np_vlong(seconds[idx] >> 31)
        len2[idx] = l2
        base = idx * _TS_ROW + 4 + len1[idx]
        for k in range(9):
            flat[base + k] = v2b[:, k]
    data = np.concatenate([flat, np.zeros(4, np.uint8)])
    return _np_murmur_varlen(data, np.arange(n, dtype=np.int64) * _TS_ROW, 4 + len1 + len2)


def _column_hashes_u32(col: Any, t: HiveType, v2: bool) -> np.ndarray:
    arr = _as_array(col)
    name = t.name
    if pa.types.is_dictionary(arr.type):
        dict_h = _column_hashes_u32(arr.dictionary, t, v2)
        idx = _fixed_values(arr.indices, arr.indices.type.to_pandas_dtype()).astype(np.int64)
        valid = _valid_mask(arr)
        if valid is not None:
            idx = np.where(valid, idx, 0)
        h = dict_h[idx] if len(dict_h) else np.zeros(len(arr), np.uint32)
        if valid is not None:
            h[~valid] = 0
        return h
    n = len(arr)
    if pa.types.is_null(arr.type):  # an all-NULL column
        return np.zeros(n, dtype=np.uint32)
    if name in ("array", "map", "struct"):
        return _pylist_hashes(arr.to_pylist(), t, v2)
    if name in ("string", "varchar", "char", "binary"):
        data, starts, lengths = _varlen_parts(arr, name)
        if name == "char":
            lengths = _rstrip_spaces(data, starts, lengths)
        valid = _valid_mask(arr)
        if valid is not None:
            lengths = np.where(valid, lengths, 0)
        if v2:
            h = _np_murmur_varlen(data, starts, lengths)
        else:
            h = _np_java_bytes_hash(data, starts, lengths, 0 if name == "string" else 1)
        if valid is not None:
            h[~valid] = 0
        return h
    if name == "decimal":
        return _decimal_hashes(arr, t, v2)
    if name == "timestamp":
        if not pa.types.is_timestamp(arr.type):
            raise BucketingError(f"cannot use an Arrow {arr.type} column as Hive timestamp")
        seconds, nanos = _timestamp_arrays(arr)
        valid = _valid_mask(arr)
        if valid is not None:  # garbage under NULLs: make it a harmless 0
            seconds = np.where(valid, seconds, 0)
            nanos = np.where(valid, nanos, 0)
        if v2:
            h = _np_timestamp_murmur(seconds, nanos)
        else:
            s = (seconds.view(np.uint64) << np.uint64(30)) | nanos.view(np.uint64)
            h = (s ^ (s >> np.uint64(32))).astype(np.uint32)
        if valid is not None:
            h[~valid] = 0
        return h
    # fixed width
    if name == "boolean":
        arr = _cast(arr, pa.bool_(), name)
        h = _bool_values(arr).astype(np.uint32)
    elif name == "tinyint":
        h = _fixed_values(_cast(arr, pa.int8(), name), np.int8).astype(np.int32).view(np.uint32)
    elif name == "smallint":
        v = _fixed_values(_cast(arr, pa.int16(), name), np.int16)
        h = _np_murmur_be16(v) if v2 else v.astype(np.int32).view(np.uint32)
    elif name in ("int", "date"):
        if name == "date":
            if pa.types.is_date64(arr.type):
                arr = arr.cast(pa.date32())
            elif not pa.types.is_date32(arr.type):
                arr = _cast(arr, pa.int32(), name)
        else:
            arr = _cast(arr, pa.int32(), name)
        v = _fixed_values(arr, np.int32)
        h = _np_murmur_be32(v) if v2 else v.view(np.uint32).copy()
    elif name == "bigint":
        v = _fixed_values(_cast(arr, pa.int64(), name), np.int64)
        if v2:
            h = _np_murmur_be64(v)
        else:
            u = v.view(np.uint64)
            h = (u ^ (u >> np.uint64(32))).astype(np.uint32)
    elif name == "float":
        f = _fixed_values(_cast(arr, pa.float32(), name), np.float32)
        bits: np.ndarray = f.view(np.int32).copy()
        bits[np.isnan(f)] = _NAN_F32_BITS
        if v2:  # widen the int bit pattern to float, hash that float's bits
            h = _np_murmur_be32(bits.astype(np.float32).view(np.int32))
        else:
            h = bits.view(np.uint32)
    elif name == "double":
        f = _fixed_values(_cast(arr, pa.float64(), name), np.float64)
        bits = f.view(np.int64).copy()
        bits[np.isnan(f)] = _NAN_F64_BITS
        if v2:  # widen the long bit pattern to double, hash that double's bits
            h = _np_murmur_be64(bits.astype(np.float64).view(np.int64))
        else:
            u = bits.view(np.uint64)
            h = (u ^ (u >> np.uint64(32))).astype(np.uint32)
    else:
        raise UnsupportedBucketTypeError(f"Hive bucketing hash is not implemented for type {t}")
    valid = _valid_mask(arr)
    if valid is not None:
        h = h.copy() if not h.flags.writeable else h
        h[~valid] = 0
    return h


def column_hashes(column: Any, hive_type: HiveTypeLike, bucketing_version: int = 2) -> np.ndarray:
    """Field hash of every row of one Arrow column (int32), vectorised, equal to :func:`hash_value` per row."""
    v2 = _check_version(bucketing_version)
    with np.errstate(over="ignore"):
        return _column_hashes_u32(column, _as_type(hive_type), v2).view(np.int32)


def bucket_hash_codes(columns: Sequence[Any], hive_types: Sequence[HiveTypeLike],
                      bucketing_version: int = 2) -> np.ndarray:
    """Every row's bucket hash (int32), vectorised, equal to :func:`bucket_hash_code` per row."""
    v2 = _check_version(bucketing_version)
    if len(columns) != len(hive_types):
        raise BucketingError(f"{len(columns)} bucket columns but {len(hive_types)} types")
    if not columns:
        raise BucketingError("at least one bucket column is needed")
    types = [_as_type(t) for t in hive_types]
    n = len(columns[0])
    h = np.zeros(n, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for col, t in zip(columns, types):
            if len(col) != n:
                raise BucketingError(f"bucket columns differ in length: {len(col)} != {n}")
            h *= np.uint32(31)
            h += _column_hashes_u32(col, t, v2)
    return h.view(np.int32)


def bucket_ids(
    columns: list[pa.Array],
    hive_types: list[str],
    num_buckets: int,
    bucketing_version: int = 2,
) -> np.ndarray:
    """Bucket of every row (int32) so large batches land in the bucket files Hive/Trino expect."""
    nb = _check_num_buckets(num_buckets)
    h = bucket_hash_codes(columns, hive_types, bucketing_version).view(np.uint32)
    return ((h & np.uint32(0x7FFFFFFF)) % np.uint32(nb)).astype(np.int32)

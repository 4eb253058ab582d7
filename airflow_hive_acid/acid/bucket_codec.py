"""``BucketCodec``: the ``bucket`` field of an ACID row (version, bucket/writer id, statement id)."""
from __future__ import annotations

import numpy as np

from .errors import AcidInputError

MAX_BUCKET_ID = 4095
MAX_STATEMENT_ID = 4095
_V1 = 1 << 29


class BucketCodecError(AcidInputError):
    """A bucket property out of range or of an unknown codec version."""


def encode_v1(bucket_id: int, statement_id: int = 0) -> int:
    """``(1 << 29) | bucketId << 16 | statementId`` as Hive 3+ writes it; statement id -1 (none
    given) is written as 0 and anything below it is refused, as Hive's ``BucketCodec.V1`` does."""
    if not 0 <= bucket_id <= MAX_BUCKET_ID:
        raise BucketCodecError(f"bucket id {bucket_id} out of range 0..{MAX_BUCKET_ID}")
    if not -1 <= statement_id <= MAX_STATEMENT_ID:
        raise BucketCodecError(f"statement id {statement_id} out of range -1..{MAX_STATEMENT_ID}")
    return _V1 | (bucket_id << 16) | max(0, statement_id)


def version(prop: int) -> int:
    return (prop & 0xE0000000) >> 29


def decode_bucket(prop: int) -> int:
    """Bucket/writer id; V0 (pre-Hive-3) properties are the bucket id itself."""
    v = version(prop)
    if v == 0:
        return prop
    if v == 1:
        return (prop & 0x0FFF0000) >> 16
    raise BucketCodecError(f"unknown bucket codec version {v} in bucket property {prop}")


def decode_statement(prop: int) -> int:
    v = version(prop)
    if v == 0:
        return 0
    if v == 1:
        return prop & 0x00000FFF
    raise BucketCodecError(f"unknown bucket codec version {v} in bucket property {prop}")


def decode_bucket_array(props: np.ndarray) -> np.ndarray:
    """Vectorized ``decode_bucket`` for int32 bucket properties (V0 and V1)."""
    p = props.astype(np.int64) & 0xFFFFFFFF
    ver = p >> 29
    if np.any(ver > 1):
        bad = int(props[np.argmax(ver > 1)])
        raise BucketCodecError(f"unknown bucket codec version in bucket property {bad}")
    return np.where(ver == 0, p, (p & 0x0FFF0000) >> 16).astype(np.int32)

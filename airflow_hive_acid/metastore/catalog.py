"""Databases, tables and partitions of ACID tables."""
from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from ..acid.compression import ORC_COMPRESS_PROPERTY, table_compression
from ..acid.errors import AcidError
from ..acid.partitions import parse_part_name
from ..acid.types import Column, format_columns, parse_columns, validate_identifier
from .counters import Counters
from .db import Store
from .errors import AlreadyExistsError, InvalidInputError, TableNotFoundError, TxnError
from .models import NO_PARTITION, TableInfo, TxnState
from .schema import dbs, partitions, tbls, txn_to_write_id, txns

KNOWN_COMPACTOR_KEYS = {
    "hive.compactor.delta.num.threshold", "hive.compactor.delta.pct.threshold",
    "hive.compactor.abortedtxn.threshold", "hive.compactor.aborted.txn.time.threshold",
    "metastore.compactor.initiator.failed.compacts.threshold",
}
_PROPERTY_KEY = re.compile(r"^[A-Za-z0-9_.\-]{1,256}$")


def split_name(qualified: str) -> tuple[str, str]:
    """``db.table`` -> (db, table), both validated and lower-cased."""
    if not isinstance(qualified, str) or qualified.count(".") != 1:
        raise InvalidInputError(f"bad table name {qualified!r}: expected DB.TABLE")
    db, table = qualified.split(".")
    return check_identifier(db, "database name"), check_identifier(table, "table name")


def check_identifier(name: str, what: str) -> str:
    try:
        return validate_identifier(name, what)
    except AcidError as exc:
        raise InvalidInputError(str(exc)) from None


def validate_properties(props: dict[str, str]) -> dict[str, str]:
    """Check table properties; keys are lower-cased (Hive treats ``NO_AUTO_COMPACTION`` so)."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if not isinstance(key, str) or not _PROPERTY_KEY.match(key):
            raise InvalidInputError(f"bad table property name {key!r}")
        k = key.lower()
        v = str(value)
        if k == "transactional" and v.lower() != "true":
            raise InvalidInputError("only transactional tables are managed here: transactional must be 'true'")
        if k == "transactional_properties" and v.lower() not in ("default", "insert_only"):
            raise InvalidInputError(f"transactional_properties must be 'default' or 'insert_only', got {v!r}")
        if k == "bucketing_version" and v not in ("1", "2"):
            raise InvalidInputError(f"bucketing_version must be 1 or 2, got {v!r}")
        if k == ORC_COMPRESS_PROPERTY:
            try:
                table_compression({k: v})
            except AcidError as exc:
                raise InvalidInputError(str(exc)) from None
        if k == "no_auto_compaction" and v.lower() not in ("true", "false"):
            raise InvalidInputError(f"no_auto_compaction must be true or false, got {v!r}")
        if k.startswith("compactorthreshold."):
            inner = k[len("compactorthreshold."):]
            if inner not in KNOWN_COMPACTOR_KEYS:
                raise InvalidInputError(f"unknown compactor threshold {key!r}; known: "
                                        + ", ".join(sorted("compactorthreshold." + x for x in KNOWN_COMPACTOR_KEYS)))
            try:
                float(v)
            except ValueError:
                raise InvalidInputError(f"{key} must be a number, got {v!r}") from None
        out[k] = v
    return out


def normalize_location(location: str) -> str:
    """Absolute local paths or URIs (``file:``, ``hdfs:``, ``s3a:``...), without trailing slash."""
    location = location.strip()
    if not location:
        raise InvalidInputError("empty table location")
    if location.startswith("file:"):
        path = location[len("file:"):]
        while path.startswith("//"):
            path = path[1:]
        return str(Path(path).resolve())
    if "://" in location:
        return location.rstrip("/")
    return str(Path(location).expanduser().resolve())


def join_location(root: str, *parts: str) -> str:
    if "://" in root:
        return posixpath.join(root, *parts)
    return str(Path(root, *parts))


class Catalog:
    """Create, describe and drop databases, tables and partitions."""

    def __init__(self, store: Store, warehouse: str):
        self.store = store
        self.warehouse = warehouse

    # -- databases ----------------------------------------------------------------------------
    def create_database(self, name: str, location: str | None = None, if_not_exists: bool = False) -> str:
        name = check_identifier(name, "database name")
        loc = normalize_location(location) if location else join_location(self.warehouse, f"{name}.db")
        with self.store.write() as conn:
            added = conn.execute(self.store.insert_ignore(dbs).values(
                name=name, location=loc, created_at=self.store.clock())).rowcount
            if not added and not if_not_exists:
                raise AlreadyExistsError(f"database {name!r} already exists")
        return name

    # -- tables -------------------------------------------------------------------------------
    def create_table(self, qualified: str, columns: str | list[Column], *,
                     partitioned_by: str | list[Column] | None = None,
                     bucketed_by: Sequence[str] | str | None = None, buckets: int = 0,
                     location: str | None = None, properties: dict[str, str] | None = None,
                     if_not_exists: bool = False, create_database: bool = True) -> TableInfo:
        """Register an ACID table; its directory is created by the first write, not here."""
        db, name = split_name(qualified)
        cols = self._columns(columns, "columns")
        part_cols = self._columns(partitioned_by, "partition columns") if partitioned_by else []
        clash = {c.name for c in cols} & {c.name for c in part_cols}
        if clash:
            raise InvalidInputError(f"partition columns {sorted(clash)} must not also be table columns")
        for pc in part_cols:
            if not pc.type.is_primitive:
                raise InvalidInputError(f"partition column {pc.name!r} must have a primitive type, not {pc.type}")
        bucket_cols = self._bucket_columns(bucketed_by, cols)
        if bucket_cols and not 1 <= buckets <= 4096:
            raise InvalidInputError(f"a bucketed table needs 1..4096 buckets, got {buckets}")
        if buckets and not bucket_cols:
            raise InvalidInputError("--buckets given without bucket columns")
        props = {"transactional": "true", "transactional_properties": "default", "bucketing_version": "2"}
        props.update(validate_properties(properties or {}))
        if props["transactional_properties"] == "insert_only" and bucket_cols:
            raise InvalidInputError("insert-only tables cannot be bucketed")

        now = self.store.clock()
        with self.store.write() as conn:
            db_loc = conn.execute(select(dbs.c.location).where(dbs.c.name == db)).scalar_one_or_none()
            if db_loc is None:
                if not create_database:
                    raise TableNotFoundError(f"unknown database {db!r}")
                conn.execute(self.store.insert_ignore(dbs).values(
                    name=db, location=join_location(self.warehouse, f"{db}.db"), created_at=now))
                # there now: ours, or a concurrent creator's (databases are never dropped)
                db_loc = conn.execute(select(dbs.c.location).where(dbs.c.name == db)).scalar_one()
            existing = self._get(conn, db, name)
            if existing is not None:
                if if_not_exists:
                    return existing
                raise AlreadyExistsError(f"table {db}.{name} already exists")
            loc = normalize_location(location) if location else join_location(db_loc, name)
            inserted = conn.execute(self.store.insert_ignore(tbls).values(
                db=db, name=name, location=loc, columns=format_columns(cols),
                partition_columns=format_columns(part_cols), bucket_columns=",".join(bucket_cols),
                num_buckets=buckets if bucket_cols else 0, properties=json.dumps(props, sort_keys=True),
                created_at=now)).rowcount
            if not inserted:   # created concurrently since we looked
                if if_not_exists:
                    return self._get_existing(conn, db, name)
                raise AlreadyExistsError(f"table {db}.{name} already exists")
            Counters(self.store.is_sqlite).create_write_id_counter(conn, db, name)
            return self._get_existing(conn, db, name)

    def _columns(self, spec: str | list[Column], what: str) -> list[Column]:
        if isinstance(spec, list):
            return spec
        try:
            return parse_columns(spec)
        except AcidError as exc:
            raise InvalidInputError(f"bad {what}: {exc}") from None

    @staticmethod
    def _bucket_columns(spec: Sequence[str] | str | None, cols: list[Column]) -> list[str]:
        if not spec:
            return []
        names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
        out = []
        known = {c.name for c in cols}
        for n in names:
            n = check_identifier(n, "bucket column name")
            if n not in known:
                raise InvalidInputError(f"bucket column {n!r} is not a column of the table ({sorted(known)})")
            out.append(n)
        return out

    def get_table(self, qualified: str) -> TableInfo:
        db, name = split_name(qualified)
        with self.store.read() as conn:
            return self._get_existing(conn, db, name)

    def _get_existing(self, conn: Connection, db: str, name: str) -> TableInfo:
        t = self._get(conn, db, name)
        if t is None:
            raise TableNotFoundError(f"unknown table {db}.{name}")
        return t

    def _get(self, conn: Connection, db: str, name: str) -> TableInfo | None:
        row = conn.execute(select(tbls).where(tbls.c.db == db, tbls.c.name == name)).mappings().first()
        if row is None:
            return None
        return TableInfo(
            db=row["db"], name=row["name"], location=row["location"], columns=parse_columns(row["columns"]),
            partition_columns=parse_columns(row["partition_columns"]) if row["partition_columns"] else [],
            bucket_columns=[c for c in row["bucket_columns"].split(",") if c],
            num_buckets=row["num_buckets"], properties=json.loads(row["properties"]),
            created_at=row["created_at"])

    def list_tables(self, db: str | None = None) -> list[TableInfo]:
        with self.store.read() as conn:
            q = select(tbls.c.db, tbls.c.name).order_by(tbls.c.db, tbls.c.name)
            if db is not None:
                q = q.where(tbls.c.db == check_identifier(db, "database name"))
            # a table dropped between the two queries (PostgreSQL reads committed rows) is left out
            return [t for r in conn.execute(q).all() if (t := self._get(conn, r[0], r[1])) is not None]

    def set_properties(self, qualified: str, properties: dict[str, str]) -> TableInfo:
        """``ALTER TABLE ... SET TBLPROPERTIES``; the table kind (insert-only or not) cannot change."""
        db, name = split_name(qualified)
        new = validate_properties(properties)
        with self.store.write() as conn:
            t = self._get(conn, db, name)
            if t is None:
                raise TableNotFoundError(f"unknown table {db}.{name}")
            if "transactional_properties" in new and new["transactional_properties"] != t.properties.get(
                    "transactional_properties", "default"):
                raise InvalidInputError("transactional_properties cannot change after the table is created")
            props = {**t.properties, **new}
            conn.execute(tbls.update().where(tbls.c.db == db, tbls.c.name == name).values(
                properties=json.dumps(props, sort_keys=True)))
            return self._get_existing(conn, db, name)

    def drop_table(self, qualified: str) -> TableInfo:
        """Forget a table (its files stay; delete them yourself once no reader needs them).
        Refused while an open transaction holds a write id for it."""
        db, name = split_name(qualified)
        with self.store.write() as conn:
            t = self._get(conn, db, name)
            if t is None:
                raise TableNotFoundError(f"unknown table {db}.{name}")
            writers = [r[0] for r in conn.execute(
                select(txn_to_write_id.c.t2w_txnid).join(txns, txns.c.txn_id == txn_to_write_id.c.t2w_txnid)
                .where(txn_to_write_id.c.t2w_database == db, txn_to_write_id.c.t2w_table == name,
                       txns.c.txn_state == TxnState.OPEN))]
            if writers:
                raise TxnError(f"table {db}.{name} has open writers (transactions {writers}); "
                               "commit or abort them first")
            conn.execute(delete(partitions).where(partitions.c.db == db, partitions.c.tbl == name))
            conn.execute(delete(tbls).where(tbls.c.db == db, tbls.c.name == name))
        return t

    # -- partitions ---------------------------------------------------------------------------
    def partition_name(self, table: TableInfo, spec: str | dict[str, str]) -> str:
        """Canonical partition name for a user spec (``ds=2024-01-01`` or a dict), validated."""
        return table.to_spec().partition_name(spec)

    def add_partitions(self, conn: Connection, db: str, table: str, names: list[str], txn_id: int) -> None:
        """Record partitions a committing write created (inside the commit's transaction)."""
        names = sorted({n for n in names if n != NO_PARTITION})
        if names:
            now = self.store.clock()
            conn.execute(self.store.insert_ignore(partitions), [
                {"db": db, "tbl": table, "part_name": n, "created_at": now, "created_by_txn": txn_id} for n in names])

    def list_partitions(self, qualified: str) -> list[str]:
        db, name = split_name(qualified)
        self.get_table(qualified)
        with self.store.read() as conn:
            return [r[0] for r in conn.execute(select(partitions.c.part_name).where(
                partitions.c.db == db, partitions.c.tbl == name).order_by(partitions.c.part_name))]

    @staticmethod
    def check_partition_name(table: TableInfo, name: str) -> str:
        if not table.is_partitioned:
            if name != NO_PARTITION:
                raise InvalidInputError(f"table {table.qualified_name} is not partitioned, got partition {name!r}")
            return name
        try:
            parse_part_name(name, table.to_spec().partition_names)
        except AcidError as exc:
            raise InvalidInputError(str(exc)) from None
        return name

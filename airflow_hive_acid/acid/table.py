"""The one model of a table: what the format needs to know to read and write one (name, location,
columns, partitioning, bucketing, insert-only, compression).

The catalog produces it (``metastore.TableInfo.to_spec()``), a job gets it in its spec (as JSON,
``jobs.spec.JobSpec``) and the Spark side wraps it with its filesystem (``spark.scan.Table``). It
lives in the format layer because every one of them may import ``acid/`` and none may import the
others (docs/architecture.md §1).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .errors import AcidInputError
from .partitions import make_part_name, parse_spec_text
from .types import Column, parse_columns

ALLOWED_PARTITION_TYPES = {"string", "varchar", "char", "tinyint", "smallint", "int", "bigint", "date", "boolean"}


class TableSpecError(AcidInputError):
    """A column, partition spec or partition column type that does not fit the table."""


@dataclass(frozen=True)
class TableSpec:
    """A table as a job sees it. Its fields are the job spec's wire format (``JobSpec.to_json``):
    the columns travel as Hive's ``"id bigint, name string"`` text."""

    name: str                         # db.table
    location: str
    columns: str                      # "id bigint, name string"
    partition_columns: str = ""       # "ds string"
    bucket_columns: tuple[str, ...] = ()
    num_buckets: int = 0
    bucketing_version: int = 2
    insert_only: bool = False
    compression: str = "zstd"         # pyarrow's codec name, from the table's orc.compress

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableSpec:
        d = dict(d)
        d["bucket_columns"] = tuple(d.get("bucket_columns") or ())
        return cls(**d)

    @cached_property
    def data_columns(self) -> list[Column]:
        """The columns stored in the data files (not the partition columns)."""
        return parse_columns(self.columns)

    @cached_property
    def partition_cols(self) -> list[Column]:
        return parse_columns(self.partition_columns) if self.partition_columns else []

    @property
    def partition_names(self) -> list[str]:
        return [c.name for c in self.partition_cols]

    @property
    def all_columns(self) -> list[Column]:
        """The data columns, then the partition columns (a row as a reader sees it)."""
        return self.data_columns + self.partition_cols

    @property
    def bucket_types(self) -> list[str]:
        """The Hive types of the bucket columns, as Hive's bucketing hash takes them
        (``acid.bucketing.bucket_ids``)."""
        return [str(self.column(c).type) for c in self.bucket_columns]

    def column(self, name: str) -> Column:
        for c in self.all_columns:
            if c.name == name:
                return c
        raise TableSpecError(f"unknown column {name!r} of {self.name}; columns: "
                             f"{[c.name for c in self.all_columns]}")

    def check_partition_types(self) -> None:
        for c in self.partition_cols:
            if c.type.name not in ALLOWED_PARTITION_TYPES:
                raise TableSpecError(f"partition column {c.name} has type {c.type}; supported: "
                                     f"{sorted(ALLOWED_PARTITION_TYPES)}")

    def partition_name(self, spec: str | Mapping[str, object] | Sequence[str]) -> str:
        """The partition directory (``ds=2024-01-01/hr=03``) a spec names, validated: the spec is
        a user's text (``ds=2024-01-01,hr=03``), a column -> value mapping, or the values of every
        partition column in order (a row's). The only place a table's partition name is made."""
        if not self.partition_cols:
            raise TableSpecError(f"{self.name} is not partitioned: a partition spec does not apply")
        if isinstance(spec, str):
            return parse_spec_text(spec, self.partition_names)
        if isinstance(spec, Mapping):
            values = {str(k).lower(): str(v) for k, v in spec.items()}
            if len(values) != len(spec):
                raise TableSpecError(f"partition spec {dict(spec)} names a column twice")
            return make_part_name(self.partition_names, values)
        return make_part_name(self.partition_names, list(spec))

"""OpenLineage for the hive-acid operators, through ``apache-airflow-providers-openlineage``.

A table is the dataset ``namespace="hive-acid://<db>", name="<table>"``: what the provider-info
``asset-uris`` converter makes of its ``hive-acid://<db>/<table>`` Asset, so the lineage graph and
the Asset graph name the same thing. Outputs carry the table's schema, the output statistics
(rows, files, bytes) and ``hiveAcidWrite`` (rows inserted, updated and deleted per kind); the run
carries ``hiveAcid`` (the txn, the write ids and the snapshot read). Operators import this module
only when the OpenLineage listener asks them, so the provider stays optional
(``docs/operations.md``, lineage).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attr
from airflow.providers.common.compat.openlineage.facet import (
    Dataset,
    InputDataset,
    OutputDataset,
    OutputStatisticsOutputDatasetFacet,
    RunFacet,
    SchemaDatasetFacet,
    SchemaDatasetFacetFields,
)
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.generated.base import OutputDatasetFacet

from .acid.stats import WriteCounts
from .assets import dataset_id, table_asset_uri
from .errors import NoSuchObjectError
from .metastore import Metastore, TableInfo, WriteStat

_SCHEMA_BASE = "https://github.com/airflow-hive-acid/airflow-hive-acid/blob/main/docs/lineage-facets.json"


@attr.define
class HiveAcidRunFacet(RunFacet):
    """The transaction a task ran in, the write id it wrote under, and the snapshot (Hive's
    ValidWriteIdList string) it read; a compaction's id, a streaming run's committed batches."""

    operation: str = attr.field()
    txnId: int | None = attr.field(default=None)  # noqa: N815
    writeId: int | None = attr.field(default=None)  # noqa: N815
    statementId: int | None = attr.field(default=None)  # noqa: N815
    committed: bool | None = attr.field(default=None)
    validWriteIds: str | None = attr.field(default=None)  # noqa: N815
    compactionId: int | None = attr.field(default=None)  # noqa: N815
    streamBatches: list[dict[str, Any]] | None = attr.field(default=None)  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return f"{_SCHEMA_BASE}#/$defs/HiveAcidRunFacet"


@attr.define
class HiveAcidWriteOutputDatasetFacet(OutputDatasetFacet):
    """What a statement changed in a table: rows by kind of change and the partitions it touched."""

    rowsInserted: int = attr.field(default=0)  # noqa: N815
    rowsUpdated: int = attr.field(default=0)  # noqa: N815
    rowsDeleted: int = attr.field(default=0)  # noqa: N815
    files: int = attr.field(default=0)
    bytes: int = attr.field(default=0)
    partitions: list[str] = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        return f"{_SCHEMA_BASE}#/$defs/HiveAcidWriteOutputDatasetFacet"


def schema_facet(info: TableInfo) -> SchemaDatasetFacet:
    return SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=c.name, type=str(c.type))
                                      for c in [*info.columns, *info.partition_columns]])


def table_input(table: str, info: TableInfo | None = None) -> InputDataset:
    namespace, name = dataset_id(table_asset_uri(table))
    return InputDataset(namespace=namespace, name=name, facets={"schema": schema_facet(info)} if info else {})


def path_input(path: str) -> InputDataset:
    namespace, name = dataset_id(path)
    return InputDataset(namespace=namespace, name=name)


def table_output(table: str, info: TableInfo | None = None, partitions: Sequence[Any] | None = None, *,
                 rows: int | None = None, size: int | None = None) -> OutputDataset:
    """The table as an output; with ``partitions`` (what a statement wrote per partition,
    anything with the :class:`WriteCounts` fields and ``partition``) its statistics, or with
    ``rows``/``size`` the plain output statistics of a rewrite (a compaction)."""
    namespace, name = dataset_id(table_asset_uri(table))
    output_facets: dict[str, Any] = {}
    if rows is not None or size is not None:
        output_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(rowCount=rows, size=size)
    if partitions is not None:
        total = WriteCounts()
        for p in partitions:
            total.add(p)
        files = total.delta_files + total.delete_delta_files + total.base_files
        size = total.delta_bytes + total.delete_delta_bytes + total.base_bytes
        output_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
            rowCount=total.rows_inserted + total.rows_updated + total.rows_deleted, size=size, fileCount=files)
        output_facets["hiveAcidWrite"] = HiveAcidWriteOutputDatasetFacet(
            rowsInserted=total.rows_inserted, rowsUpdated=total.rows_updated, rowsDeleted=total.rows_deleted,
            files=files, bytes=size, partitions=sorted({p.partition for p in partitions if p.partition}))
    return OutputDataset(namespace=namespace, name=name, facets={"schema": schema_facet(info)} if info else {},
                         outputFacets=output_facets)


def tables_output(ms: Metastore, tables: Iterable[str], writes: Sequence[WriteStat] | None = None
                  ) -> list[OutputDataset]:
    """Each of ``tables`` as an output with its schema (if the table still exists) and, given
    ``writes`` (a txn's recorded write stats), what the txn wrote to it: the datasets of a
    transaction task, or of the cleaner."""
    out: list[OutputDataset] = []
    for name in dict.fromkeys(t.lower() for t in tables):      # each table once, looked up once
        try:
            info: TableInfo | None = ms.catalog.get_table(name)
        except NoSuchObjectError:
            info = None
        mine = None if writes is None else [w for w in writes if f"{w.db}.{w.table}" == name]
        out.append(table_output(name, info, mine))
    return out


def lineage(inputs: Sequence[Dataset] = (), outputs: Sequence[Dataset] = (),
            run: HiveAcidRunFacet | None = None) -> OperatorLineage:
    return OperatorLineage(inputs=list(inputs), outputs=list(outputs),
                           run_facets={"hiveAcid": run} if run is not None else {})

"""Airflow Assets for Hive ACID tables: ``hive-acid://<db>/<table>[/<col>=<val>[/...]]``.

``sanitize_uri`` is the ``asset-uris`` handler Airflow calls for the scheme (it normalizes case
and rejects malformed names); ``convert_asset_to_openlineage`` its OpenLineage converter (the
dataset the operators' lineage names, :mod:`airflow_hive_acid.lineage`); ``table_asset`` builds
the Asset the DML operators emit events on.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, unquote, urlsplit

from .acid.partitions import make_part_name, parse_part_name
from .errors import InvalidInputError
from .metastore.catalog import split_name

if TYPE_CHECKING:
    from airflow.sdk import Asset

SCHEME = "hive-acid"


def _normalized_parts(db: str, path: str) -> tuple[str, str, str | None]:
    segments = [s for s in unquote(path).split("/") if s != ""]
    if not segments:
        raise InvalidInputError(f"{SCHEME} URI needs a table: {SCHEME}://<db>/<table>[/<partition>]")
    try:
        db_name, table = split_name(f"{db}.{segments[0]}")
        partition = None
        if len(segments) > 1:
            spec = parse_part_name("/".join(segments[1:]))
            partition = make_part_name(list(spec), spec)
    except Exception as exc:  # the catalog's and the partition parser's errors, as Airflow expects
        raise InvalidInputError(f"bad {SCHEME} URI {db!r}/{path!r}: {exc}") from None
    return db_name, table, partition


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Normalize ``hive-acid://DB/Table/ds=1`` to ``hive-acid://db/table/ds=1``; ValueError if bad."""
    if uri.query or uri.fragment:
        raise InvalidInputError(f"{SCHEME} URI takes no query or fragment: {uri.geturl()}")
    if not uri.netloc:
        raise InvalidInputError(f"{SCHEME} URI needs a database: {SCHEME}://<db>/<table>[/<partition>]")
    db, table, partition = _normalized_parts(uri.netloc, uri.path)
    path = f"/{table}" + (f"/{partition}" if partition else "")
    return uri._replace(scheme=SCHEME, netloc=db, path=path)


def dataset_id(uri: str) -> tuple[str, str]:
    """OpenLineage's (namespace, name) of a URI: ``scheme://authority`` and the path, as the
    object-store providers convert theirs; a local path is in the ``file`` namespace."""
    parts = urlsplit(uri)
    if parts.scheme in ("", "file"):
        return "file", parts.path or uri
    return f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/") or "/"


def convert_asset_to_openlineage(asset: Any, lineage_context: Any = None) -> Any:
    """The ``to_openlineage_converter`` of the ``hive-acid`` scheme: ``hive-acid://db/table`` is
    the dataset ``namespace="hive-acid://db", name="table"``."""
    from airflow.providers.common.compat.openlineage.facet import Dataset
    namespace, name = dataset_id(asset.uri)
    return Dataset(namespace=namespace, name=name)


def table_asset_uri(table: str, partition: str | None = None) -> str:
    """``db.table`` (and an optional canonical partition name) -> the Asset URI."""
    db, name = split_name(table)
    uri = f"{SCHEME}://{db}/{name}"
    if partition:
        _, _, part = _normalized_parts(db, f"/{name}/{partition}")
        uri += f"/{part}"
    return uri


def table_asset(table: str, partition: str | None = None, *, extra: dict[str, Any] | None = None) -> Asset:
    """The Asset for a table (or one partition); its name is its URI, so Assets declared by URI
    in other DAGs are the same Asset."""
    from airflow.sdk import Asset
    uri = table_asset_uri(table, partition)
    return Asset(uri=uri, name=uri, extra=extra or {})

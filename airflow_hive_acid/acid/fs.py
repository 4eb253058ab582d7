"""Files of a table through ``pyarrow.fs`` (local, HDFS, S3, ... as pyarrow reaches them):
list a table into per-partition ``DirEntry`` trees for AcidState, write markers, publish staged
directories.

One recursive listing per table (or partition) call: object stores answer it with prefix
listings, and AcidState never needs a second look at the directory.
"""
from __future__ import annotations

import errno
import json
import os
import posixpath
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from .errors import AcidError
from .names import ACID_VERSION_FILE, METADATA_FILE, ORC_ACID_VERSION, is_hidden
from .partitions import PartitionSpecError, parse_part_name
from .state import DirEntry

STAGING_DIR = "_hive_acid_staging"


class AcidFileError(AcidError):
    """A missing, unreadable or unexpected file or directory."""


def filesystem_for(location: str) -> tuple[pafs.FileSystem, str]:
    """``(filesystem, path)`` for a local path or a URI pyarrow understands."""
    if "://" in location:
        fs, path = pafs.FileSystem.from_uri(location)
        return fs, path.rstrip("/")
    return pafs.LocalFileSystem(), location.rstrip("/") or "/"


def join(*parts: str) -> str:
    return posixpath.join(*[p for p in parts if p])


@dataclass
class TableListing:
    """A table directory seen at one moment: for each partition (``""`` if unpartitioned) the
    children of its directory, as AcidState takes them."""

    root: str
    partitions: dict[str, list[DirEntry]]


def list_table(fs: pafs.FileSystem, root: str, partition_columns: list[str],
               only_partitions: list[str] | None = None) -> TableListing:
    """List ``root`` recursively (one call) and group files into partitions.

    Partition directories are ``col=value`` levels in the declared order; anything else at those
    levels (hidden names, staging, stray files) is ignored, as Hive's listing does.
    """
    infos: list[pafs.FileInfo] = []
    if only_partitions is not None:
        for part in only_partitions:
            infos.extend(_list_recursive(fs, join(root, part)))
    else:
        infos = _list_recursive(fs, root)
    depth = len(partition_columns)
    tree: dict[str, dict] = {}
    for info in infos:
        rel = info.path[len(root):].lstrip("/")
        if not rel:
            continue
        parts = rel.split("/")
        if depth:
            if len(parts) <= depth:
                continue
            part_dirs = parts[:depth]
            if any(is_hidden(p) or "=" not in p for p in part_dirs):
                continue
            part_name = "/".join(part_dirs)
            try:
                parse_part_name(part_name, partition_columns)
            except PartitionSpecError:
                continue
            inner = parts[depth:]
        else:
            part_name, inner = "", parts
        node = tree.setdefault(part_name, {})
        for name in inner[:-1]:
            node = node.setdefault(name, {})
        if info.type == pafs.FileType.Directory:
            node.setdefault(inner[-1], {})
        else:
            node[inner[-1]] = info.size
    out: dict[str, list[DirEntry]] = {}
    for part_name, node in tree.items():
        out[part_name] = [_entry(fs, join(root, part_name), name, sub) for name, sub in sorted(node.items())]
    if not depth and "" not in out:
        out[""] = []
    return TableListing(root, out)


def _list_recursive(fs: pafs.FileSystem, path: str) -> list[pafs.FileInfo]:
    try:
        return fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    except OSError as exc:
        raise AcidFileError(f"cannot list {path}: {exc}") from None


def _entry(fs: pafs.FileSystem, parent: str, name: str, sub: dict | int) -> DirEntry:
    if not isinstance(sub, dict):
        return DirEntry(name, False, sub)
    children = tuple(_entry(fs, join(parent, name), n, s) for n, s in sorted(sub.items()))
    fmt = None
    if name.startswith("base_") and METADATA_FILE in sub:
        fmt = read_metadata_format(fs, join(parent, name))
    return DirEntry(name, True, children=children, metadata_format=fmt)


def read_metadata_format(fs: pafs.FileSystem, directory: str) -> str | None:
    """``dataFormat`` of a ``_metadata_acid`` file (``compacted``, ``truncated`` ...)."""
    try:
        with fs.open_input_stream(join(directory, METADATA_FILE)) as f:
            return json.loads(f.read().decode()).get("dataFormat")
    except (OSError, ValueError) as exc:
        raise AcidFileError(f"unreadable {METADATA_FILE} in {directory}: {exc}") from None


def open_output(fs: pafs.FileSystem, path: str) -> pa.NativeFile:
    """A new file at ``path`` open for writing, its directory created first."""
    fs.create_dir(posixpath.dirname(path), recursive=True)
    return fs.open_output_stream(path)


def write_bytes(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    with open_output(fs, path) as f:
        f.write(data)


def write_acid_version(fs: pafs.FileSystem, directory: str) -> None:
    """``_orc_acid_version``: the single byte ``2`` Hive writes into every ACID directory."""
    write_bytes(fs, join(directory, ACID_VERSION_FILE), str(ORC_ACID_VERSION).encode())


def write_metadata_acid(fs: pafs.FileSystem, directory: str, data_format: str) -> None:
    write_bytes(fs, join(directory, METADATA_FILE),
                json.dumps({"thisFileVersion": "0", "dataFormat": data_format}).encode())


def exists(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def remove_dir(fs: pafs.FileSystem, path: str) -> None:
    """Delete a directory tree if it is there (staging after a job, spool after a batch)."""
    if exists(fs, path):
        fs.delete_dir(path)


def remove_staged(fs: pafs.FileSystem, path: str) -> None:
    """Delete what a job left under a table's ``_hive_acid_staging`` (its folder, or a file of
    rows), then ``_hive_acid_staging`` itself if that left it empty, so no job, failed or not,
    leaves an empty folder in the table."""
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        fs.delete_dir(path)
    elif info.type != pafs.FileType.NotFound:
        fs.delete_file(path)
    parent = posixpath.dirname(path)
    if posixpath.basename(parent) == STAGING_DIR:
        remove_if_empty(fs, parent)


def remove_if_empty(fs: pafs.FileSystem, path: str) -> bool:
    """Remove the directory ``path`` only if it is empty, in one step that a concurrent job
    putting its own folder there makes fail (a local ``rmdir``); True if removed. Elsewhere it
    stays: pyarrow deletes directories with their contents, and an empty one on an object store
    is at most a marker."""
    if not isinstance(fs, pafs.LocalFileSystem):
        return False
    try:
        os.rmdir(path)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
            return False          # another job's folder is there now, or another job removed it
        raise
    return True


def publish(fs: pafs.FileSystem, staged: str, final: str) -> None:
    """Move a finished directory from staging to its place. A directory already there of the
    same name is a leftover of an earlier attempt of this very statement (same write id and
    statement id, never committed) and is replaced."""
    if exists(fs, final):
        fs.delete_dir(final)
    fs.create_dir(posixpath.dirname(final), recursive=True)
    fs.move(staged, final)

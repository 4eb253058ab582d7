"""``hive-acid``: the admin command line over the metastore (and, through Spark jobs, the data).

Every command prints a human table or, with ``--json``, one JSON document; errors go to stderr
with exit status 1 (2 for usage errors).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from .acid.writeids import ValidWriteIdList
from .errors import HiveAcidError
from .metastore import (
    CompactionState,
    CompactionType,
    Metastore,
    WriteStat,
)
from .metastore.db import default_url

NO_VAL = "---"


class CliError(HiveAcidError):
    """A usage problem found after parsing (bad key=value etc.)."""


# -- output --------------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    if v is None or v == "":
        return NO_VAL
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v)) or NO_VAL
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return str(v)


def local_time(epoch_ms: Any) -> str:
    """An epoch-milliseconds time of the metastore as this machine's local ISO time to the second
    (``2026-11-26T09:15:04+01:00``); the JSON output keeps the number."""
    if not epoch_ms:                       # None, or 0: never
        return NO_VAL
    import pendulum
    from pendulum.tz import local_timezone
    zone = local_timezone()                # a Timezone, or a FixedTimezone where TZ is an offset
    return pendulum.from_timestamp(int(epoch_ms) // 1000, tz=zone).isoformat()  # type: ignore[arg-type]


Column = tuple[str, str] | tuple[str, str, Callable[[Any], str]]


def print_table(rows: list[dict[str, Any]], columns: Sequence[Column], out: TextIO | None = None) -> None:
    """Tab-separated with a header line, like Hive's CLI output of SHOW commands; a column's
    optional third element formats its values (default :func:`_fmt`)."""
    out = out if out is not None else sys.stdout
    print("\t".join(c[0] for c in columns), file=out)
    for r in rows:
        print("\t".join((c[2] if len(c) > 2 else _fmt)(r.get(c[1])) for c in columns), file=out)


def emit(args: argparse.Namespace, payload: Any, human: Callable[[], object] | None = None) -> None:
    if args.json or human is None:
        print(json.dumps(payload, indent=None if args.json else 2, sort_keys=False, default=str))
    else:
        human()


def _kv(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        if "=" not in item:
            raise CliError(f"{what} {item!r} is not key=value")
        k, v = item.split("=", 1)
        if k.strip() in out:
            raise CliError(f"{what} {k.strip()!r} given twice")
        out[k.strip()] = v.strip()
    return out


def _ms(args: argparse.Namespace) -> Metastore:
    return Metastore(args.metastore)


# -- commands ------------------------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> None:
    ms = Metastore.initialize(args.metastore, warehouse=args.warehouse, settings=_kv(args.set, "--set"))
    emit(args, {"metastore": ms.url, "settings": ms.config.items()},
         lambda: print(f"Initialized metastore {ms.store.engine.url!r}\nwarehouse: {ms.config.warehouse}"))


def cmd_config(args: argparse.Namespace) -> None:
    ms = _ms(args)
    if args.value is not None:
        ms.set_setting(args.key, args.value)
    items = ms.config.items()
    if args.key and args.value is None:
        if args.key not in items:
            raise CliError(f"unknown setting {args.key!r}; known: {sorted(items)}")
        items = {args.key: items[args.key]}
    emit(args, items, lambda: [print(f"{k}={v}") for k, v in items.items()])


def cmd_create_table(args: argparse.Namespace) -> None:
    t = _ms(args).catalog.create_table(
        args.table, args.columns, partitioned_by=args.partitioned_by, bucketed_by=args.bucketed_by,
        buckets=args.buckets or 0, location=args.location, properties=_kv(args.property, "--property"),
        if_not_exists=args.if_not_exists)
    emit(args, t.to_dict(), lambda: print(f"Created table {t.qualified_name} at {t.location}"))


def cmd_describe(args: argparse.Namespace) -> None:
    ms = _ms(args)
    t = ms.catalog.get_table(args.table)
    d = t.to_dict()
    d["partitions"] = ms.catalog.list_partitions(args.table) if t.is_partitioned else []

    def human() -> None:
        print("col_name\tdata_type")
        for c in t.columns:
            print(f"{c.name}\t{c.type}")
        if t.partition_columns:
            print("\n# Partition Information\ncol_name\tdata_type")
            for c in t.partition_columns:
                print(f"{c.name}\t{c.type}")
        print(f"\nLocation:\t{t.location}")
        if t.bucket_columns:
            print(f"Bucket Columns:\t{t.bucket_columns}\nNum Buckets:\t{t.num_buckets}")
        print("Table Parameters:")
        for k, v in sorted(t.properties.items()):
            print(f"\t{k}\t{v}")
        if d["partitions"]:
            print(f"Partitions:\t{len(d['partitions'])}")

    emit(args, d, human)


def cmd_list_tables(args: argparse.Namespace) -> None:
    tables = _ms(args).catalog.list_tables(args.db)
    emit(args, [t.qualified_name for t in tables], lambda: [print(t.qualified_name) for t in tables])


def cmd_drop_table(args: argparse.Namespace) -> None:
    t = _ms(args).catalog.drop_table(args.table)
    emit(args, {"dropped": t.qualified_name, "location": t.location},
         lambda: print(f"Dropped {t.qualified_name}; its files remain at {t.location}"))


def cmd_alter_table(args: argparse.Namespace) -> None:
    t = _ms(args).catalog.set_properties(args.table, _kv(args.property, "--property"))
    emit(args, t.to_dict(), lambda: print(f"Altered {t.qualified_name}: {t.properties}"))


def cmd_txn_open(args: argparse.Namespace) -> None:
    ids = _ms(args).txns.open_txns(args.count, agent_info=args.agent_info or "hive-acid cli")
    payload = {"txn_id": ids[0]} if args.count == 1 else {"txn_ids": ids}
    emit(args, payload, lambda: print(" ".join(map(str, ids))))


def cmd_txn_allocate(args: argparse.Namespace) -> None:
    ids = _ms(args).txns.allocate_write_ids(args.txn, args.tables)
    payload = {"write_id": ids[args.tables[0]]} if len(args.tables) == 1 else {"write_ids": ids}
    emit(args, payload, lambda: [print(f"{t}\t{w}") for t, w in ids.items()])


def cmd_txn_commit(args: argparse.Namespace) -> None:
    writes = []
    if args.writes:
        with open(args.writes) as fh:
            raw = json.load(fh)
        if not isinstance(raw, list):
            raise CliError(f"{args.writes} must hold a JSON list of write stats")
        writes = [WriteStat.from_dict(d) for d in raw]
    res = _ms(args).txns.commit_txn(args.txn, writes)
    emit(args, {"txn_id": args.txn, "committed": True, "already_committed": res.already_committed},
         lambda: print(f"Committed transaction {args.txn}" + (" (already committed)" if res.already_committed else "")))


def cmd_txn_abort(args: argparse.Namespace) -> None:
    changed = _ms(args).txns.abort_txn(args.txn, args.reason)
    emit(args, {"txn_id": args.txn, "aborted": True, "already_aborted": not changed},
         lambda: print(f"Aborted transaction {args.txn}" + ("" if changed else " (already aborted)")))


def cmd_txn_heartbeat(args: argparse.Namespace) -> None:
    _ms(args).txns.heartbeat(args.txn)
    emit(args, {"txn_id": args.txn, "heartbeat": True}, lambda: print(f"Heartbeat sent for {args.txn}"))


def cmd_txn_show(args: argparse.Namespace) -> None:
    ms = _ms(args)
    info = ms.txns.get_txn(args.txn).to_dict()
    info["write_ids"] = ms.txns.write_ids_of(args.txn)
    emit(args, info)


def cmd_snapshot(args: argparse.Namespace) -> None:
    snap = _ms(args).txns.snapshot(args.table, txn_id=args.txn)
    d = snap.to_dict()
    emit(args, d, lambda: print(d["valid_write_ids"]))


def cmd_parse_writeids(args: argparse.Namespace) -> None:
    w = ValidWriteIdList.parse(args.valid_write_ids)
    d = {"table": w.table, "high_watermark": w.high_watermark, "min_open_write_id": w.min_open,
         "open": list(w.open_ids), "aborted": list(w.aborted_ids), "normalized": w.to_string()}
    if args.write_id is not None:
        d["write_id"] = args.write_id
        d["valid"] = w.is_write_id_valid(args.write_id)
        d["aborted_write_id"] = w.is_write_id_aborted(args.write_id)
    emit(args, d)


TXN_COLUMNS: list[Column] = [
    ("Transaction ID", "txn_id"), ("Transaction State", "state"), ("Started Time", "started", local_time),
    ("Last Heartbeat Time", "last_heartbeat", local_time), ("User", "user"), ("Hostname", "host"),
    ("Reason", "reason")]
LOCK_COLUMNS: list[Column] = [
    ("Lock ID", "lock_id"), ("Database", "database"), ("Table", "table"), ("Partition", "partition"),
    ("State", "state"), ("Blocked By", "blocked_by"), ("Type", "type"), ("Transaction ID", "txn_id"),
    ("Last Heartbeat", "last_heartbeat", local_time), ("Acquired At", "acquired_at", local_time), ("User", "user"),
    ("Hostname", "host"), ("Agent Info", "agent_info")]
COMPACTION_COLUMNS: list[Column] = [
    ("CompactionId", "id"), ("Database", "database"), ("Table", "table"), ("Partition", "partition"),
    ("Type", "type"), ("State", "state"), ("Worker", "worker"), ("Enqueue Time", "enqueue_time", local_time),
    ("Start Time", "start", local_time), ("Duration(ms)", "duration_ms"), ("SparkAppId", "spark_app_id"),
    ("Error message", "error"), ("Initiator", "initiator"), ("TxnId", "txn_id"), ("Next TxnId", "next_txn_id"),
    ("Commit Time", "commit_time", local_time), ("Highest WriteId", "highest_write_id"), ("Reason", "reason")]


def cmd_show(args: argparse.Namespace) -> None:
    ms = _ms(args)
    if args.what == "transactions":
        rows = [t.to_dict() for t in ms.txns.show_transactions(include_committed=args.all)]
        emit(args, rows, lambda: print_table(rows, TXN_COLUMNS))
    elif args.what == "locks":
        db = table = None
        if args.target:
            db, _, table = args.target.partition(".")
        rows = [li.to_dict() for li in ms.locks.show_locks(db, table or None)]
        emit(args, rows, lambda: print_table(rows, LOCK_COLUMNS))
    else:
        db = table = None
        if args.target:
            info = ms.catalog.get_table(args.target) if "." in args.target else None
            db, table = (info.db, info.name) if info else (args.target, None)
        partition = None
        if args.partition:
            partition = ms.catalog.partition_name(ms.catalog.get_table(args.target), args.partition)
        rows = [c.to_dict() for c in ms.compactions.show(
            db=db, table=table, partition=partition,
            states=[CompactionState.parse(args.state)] if args.state else None,
            type=CompactionType.parse(args.type) if args.type else None, cq_id=args.id, limit=args.limit)]
        emit(args, rows, lambda: print_table(rows, COMPACTION_COLUMNS))


def cmd_abort_transactions(args: argparse.Namespace) -> None:
    aborted = _ms(args).txns.abort_txns(args.txns, args.reason)
    emit(args, {"aborted": aborted}, lambda: print(f"Aborted {len(aborted)} transaction(s): {aborted}"))


def cmd_housekeeper(args: argparse.Namespace) -> None:
    report = _ms(args).housekeep()
    emit(args, report.to_dict())


METRICS_TABLE_COLUMNS = [("Table", "table"), ("Partitions", "partitions"), ("ActiveDeltas", "active_deltas"),
                         ("DeleteDeltas", "active_delete_deltas"), ("SmallDeltas", "small_deltas"),
                         ("ObsoleteDeltas", "obsolete_deltas"), ("BaseRows", "base_rows"),
                         ("DeltaRows", "delta_rows"), ("DeltaPct", "delta_pct")]


def cmd_metrics(args: argparse.Namespace) -> None:
    """Hive's ACID metrics from the metastore's records; warnings go to stderr."""
    m = _ms(args).metrics()
    for warning in m.warnings:
        print(f"hive-acid: warning: {warning}", file=sys.stderr)
    if args.prometheus:
        sys.stdout.write(m.to_prometheus())
        return

    def human() -> None:
        for name, value in m.gauges().items():
            if not name.startswith("table."):
                print(f"{name}\t{value:g}")
        print()
        print_table([t.to_dict() for t in m.tables], METRICS_TABLE_COLUMNS)

    emit(args, m.to_dict(), human)


# -- compaction (initiator, worker, cleaner; Spark jobs for the files) -------------------------------
def _compactor(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from .compactor import Compactor
    return Compactor(_ms(args), _submitter(args))


def _submitter(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """spark-submit on this machine; the terminal gets the job's stage lines as they come and a
    failed job's error as the command's last line (all of Spark's output with ``--verbose``)."""
    from .jobs import LocalSubmitter
    return LocalSubmitter(master=getattr(args, "master", None), log=lambda line: print(line, file=sys.stderr),
                          deploy_mode=getattr(args, "deploy_mode", None), verbose=getattr(args, "verbose", False),
                          brief=True)


def cmd_compact(args: argparse.Namespace) -> None:
    """ALTER TABLE ... [PARTITION (...)] COMPACT 'major'|'minor' [AND WAIT]."""
    out = _compactor(args).compact(args.table, args.partition, args.type, wait=args.wait)

    def human() -> None:
        if not args.wait:
            print(out["message"])
            return
        print(out["message"])
        print(f"Compaction with id {out['id']} finished with status: {out['state']}")
        if out.get("error"):
            print(f"Error: {out['error']}")

    emit(args, out, human)
    if args.wait and out["state"] in (CompactionState.FAILED.label, CompactionState.REFUSED.label):
        raise CliError(f"compaction {out['id']} {out['state']}: {out.get('error')}")


INITIATOR_COLUMNS = [("Table", "table"), ("Partition", "partition"), ("Decision", "action"), ("Type", "type"),
                     ("CompactionId", "compaction_id"), ("Reason", "reason")]


def cmd_initiator(args: argparse.Namespace) -> None:
    from .compactor import Compactor
    decisions = [d.to_dict() for d in Compactor(_ms(args), _NoSubmit()).initiate(table=args.table)]
    emit(args, decisions, lambda: print_table(decisions, INITIATOR_COLUMNS))


class _NoSubmit:
    """The initiator's ``submit``: it decides from the metastore alone and runs no Spark job."""

    def __call__(self, spec):  # type: ignore[no-untyped-def]
        raise CliError(f"the initiator runs no Spark job (asked for {spec.job})")

    def kill(self) -> None:
        pass


def cmd_worker(args: argparse.Namespace) -> None:
    res = _compactor(args).run_worker(table=args.table, cq_id=args.id)
    if res is None:
        emit(args, None, lambda: print("No compaction to run"))
        return
    d = res.to_dict()
    emit(args, d, lambda: print(
        f"Compaction {d['id']} of {d['table']}{' ' + d['partition'] if d['partition'] else ''} ({d['type']}): "
        f"{d['state']}" + (f"; wrote {', '.join(d['output'])}" if d["output"] else "")
        + (f"; {d['error']}" if d["error"] else "")))
    if res.state == CompactionState.FAILED.label:
        raise CliError(f"compaction {res.id} failed: {res.error}")


CLEAN_COLUMNS = [("Kind", "kind"), ("CompactionId", "id"), ("Table", "table"), ("Partitions", "partitions"),
                 ("State", "state"), ("Deleted", "deleted"), ("Remaining", "remaining"), ("Error", "error")]


def cmd_cleaner(args: argparse.Namespace) -> None:
    results = [c.to_dict() for c in _compactor(args).clean(table=args.table)]
    emit(args, results, lambda: print_table(results, CLEAN_COLUMNS))


# -- data commands (each runs a Spark job in its own transaction) ----------------------------------
def _runner(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from .statements import StatementRunner
    return StatementRunner(_ms(args), _submitter(args), agent_info="hive-acid cli")


def _source(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from .jobs import SourceSpec
    from .statements import table_source
    if bool(args.source) == bool(getattr(args, "source_table", None)):
        raise CliError("give --source PATH or --source-table DB.TABLE (one of them)")
    if args.source:
        return SourceSpec(path=args.source, format=args.format, options=_kv(args.option, "--option"))
    return table_source(_ms(args), args.source_table)


def _report(args: argparse.Namespace, result) -> None:  # type: ignore[no-untyped-def]
    from .jobs.joblog import summary_table
    d = result.to_dict()
    for line in summary_table(result.manifest.partitions):
        print(line, file=sys.stderr)
    emit(args, d, lambda: print(
        f"{args.command.upper()} {d['table']}: {d['rows_inserted']} inserted, {d['rows_updated']} updated, "
        f"{d['rows_deleted']} deleted in {len(d['partitions'])} partition(s); write id {d['write_id']}, "
        f"transaction {d['txn_id']} committed"))


def cmd_insert(args: argparse.Namespace) -> None:
    from .acid.partitions import parse_spec
    from .jobs import Insert
    partition = parse_spec(args.partition) if args.partition else None
    _report(args, _runner(args).run(Insert(source=_source(args), overwrite=args.overwrite, partition=partition),
                                    args.table))


def cmd_delete(args: argparse.Namespace) -> None:
    from .jobs import Delete
    _report(args, _runner(args).run(Delete(where=args.where), args.table))


def cmd_update(args: argparse.Namespace) -> None:
    from .jobs import Update, parse_assignments
    sets: dict[str, str] = {}
    for item in args.set:
        for col, expr in parse_assignments(item).items():
            if col in sets:
                raise CliError(f"column {col!r} assigned twice")
            sets[col] = expr
    _report(args, _runner(args).run(Update(set=sets, where=args.where), args.table))


def cmd_merge(args: argparse.Namespace) -> None:
    from .jobs import Merge
    if not args.clause:
        raise CliError("give at least one --clause, e.g. --clause 'WHEN MATCHED THEN UPDATE SET v = s.v' "
                       "--clause 'WHEN NOT MATCHED THEN INSERT *'")
    keys = [k.strip().lower() for k in ",".join(args.on or []).split(",") if k.strip()]
    on: list[str] | str = args.on_expr if args.on_expr else keys
    _report(args, _runner(args).run(Merge(source=_source(args), on=on, clauses=list(args.clause)),
                                    args.table))


def cmd_read(args: argparse.Namespace) -> None:
    from .jobs import Read
    request = Read(limit=args.limit, partition=args.partition, where=args.where,
                   columns=[c.strip().lower() for c in args.columns.split(",")] if args.columns else None,
                   with_row_id=args.row_id, order_by=args.order_by.split(",") if args.order_by else None)
    rows = _runner(args).read_rows(args.table, request, at_write_id=args.at_write_id)
    if args.json:
        for r in rows:
            print(json.dumps(r, default=str))
    elif rows:
        cols = list(rows[0])
        print_table(rows, [(c, c) for c in cols])


def cmd_dirs(args: argparse.Namespace) -> None:
    """AcidState of every partition: what a reader picks and why the rest is skipped (no Spark)."""
    from .acid import fs as afs
    from .acid.state import get_acid_state
    ms = _ms(args)
    info = ms.catalog.get_table(args.table)
    snap = ms.txns.snapshot(info.qualified_name, txn_id=args.txn)
    fs, root = afs.filesystem_for(info.location)
    only = [ms.catalog.partition_name(info, args.partition)] if args.partition else None
    listing = afs.list_table(fs, root, info.to_spec().partition_names, only)
    out: list[dict[str, Any]] = []
    for part in sorted(listing.partitions):
        st = get_acid_state(listing.partitions[part], snap.valid_write_ids, snap.valid_txns)
        out.append({"partition": part or None,
                    "base": st.base.parsed.name if st.base else None,
                    "deltas": [d.parsed.name for d in st.deltas],
                    "delete_deltas": [d.parsed.name for d in st.delete_deltas],
                    "original_files": [p for p, _ in st.original_files],
                    "obsolete": sorted(st.obsolete), "aborted": sorted(st.aborted),
                    "skipped": dict(sorted(st.skipped.items()))})
    payload = {"table": info.qualified_name, "location": info.location,
               "valid_write_ids": snap.valid_write_ids.to_string(), "partitions": out}

    def human() -> None:
        print(f"{info.qualified_name} at {info.location}\nsnapshot {payload['valid_write_ids']}")
        for p in out:
            print(f"\n[{p['partition'] or '(table)'}]")
            for name in ([p["base"]] if p["base"] else []) + p["deltas"] + p["delete_deltas"]:
                print(f"  read    {name}")
            for name in p["original_files"]:
                print(f"  read    {name} (original file)")
            for name, why in p["skipped"].items():
                print(f"  skip    {name}: {why}")

    emit(args, payload, human)


def cmd_register(args: argparse.Namespace) -> None:
    """Adopt a table directory Hive wrote: its write ids become committed history."""
    from .acid import fs as afs
    from .acid.names import ParsedBase, parse_dir
    ms = _ms(args)
    fs, root = afs.filesystem_for(args.location)
    if not afs.exists(fs, root):
        raise CliError(f"location {args.location} does not exist")
    info = ms.catalog.create_table(args.table, args.columns, partitioned_by=args.partitioned_by,
                                   bucketed_by=args.bucketed_by, buckets=args.buckets or 0, location=args.location,
                                   properties=_kv(args.property, "--property"))
    listing = afs.list_table(fs, root, info.to_spec().partition_names)
    max_wid = 0
    for entries in listing.partitions.values():
        for e in entries:
            if e.is_dir and (e.name.startswith(("base_", "delta_", "delete_delta_"))):
                p = parse_dir(e.name)
                max_wid = max(max_wid, p.write_id if isinstance(p, ParsedBase) else p.max_write_id)
    aborted = [int(x) for x in (args.aborted or "").split(",") if x.strip()]
    ms.txns.adopt_history(info.qualified_name, max_wid, aborted)
    parts = sorted(p for p in listing.partitions if p)
    if parts:
        txn = ms.txns.open_txn(agent_info="hive-acid register")
        with ms.store.write() as conn:
            ms.catalog.add_partitions(conn, info.db, info.name, parts, txn)
        ms.txns.commit_txn(txn)
    d = {**info.to_dict(), "adopted_write_ids": max_wid, "aborted_write_ids": aborted, "partitions": parts}
    emit(args, d, lambda: print(f"Registered {info.qualified_name} at {info.location}: write ids 1..{max_wid} "
                                f"adopted ({len(aborted)} aborted), {len(parts)} partition(s)"))


# -- parser --------------------------------------------------------------------------------------
def _txn_id(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad transaction id {text!r}: not an integer") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"bad transaction id {text!r}: must be positive")
    return v


# --json is accepted after the command too: hive-acid read db.t --json
_COMMON = argparse.ArgumentParser(add_help=False)
_COMMON.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _command(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    return sub.add_parser(name, parents=[_COMMON], **kwargs)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hive-acid", description=__doc__.splitlines()[0])
    p.add_argument("--metastore", default=None,
                   help=f"metastore URL (sqlite:///PATH or postgresql://...); default $HIVE_ACID_METASTORE or "
                        f"{default_url()}")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = _command(sub, "init", help="create the metastore schema (idempotent)")
    s.add_argument("--warehouse", help="root folder/URI of table directories")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="a setting, e.g. hive.txn.timeout=300")
    s.set_defaults(fn=cmd_init)

    s = _command(sub, "config", help="show or change a metastore-wide setting")
    s.add_argument("key", nargs="?")
    s.add_argument("value", nargs="?")
    s.set_defaults(fn=cmd_config)

    s = _command(sub, "create-table", help="register a transactional table")
    s.add_argument("table", metavar="DB.TABLE")
    s.add_argument("--columns", required=True, help='"id bigint, name string"')
    s.add_argument("--partitioned-by", help='"ds string"')
    s.add_argument("--bucketed-by", help="comma-separated bucket columns")
    s.add_argument("--buckets", type=int, help="number of buckets")
    s.add_argument("--location")
    s.add_argument("--property", action="append", metavar="K=V", help="table property (repeatable)")
    s.add_argument("--if-not-exists", action="store_true")
    s.set_defaults(fn=cmd_create_table)

    for name, fn, helptext in (("describe", cmd_describe, "columns, location, properties, partitions"),
                               ("drop-table", cmd_drop_table, "forget a table (files stay)")):
        s = _command(sub, name, help=helptext)
        s.add_argument("table", metavar="DB.TABLE")
        s.set_defaults(fn=fn)

    s = _command(sub, "alter-table", help="set table properties")
    s.add_argument("table", metavar="DB.TABLE")
    s.add_argument("--property", action="append", required=True, metavar="K=V")
    s.set_defaults(fn=cmd_alter_table)

    s = _command(sub, "list-tables", help="tables of one or all databases")
    s.add_argument("db", nargs="?")
    s.set_defaults(fn=cmd_list_tables)

    txn = _command(sub, "txn", help="transaction lifecycle").add_subparsers(dest="txn_cmd", required=True,
                                                                            metavar="ACTION")

    s = _command(txn, "open", help="open a transaction")
    s.add_argument("--count", type=int, default=1)
    s.add_argument("--agent-info")
    s.set_defaults(fn=cmd_txn_open)
    s = _command(txn, "allocate", help="allocate the txn's write id for tables")
    s.add_argument("txn", type=_txn_id)
    s.add_argument("tables", nargs="+", metavar="DB.TABLE")
    s.set_defaults(fn=cmd_txn_allocate)
    s = _command(txn, "commit", help="commit a transaction")
    s.add_argument("txn", type=_txn_id)
    s.add_argument("--writes", metavar="FILE", help="JSON list of write stats to record")
    s.set_defaults(fn=cmd_txn_commit)
    s = _command(txn, "abort", help="abort a transaction")
    s.add_argument("txn", type=_txn_id)
    s.add_argument("--reason", default="aborted by user")
    s.set_defaults(fn=cmd_txn_abort)
    s = _command(txn, "heartbeat", help="keep a transaction alive")
    s.add_argument("txn", type=_txn_id)
    s.set_defaults(fn=cmd_txn_heartbeat)
    s = _command(txn, "show", help="one transaction with its write ids")
    s.add_argument("txn", type=_txn_id)
    s.set_defaults(fn=cmd_txn_show)

    s = _command(sub, "snapshot", help="the table's ValidWriteIdList now (or as a txn sees it)")
    s.add_argument("table", metavar="DB.TABLE")
    s.add_argument("--txn", type=_txn_id)
    s.set_defaults(fn=cmd_snapshot)

    s = _command(sub, "parse-writeids", help="check and explain a ValidWriteIdList string")
    s.add_argument("valid_write_ids")
    s.add_argument("--write-id", type=int, help="also say whether this write id is valid")
    s.set_defaults(fn=cmd_parse_writeids)

    s = _command(sub, "show", help="SHOW TRANSACTIONS | LOCKS | COMPACTIONS")
    s.add_argument("what", choices=["transactions", "locks", "compactions"])
    s.add_argument("target", nargs="?", metavar="DB[.TABLE]")
    s.add_argument("--all", action="store_true", help="transactions: include committed ones")
    s.add_argument("--partition", help="compactions: partition spec col=value[,col=value]")
    s.add_argument("--state", help="compactions: initiated, working, ready for cleaning, failed, succeeded...")
    s.add_argument("--type", help="compactions: major or minor")
    s.add_argument("--id", type=int, help="compactions: one compaction id")
    s.add_argument("--limit", type=int)
    s.set_defaults(fn=cmd_show)

    s = _command(sub, "abort-transactions", help="ABORT TRANSACTIONS id [id ...]")
    s.add_argument("txns", nargs="+", type=_txn_id)
    s.add_argument("--reason", default="aborted by user")
    s.set_defaults(fn=cmd_abort_transactions)

    s = _command(sub, "housekeeper", help="abort timed-out txns, purge old bookkeeping, requeue dead compactions")
    s.set_defaults(fn=cmd_housekeeper)

    s = _command(sub, "metrics", help="ACID metrics (open/aborted txns, compaction queue, deltas per table)")
    s.add_argument("--prometheus", action="store_true", help="Prometheus text exposition format")
    s.set_defaults(fn=cmd_metrics)

    _data_parsers(sub)
    _compaction_parsers(sub)
    return p


def _spark_opts(s: argparse.ArgumentParser) -> None:
    """Options of every command that runs a Spark job."""
    s.add_argument("--master", help="Spark master (default $HIVE_ACID_SPARK_MASTER or local[*])")
    s.add_argument("--deploy-mode", choices=["client", "cluster"],
                   help="where the Spark driver runs (spark-submit's --deploy-mode; default client)")
    s.add_argument("--verbose", action="store_true",
                   help="show all of the Spark job's output (default: its stage lines, and its error at the end)")


def _compaction_parsers(sub: Any) -> None:
    s = _command(sub, "compact", help="ALTER TABLE ... COMPACT 'major'|'minor' [AND WAIT]")
    s.add_argument("table", metavar="DB.TABLE")
    s.add_argument("--partition", help="col=value[,col=value] (required for a partitioned table)")
    s.add_argument("--type", required=True, choices=["major", "minor"])
    s.add_argument("--wait", action="store_true", help="run the worker and the cleaner now and wait for the result")
    _spark_opts(s)
    s.set_defaults(fn=cmd_compact)

    s = _command(sub, "initiator", help="queue the compactions the recorded write stats call for")
    s.add_argument("--table", metavar="DB.TABLE")
    s.set_defaults(fn=cmd_initiator)

    s = _command(sub, "worker", help="claim one queued compaction and run it")
    s.add_argument("--table", metavar="DB.TABLE")
    s.add_argument("--id", type=int, help="this compaction id")
    _spark_opts(s)
    s.set_defaults(fn=cmd_worker)

    s = _command(sub, "cleaner", help="delete files compactions made obsolete, and files of aborted writes")
    s.add_argument("--table", metavar="DB.TABLE")
    _spark_opts(s)
    s.set_defaults(fn=cmd_cleaner)


def _data_parsers(sub: Any) -> None:
    def source_opts(s: argparse.ArgumentParser) -> None:
        s.add_argument("--source", help="file or directory of rows (orc, parquet, csv, json)")
        s.add_argument("--source-table", metavar="DB.TABLE", help="another ACID table, read at its latest snapshot")
        s.add_argument("--format", help="source format if the path does not tell")
        s.add_argument("--option", action="append", metavar="K=V", help="source reader option (repeatable)")

    s = _command(sub, "insert", help="INSERT [OVERWRITE] rows from a file into a table")
    s.add_argument("table", metavar="DB.TABLE")
    source_opts(s)
    s.add_argument("--overwrite", action="store_true", help="INSERT OVERWRITE (the table, or --partition)")
    s.add_argument("--partition", help="static partition col=value[,col=value]")
    _spark_opts(s)
    s.set_defaults(fn=cmd_insert)

    s = _command(sub, "delete", help="DELETE FROM table WHERE expr")
    s.add_argument("table", metavar="DB.TABLE")
    s.add_argument("--where", required=True, help="Spark SQL condition")
    _spark_opts(s)
    s.set_defaults(fn=cmd_delete)

    s = _command(sub, "update", help="UPDATE table SET col = expr WHERE expr")
    s.add_argument("table", metavar="DB.TABLE")
    s.add_argument("--set", action="append", required=True, help='"col = expr" (repeatable)')
    s.add_argument("--where", help="Spark SQL condition (default: every row)")
    _spark_opts(s)
    s.set_defaults(fn=cmd_update)

    s = _command(sub, "merge", help="MERGE INTO table t USING source s ON keys WHEN ...")
    s.add_argument("table", metavar="DB.TABLE")
    source_opts(s)
    s.add_argument("--on", action="append", help="key column(s), comma-separated or repeated")
    s.add_argument("--on-expr", help="a full ON condition over t.* and s.* instead of --on")
    s.add_argument("--clause", action="append", help="\"WHEN MATCHED [AND cond] THEN UPDATE SET c = s.c | DELETE\", "
                   "\"WHEN NOT MATCHED THEN INSERT *\", \"WHEN NOT MATCHED BY SOURCE THEN DELETE\" (in order)")
    _spark_opts(s)
    s.set_defaults(fn=cmd_merge)

    s = _command(sub, "read", help="rows of a table at its latest (or an older) snapshot")
    s.add_argument("table", metavar="DB.TABLE")
    s.add_argument("--partition", help="col=value[,col=value]")
    s.add_argument("--at-write-id", type=int, help="read as of this write id")
    s.add_argument("--limit", type=int)
    s.add_argument("--columns", help="comma-separated columns")
    s.add_argument("--where", help="Spark SQL condition")
    s.add_argument("--order-by", help="comma-separated columns")
    s.add_argument("--row-id", action="store_true", help="include ROW__ID")
    _spark_opts(s)
    s.set_defaults(fn=cmd_read)

    s = _command(sub, "dirs", help="the directories a reader picks per partition, and why others are skipped")
    s.add_argument("table", metavar="DB.TABLE")
    s.add_argument("--partition", help="col=value[,col=value]")
    s.add_argument("--txn", type=_txn_id, help="as this transaction sees the table")
    s.set_defaults(fn=cmd_dirs)

    s = _command(sub, "register", help="adopt a table directory Hive already wrote")
    s.add_argument("table", metavar="DB.TABLE")
    s.add_argument("--location", required=True)
    s.add_argument("--columns", required=True)
    s.add_argument("--partitioned-by")
    s.add_argument("--bucketed-by")
    s.add_argument("--buckets", type=int)
    s.add_argument("--property", action="append", metavar="K=V")
    s.add_argument("--aborted", help="write ids Hive aborted, comma-separated (they stay invisible)")
    s.set_defaults(fn=cmd_register)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.fn(args)
    except (HiveAcidError, ValueError, OSError) as exc:
        print(f"hive-acid: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

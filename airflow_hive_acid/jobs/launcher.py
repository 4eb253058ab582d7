"""Run a job: :func:`run_job` is the one place a job runs under its transaction's heartbeat;
a :class:`Submit` starts it. :class:`LocalSubmitter` uses the ``spark-submit`` of this
environment's pyspark without importing pyspark (the Airflow worker and the CLI never do): it
finds SPARK_HOME from the installed package, points the Python workers at this interpreter,
passes the spec on the command line, streams the output and reads the manifest back from the
table's filesystem, so the driver may run on another machine (cluster deploy mode)."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..acid import fs as afs
from ..errors import JobFailed
from .joblog import QUIET_CONF, OutputFilter
from .manifest import Manifest
from .spec import JobSpec

# the entry scripts, by job name: the Spark jobs, and the jobs whose driver uses the data source
ENTRYPOINTS = (Path(__file__).resolve().parent.parent / "spark" / "entrypoints",
               Path(__file__).resolve().parent.parent / "datasource" / "entrypoints")


@runtime_checkable
class Submit(Protocol):
    """Runs one job to its end: its manifest, or ``JobFailed``; ``kill`` stops a running job."""

    def __call__(self, spec: JobSpec) -> Manifest: ...

    def kill(self) -> None: ...


def run_job(submit: Submit, spec: JobSpec, keepalive: AbstractContextManager | None = None) -> Manifest:
    """Run ``spec`` with ``submit`` inside ``keepalive`` (the transaction's heartbeat), its
    manifest on the table's filesystem at a fresh path, removed once read (with the staging
    folder, if no other job has something there)."""
    name = (f"txn_{spec.txn_id}_" if spec.txn_id else "") + f"job_{uuid.uuid4().hex}"
    job_dir = afs.join(spec.table.location, afs.STAGING_DIR, name)
    spec.manifest_path = afs.join(job_dir, "manifest.json")
    try:
        with keepalive if keepalive is not None else nullcontext():
            return submit(spec)
    finally:
        fs, path = afs.filesystem_for(job_dir)
        afs.remove_staged(fs, path)


def spark_home() -> str:
    """``$SPARK_HOME``, else the pip-installed pyspark's directory (found without importing it)."""
    env = os.environ.get("SPARK_HOME")
    if env:
        return env
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise JobFailed("pyspark is not installed in this environment and SPARK_HOME is not set")
    return spec.submodule_search_locations[0]


def spark_submit_binary() -> str:
    return str(Path(spark_home()) / "bin" / "spark-submit")


def job_script(job: str) -> str:
    for folder in ENTRYPOINTS:
        path = folder / f"{job}.py"
        if path.exists():
            return str(path)
    raise JobFailed(f"no entry script for job {job!r} in {', '.join(map(str, ENTRYPOINTS))}")


def spec_arguments(spec: JobSpec) -> list[str]:
    """The entry script's arguments: the spec itself, so no file of the submitter is needed."""
    return ["--spec-b64", base64.b64encode(spec.to_json().encode()).decode()]


def job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for spark-submit: SPARK_HOME, and this interpreter for driver and workers.

    ``PYTHONSAFEPATH``: Spark starts the worker daemon as ``python -m``, which would put the
    working directory first on its path, so a directory holding another ``airflow_hive_acid``
    (an older checkout) would give the workers other code than the driver."""
    env = dict(os.environ)
    env["SPARK_HOME"] = spark_home()
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.setdefault("PYTHONSAFEPATH", "1")
    env.update(extra or {})
    return env


# Settings that make small jobs start faster; a cluster's spark-defaults still apply. The worker
# daemon is pyspark's own, imported from the installed package (see ``spark/entrypoints``).
FAST_START_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.speculation": "false",
    "spark.python.daemon.module": "airflow_hive_acid.spark.entrypoints.daemon",
}


def env_conf() -> dict[str, str]:
    """Extra Spark settings from ``$HIVE_ACID_SPARK_CONF``: whitespace-separated ``key=value``."""
    out = {}
    for item in os.environ.get("HIVE_ACID_SPARK_CONF", "").split():
        if "=" not in item:
            raise JobFailed(f"HIVE_ACID_SPARK_CONF item {item!r} is not key=value")
        k, v = item.split("=", 1)
        out[k] = v
    return out


class FastJvm:
    """Driver JVM options that halve a short job's start: class data sharing (an archive of the
    classes a Spark driver loads, made by the first job and reused by the next) and the C1
    compiler only (a job's heavy work runs in Python; C2 would only compete with it for cores).

    Only where the driver runs on this machine (client deploy mode); off with
    ``HIVE_ACID_FAST_JVM=0``. A stale or foreign archive is ignored by the JVM (``-Xshare:auto``).
    """

    def __init__(self, deploy_mode: str | None = None):
        self.enabled = os.environ.get("HIVE_ACID_FAST_JVM", "1") != "0" and (deploy_mode or "client") == "client"
        self._dump: Path | None = None
        self.archive = self._archive_path() if self.enabled else None

    @staticmethod
    def _archive_path() -> Path | None:
        java = shutil.which("java", path=str(Path(os.environ["JAVA_HOME"]) / "bin")) if os.environ.get(
            "JAVA_HOME") else shutil.which("java")
        if java is None:
            return None
        java = os.path.realpath(java)
        jars = Path(spark_home()) / "jars"
        key = f"{java}:{os.stat(java).st_mtime_ns}:{jars}:{jars.stat().st_mtime_ns if jars.exists() else 0}"
        cache = Path(os.environ.get("HIVE_ACID_CACHE_DIR", Path.home() / ".cache" / "hive-acid"))
        return cache / f"spark-driver-{hashlib.sha1(key.encode()).hexdigest()[:16]}.jsa"

    def conf(self, conf: dict[str, str]) -> dict[str, str]:
        """``conf`` with these options added to ``spark.driver.extraJavaOptions``."""
        if not self.enabled or self.archive is None:
            return conf
        if self.archive.exists():
            opts = f"-XX:SharedArchiveFile={self.archive}"
        else:
            try:
                self.archive.parent.mkdir(parents=True, exist_ok=True)
            except OSError:          # no writable cache: start without an archive
                return conf
            self._dump = self.archive.with_name(f"{self.archive.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            opts = f"-XX:ArchiveClassesAtExit={self._dump}"
        opts += " -XX:TieredStopAtLevel=1 -Xlog:cds=off -Xlog:cds+dynamic=off"
        key = "spark.driver.extraJavaOptions"
        return {**conf, key: f"{conf[key]} {opts}" if conf.get(key) else opts}

    def finish(self) -> None:
        """After the job: the archive its driver dumped becomes the one later jobs use."""
        if self._dump is not None and self._dump.exists():
            try:
                if self.archive is not None and not self.archive.exists():
                    os.replace(self._dump, self.archive)
            finally:
                self._dump.unlink(missing_ok=True)
        self._dump = None


@dataclass(frozen=True)
class Application:
    """What spark-submit runs for a job: the application file, its main class (a JVM
    application), its arguments and the job's Spark settings."""

    file: str
    args: list[str]
    conf: dict[str, str]
    java_class: str | None = None


def application(spec: JobSpec, master: str, conf: dict[str, str] | None = None,
                deploy_mode: str | None = None) -> Application:
    """A job's application. Standalone masters refuse Python applications in cluster deploy
    mode; there the driver runs pyspark's ``PythonRunner`` as a JVM application instead."""
    conf = {**FAST_START_CONF, **env_conf(), **(conf or {})}
    if deploy_mode == "cluster" and master.startswith("spark://"):
        python = os.environ.get("PYSPARK_PYTHON", sys.executable)
        conf = {"spark.standalone.submit.waitAppCompletion": "true", "spark.pyspark.python": python,
                "spark.pyspark.driver.python": python, **conf}
        core = next((Path(spark_home()) / "jars").glob("spark-core_*.jar"))
        return Application(str(core), [job_script(spec.job), "", *spec_arguments(spec)], conf,
                           "org.apache.spark.deploy.PythonRunner")
    return Application(job_script(spec.job), spec_arguments(spec), conf)


def submit_command(spec: JobSpec, master: str, conf: dict[str, str] | None = None,
                   deploy_mode: str | None = None) -> list[str]:
    """The spark-submit command line of a job."""
    app = application(spec, master, conf, deploy_mode)
    cmd = [spark_submit_binary(), "--master", master, "--name", f"hive-acid-{spec.job}"]
    if deploy_mode:
        cmd += ["--deploy-mode", deploy_mode]
    for k, v in app.conf.items():
        cmd += ["--conf", f"{k}={v}"]
    if app.java_class:
        cmd += ["--class", app.java_class]
    return cmd + [app.file, *app.args]


def collect_manifest(spec: JobSpec, returncode: int, output_tail: Iterable[str] = ()) -> Manifest:
    """The manifest of a finished job, or ``JobFailed`` with the job's own error (from the
    manifest) or, if it wrote none, the exit status and the last lines of its output."""
    manifest = Manifest.load(spec.manifest_path)
    if manifest is not None:
        manifest.raise_for_failure()
    if returncode != 0 or manifest is None:
        raise JobFailed(f"spark-submit of the {spec.job} job exited with status {returncode}; last output:\n"
                        + "\n".join(output_tail), manifest)
    return manifest


def kill_process_group(proc: subprocess.Popen | None) -> None:
    """SIGKILL a spark-submit started with ``start_new_session=True`` and everything it started
    (the JVM, the Python driver, the Python workers): killing spark-submit alone orphans them."""
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class LocalSubmitter:
    """Runs jobs with the local spark-submit (``local[*]`` unless told otherwise); used by the
    CLI and by tests. The Airflow hook submits through ``SparkSubmitHook`` instead.

    ``log`` gets the job's stage lines, warnings and errors; only its stage lines when
    ``brief``; with ``verbose`` all of Spark's output (:mod:`~airflow_hive_acid.jobs.joblog`).
    A failed job's error comes back in ``JobFailed`` either way."""

    def __init__(self, master: str | None = None, conf: dict[str, str] | None = None,
                 log: Callable[[str], None] | None = None, deploy_mode: str | None = None,
                 verbose: bool = False, brief: bool = False):
        self.master = master or os.environ.get("HIVE_ACID_SPARK_MASTER", "local[*]")
        self.conf = conf or {}
        self.deploy_mode = deploy_mode
        self.verbose = verbose
        self.brief = brief
        self.log = log or (lambda line: print(line, file=sys.stderr))
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def __call__(self, spec: JobSpec) -> Manifest:
        jvm = FastJvm(self.deploy_mode)
        conf = {**({} if self.verbose else QUIET_CONF), **env_conf(), **self.conf}
        cmd = submit_command(spec, self.master, jvm.conf(conf), self.deploy_mode)
        output = OutputFilter(self.verbose, self.brief)
        tail: deque[str] = deque(maxlen=40)
        with self._lock:
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                          env=job_env(), start_new_session=True)
        proc = self._proc
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            if output.keep(line):
                self.log(line)
        rc = proc.wait()
        with self._lock:
            self._proc = None
        jvm.finish()
        return collect_manifest(spec, rc, tail)

    def kill(self) -> None:
        """Kill the running spark-submit and everything it started (driver, Python workers)."""
        with self._lock:
            proc = self._proc
        kill_process_group(proc)

"""Run a job through the ``spark-submit`` of this environment's pyspark, without importing
pyspark (the Airflow worker and the CLI never do): find SPARK_HOME from the installed package,
point the Python workers at this interpreter, stream the output, read the manifest."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from .protocol import JobSpec, Manifest

JOBS_DIR = Path(__file__).resolve().parent / "jobs"


class JobFailed(RuntimeError):
    """A Spark job that ended without success; ``manifest`` is set if the job wrote one."""

    def __init__(self, message: str, manifest: Manifest | None = None):
        super().__init__(message)
        self.manifest = manifest


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
    path = JOBS_DIR / f"{job}.py"
    if not path.exists():
        raise JobFailed(f"no entry script for job {job!r} in {JOBS_DIR}")
    return str(path)


def job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for spark-submit: SPARK_HOME, and this interpreter for driver and workers."""
    env = dict(os.environ)
    env["SPARK_HOME"] = spark_home()
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.update(extra or {})
    return env


# Settings that make small jobs start faster; a cluster's spark-defaults still apply. The worker
# daemon is pyspark's own, imported from the installed package (see ``jobs/__init__.py``).
FAST_START_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.speculation": "false",
    "spark.python.daemon.module": "airflow_hive_acid.spark.jobs.daemon",
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


def submit_command(spec_path: str, job: str, master: str, conf: dict[str, str] | None = None) -> list[str]:
    cmd = [spark_submit_binary(), "--master", master, "--name", f"hive-acid-{job}"]
    for k, v in {**FAST_START_CONF, **env_conf(), **(conf or {})}.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + [job_script(job), "--spec", spec_path]


def collect_manifest(spec: JobSpec, returncode: int, output_tail: Iterable[str] = ()) -> Manifest:
    """The manifest of a finished job, or ``JobFailed`` with the job's own error (from the
    manifest) or, if it wrote none, the exit status and the last lines of its output."""
    manifest = None
    if Path(spec.manifest_path).exists():
        try:
            manifest = Manifest.load(spec.manifest_path)
        except ValueError:
            manifest = None
    if manifest is not None and not manifest.ok:
        raise JobFailed(f"{spec.job} job failed: {manifest.error}", manifest)
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
    CLI and by tests. The Airflow hook submits through ``SparkSubmitHook`` instead."""

    def __init__(self, master: str | None = None, conf: dict[str, str] | None = None,
                 log: Callable[[str], None] | None = None):
        self.master = master or os.environ.get("HIVE_ACID_SPARK_MASTER", "local[*]")
        self.conf = conf or {}
        self.log = log or (lambda line: print(line, file=sys.stderr))
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def __call__(self, spec: JobSpec, spec_path: str) -> Manifest:
        jvm = FastJvm()
        cmd = submit_command(spec_path, spec.job, self.master, jvm.conf({**env_conf(), **self.conf}))
        tail: deque[str] = deque(maxlen=40)
        with self._lock:
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                          env=job_env(), start_new_session=True)
        proc = self._proc
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
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

"""An install without the ``postgres`` extra: the metastore works on SQLite, and a PostgreSQL
URL says which extra to install. Checked in a real venv whose site-packages are this project's
minus psycopg."""
import os
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def python_without_psycopg(tmp_path_factory) -> Path:
    """The interpreter of a new venv that sees every package of this one except psycopg's."""
    root = tmp_path_factory.mktemp("no-psycopg")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root / "venv")
    python = root / "venv" / "bin" / "python"
    target = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip())
    sources = {Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
    for source in sources:
        for entry in source.iterdir():
            if not entry.name.lower().startswith("psycopg") and not (target / entry.name).exists():
                (target / entry.name).symlink_to(entry)
    return python


def run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HIVE_ACID_METASTORE")}
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


SCRIPT = """
import importlib.util, sys
assert importlib.util.find_spec("psycopg") is None, "psycopg must not be importable here"
try:
    import psycopg
except ModuleNotFoundError:
    pass
else:
    raise AssertionError("psycopg imported")

import airflow_hive_acid.metastore.db
from airflow_hive_acid.errors import InvalidInputError
from airflow_hive_acid.metastore import Metastore, TxnState

ms = Metastore.initialize(sys.argv[1], warehouse=sys.argv[2])
ms.catalog.create_table("db.t", "id bigint")
txn, write_ids = ms.txns.begin_write(["db.t"])
ms.txns.commit_txn(txn)
assert ms.txns.get_txn(txn).state is TxnState.COMMITTED and write_ids == {"db.t": 1}
ms.close()
try:
    Metastore("postgresql://ops:s3cret@127.0.0.1:5432/test")
except InvalidInputError as exc:
    print(exc)
else:
    raise AssertionError("a PostgreSQL metastore opened without psycopg")
assert not any(m.startswith("psycopg") or m.endswith("pgfast") for m in sys.modules), sorted(sys.modules)
"""


def test_sqlite_metastore_without_psycopg_and_a_clear_error_for_postgresql(python_without_psycopg, tmp_path):
    proc = run(python_without_psycopg, "-c", SCRIPT, f"sqlite:///{tmp_path / 'm.db'}", str(tmp_path / "wh"),
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout.strip()
    assert "psycopg is not installed" in message and "pip install 'airflow-hive-acid[postgres]'" in message
    assert "s3cret" not in message

    cli = run(python_without_psycopg, "-m", "airflow_hive_acid.cli", "--metastore",
              "postgresql://ops:s3cret@127.0.0.1:5432/test", "show", "transactions", cwd=tmp_path)
    assert cli.returncode == 1
    assert cli.stderr == ("hive-acid: error: metastore postgresql+psycopg://ops:***@127.0.0.1:5432/test is "
                          "PostgreSQL, whose driver psycopg is not installed: "
                          "pip install 'airflow-hive-acid[postgres]'\n"), cli.stderr

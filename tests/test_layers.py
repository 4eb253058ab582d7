"""The import rules of docs/architecture.md §1, checked on the source: every import (relative
ones resolved, function-local ones included) of every module of the package."""
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "airflow_hive_acid"
AIRFLOW_LAYER = ("hooks", "operators", "sensors", "triggers", "assets", "cli")
CLIENT = ("statements", "compactor", "heartbeat", "writetxn")

# layer (first path component under the package) -> prefixes it must not import
FORBIDDEN = {
    "errors": ("airflow", "pyspark", "sqlalchemy", "airflow_hive_acid."),
    "acid": ("airflow", "pyspark", "sqlalchemy", "airflow_hive_acid.metastore", "airflow_hive_acid.jobs",
             "airflow_hive_acid.spark", "airflow_hive_acid.datasource"),
    "metastore": ("airflow.", "pyspark", "airflow_hive_acid.jobs", "airflow_hive_acid.spark",
                  "airflow_hive_acid.datasource", "airflow_hive_acid.statements"),
    "jobs": ("airflow.", "pyspark", "sqlalchemy", "airflow_hive_acid.metastore", "airflow_hive_acid.spark",
             "airflow_hive_acid.datasource"),
    "spark": ("airflow.", "sqlalchemy", "airflow_hive_acid.metastore", "airflow_hive_acid.statements",
              "airflow_hive_acid.compactor", "airflow_hive_acid.heartbeat", "airflow_hive_acid.datasource"),
    "datasource": ("airflow.",),
    **{c: ("airflow.", "pyspark", "airflow_hive_acid.spark", "airflow_hive_acid.datasource") for c in CLIENT},
    **{a: ("pyspark", "airflow_hive_acid.spark", "airflow_hive_acid.datasource") for a in AIRFLOW_LAYER},
}


def imports(path: Path) -> list[str]:
    module = "airflow_hive_acid." + ".".join(path.relative_to(PKG).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module.removesuffix(".__init__")
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            out += [base] + [f"{base}.{a.name}" for a in node.names]
    return out


def layer_of(path: Path) -> str:
    first = path.relative_to(PKG).parts[0]
    return first.removesuffix(".py")


def matches(module: str, rule: str) -> bool:
    """``"airflow."`` is a prefix (``airflow.models``, not ``airflow_hive_acid``); ``"pyspark"``
    is the package and everything in it."""
    return module.startswith(rule) if rule.endswith(".") else module == rule or module.startswith(rule + ".")


def modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_module_imports_only_what_its_layer_may(path: Path):
    rules = FORBIDDEN.get(layer_of(path), ())
    bad = [m for m in imports(path) if any(matches(m, r) for r in rules)]
    assert not bad, f"{path.relative_to(PKG)} imports {bad}: see docs/architecture.md §1"


def test_the_rules_see_relative_imports():
    src = PKG / "datasource" / "source.py"
    found = imports(src)
    assert "airflow_hive_acid.spark.scan" in found and "airflow_hive_acid.metastore" in found
    assert any(m.startswith("airflow_hive_acid.metastore") for m in imports(PKG / "statements.py"))


def test_nothing_but_tests_imports_the_data_source():
    users = [p for p in PKG.rglob("*.py") if layer_of(p) != "datasource"
             and any(m.startswith("airflow_hive_acid.datasource") for m in imports(p))]
    assert not users

"""What every hive-acid operator shares: the two hooks, the task's identity in the metastore
(so a retried task finds what its earlier attempt did), and txn ids coming from XCom."""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any, TypeVar

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from ..errors import InvalidInputError, is_retryable
from ..hooks.metastore import AcidMetastoreHook
from ..hooks.spark import AcidSparkHook

F = TypeVar("F", bound=Callable[..., Any])


def fails_fast(execute: F) -> F:
    """An ``execute`` whose error no retry can fix (``errors.is_retryable``: bad input, an unknown
    table, a job that refused its input, the abort of a txn the task joined) fails the task at
    once (``AirflowFailException``); any other error is left to the task's ``retries``."""

    @functools.wraps(execute)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return execute(self, *args, **kwargs)
        except Exception as exc:
            if is_retryable(exc, joined_txn=_joined_txn(self)):
                raise
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc

    return wrapper  # type: ignore[return-value]


def _joined_txn(operator: Any) -> int | None:
    """The txn an operator was given (``txn_id``) rather than opened itself, if any."""
    try:
        return parse_txn_id(getattr(operator, "txn_id", None))
    except InvalidInputError:
        return None


def task_key(context: Context) -> str:
    """``airflow:<dag>.<task>.<run>[<map index>]``, at most 256 characters: the txn agent info
    and statement key of this task instance, the same in every try."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    key = f"airflow:{ti.dag_id}.{ti.task_id}.{ti.run_id}" + (f"[{map_index}]" if map_index is not None
                                                               and map_index >= 0 else "")
    if len(key) > 256:
        key = key[:215] + "#" + hashlib.sha1(key.encode()).hexdigest()
    return key


def parse_txn_id(value: Any, what: str = "txn_id") -> int | None:
    """A txn id from a literal, a template's rendered string, or a Begin operator's XCom dict."""
    if value is None or value == "":
        return None
    if isinstance(value, dict):
        value = value.get("txn_id")
    return positive_id(value, what, "a transaction id")


def positive_id(value: Any, what: str, noun: str) -> int:
    """``value`` (an int, or a rendered template's string of one) as a positive id; ``what`` names
    the argument and ``noun`` the kind of id in the error."""
    if isinstance(value, bool):
        raise InvalidInputError(f"{what} must be {noun} (an integer), got {value!r}")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise InvalidInputError(f"{what} must be {noun} (an integer), got {value!r}") from None
    if number <= 0:
        raise InvalidInputError(f"{what} must be positive, got {number}")
    return number


class AcidBaseOperator(BaseOperator):
    """Base of the hive-acid operators: ``hive_acid_conn_id`` names the metastore connection,
    ``spark_conn_id`` the Spark one (``spark_default``; ``local[*]`` if it does not exist).
    ``verbose`` puts all of Spark's output in the task log, not only the job's stage lines,
    warnings and errors."""

    ui_color = "#e8f4e8"

    def __init__(self, *, hive_acid_conn_id: str = AcidMetastoreHook.default_conn_name,
                 spark_conn_id: str = AcidSparkHook.default_conn_name, spark_conf: dict[str, Any] | None = None,
                 lock_wait: float | None = None, verbose: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hive_acid_conn_id = hive_acid_conn_id
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf or {}
        self.lock_wait = lock_wait
        self.verbose = verbose

    @cached_property
    def metastore_hook(self) -> AcidMetastoreHook:
        return AcidMetastoreHook(hive_acid_conn_id=self.hive_acid_conn_id)

    @cached_property
    def spark_hook(self) -> AcidSparkHook:
        return AcidSparkHook(conn_id=self.spark_conn_id, conf=self.spark_conf, verbose=self.verbose)


def is_templated(value: str | Sequence[str] | None) -> bool:
    if value is None:
        return False
    items = [value] if isinstance(value, str) else list(value)
    return any("{{" in str(v) or "{%" in str(v) for v in items)

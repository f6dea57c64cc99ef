"""The key of a result record: which dataset, split, run and method it scores.

Every result record the runner appends to ``results.jsonl`` (:func:`jaxclp.experiments.runner.append_record`)
holds ``dataset``, ``split``, ``run`` and ``method``; the last record of each key is the current one. Code that
indexes records builds that key with :func:`record_key` rather than picking the four fields by hand, so the
fields and their order are written once. This module imports nothing of the package: every layer may use it.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

__all__ = ["RecordKey", "record_key"]


class RecordKey(NamedTuple):
    """``(dataset, split, run, method)`` of a result record; a tuple, so keys sort and compare as tuples (by
    dataset, then split, run and method) and a plain 4-tuple finds the same entry of a dict.

    Attributes:
        dataset: the dataset's name as the record holds it (``"texas"``, ``"acm+dagger"``, a user's file name).
        split: the split regime (``"sparse"``, ``"medium"``, ``"dense"``, or a user's).
        run: the split's index (0-based).
        method: the method's name (``"mlp"``, ``"clp"``, ...).
    """

    dataset: str
    split: str
    run: int
    method: str


def record_key(record: Mapping) -> RecordKey:
    """The :class:`RecordKey` of a result record.

    The values are taken as the record holds them (no conversion), so keys built here equal the tuples the
    records were indexed by before.

    Args:
        record: a record as read from ``results.jsonl`` (a dict), of type ``"result"``.

    Returns:
        ``RecordKey(record["dataset"], record["split"], record["run"], record["method"])``.

    Raises:
        ValueError: the record lacks one of the four fields (e.g. a header record, which has no ``method``);
            the message names the missing fields and the record's type.
    """
    missing = [f for f in RecordKey._fields if f not in record]
    if missing:
        raise ValueError(f"a record of type {record.get('type')!r} has no {', '.join(map(repr, missing))} "
                         f"field{'s' if len(missing) > 1 else ''}: only result records have a key "
                         f"({', '.join(RecordKey._fields)})")
    return RecordKey(record["dataset"], record["split"], record["run"], record["method"])

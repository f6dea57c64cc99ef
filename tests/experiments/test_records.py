"""jaxclp.experiments.records: the (dataset, split, run, method) key of a result record."""

from __future__ import annotations

import pytest

from jaxclp.experiments.records import RecordKey, record_key


def _result(dataset="texas", split="medium", run=0, method="clp", **extra) -> dict:
    return {"type": "result", "dataset": dataset, "split": split, "run": run, "method": method, "test": 0.5,
            "val": 0.4, "params": {}} | extra


def test_record_key_of_a_result_record():
    k = record_key(_result(run=3))
    assert k == RecordKey("texas", "medium", 3, "clp") == ("texas", "medium", 3, "clp")
    assert (k.dataset, k.split, k.run, k.method) == ("texas", "medium", 3, "clp")
    assert hash(k) == hash(("texas", "medium", 3, "clp"))  # a plain tuple finds the same dict entry
    assert {k: 1}[("texas", "medium", 3, "clp")] == 1
    assert k._replace(method="mlp") == ("texas", "medium", 3, "mlp")


def test_record_key_of_a_header_record_names_the_missing_field():
    header = {"type": "header", "dataset": "texas", "split": "medium", "run": 0, "argv": ["jaxclp", "run"]}
    with pytest.raises(ValueError, match=r"'header'.*'method'"):
        record_key(header)
    with pytest.raises(ValueError, match=r"'run', 'method' fields"):
        record_key({"type": "header", "dataset": "texas", "split": "medium"})


def test_record_keys_sort_and_compare_as_tuples():
    recs = [_result("texas", "medium", 1, "lp"), _result("cornell", "sparse", 0, "mlp"),
            _result("texas", "medium", 0, "mlp"), _result("texas", "medium", 0, "clp")]
    keys = sorted(record_key(r) for r in recs)
    assert keys == sorted((r["dataset"], r["split"], r["run"], r["method"]) for r in recs)
    assert [tuple(k) for k in keys] == [("cornell", "sparse", 0, "mlp"), ("texas", "medium", 0, "clp"),
                                        ("texas", "medium", 0, "mlp"), ("texas", "medium", 1, "lp")]
    assert RecordKey("texas", "medium", 0, "mlp") < RecordKey("texas", "medium", 1, "clp")  # run before method

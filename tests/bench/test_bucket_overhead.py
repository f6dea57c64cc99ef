"""benchmarks.bucket_overhead: both variants fit in their own process, and the padded prior equals the exact one to
rounding."""

from __future__ import annotations

from pathlib import Path

from benchmarks import _common as C, bucket_overhead as bo


def test_bucket_overhead_measures_both_variants():
    src = Path(bo.__file__).resolve().parents[1] / "src"
    rows = bo.measure(src, sizes=(70,), names=("mlp",), epochs=3, repeats=1)
    (r,) = rows
    assert (r["nodes"], r["padded_nodes"]) == (70, 80) and r["padded_edges"] >= r["edges"]
    assert r["exact_s"] > 0 and r["padded_s"] > 0 and r["max_abs_diff"] < 1e-5
    text = bo.markdown(dict(command="c", checkout="x", machine=C.machine_info(), epochs=3, repeats=1, rows=rows))
    assert "| 70 |" in text and "80 /" in text

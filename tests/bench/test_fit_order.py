"""benchmarks.fit_order: its table from a hand-made payload (the measurement itself runs ~10 min: not a test)."""

from __future__ import annotations

from benchmarks import _common as C, fit_order as fo


def test_fit_order_table_reads_minimum_median_ratio_and_records():
    row = dict(nodes=300, ratios=[0.8, 0.9], ratio_median=0.85, min_s={"given": 16.5, "costliest first": 14.0},
               median_s={"given": 17.8, "costliest first": 16.3},
               split_median_s={"given": 5.7, "costliest first": 5.3}, same_records=True)
    text = fo.markdown(dict(command="c", checkout="x", machine=C.machine_info(), repeats=2, rows=[row]))
    assert "| 300 | 16.5 (17.8) | 14.0 (16.3) | 0.85 (0.80, 0.90) | 5.7 / 5.3 | equal |" in text
    text = fo.markdown(dict(command="c", checkout="x", machine=C.machine_info(), repeats=2,
                            rows=[dict(row, same_records=False)]))
    assert "| DIFFER |" in text

"""benchmarks.fit_threads: both variants timed in one process, the same priors bit for bit, a row per size."""

from __future__ import annotations

from pathlib import Path

from benchmarks import _common as C, fit_threads as ft


def test_fit_threads_times_both_variants_with_equal_priors(monkeypatch):
    src = Path(ft.__file__).resolve().parents[1] / "src"
    payload = ft.measure(src, sizes=(60,), repeats=1, kinds=("gcn",), memory=False)
    (r,) = payload["rows"]
    assert r["nodes"] == 60 and r["threads"] >= 1 and r["same_bits"]
    assert r["one_s"] > 0 and r["side_s"] > 0 and len(r["ratios"]) == 1
    assert payload["memory"] == {}
    text = ft.markdown(dict(command="c", checkout="x", machine=C.machine_info(), repeats=1, **payload))
    assert "| 60 |" in text and "equal" in text

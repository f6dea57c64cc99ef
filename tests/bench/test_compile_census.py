"""benchmarks.compile_census: its worker counts the compilations of a real ``jaxclp run`` and the persistent cache's
reads (a second identical process on the same cache compiles fewer programs and reads the rest)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import _common as C, compile_census as cc
from benchmarks.time_limit import user_graph


def test_census_counts_compilations_and_cache_reads(tmp_path):
    graph = user_graph(tmp_path / "g.npz", 60, seed=0)
    src = Path(cc.__file__).resolve().parents[1] / "src"
    args = ["--methods", "lp", "--runs", "1"]
    first = cc._case(src, tmp_path / "xla", graph, args)
    again = cc._case(src, tmp_path / "xla", graph, args)
    assert first["rc"] == 0 and first["xla_compilations"] > 0 and first["cache_hits"] == 0
    assert sum(p[1] for p in first["programs"]) == first["programs_loaded"] == first["xla_compilations"]
    assert first["compile_s"] >= first["backend_s"] > 0
    # the same shapes again: every program the first process compiled is read from the cache instead
    assert again["programs_loaded"] == first["programs_loaded"]  # the same programs: each one compiled or read
    assert 0 < again["cache_hits"] <= again["programs_loaded"] and again["xla_compilations"] < first["xla_compilations"]
    text = cc.markdown(dict(tag="t", command="c", checkout="x", machine=C.machine_info(), rows=[dict(case="first graph", nodes=60,
                                                                                       **first)]))
    assert f"| first graph | 60 | --graph g.npz --methods lp --runs 1 |" in text

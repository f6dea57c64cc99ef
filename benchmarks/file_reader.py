"""Reading a user's graph files: numpy's C reader (``np.loadtxt``, the fast path of
:func:`jaxclp.datasets.files.read_edge_list` / ``read_features_file``) vs the line-by-line reader it falls back to.

* ``edges``: an integer edge list of ``edges`` lines ``u,v`` (a header line, random ids below ``nodes``), written to
  a temporary file; :func:`read_edge_list` with the fast path, and with it disabled (the line-by-line reader);
  alternating, median (min) of ``repeats`` each, the two arrays checked equal.
* ``features``: a CSV features matrix of ``nodes`` x ``dim`` floats, :func:`read_features_file` likewise.
* ``weighted``: a weighted edge list (``u,v,w`` lines) parsed in one pass (:func:`read_weighted_edge_list`, what
  ``load_file(..., weighted=True)`` uses) vs two (:func:`read_edge_list`, then the weight column: how it was read
  before session 19), both by the C reader; alternating, the arrays checked equal.
* ``load_file``: the whole :func:`jaxclp.datasets.load_file` (labels file + edge list: parsing, id map, graph).

Usage: ``python -m jaxclp.benchmarks.file_reader [--quick] [--out DIR]`` (also ``python -m jaxclp.benchmarks.run
file_reader``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from jaxclp.benchmarks import _common as C

FULL = {"nodes": 200_000, "edges": 1_000_000, "dim": 32, "repeats": 5}
QUICK = {"nodes": 2_000, "edges": 10_000, "dim": 8, "repeats": 2}


def _alternate(fast_fn, slow_fn, repeats: int, disable_fast_path: bool = True) -> tuple[dict, object, object]:
    """Runs fast, slow, fast, slow, ... ``repeats`` times each (each pair under the same load); with
    ``disable_fast_path`` the C reader is switched off while ``slow_fn`` runs (the line-by-line reader)."""
    from jaxclp.datasets import files

    times = {"fast": [], "slow": []}
    foreign = {"fast": [], "slow": []}
    out = {}
    original = files._fast_columns
    for _ in range(repeats):
        for mode, fn in (("fast", fast_fn), ("slow", slow_fn)):
            if mode == "slow" and disable_fast_path:
                files._fast_columns = lambda *a, **k: None
            try:
                with C.CpuMonitor() as mon:
                    t = time.perf_counter()
                    out[mode] = fn()
                    times[mode].append(time.perf_counter() - t)
            finally:
                files._fast_columns = original
            foreign[mode].append(mon.foreign_cores)
    row = {}
    for mode in ("fast", "slow"):
        row[f"{mode}_s"] = statistics.median(times[mode])
        row[f"{mode}_min_s"] = min(times[mode])
        row[f"{mode}_foreign_cores"] = statistics.median(foreign[mode])
    row["speedup"] = row["slow_s"] / row["fast_s"]
    return row, out["fast"], out["slow"]


def _write_graph(tmp: Path, cfg: dict) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    e = rng.integers(0, cfg["nodes"], (cfg["edges"], 2))
    edges, labels = tmp / "edges.csv", tmp / "labels.csv"
    with open(edges, "w") as f:
        f.write("src,dst\n")
        np.savetxt(f, e, fmt="%d", delimiter=",")
    np.savetxt(labels, np.c_[np.arange(cfg["nodes"]), rng.integers(0, 5, cfg["nodes"])], fmt="%d", delimiter=",")
    return edges, labels


def edges(cfg: dict) -> dict:
    from jaxclp.datasets import files

    with tempfile.TemporaryDirectory() as d:
        path, _ = _write_graph(Path(d), cfg)
        row, a, b = _alternate(lambda: files.read_edge_list(path), lambda: files.read_edge_list(path),
                               cfg["repeats"])
        row.update(edges=cfg["edges"], file_mib=path.stat().st_size / 2**20, equal=bool(np.array_equal(a, b)))
    return row


def features(cfg: dict) -> dict:
    from jaxclp.datasets import files

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.csv"
        x = np.random.default_rng(1).normal(size=(cfg["nodes"], cfg["dim"])).astype(np.float32)
        np.savetxt(path, x, fmt="%.6g", delimiter=",")
        n = cfg["nodes"]
        row, a, b = _alternate(lambda: files.read_features_file(path, n), lambda: files.read_features_file(path, n),
                               cfg["repeats"])
        row.update(shape=[n, cfg["dim"]], file_mib=path.stat().st_size / 2**20, equal=bool(np.array_equal(a, b)))
    return row


def weighted(cfg: dict) -> dict:
    from jaxclp.datasets import files

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "w.csv"
        rng = np.random.default_rng(2)
        e = rng.integers(0, cfg["nodes"], (cfg["edges"], 2))
        with open(path, "w") as f:
            f.write("src,dst,weight\n")
            f.write("\n".join(f"{a},{b},{w:.6f}" for (a, b), w in zip(e, rng.random(cfg["edges"]))) + "\n")
        two = lambda: (files.read_edge_list(path), files._fast_columns(path, (2,), np.float64, 2)[:, 0])  # noqa: E731
        row, a, b = _alternate(lambda: files.read_weighted_edge_list(path), two, cfg["repeats"],
                               disable_fast_path=False)
        row.update(edges=cfg["edges"], file_mib=path.stat().st_size / 2**20,
                   equal=all(np.array_equal(x, y) for x, y in zip(a, b)))
    return row


def load_file(cfg: dict) -> dict:
    from jaxclp.datasets import load_file as load

    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*(self-loop line|repeat an edge)", UserWarning)  # random edges have both
        e, lab = _write_graph(Path(d), cfg)
        row, a, b = _alternate(lambda: load(e, labels=lab), lambda: load(e, labels=lab), cfg["repeats"])
        row.update(nodes=cfg["nodes"], edges=cfg["edges"], graph_edges=int(a.graph.num_edges),
                   equal=bool(np.array_equal(np.asarray(a.graph.senders), np.asarray(b.graph.senders))
                              and np.array_equal(np.asarray(a.graph.receivers), np.asarray(b.graph.receivers))))
    return row


def write_markdown(path: Path, payload: dict) -> None:
    s = lambda r, m: f"{r[m + '_s']:.3f} ({r[m + '_min_s']:.3f})"  # noqa: E731
    rows = []
    for key, what in (("edges", lambda r: f"edge list, {r['edges']:,} lines ({r['file_mib']:.1f} MiB)"),
                      ("features", lambda r: f"CSV features {r['shape'][0]:,} x {r['shape'][1]} "
                                             f"({r['file_mib']:.1f} MiB)"),
                      ("load_file", lambda r: f"load_file: labels + edge list ({r['nodes']:,} nodes, "
                                              f"{r['edges']:,} lines -> {r['graph_edges']:,} directed edges)"),
                      ("weighted", lambda r: f"weighted edge list, {r['edges']:,} lines ({r['file_mib']:.1f} MiB): "
                                             "one pass (C reader column) vs two passes (C reader column)")):
        if key not in payload:
            continue
        r = payload[key]
        rows.append([what(r), s(r, "fast"), s(r, "slow"), f"{r['speedup']:.1f}x",
                     f"{r['fast_foreign_cores']:.1f} / {r['slow_foreign_cores']:.1f}", "yes" if r["equal"] else "NO"])
    lines = ["# Reading a user's graph files: numpy's C reader vs line by line "
             "(`python -m jaxclp.benchmarks.file_reader`)", "", C.machine_header_md(payload["machine"]), "",
             "Seconds, median (min) of alternating runs; `foreign` = CPU cores used by other processes meanwhile "
             "(C reader / line by line); `same` = both readers gave the same arrays.", "",
             C.md_table(["input", "C reader", "line by line", "speed-up", "foreign", "same"], rows), ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict:
    return C.sections_main("file_reader", __doc__, {"edges": edges, "features": features, "load_file": load_file,
                                                    "weighted": weighted},
                           FULL, QUICK, write_markdown, argv, out)


if __name__ == "__main__":
    main()

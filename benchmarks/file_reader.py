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
* ``gzip``: the same ``load_file`` on gzip-compressed copies of the two files (``edges.csv.gz``, ``labels.csv.gz``)
  vs the plain ones: what reading compressed files costs; alternating, the graphs checked equal.
* ``ogb``: ``load_file`` on an OGB node-property folder of ogbn-arxiv's size (``ogb_nodes`` nodes, ``ogb_edges``
  directed edges, ``ogb_dim`` float features, labels and a split, every file gzip-compressed as OGB ships it);
  median (min) of ``repeats``.

Usage: ``python -m benchmarks.file_reader [--quick] [--out DIR]`` (also ``python -m benchmarks.run
file_reader``).
"""

from __future__ import annotations

import io
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks import _common as C

FULL = {"nodes": 200_000, "edges": 1_000_000, "dim": 32, "repeats": 5,
        "ogb_nodes": 169_343, "ogb_edges": 1_166_243, "ogb_dim": 128}  # ogbn-arxiv's counts
QUICK = {"nodes": 2_000, "edges": 10_000, "dim": 8, "repeats": 2, "ogb_nodes": 2_000, "ogb_edges": 10_000,
         "ogb_dim": 8}


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


def _same_graph(a, b) -> bool:
    return bool(np.array_equal(np.asarray(a.graph.senders), np.asarray(b.graph.senders))
                and np.array_equal(np.asarray(a.graph.receivers), np.asarray(b.graph.receivers))
                and np.array_equal(np.asarray(a.labels), np.asarray(b.labels)))


def _gzip_copy(path: Path) -> Path:
    import gzip

    out = path.with_name(path.name + ".gz")
    out.write_bytes(gzip.compress(path.read_bytes(), compresslevel=6))
    return out


def gzip(cfg: dict) -> dict:
    from jaxclp.datasets import load_file as load

    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*(self-loop line|repeat an edge)", UserWarning)
        e, lab = _write_graph(Path(d), cfg)
        ez, labz = _gzip_copy(e), _gzip_copy(lab)
        row, a, b = _alternate(lambda: load(ez, labels=labz), lambda: load(e, labels=lab), cfg["repeats"],
                               disable_fast_path=False)
        row.update(nodes=cfg["nodes"], edges=cfg["edges"], file_mib=(e.stat().st_size + lab.stat().st_size) / 2**20,
                   gz_mib=(ez.stat().st_size + labz.stat().st_size) / 2**20, equal=_same_graph(a, b))
    return row


def _write_ogb(root: Path, n: int, m: int, dim: int) -> None:
    """An OGB node-property folder (arxiv layout, every file gzip-compressed): random edges, labels, features and a
    90/30/rest split by a permutation."""
    import gzip as gz

    rng = np.random.default_rng(3)
    raw, split = root / "raw", root / "split" / "time"
    raw.mkdir(parents=True)
    split.mkdir(parents=True)

    def put(path, arr, fmt):
        buf = io.BytesIO()
        np.savetxt(buf, arr, fmt=fmt, delimiter=",")
        path.write_bytes(gz.compress(buf.getvalue(), compresslevel=6))

    put(raw / "edge.csv.gz", rng.integers(0, n, (m, 2)), "%d")
    put(raw / "num-node-list.csv.gz", np.array([n]), "%d")
    put(raw / "node-label.csv.gz", rng.integers(0, 40, n), "%d")
    put(raw / "node-feat.csv.gz", rng.normal(size=(n, dim)).astype(np.float32), "%.6f")
    perm = rng.permutation(n)
    for name, idx in zip(("train", "valid", "test"), np.split(perm, [int(0.54 * n), int(0.72 * n)])):
        put(split / f"{name}.csv.gz", idx, "%d")


def ogb(cfg: dict) -> dict:
    from jaxclp.datasets import load_file as load

    n, m, dim = cfg["ogb_nodes"], cfg["ogb_edges"], cfg["ogb_dim"]
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*(self-loop line|repeat an edge)", UserWarning)
        root = Path(d) / "arxiv"
        _write_ogb(root, n, m, dim)
        times, foreign = [], []
        for _ in range(cfg["repeats"]):
            with C.CpuMonitor() as mon:
                t = time.perf_counter()
                ds = load(root)
                times.append(time.perf_counter() - t)
            foreign.append(mon.foreign_cores)
        mib = sum(f.stat().st_size for f in root.rglob("*.gz")) / 2**20
        return {"nodes": n, "edges": m, "dim": dim, "gz_mib": mib, "s": statistics.median(times),
                "min_s": min(times), "foreign_cores": statistics.median(foreign),
                "graph_edges": int(ds.graph.num_edges), "features": list(np.shape(ds.features)),
                "split": [int(np.asarray(x).sum()) for x in (ds.splits.train, ds.splits.val, ds.splits.test)]}


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
             "(`python -m benchmarks.file_reader`)", "", C.machine_header_md(payload["machine"]), "",
             "Seconds, median (min) of alternating runs; `foreign` = CPU cores used by other processes meanwhile "
             "(C reader / line by line); `same` = both readers gave the same arrays.", "",
             C.md_table(["input", "C reader", "line by line", "speed-up", "foreign", "same"], rows), ""]
    if "gzip" in payload:
        r = payload["gzip"]
        lines += ["Compressed files (`load_file` on gzip copies vs the plain files, alternating; seconds, median "
                  "(min)):",
                  "", C.md_table(["input", "gzip", "plain", "gzip / plain", "foreign", "same"], [[
                      f"labels + edge list ({r['nodes']:,} nodes, {r['edges']:,} lines; {r['file_mib']:.1f} MiB, "
                      f"{r['gz_mib']:.1f} MiB gzip)", s(r, "fast"), s(r, "slow"), f"{1 / r['speedup']:.2f}",
                      f"{r['fast_foreign_cores']:.1f} / {r['slow_foreign_cores']:.1f}",
                      "yes" if r["equal"] else "NO"]]), ""]
    if "ogb" in payload:
        r = payload["ogb"]
        lines += ["An OGB node-property folder of ogbn-arxiv's size (`load_file(folder)`, random content, every file "
                  "gzip; seconds, median (min)):", "",
                  C.md_table(["folder", "seconds", "foreign", "graph"], [[
                      f"{r['nodes']:,} nodes, {r['edges']:,} edges, {r['dim']} features, split "
                      f"{'/'.join(f'{v:,}' for v in r['split'])} ({r['gz_mib']:.1f} MiB gzip)",
                      f"{r['s']:.2f} ({r['min_s']:.2f})", f"{r['foreign_cores']:.1f}",
                      f"{r['graph_edges']:,} directed edges (symmetrized), features {r['features']}"]]), ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict:
    return C.sections_main("file_reader", __doc__, {"edges": edges, "features": features, "load_file": load_file,
                                                    "weighted": weighted, "gzip": gzip, "ogb": ogb},
                           FULL, QUICK, write_markdown, argv, out)


if __name__ == "__main__":
    main()

"""fig4: accuracy vs edge homophily h on synthetic graphs (paper Fig. 4); fig5: CLP vs CLP* on Syn-1.

Graphs: :func:`jaxclp.datasets.synthetic` with average degree 5 / 10 / 15 (Syn-1 / Syn-2 / Syn-3), edge
homophily h in {0, 0.1, ..., 1} (hit exactly up to rounding), one graph per (degree, h, feature source).
Features: the paper's 2-D Gaussians, or rows sampled from a real dataset (``features_from``; full config:
actor, 5 synthetic classes mapped one-to-one onto actor's 5 classes, 400 nodes each, sampled without
replacement). Every (graph, split, method) goes through :func:`jaxclp.experiments.runner.run` (records in
``figures/records/synthetic/results.jsonl``, shared by fig4 and fig5 and resumable).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from jaxclp.experiments.analyses import common
from jaxclp.experiments.runner import run
from jaxclp.datasets import load, synthetic

H_GRID = tuple(round(0.1 * i, 1) for i in range(11))
SYN_GRAPHS = (("Syn-1", 5), ("Syn-2", 10), ("Syn-3", 15))
BASE_METHODS = ("mlp", "lp", "cs", "clp_star", "clp_mlp")
"""Fig. 4's methods. CLP is ``clp_mlp``, CLP on the paper's base predictor (the MLP) with every propagation variant
chosen on validation: the figure asks what CLP's propagation adds to its MLP as h varies, as the paper's does. The
tables' ``clp`` (revision 2, which also chooses among seven base predictors, GNNs included) is Fig. 5's CLP on
Syn-1; on Fig. 4's whole grid it would cost ~15 h on two CPU cores (its 16 tuned-GNN prior fits per split)."""
SPLITS = ("sparse", "medium", "dense")
RECORDS = "synthetic"


@dataclasses.dataclass(frozen=True)
class FeatureSource:
    """``name``: "gaussian", a dataset name (features sampled from it), or "quick-real" (a tiny fabricated
    bag-of-words source for the quick configuration)."""

    name: str
    num_classes: int
    nodes_per_class: int


@dataclasses.dataclass(frozen=True)
class Block:
    """One rectangle of the grid: these methods on (graphs x h x splits) with ``runs`` splits each."""

    source: str
    graphs: tuple
    splits: tuple
    methods: tuple
    runs: int
    hs: tuple | None = None  # None: the config's full h grid


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    hs: tuple
    graphs: tuple  # (name, average degree)
    sources: tuple
    blocks: tuple
    epochs: int = 500
    seed: int = 0


ALL_GRAPHS = tuple(g for g, _ in SYN_GRAPHS)
# Full configuration: 10 splits per cell, as the tables (the committed fig4.json/PNGs). Records are resumable, so
# an interrupted `jaxclp reproduce fig4` only adds the missing splits; roughly 2-3 h from scratch on 2 CPU cores
# (estimated from the resumed runs).
# H2GCN (whose exact-2-hop graph makes it 10-30x slower than GCN here) on the medium split only,
# h in {0, 0.2, ..., 1}; the real-feature graphs on the medium split only, without H2GCN.
FULL_FIG4 = SweepConfig(
    hs=H_GRID, graphs=SYN_GRAPHS,
    sources=(FeatureSource("gaussian", 10, 200), FeatureSource("actor", 5, 400)),
    blocks=(Block("gaussian", ALL_GRAPHS, SPLITS, BASE_METHODS + ("gcn",), 10),
            Block("gaussian", ALL_GRAPHS, ("medium",), ("h2gcn",), 10, hs=H_GRID[::2]),
            Block("actor", ALL_GRAPHS, ("medium",), BASE_METHODS + ("gcn",), 10)))
# Quick: 3 classes x 30 nodes, average degree 4, 2 splits, 20 MLP epochs: the same array shapes as the other
# quick configurations, so one process compiles the MLP training loop once for all of them.
QUICK_FIG4 = SweepConfig(
    hs=(0.0, 0.5, 1.0), graphs=(("Syn-1", 4),),
    sources=(FeatureSource("gaussian", 3, 30), FeatureSource("quick-real", 3, 30)),
    blocks=(Block("gaussian", ("Syn-1",), ("medium",), BASE_METHODS + ("gcn",), 2),
            Block("quick-real", ("Syn-1",), ("medium",), ("mlp", "clp_mlp"), 2)),
    epochs=20)

FULL_FIG5 = SweepConfig(hs=H_GRID, graphs=(("Syn-1", 5),), sources=(FeatureSource("gaussian", 10, 200),),
                        blocks=(Block("gaussian", ("Syn-1",), ("medium",), ("mlp", "clp_star", "clp", "clp_paper"),
                                      10),))
QUICK_FIG5 = dataclasses.replace(QUICK_FIG4, sources=QUICK_FIG4.sources[:1],
                                 blocks=(Block("gaussian", ("Syn-1",), ("medium",),
                                               ("mlp", "clp_star", "clp", "clp_paper"), 2),))


def quick_real_source(num_classes: int = 3, rows_per_class: int = 40, dim: int = 24, seed: int = 0):
    """A tiny fabricated 'real' source: binary bag-of-words rows whose word probabilities depend on the class."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.6, size=(num_classes, dim))
    y = np.repeat(np.arange(num_classes), rows_per_class)
    x = (rng.random((y.size, dim)) < p[y]).astype(np.float32)
    return x, y


def _real(name: str, data_root, cache: dict):
    if name not in cache:
        if name == "quick-real":
            cache[name] = quick_real_source()
        else:
            ds = load(name, root=data_root)
            if ds.features is None:
                raise ValueError(f"{name} has no node features to sample from")
            cache[name] = (ds.features, np.asarray(ds.labels))
    return cache[name]


def sweep_dataset(src: FeatureSource, degree: int, h: float, *, data_root=None, cache=None):
    """The synthetic graph of one grid cell (deterministic: seed from degree and h)."""
    cache = {} if cache is None else cache
    key = ("ds", src, degree, h)
    if key in cache:
        return cache[key]
    name = f"syn-d{degree}-{src.name}-{src.num_classes}x{src.nodes_per_class}-h{h:.1f}"
    seed = 1000 * int(degree) + int(round(100 * h))
    if src.name == "gaussian":
        ds = synthetic(h, degree, src.num_classes, src.nodes_per_class, features="gaussian", seed=seed, name=name)
    else:
        ds = synthetic(h, degree, src.num_classes, src.nodes_per_class, seed=seed,
                       features_from=_real(src.name, data_root, cache), name=name)
    cache[key] = ds
    return ds


def _with_datasets(cfg: SweepConfig, datasets) -> SweepConfig:
    """``--datasets gaussian,squirrel``: keep/replace feature sources (a new real name reuses the real block)."""
    if not datasets:
        return cfg
    sources, blocks = [], []
    real_template = next((s for s in cfg.sources if s.name != "gaussian"), None)
    for name in datasets:
        src = next((s for s in cfg.sources if s.name == name), None)
        if src is None:
            if real_template is None:
                raise ValueError(f"no real-feature block to reuse for {name!r}")
            src = dataclasses.replace(real_template, name=name)
            tmpl = [b for b in cfg.blocks if b.source == real_template.name]
        else:
            tmpl = [b for b in cfg.blocks if b.source == name]
        sources.append(src)
        blocks += [dataclasses.replace(b, source=src.name) for b in tmpl]
    return dataclasses.replace(cfg, sources=tuple(sources), blocks=tuple(blocks))


def run_sweep(cfg: SweepConfig, rec_dir: Path, *, runs_cap: int, data_root=None, argv=None, progress=True):
    """Runs every block through the runner (resumable); returns the dataset cache."""
    degree = dict(cfg.graphs)
    src = {s.name: s for s in cfg.sources}
    cache = {}
    for b in cfg.blocks:
        for g in b.graphs:
            for h in b.hs or cfg.hs:
                ds = sweep_dataset(src[b.source], degree[g], h, data_root=data_root, cache=cache)
                for split in b.splits:
                    run(ds, split, b.methods, min(b.runs, runs_cap), rec_dir, seed=cfg.seed, epochs=cfg.epochs,
                        progress=progress, argv=argv)
    return cache


def sweep_rows(cfg: SweepConfig, rec_dir: Path, cache: dict, *, runs_cap: int) -> list[dict]:
    results = common.last_results(rec_dir / "results.jsonl")
    degree = dict(cfg.graphs)
    src = {s.name: s for s in cfg.sources}
    rows = []
    for b in cfg.blocks:
        nruns = min(b.runs, runs_cap)
        for g in b.graphs:
            for h in b.hs or cfg.hs:
                ds = cache[("ds", src[b.source], degree[g], h)]
                for split in b.splits:
                    for m in b.methods:
                        vals = common.test_scores(results, ds.name, split, m, nruns)
                        rows.append({"features": b.source, "graph": g, "avg_degree": degree[g], "h": h,
                                     "h_realized": ds.info["h"], "split": split, "method": m, "dataset": ds.name,
                                     **common.mean_std(vals), "values": vals})
    return rows


def _plot_source(rows, source: str, path: Path, title: str) -> Path:
    plt = common.pyplot()
    rows = [r for r in rows if r["features"] == source]
    graphs = list(dict.fromkeys(r["graph"] for r in rows))
    splits = [s for s in SPLITS if any(r["split"] == s for r in rows)]
    one_split = len(splits) == 1  # then lay the graphs out side by side
    nr, nc = (1, len(graphs)) if one_split else (len(graphs), len(splits))
    fig, axes = plt.subplots(nr, nc, figsize=(4.2 * nc, 3.4 * nr + (1.0 if nr == 1 else 0.0)), squeeze=False,
                             sharex=True, sharey=True)
    handles = {}
    for gi, g in enumerate(graphs):
        for si, s in enumerate(splits):
            ax = axes[0][gi] if one_split else axes[gi][si]
            cell = [r for r in rows if r["graph"] == g and r["split"] == s]
            for m in dict.fromkeys(r["method"] for r in cell):
                rr = sorted((r for r in cell if r["method"] == m), key=lambda r: r["h"])
                mean = [100 * r["mean"] if r["mean"] is not None else np.nan for r in rr]
                std = [100 * r["std"] if r["std"] is not None else np.nan for r in rr]
                handles[m] = common.errorbar(ax, [r["h"] for r in rr], mean, std, m)
            deg = cell[0]["avg_degree"] if cell else "?"
            ax.set_title(f"{g} (avg degree {deg}), {s}", fontsize=9)
            ax.grid(alpha=0.3)
            if one_split or gi == len(graphs) - 1:
                ax.set_xlabel("edge homophily h")
            if (gi == 0) if one_split else (si == 0):
                ax.set_ylabel("test accuracy (%)")
    fig.suptitle(title, fontsize=10)
    fig.legend([handles[m] for m in handles], [common.METHOD_LABELS.get(m, m) for m in handles],
               loc="lower center", ncol=min(8, len(handles)), fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.06 if nr == 1 else 0.04, 1, 0.9 if nr == 1 else 0.97))
    return common.save_figure(fig, path)


def fig4(out: Path, *, runs=10, datasets=None, data_root=None, argv=None, quick: bool | None = None,
         progress: bool = True) -> list[Path]:
    """Accuracy vs h on Syn-1/2/3, sparse/medium/dense, Gaussian and real-dataset features.

    ``runs`` caps the splits per cell (the full configuration uses 10 for every block; see :data:`FULL_FIG4`).
    ``datasets``: feature sources to use, e.g. ``gaussian,actor`` (a new real dataset name reuses the real block).
    """
    t0 = time.perf_counter()
    quick = common.resolve_quick(quick)
    cfg = _with_datasets(QUICK_FIG4 if quick else FULL_FIG4, datasets)
    fig_dir = common.figures_dir(out)
    prefix = "fig4_quick" if quick else "fig4"
    rec_dir = common.records_dir(fig_dir, RECORDS + ("_quick" if quick else ""))
    cache = run_sweep(cfg, rec_dir, runs_cap=runs, data_root=data_root, argv=argv, progress=progress)
    rows = sweep_rows(cfg, rec_dir, cache, runs_cap=runs)
    paths = []
    for s in cfg.sources:
        feat = ("2-D Gaussian features, " if s.name == "gaussian" else f"features sampled from {s.name}, ")
        title = (f"Fig. 4: test accuracy vs h ({feat}{s.num_classes} classes x {s.nodes_per_class} nodes)\n"
                 f"mean ± std over splits, every hyperparameter chosen on validation")
        paths.append(_plot_source(rows, s.name, fig_dir / f"{prefix}_{s.name}.png", title))
    class_maps = {}
    for key, ds in cache.items():
        if key[0] == "ds" and key[1].name != "gaussian":
            class_maps[ds.name] = ds.info.get("class_map")
    data = {"target": "fig4", "quick": quick, "command": " ".join(argv or ["jaxclp", "reproduce", "fig4"]),
            "config": dataclasses.asdict(cfg), "runs_cap": runs,
            "records": str(rec_dir / "results.jsonl"), "std": "sample std (ddof=1) over splits",
            "real_feature_class_maps": class_maps,
            "wall_seconds_this_invocation": time.perf_counter() - t0, "rows": rows}
    paths.insert(0, common.write_json(fig_dir / f"{prefix}.json", data))
    return paths


def fig5(out: Path, *, runs=10, datasets=None, data_root=None, argv=None, quick: bool | None = None,
         progress: bool = True) -> list[Path]:
    """CLP vs CLP* (and the paper's single CLP update) on Syn-1, medium split, across h (10 splits).

    Shares the records of fig4 (same dataset names), so cells fig4 already ran are not recomputed.
    """
    t0 = time.perf_counter()
    quick = common.resolve_quick(quick)
    cfg = QUICK_FIG5 if quick else FULL_FIG5
    fig_dir = common.figures_dir(out)
    prefix = "fig5_quick" if quick else "fig5"
    rec_dir = common.records_dir(fig_dir, RECORDS + ("_quick" if quick else ""))
    cache = run_sweep(cfg, rec_dir, runs_cap=runs, data_root=data_root, argv=argv, progress=progress)
    rows = sweep_rows(cfg, rec_dir, cache, runs_cap=runs)
    results = common.last_results(rec_dir / "results.jsonl")
    b = cfg.blocks[0]
    nruns = min(b.runs, runs)
    src = cfg.sources[0]
    deg = dict(cfg.graphs)[b.graphs[0]]
    diffs = []
    for h in cfg.hs:
        ds = cache[("ds", src, deg, h)]
        for m in ("clp", "clp_paper"):
            d = [results[(ds.name, "medium", i, m)]["test"] - results[(ds.name, "medium", i, "clp_star")]["test"]
                 for i in range(nruns) if (ds.name, "medium", i, m) in results
                 and (ds.name, "medium", i, "clp_star") in results]
            diffs.append({"h": h, "method": m, "minus": "clp_star", **common.mean_std(d), "values": d,
                          "wins": int(np.sum(np.asarray(d) > 0)), "losses": int(np.sum(np.asarray(d) < 0))})
    plt = common.pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for m in b.methods:
        rr = sorted((r for r in rows if r["method"] == m), key=lambda r: r["h"])
        common.errorbar(ax1, [r["h"] for r in rr], [100 * r["mean"] for r in rr], [100 * r["std"] for r in rr], m)
    ax1.set(xlabel="edge homophily h", ylabel="test accuracy (%)",
            title=f"{b.graphs[0]} (avg degree {deg}), medium split, {nruns} splits")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    for m in ("clp", "clp_paper"):
        dd = [d for d in diffs if d["method"] == m]
        common.errorbar(ax2, [d["h"] for d in dd], [100 * d["mean"] for d in dd], [100 * d["std"] for d in dd], m,
                        label=f"{common.METHOD_LABELS[m]} − CLP*")
    ax2.axhline(0, color="k", linewidth=0.8)
    ax2.set(xlabel="edge homophily h", ylabel="accuracy difference (points)",
            title="paired difference per split (mean ± std)")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.suptitle(f"Fig. 5: CLP vs CLP* ({src.num_classes * src.nodes_per_class}-node Gaussian Syn-1)", fontsize=10)
    fig.tight_layout()
    png = common.save_figure(fig, fig_dir / f"{prefix}.png")
    data = {"target": "fig5", "quick": quick, "command": " ".join(argv or ["jaxclp", "reproduce", "fig5"]),
            "config": dataclasses.asdict(cfg), "runs_cap": runs, "records": str(rec_dir / "results.jsonl"),
            "std": "sample std (ddof=1) over splits", "wall_seconds_this_invocation": time.perf_counter() - t0,
            "rows": rows, "differences": diffs}
    return [common.write_json(fig_dir / f"{prefix}.json", data), png]

"""fig1: micro-level accuracy, i.e. test accuracy grouped by each test node's 1-hop homophily h_v (paper Fig. 1).

Per split, every method's candidates are selected on validation exactly as in the runner (via
:func:`jaxclp.experiments.analyses.common.run_mirror`, whose records equal the runner's); the chosen scores' argmax on
the TEST nodes is then grouped by ``h_v = |{u in N(v): y_u = y_v}| / |N(v)|`` computed from ALL labels
(:func:`jaxclp.homophily.node_homophily_per_node`). h_v is an analysis quantity only; it never enters a choice.
Test nodes without neighbours have no h_v and are counted separately ("isolated").
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import jaxclp
from jaxclp.experiments.analyses import common
from jaxclp.datasets import load, synthetic
from jaxclp.homophily import node_homophily_per_node


@dataclasses.dataclass(frozen=True)
class Fig1Config:
    datasets: tuple
    methods: tuple
    runs: int
    split: str = "medium"
    epochs: int = 500
    seed: int = 0
    bin_width: float = 0.1


# Full: 10 splits per dataset, as the tables.
FULL_FIG1 = Fig1Config(datasets=("wiki", "acm"), methods=("mlp", "lp", "cs", "clp", "gcn", "h2gcn"), runs=10)
QUICK_FIG1 = Fig1Config(datasets=("quick-syn",), methods=("mlp", "lp", "clp"), runs=2, epochs=20)


def load_dataset(name: str, data_root=None):
    """A registry dataset, or ``quick-syn`` (3 classes x 30 nodes, average degree 4, h = 0.5, Gaussian)."""
    if name == "quick-syn":
        return synthetic(0.5, 4, num_classes=3, nodes_per_class=30, seed=0, name="quick-syn")
    return load(name, root=data_root)


def micro_counts(pred, labels, test_mask, h, has_neighbors, width: float = 0.1) -> dict:
    """Per-bin test counts and correct predictions.

    Args:
        pred: (n,) predicted classes; labels: (n,) true classes; test_mask: (n,) bool.
        h, has_neighbors: node homophily and its definedness (:func:`jaxclp.homophily.node_homophily_per_node`).

    Returns:
        ``{"count": [B], "correct": [B], "isolated_count": int, "isolated_correct": int}`` over test nodes.
    """
    pred, labels, test_mask = np.asarray(pred), np.asarray(labels), np.asarray(test_mask, bool)
    has = np.asarray(has_neighbors, bool)
    ok = pred == labels
    nb = int(round(1.0 / width)) + 1
    sel = test_mask & has
    b = common.homophily_bins(np.asarray(h)[sel], width)
    iso = test_mask & ~has
    return {"count": np.bincount(b, minlength=nb).tolist(),
            "correct": np.bincount(b, weights=ok[sel].astype(float), minlength=nb).astype(int).tolist(),
            "isolated_count": int(iso.sum()), "isolated_correct": int(ok[iso].sum())}


def _extra_fn(ds, methods, width):
    h, has = node_homophily_per_node(ds.graph, jnp.asarray(ds.labels))  # ALL labels: analysis only
    h, has = np.asarray(h), np.asarray(has)
    y = np.asarray(ds.labels)

    def extra(i, ctx, chosen, test_mask):
        return {"bins": common.bin_centers(width).tolist(), "num_test": int(np.sum(test_mask)),
                "methods": {m: micro_counts(np.argmax(np.asarray(chosen[m][2]), axis=1), y, test_mask, h, has, width)
                            for m in methods}}

    return extra


def aggregate(rec_path: Path, ds_name: str, split: str, methods, runs: int, width: float) -> dict:
    results = common.last_results(rec_path)
    extras = common.last_extras(rec_path, "micro")
    centers = common.bin_centers(width)
    out = {"bins": centers.tolist(), "methods": {}}
    per_run = [extras[(ds_name, split, i)] for i in range(runs) if (ds_name, split, i) in extras]
    out["runs"] = len(per_run)
    out["num_test"] = [r["num_test"] for r in per_run]
    for m in methods:
        cnt = np.asarray([r["methods"][m]["count"] for r in per_run], float)
        cor = np.asarray([r["methods"][m]["correct"] for r in per_run], float)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = np.where(cnt > 0, cor / cnt, np.nan)
        stats = [common.mean_std(acc[:, b].tolist()) for b in range(len(centers))]
        iso_c = [r["methods"][m]["isolated_count"] for r in per_run]
        iso_k = [r["methods"][m]["isolated_correct"] for r in per_run]
        overall_bins = [(cor[j].sum() + iso_k[j]) / per_run[j]["num_test"] for j in range(len(per_run))]
        overall_rec = [results[(ds_name, split, i, m)]["test"] for i in range(runs)
                       if (ds_name, split, i, m) in results]
        out["methods"][m] = {
            "accuracy_mean": [s["mean"] for s in stats], "accuracy_std": [s["std"] for s in stats],
            "accuracy_n": [s["n"] for s in stats], "count_per_run": cnt.tolist(),
            "count_mean": cnt.mean(0).tolist() if len(per_run) else [],
            "isolated_count": iso_c, "isolated_correct": iso_k,
            "overall_from_bins": overall_bins, "overall_from_records": overall_rec,
            "overall": common.mean_std(overall_rec)}
    return out


def fig1(out: Path, *, runs=10, datasets=None, data_root=None, argv=None, quick: bool | None = None,
         progress: bool = True) -> list[Path]:
    """Test accuracy per h_v bin (0, 0.1, ..., 1) for MLP, LP, C&S, CLP, GCN, H2GCN on wiki and acm.

    ``runs`` caps the splits (full configuration: 10).
    """
    t0 = time.perf_counter()
    quick = common.resolve_quick(quick)
    cfg = QUICK_FIG1 if quick else FULL_FIG1
    if datasets:
        cfg = dataclasses.replace(cfg, datasets=tuple(datasets))
    nruns = min(cfg.runs, runs)
    fig_dir = common.figures_dir(out)
    prefix = "fig1_quick" if quick else "fig1"
    rec_dir = common.records_dir(fig_dir, prefix)
    per_ds = {}
    for name in cfg.datasets:
        ds = load_dataset(name, data_root)
        path = common.run_mirror(ds, cfg.split, cfg.methods, nruns, rec_dir, seed=cfg.seed, epochs=cfg.epochs,
                                 extra=_extra_fn(ds, cfg.methods, cfg.bin_width), extra_type="micro", argv=argv,
                                 progress=progress)
        agg = aggregate(path, ds.name, cfg.split, cfg.methods, nruns, cfg.bin_width)
        h, has = node_homophily_per_node(ds.graph, jnp.asarray(ds.labels))
        agg.update(num_nodes=ds.num_nodes,
                   node_homophily=float(jaxclp.node_homophily(ds.graph, jnp.asarray(ds.labels))),
                   edge_homophily=ds.edge_homophily(), num_isolated=int((~np.asarray(has)).sum()))
        per_ds[ds.name] = agg
    png = _plot(per_ds, cfg, nruns, fig_dir / f"{prefix}.png")
    data = {"target": "fig1", "quick": quick, "command": " ".join(argv or ["jaxclp", "reproduce", "fig1"]),
            "config": dataclasses.asdict(cfg), "runs_cap": runs, "records": str(rec_dir / "results.jsonl"),
            "binning": "nearest multiple of 0.1: bin b holds (b-0.5)/10 <= h_v < (b+0.5)/10 (0 and 1 half-width)",
            "std": "sample std (ddof=1) over splits whose bin is non-empty",
            "wall_seconds_this_invocation": time.perf_counter() - t0, "datasets": per_ds}
    return [common.write_json(fig_dir / f"{prefix}.json", data), png]


def _plot(per_ds: dict, cfg: Fig1Config, nruns: int, path: Path) -> Path:
    plt = common.pyplot()
    names = list(per_ds)
    fig, axes = plt.subplots(2, len(names), figsize=(5.6 * len(names), 5.2), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1]}, sharex=True)
    handles = {}
    for j, name in enumerate(names):
        d = per_ds[name]
        x = np.asarray(d["bins"])
        ax = axes[0][j]
        for k, (m, s) in enumerate(d["methods"].items()):
            mean = np.asarray([np.nan if v is None else 100 * v for v in s["accuracy_mean"]])
            std = np.asarray([np.nan if v is None else 100 * v for v in s["accuracy_std"]])
            off = (k - (len(d["methods"]) - 1) / 2) * 0.008  # small dodge so error bars do not overlap
            handles[m] = common.errorbar(ax, x + off, mean, std, m)
        ax.set_title(f"{name}: node homophily {d['node_homophily']:.2f}, {d['runs']} splits ({cfg.split})", fontsize=9)
        ax.set_ylabel("test accuracy (%)")
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
        cnt = np.asarray(next(iter(d["methods"].values()))["count_mean"])
        axes[1][j].bar(x, cnt, width=0.07, color="tab:gray")
        axes[1][j].set_ylabel("test nodes / split")
        axes[1][j].set_xlabel("node homophily h_v (bin centre)")
        axes[1][j].set_xticks(x)
        axes[1][j].grid(alpha=0.3)
    fig.legend(list(handles.values()), [common.METHOD_LABELS.get(m, m) for m in handles], loc="lower center",
               ncol=len(handles), fontsize=8, bbox_to_anchor=(0.5, -0.03))
    fig.suptitle("Fig. 1: test accuracy by node homophily h_v (mean ± std over splits; selection on validation)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    return common.save_figure(fig, path)

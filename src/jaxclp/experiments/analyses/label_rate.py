"""fig6: label rate vs the compatibility estimate and CLP accuracy (paper Fig. 6).

For training fractions 1%, 5%, 10%, 20%, 48% (validation = the same fraction, 32% for 48%, test = the rest;
random, not class-balanced splits), per split: the MLP prior of the validation-chosen depth, the estimate
``H_hat = Sinkhorn((M*Y)^T A B0)`` (:func:`jaxclp.estimate_compatibility`, training labels only), its distance
``||H - H_hat||_F`` to the true compatibility ``H = Sinkhorn(Y^T A Y)`` (:func:`jaxclp.true_compatibility`,
ALL labels, analysis only), and the test scores of MLP, LP, CLP*, CLP chosen on validation. Also recorded:
``H_hat`` with an ORACLE prior (every neighbour's true label; still only training receivers), which separates
the error due to few labelled receivers from the error due to the MLP prior.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxclp
from jaxclp.experiments.analyses import common
from jaxclp.datasets import load, random_splits, synthetic

FRACTIONS = (0.01, 0.05, 0.1, 0.2, 0.48)


@dataclasses.dataclass(frozen=True)
class Fig6Config:
    datasets: tuple
    runs: int
    fractions: tuple = FRACTIONS
    methods: tuple = ("mlp", "lp", "clp_star", "clp_mlp")  # CLP on the MLP prior: Fig. 4's reason
    epochs: int = 500
    seed: int = 0


FULL_FIG6 = Fig6Config(datasets=("syn-h0", "acm", "chameleon"), runs=10)
QUICK_FIG6 = Fig6Config(datasets=("quick-syn-h0",), runs=2, fractions=(0.01, 0.1, 0.48), epochs=20)


def val_fraction(train: float) -> float:
    return 0.32 if train >= 0.48 else train


def split_label(train: float) -> str:
    va = val_fraction(train)
    return f"{100 * train:g}/{100 * va:g}/{100 * (1 - train - va):g}"


def load_dataset(name: str, data_root=None):
    """``syn-h0``: 5 classes x 400 nodes, average degree 10, h = 0 (every edge joins two different classes,
    uniformly), Gaussian features; ``quick-syn-h0``: the same with 3 x 30 nodes and degree 4; else the registry."""
    if name == "syn-h0":
        return synthetic(0.0, 10, num_classes=5, nodes_per_class=400, seed=0, name="syn-h0-d10-5x400")
    if name == "quick-syn-h0":
        return synthetic(0.0, 4, num_classes=3, nodes_per_class=30, seed=0, name="quick-syn-h0")
    return load(name, root=data_root)


def _extra_fn(ds, H_true):
    y_all = jnp.asarray(ds.labels)
    k = ds.num_classes
    uniform = jnp.full((k, k), 1.0 / k)

    def extra(i, ctx, chosen, test_mask):
        y_tr = jnp.where(ctx.train, ctx.labels, 0)  # training labels only
        H_hat, info = jaxclp.estimate_compatibility(ctx.graph, ctx.prior, y_tr, ctx.train)
        # oracle prior: true labels of every neighbour (analysis only), still only training receivers
        oracle = jax.nn.one_hot(y_all, k, dtype=ctx.prior.dtype)
        H_orc, _ = jaxclp.estimate_compatibility(ctx.graph, oracle, y_all, ctx.train)
        Ht = H_true.astype(H_hat.dtype)
        return {"distance": float(jaxclp.compatibility_distance(Ht, H_hat)),
                "distance_oracle_prior": float(jaxclp.compatibility_distance(Ht, H_orc)),
                "distance_uniform": float(jaxclp.compatibility_distance(Ht, uniform.astype(Ht.dtype))),
                "H_hat": np.asarray(H_hat).round(5).tolist(), "sinkhorn_converged": bool(info.converged),
                "num_train": int(np.sum(np.asarray(ctx.train))), "mlp_depth": int(ctx.mlp_depth)}

    return extra


def fig6(out: Path, *, runs=10, datasets=None, data_root=None, argv=None, quick: bool | None = None,
         progress: bool = True) -> list[Path]:
    """||H - H_hat||_F and accuracy vs training fraction on a synthetic graph, acm and chameleon.

    ``runs`` caps the splits per fraction (full configuration: 10).
    """
    t0 = time.perf_counter()
    quick = common.resolve_quick(quick)
    cfg = QUICK_FIG6 if quick else FULL_FIG6
    if datasets:
        cfg = dataclasses.replace(cfg, datasets=tuple(datasets))
    nruns = min(cfg.runs, runs)
    fig_dir = common.figures_dir(out)
    prefix = "fig6_quick" if quick else "fig6"
    rec_dir = common.records_dir(fig_dir, prefix)
    per_ds = {}
    for name in cfg.datasets:
        ds = load_dataset(name, data_root)
        H_true = jaxclp.true_compatibility(ds.graph, jnp.asarray(ds.labels), ds.num_classes)
        rows = []
        for frac in cfg.fractions:
            label = split_label(frac)
            sp = random_splits(ds.num_nodes, (frac, val_fraction(frac)), num_splits=nruns, seed=cfg.seed)
            path = common.run_mirror(ds, label, cfg.methods, nruns, rec_dir, splits=sp, seed=cfg.seed,
                                     epochs=cfg.epochs, extra=_extra_fn(ds, H_true), extra_type="compat",
                                     argv=argv, progress=progress)
            results = common.last_results(path)
            extras = common.last_extras(path, "compat")
            ex = [extras[(ds.name, label, i)] for i in range(nruns) if (ds.name, label, i) in extras]
            row = {"train_fraction": frac, "val_fraction": val_fraction(frac), "split": label,
                   "num_train": [e["num_train"] for e in ex],
                   "single_class_runs": common.single_class_runs(results, ds.name, label, cfg.methods[0], nruns)}
            for key in ("distance", "distance_oracle_prior", "distance_uniform"):
                vals = [e[key] for e in ex]
                row[key] = common.mean_std(vals) | {"values": vals}
            for m in cfg.methods:
                vals = common.test_scores(results, ds.name, label, m, nruns)
                row[m] = common.mean_std(vals) | {"values": vals}
            row["H_hat_split0"] = ex[0]["H_hat"] if ex else None
            rows.append(row)
        per_ds[ds.name] = {"num_nodes": ds.num_nodes, "num_classes": ds.num_classes, "metric": ds.metric,
                           "edge_homophily": ds.edge_homophily(), "H_true": np.asarray(H_true).round(5).tolist(),
                           "rows": rows}
    png = _plot(per_ds, cfg, nruns, fig_dir / f"{prefix}.png")
    data = {"target": "fig6", "quick": quick, "command": " ".join(argv or ["jaxclp", "reproduce", "fig6"]),
            "config": dataclasses.asdict(cfg), "runs_cap": runs, "records": str(rec_dir / "results.jsonl"),
            "std": "sample std (ddof=1) over splits",
            "wall_seconds_this_invocation": time.perf_counter() - t0, "datasets": per_ds}
    return [common.write_json(fig_dir / f"{prefix}.json", data), png]


def _plot(per_ds, cfg, nruns, path):
    plt = common.pyplot()
    names = list(per_ds)
    fig, axes = plt.subplots(2, len(names), figsize=(4.6 * len(names), 6.4), squeeze=False)
    for j, name in enumerate(names):
        d = per_ds[name]
        x = [100 * r["train_fraction"] for r in d["rows"]]
        ax = axes[0][j]
        for key, lab, col, mk in (("distance", "H_hat (MLP prior, as CLP)", "tab:red", "o"),
                                  ("distance_oracle_prior", "H_hat (oracle prior)", "tab:blue", "s"),
                                  ("distance_uniform", "uniform 1/K (reference)", "tab:gray", None)):
            m = [r[key]["mean"] for r in d["rows"]]
            s = [r[key]["std"] for r in d["rows"]]
            ax.errorbar(x, m, yerr=s, label=lab, color=col, marker=mk, capsize=2,
                        linestyle="--" if mk is None else "-")
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.set_title(f"{name} (K={d['num_classes']}, edge h={d['edge_homophily']:.2f})", fontsize=9)
        ax.set_ylabel("||H − H_hat||_F")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax = axes[1][j]
        for m in cfg.methods:
            common.errorbar(ax, x, [100 * r[m]["mean"] if r[m]["mean"] is not None else np.nan for r in d["rows"]],
                            [100 * r[m]["std"] if r[m]["std"] is not None else np.nan for r in d["rows"]], m)
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.set_xlabel("training labels (% of nodes)")
        ax.set_ylabel(f"test {'accuracy' if d['metric'] == 'accuracy' else 'ROC-AUC'} (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Fig. 6: compatibility estimate and accuracy vs label rate (mean ± std over {nruns} splits)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return common.save_figure(fig, path)

"""fig7: accuracy vs number of parameters and wall time (paper Fig. 7).

Models, each with a FIXED architecture (no depth selection, so size and time belong to one model):

* MLP and CLP with a linear, 2-layer (64) or 3-layer (64, 64) base predictor. CLP = MLP fit, then the CLP
  candidates (``clp``: the runner's ``clp_mlp`` grid on this MLP — the paper's and per-step-L1 variants x 9
  alphas, the spectrally scaled closed forms, the authors' propagation; ``clp_paper``: the paper's update x 9
  alphas) chosen on validation. Its trainable parameters are the MLP's (H is estimated, K x K, and alpha is chosen; neither is
  trained by gradient).
* GCN with the same widths: 1 layer (linear propagation), 2 layers (64), 3 layers (64, 64).
* H2GCN with embedding width p and R aggregation rounds (its architecture has no MLP depth to vary).

Timing: per model, ``jax.clear_caches()``, then the first call on split 0 (compile + run), a second call on split 0
with the same shapes (run only), then one call per remaining split. "compile" = first − second call;
"run" = mean ± std over the warm calls (one per split). Wall-clock on 2 shared CPU cores: indicative only.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxclp
from jaxclp.experiments import runner
from jaxclp.experiments.analyses import common
from jaxclp.experiments.candidates import Context, select, visible_labels
from jaxclp.experiments.methods import method_clp, method_clp_paper
from jaxclp.datasets import load, synthetic
from jaxclp.mlp import mlp_param_count
from jaxclp.features import as_features
from jaxclp.gnn import fit_gcn, fit_h2gcn, gnn_param_count
from jaxclp.train import TrainConfig


@dataclasses.dataclass(frozen=True)
class Fig7Config:
    datasets: tuple
    runs: int
    encoders: tuple = (("linear", ()), ("2-layer", (64,)), ("3-layer", (64, 64)))
    h2gcn: tuple = ((16, 1), (64, 1), (64, 2))  # (width p, rounds R)
    split: str = "medium"
    epochs: int = 500
    seed: int = 0


FULL_FIG7 = Fig7Config(datasets=("brazil-airports", "wisconsin"), runs=10)
QUICK_FIG7 = Fig7Config(datasets=("quick-syn",), runs=2, encoders=(("linear", ()), ("2-layer", (16,))),
                        h2gcn=((8, 1),), epochs=20)


def load_dataset(name, data_root=None):
    if name == "quick-syn":
        return synthetic(0.5, 4, num_classes=3, nodes_per_class=30, seed=0, name="quick-syn")
    return load(name, root=data_root)


def _models(cfg: Fig7Config):
    out = []
    for tag, hid in cfg.encoders:
        out += [("mlp", tag, {"hidden": hid}), ("clp_paper", tag, {"hidden": hid}), ("clp", tag, {"hidden": hid}),
                ("gcn", tag, {"hidden": hid})]
    out += [("h2gcn", f"p={p}, R={r}", {"hidden": p, "num_rounds": r}) for p, r in cfg.h2gcn]
    return out


def _param_count(kind, kw, d, k):
    if kind in ("mlp", "clp", "clp_paper"):
        return mlp_param_count(d, k, kw["hidden"])
    if kind == "gcn":
        return gnn_param_count("gcn", d, k, kw["hidden"])
    return gnn_param_count("h2gcn", d, k, kw["hidden"], num_rounds=kw["num_rounds"])


def _fitter(kind, kw, ds, x, y, sp, keys, cfg_train):
    """``f(i) -> (scores, parts)``: one full fit + selection on split i, blocking until done."""
    k = ds.num_classes
    tr, va = np.asarray(sp.train), np.asarray(sp.val)

    def f(i):
        yv = jnp.asarray(visible_labels(y, tr[i], va[i]))
        t_i, v_i = jnp.asarray(tr[i]), jnp.asarray(va[i])
        t0 = time.perf_counter()
        if kind == "gcn":
            return jax.block_until_ready(fit_gcn(keys[i], ds.graph, x, yv, t_i, v_i, num_classes=k,
                                                 hidden=kw["hidden"], cfg=cfg_train).prior), {}
        if kind == "h2gcn":
            return jax.block_until_ready(fit_h2gcn(keys[i], ds.graph, x, yv, t_i, v_i, num_classes=k,
                                                   hidden=kw["hidden"], num_rounds=kw["num_rounds"],
                                                   cfg=cfg_train).prior), {}
        prior = jax.block_until_ready(jaxclp.fit_mlp(keys[i], x, yv, t_i, v_i, num_classes=k, hidden=kw["hidden"],
                                                     cfg=cfg_train).prior)
        t1 = time.perf_counter()
        if kind == "mlp":
            return prior, {"mlp_seconds": t1 - t0}
        ctx = Context(graph=ds.graph, features=x, labels=yv, train=t_i, val=v_i, num_classes=k, metric=ds.metric,
                      key=keys[i], priors={0: prior}, mlp_depth=0)
        cands = (method_clp if kind == "clp" else method_clp_paper)(ctx)
        best, _ = select(cands, np.asarray(yv), va[i], ds.metric)
        scores = jax.block_until_ready(cands[best])
        return scores, {"mlp_seconds": t1 - t0, "propagation_seconds": time.perf_counter() - t1,
                        "num_candidates": len(cands)}

    return f


def measure(ds, cfg: Fig7Config, runs: int) -> list[dict]:
    feats, feat_kind = runner.node_features(ds)
    x = as_features(feats)
    y = np.asarray(ds.labels)
    sp = runner.get_splits(ds, cfg.split, runs, cfg.seed)
    nruns = min(runs, sp.train.shape[0])
    keys = jax.random.split(jax.random.key(cfg.seed), nruns)
    te = np.asarray(sp.test)
    cfg_train = TrainConfig(epochs=cfg.epochs, metric=ds.metric)
    rows = []
    for kind, tag, kw in _models(cfg):
        f = _fitter(kind, kw, ds, x, y, sp, keys, cfg_train)
        jax.clear_caches()
        t = time.perf_counter()
        f(0)
        first = time.perf_counter() - t
        scores, times, parts = [], [], []
        for i in [0] + list(range(1, nruns)):
            t = time.perf_counter()
            s, p = f(i)
            times.append(time.perf_counter() - t)
            scores.append(runner.score_test(ds.metric, s, y, te[i]))
            parts.append(p)
        row = {"dataset": ds.name, "model": kind, "variant": tag, "kwargs": kw,
               "params": _param_count(kind, kw, x.shape[1], ds.num_classes), "features": feat_kind,
               "num_features": int(x.shape[1]), "metric": ds.metric, "test": common.mean_std(scores),
               "test_values": scores, "first_call_seconds": first, "second_call_seconds": times[0],
               "compile_seconds": max(first - times[0], 0.0),
               "run_seconds": common.mean_std(times) | {"median": float(np.median(times)),
                                                        "p25": float(np.percentile(times, 25)),
                                                        "p75": float(np.percentile(times, 75))},
               "run_seconds_values": times}
        for key in ("mlp_seconds", "propagation_seconds"):
            if parts and key in parts[0]:
                row[key] = common.mean_std([p[key] for p in parts])
        if parts and "num_candidates" in parts[0]:
            row["num_candidates"] = parts[0]["num_candidates"]
        rows.append(row)
    return rows


LABEL = {"mlp": "MLP", "clp_paper": "CLP (paper update)", "clp": "CLP (clp_mlp grid)", "gcn": "GCN",
         "h2gcn": "H2GCN"}


def fig7(out: Path, *, runs=10, datasets=None, data_root=None, argv=None, quick: bool | None = None,
         progress: bool = True) -> list[Path]:
    """Accuracy vs parameters and wall time on brazil-airports and wisconsin (medium split, 10 splits)."""
    t0 = time.perf_counter()
    quick = common.resolve_quick(quick)
    cfg = QUICK_FIG7 if quick else FULL_FIG7
    if datasets:
        cfg = dataclasses.replace(cfg, datasets=tuple(datasets))
    nruns = min(cfg.runs, runs)
    fig_dir = common.figures_dir(out)
    prefix = "fig7_quick" if quick else "fig7"
    rows = []
    for name in cfg.datasets:
        rows += measure(load_dataset(name, data_root), cfg, nruns)
    png = _plot(rows, cfg, nruns, fig_dir / f"{prefix}.png")
    md = _markdown(rows, nruns)
    md_path = fig_dir / f"{prefix}.md"
    md_path.write_text(md)
    data = {"target": "fig7", "quick": quick, "command": " ".join(argv or ["jaxclp", "reproduce", "fig7"]),
            "config": dataclasses.asdict(cfg), "runs_cap": runs, "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()],
            "timing": "compile = first call − second call on split 0 (same shapes, after jax.clear_caches()); "
                      "run = mean ± std over one warm call per split",
            "std": "sample std (ddof=1) over splits",
            "wall_seconds_this_invocation": time.perf_counter() - t0, "rows": rows}
    return [common.write_json(fig_dir / f"{prefix}.json", data), md_path, png]


def _markdown(rows, nruns) -> str:
    lines = ["| dataset | model | base / architecture | params | test (%) | run s / split: median (mean ± std) | "
             "compile s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        run = r["run_seconds"]
        lines.append(f"| {r['dataset']} | {LABEL[r['model']]} | {r['variant']} | {r['params']:,} | "
                     f"{common.fmt_pm(r['test'])} | {run['median']:.3f} ({run['mean']:.3f} ± {run['std']:.3f}) | "
                     f"{r['compile_seconds']:.2f} |")
    return (f"## Fig. 7: parameters and wall time (medium split, {nruns} splits, CPU)\n\n" + "\n".join(lines) + "\n")


def _plot(rows, cfg, nruns, path):
    plt = common.pyplot()
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(len(names), 2, figsize=(10.5, 3.8 * len(names)), squeeze=False)
    style = {"mlp": common.METHOD_STYLE["mlp"], "clp_paper": common.METHOD_STYLE["clp_paper"],
             "clp": common.METHOD_STYLE["clp"], "gcn": common.METHOD_STYLE["gcn"],
             "h2gcn": common.METHOD_STYLE["h2gcn"]}
    handles = {}
    for j, name in enumerate(names):
        rr = [r for r in rows if r["dataset"] == name]
        for col, xkey in ((0, "params"), (1, "run_seconds")):
            ax = axes[j][col]
            for kind in dict.fromkeys(r["model"] for r in rr):
                pts = [r for r in rr if r["model"] == kind]
                dodge = {"clp_paper": 1.05, "clp": 1.10}.get(kind, 1.0)  # CLP has exactly the MLP's parameters
                xs = [r["params"] * dodge if xkey == "params" else r["run_seconds"]["median"] for r in pts]
                xe = None if xkey == "params" else np.array(
                    [[r["run_seconds"]["median"] - r["run_seconds"]["p25"] for r in pts],
                     [r["run_seconds"]["p75"] - r["run_seconds"]["median"] for r in pts]])
                ys = [100 * r["test"]["mean"] for r in pts]
                ye = [100 * r["test"]["std"] for r in pts]
                c, mk = style[kind]
                h = ax.errorbar(xs, ys, yerr=ye, xerr=xe, color=c, marker=mk, markersize=6, capsize=2,
                                linestyle="-" if kind != "h2gcn" else ":", label=LABEL[kind])
                handles[kind] = h
                for r, xv, yv in zip(pts, xs, ys):
                    ax.annotate(r["variant"].replace("-layer", "L"), (xv, yv), fontsize=6, xytext=(3, 3),
                                textcoords="offset points", color=c)
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
            ax.set_xlabel("trainable parameters (CLP points dodged right: same as its MLP)" if xkey == "params"
                          else "wall time per split, warm: median, 25-75% (s)")
            ax.set_ylabel(f"test {'accuracy' if rr[0]['metric'] == 'accuracy' else 'ROC-AUC'} (%)")
            ax.set_title(f"{name} ({rr[0]['num_features']} {rr[0]['features']} features)", fontsize=9)
    fig.legend(list(handles.values()), [LABEL[k] for k in handles], loc="lower center", ncol=len(handles),
               fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(f"Fig. 7: test score (mean ± std over {nruns} splits) vs parameters and warm run time (compile "
                 "time excluded, see fig7.md)", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    return common.save_figure(fig, path)

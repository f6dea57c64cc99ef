"""Task 3: end-to-end CLP on real data, jaxclp vs a straightforward PyTorch implementation.

Pipeline timed (both sides): fit the MLP prior (500 epochs max, early stopping), estimate H (Sinkhorn), solve
the closed form for the alpha grid 0.1..0.9 and select alpha on validation, predict. jaxclp side:
``jaxclp.CLP(metric=...).fit(graph, features, labels, train, val).predict()``; PyTorch side:
:mod:`benchmarks.torch_clp`. Also timed separately: the MLP alone, and propagation + alpha selection alone
(the same prior given to both sides), because early stopping can make the two MLPs run different numbers of
epochs.

Datasets (``jaxclp.datasets.load``, root ``$JAXCLP_DATA``, default ``../shared/datasets``, loaded with
``cache=False`` so nothing is written next to the shared files): Texas, Chameleon, Squirrel (published
Geom-GCN split 0, 60/20/20), Twitch-EN (no published split: ``random_splits(n, "dense")`` split 0, 48/32/20;
metric ROC-AUC).

Timings exclude compilation: the first jaxclp call compiles (reported as ``compile_s`` = first call minus the
median of the following runs); the PyTorch side gets one untimed warm-up run too.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C

DATASETS = ("texas", "chameleon", "squirrel", "twitch-en")
QUICK_DATASETS = ("texas",)


def data_root() -> str:
    return str(C.data_root())


def _split(ds):
    from jaxclp import datasets as D

    if ds.splits is not None:
        return np.asarray(ds.splits.train[0]), np.asarray(ds.splits.val[0]), np.asarray(ds.splits.test[0]), "published split 0"
    sp = D.random_splits(ds.num_nodes, "dense", num_splits=1, seed=0)
    return np.asarray(sp.train[0]), np.asarray(sp.val[0]), np.asarray(sp.test[0]), "random_splits(dense) split 0"


def _test_metric(metric, proba, y, mask):
    if metric == "roc_auc":
        import torch

        from benchmarks.torch_clp import roc_auc

        return roc_auc(torch.from_numpy(np.asarray(proba)[:, 1].copy()), torch.from_numpy(y.astype(np.int64)),
                       torch.from_numpy(mask))
    return float((np.asarray(proba).argmax(1) == y)[mask].mean())


def run_dataset(name: str, repeats: int, quick: bool = False) -> dict:
    import jax
    import jax.numpy as jnp

    import jaxclp
    from jaxclp import datasets as D

    t0 = time.perf_counter()
    ds = D.load(name, root=data_root(), download=False, cache=False)
    load_s = time.perf_counter() - t0
    train, val, test, split_name = _split(ds)
    metric = ds.metric
    y = np.asarray(ds.labels)
    feats = np.asarray(ds.features, dtype=np.float32)
    g = ds.graph
    k = ds.num_classes
    epochs = 50 if quick else 500
    out = {"dataset": name, "n": ds.num_nodes, "epochs_max": epochs, "m": g.num_edges, "features": feats.shape[1], "K": k,
           "metric": metric, "split": split_name, "load_s": load_s}
    C.log(f"end_to_end: {name} n={ds.num_nodes} m={g.num_edges} d={feats.shape[1]} K={k}")
    # ------------------------------------------------------------------ jaxclp
    xj, yj, tj, vj = jnp.asarray(feats), jnp.asarray(y), jnp.asarray(train), jnp.asarray(val)

    def jax_full():
        model = jaxclp.CLP(metric=metric, seed=0, epochs=epochs, num_classes=k).fit(g, xj, yj, tj, vj)
        proba = model.predict_proba()
        jax.block_until_ready(proba)
        return model, proba

    t, (model, proba) = C.time_call(jax_full, repeats=repeats, warmup=1, min_repeats=min(3, repeats),
                                    sync=lambda z: z)
    out["jax"] = {"total": t.as_dict(), "alpha": model.alpha_, "method": model.method_,
                  "mlp_epochs": int(np.asarray(model.mlp_.info.epochs_run)), "val_score": model.val_score_,
                  "test_score": _test_metric(metric, proba, y, test)}
    prior = model.prior_
    if quick:  # smoke test: the whole pipeline once per side, no per-stage timings
        out["jax"]["mlp"] = out["jax"]["propagation_selection"] = {"median": None}
    else:
        _jax_stages(out, g, xj, yj, tj, vj, k, metric, prior, repeats)
    return _torch_side(out, name, ds, g, feats, y, train, val, test, k, metric, prior, model, repeats, epochs,
                       quick)


def _jax_stages(out, g, xj, yj, tj, vj, k, metric, prior, repeats):
    import jax

    import jaxclp
    from jaxclp.mlp import fit_mlp

    def jax_mlp():
        return fit_mlp(jax.random.key(0), xj, yj, tj, vj, num_classes=k).prior

    t, _ = C.time_call(jax_mlp, repeats=repeats, warmup=1, min_repeats=min(3, repeats))
    out["jax"]["mlp"] = t.as_dict()

    def jax_prop():
        m2 = jaxclp.CLP(metric=metric, num_classes=k).fit(g, None, yj, tj, vj, prior=prior)
        p2 = m2.predict_proba()
        jax.block_until_ready(p2)
        return p2

    t, _ = C.time_call(jax_prop, repeats=repeats, warmup=1, min_repeats=min(3, repeats), sync=lambda z: z)
    out["jax"]["propagation_selection"] = t.as_dict()
    C.log(f"  jaxclp: total {out['jax']['total']['median']:.2f}s (compile {out['jax']['total']['compile']:.1f}s), "
          f"mlp {out['jax']['mlp']['median']:.2f}s, prop+select {out['jax']['propagation_selection']['median']:.3f}s, "
          f"test {out['jax']['test_score']:.3f}")


def _torch_side(out, name, ds, g, feats, y, train, val, test, k, metric, prior, model, repeats, epochs, quick):
    import jax.numpy as jnp

    import jaxclp
    from benchmarks import torch_clp as TC

    if not TC.available():
        out["torch"] = {"skipped": "torch not installed (pip install torch==2.13.0)"}
        return out
    import torch

    ei = torch.from_numpy(np.stack([np.asarray(g.senders), np.asarray(g.receivers)]).astype(np.int64))
    xt = torch.from_numpy(feats.copy())
    yt = torch.from_numpy(y.astype(np.int64))
    trt, vat = torch.from_numpy(train.copy()), torch.from_numpy(val.copy())

    def torch_full():
        pred, info = TC.clp_pipeline(ei, ds.num_nodes, xt, yt, trt, vat, k, metric=metric, epochs=epochs)
        return pred, info

    t, (pred, info) = C.time_call(torch_full, repeats=repeats, warmup=1, min_repeats=min(3, repeats),
                                  sync=lambda z: z)
    out["torch"] = {"total": t.as_dict(), "alpha": info["alpha"], "mlp_epochs": info["mlp_epochs"],
                    "val_score": info["val_score"], "neumann_iterations": info["neumann_iterations"],
                    "threads": torch.get_num_threads()}
    out["torch"]["test_score"] = _test_metric(metric, info["proba"].numpy(), y, test)
    if quick:
        return out
    t, _ = C.time_call(lambda: TC.fit_mlp(xt, yt, trt, vat, k), repeats=repeats, warmup=1,
                       min_repeats=min(3, repeats), sync=lambda z: z)
    out["torch"]["mlp"] = t.as_dict()
    prior_t = torch.from_numpy(np.asarray(prior, dtype=np.float32).copy())
    t, (pred2, info2) = C.time_call(
        lambda: TC.clp_pipeline(ei, ds.num_nodes, xt, yt, trt, vat, k, metric=metric, prior=prior_t),
        repeats=repeats, warmup=1, min_repeats=min(3, repeats), sync=lambda z: z)
    out["torch"]["propagation_selection"] = t.as_dict()
    out["torch"]["same_prior_alpha"] = info2["alpha"]
    out["jax"]["same_prior_alpha"] = model.alpha_
    tj, vj = jnp.asarray(train), jnp.asarray(val)
    m2 = jaxclp.CLP(metric=metric, num_classes=k).fit(g, None, jnp.asarray(y), tj, vj, prior=prior)
    jpred = np.asarray(m2.predict_proba()).argmax(1)
    out["same_prior_prediction_agreement"] = float((pred2.numpy() == jpred).mean())
    C.log(f"  torch: total {out['torch']['total']['median']:.2f}s, mlp {out['torch']['mlp']['median']:.2f}s, "
          f"prop+select {out['torch']['propagation_selection']['median']:.3f}s")
    return out


def write_markdown(path: Path, payload: dict) -> None:
    lines = ["# Task 3: end to end on real data (fit + alpha selection + predict)", "",
             C.machine_header_md(payload["machine"]), ""]
    lines += [(__doc__ or "").split("\n\n", 1)[1].strip(), "",
              f"Median of {payload['repeats']} runs after one warm-up. Seconds.", ""]
    body = []
    for r in payload["rows"]:
        j, t = r["jax"], r.get("torch", {})
        tt = t.get("total", {})

        def ratio(a, b):
            return None if (a is None or b is None) else b / a

        body.append([r["dataset"], r["n"], r["m"], r["features"], r["K"],
                     j["total"]["median"], j["total"]["compile"], tt.get("median"),
                     ratio(j["total"]["median"], tt.get("median")),
                     j["mlp"]["median"], t.get("mlp", {}).get("median"),
                     j["propagation_selection"]["median"], t.get("propagation_selection", {}).get("median"),
                     ratio(j["propagation_selection"]["median"], t.get("propagation_selection", {}).get("median")),
                     f"{j['mlp_epochs']}/{t.get('mlp_epochs', '-')}",
                     f"{j['alpha']}/{t.get('alpha', '-')}", j["method"],
                     f"{j['test_score']:.3f}/{t['test_score']:.3f}" if "test_score" in t else f"{j['test_score']:.3f}/-",
                     r.get("same_prior_prediction_agreement")])
    lines += [C.md_table(["dataset", "n", "m", "d", "K", "jaxclp total", "jaxclp compile", "torch total",
                          "speed-up", "jax MLP", "torch MLP", "jax prop+select", "torch prop+select",
                          "prop speed-up", "MLP epochs jax/torch", "alpha jax/torch", "jax method",
                          "test jax/torch", "same-prior pred. agreement"], body), ""]
    lines += ["`speed-up` = torch time / jaxclp time (> 1: jaxclp faster). `test` is accuracy (ROC-AUC for "
              "Twitch-EN). The two MLPs use "
              "different random initializations, so their priors, selected alphas and accuracies differ; "
              "`same-prior pred. agreement` compares the predictions of the two propagation + selection "
              "implementations given the identical (jaxclp) prior.", ""]
    path.write_text("\n".join(lines))


def plot(path: Path, payload: dict) -> str | None:
    rows = [r for r in payload.get("rows", []) if "mlp" in r.get("torch", {}) and r["jax"]["mlp"].get("median")]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    xs = np.arange(len(rows))
    w = 0.2
    parts = [("jax", "mlp", "tab:red", "jaxclp MLP"), ("jax", "propagation_selection", "salmon", "jaxclp prop+select"),
             ("torch", "mlp", "tab:orange", "torch MLP"), ("torch", "propagation_selection", "gold", "torch prop+select")]
    for i, (side, part, col, lab) in enumerate(parts):
        ax.bar(xs + (i - 1.5) * w, [r[side][part]["median"] for r in rows], w, color=col, label=lab)
    ax.set_xticks(xs, [r["dataset"] for r in rows])
    ax.set_yscale("log")
    ax.set_ylabel("seconds (median)")
    ax.set_title("End to end CLP stages, jaxclp vs PyTorch (CPU)")
    return C.save_figure(fig, path, ax)


def main(argv=None, out=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.end_to_end", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=out)
    ap.add_argument("--datasets", nargs="*", default=None)
    args = ap.parse_args(argv)
    od = C.out_dir(args.out)
    t0 = time.time()
    info = C.machine_info()
    payload = {"benchmark": "end_to_end", "quick": args.quick, "machine": info}
    names = args.datasets or (QUICK_DATASETS if args.quick else DATASETS)
    repeats = 1 if args.quick else 3
    rows = []
    for nm in names:
        try:
            rows.append(run_dataset(nm, repeats, quick=args.quick))
        except FileNotFoundError as err:
            rows.append({"dataset": nm, "error": f"data not found under {data_root()}: {err}"})
            C.log(f"end_to_end: {nm}: data not found ({err})")
    payload["rows"] = [r for r in rows if "error" not in r]
    payload["errors"] = [r for r in rows if "error" in r]
    payload["repeats"] = repeats
    p = plot(od / "end_to_end.png", payload)
    payload["plots"] = [p] if p else []
    return C.write_results(od, "end_to_end", payload, write_markdown, t0)


if __name__ == "__main__":
    main()

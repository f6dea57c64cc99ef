"""Message passing of the tuned GNNs (GraphSAGE, GAT, GAT-sep, GCN-sep): the gather + segment-sum path vs the CSR
kernel with a transpose plan (``jaxclp.sparse.csr_matmul_planned``; its gradient w.r.t. the edge values is the
SDDMM kernel), one training step and one whole fit, in one process.

* ``step``: ``jax.value_and_grad`` of the cross-entropy of a :class:`jaxclp.gnn.TunedGNN` in training mode
  (dropout on), residual + LayerNorm + feed-forward blocks at ``layers`` depth, hidden 64 — the body of the
  training loop, which runs up to 500 times per fit. Both paths on the same parameters; the logits' max
  difference is recorded.
* ``fit``: one :func:`jaxclp.gnn._train_model` fit (<= 500 epochs, early stopping, the runner's tuned-GNN
  settings) per path, compile excluded (compiled ahead of time).

Usage: ``python -m benchmarks.gnn [--quick] [--out DIR]`` (also ``python -m benchmarks.run gnn``).
Data: ``$JAXCLP_DATA`` (default ``../shared/datasets``), read in place (``cache=False``).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import _common as C

FULL = {"datasets": ("chameleon", "squirrel"), "convs": ("sage", "gat", "gat_sep", "gcn_sep"), "layers": 3,
        "repeats": 7, "fit_datasets": ("chameleon",), "fit_convs": ("sage", "gat"), "fit_repeats": 1}
QUICK = {"datasets": ("texas",), "convs": ("sage", "gat"), "layers": 1, "repeats": 2, "fit_datasets": (),
         "fit_convs": (), "fit_repeats": 1}


def _setup(dataset: str, conv_name: str, layers: int):
    import jax
    import jax.numpy as jnp

    import jaxclp
    from jaxclp.gnn import GNNSpec, _model, tuned_gnn_graph
    from jaxclp.sparse import transpose_plan

    ds = jaxclp.datasets.load(dataset, root=C.data_root(), download=False, cache=False)
    conv, sep = conv_name.split("_")[0], conv_name.endswith("_sep")
    spec = GNNSpec(conv=conv, hidden=64, num_layers=layers, sep=sep, residual=True, norm=True, dropout=0.2,
                   heads=4, ffn=True)
    x = jnp.asarray(ds.features, jnp.float32)
    gt = tuned_gnn_graph(ds.graph, conv, sep, nodes=x)
    plan = transpose_plan(gt.senders, gt.receivers, ds.graph.num_nodes)
    k = int(ds.labels.max()) + 1
    model = _model(spec, k, bool(ds.graph.symmetric))
    params = model.init(jax.random.PRNGKey(0), gt, None, train=False)
    return ds, spec, model, gt, plan, params


def step(cfg) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    rows = []
    for dataset in cfg["datasets"]:
        for conv_name in cfg["convs"]:
            ds, spec, model, gt, plan, params = _setup(dataset, conv_name, cfg["layers"])
            y = jnp.asarray(np.maximum(ds.labels, 0))
            n = y.shape[0]
            row = {"dataset": dataset, "conv": conv_name, "n": n, "edges": int(gt.senders.shape[0]),
                   "layers": cfg["layers"]}
            logits = {}
            for path, pl in (("gather", None), ("csr", plan)):
                # graph and plan are arguments, not closed-over constants: XLA:GPU constant-folds a captured
                # transpose plan for seconds per compile (seen on an H200, benchmarks/results/device.md)
                def loss(p, gt, pl, y):
                    z = model.apply(p, gt, pl, train=True, rngs={"dropout": jax.random.PRNGKey(1)})
                    return jnp.mean(jax.nn.logsumexp(z, -1) - z[jnp.arange(n), y])

                f = jax.jit(jax.value_and_grad(loss))
                C.time_call(lambda f=f, pl=pl: f(params, gt, pl, y), repeats=cfg["repeats"])[0].into(row, path)
                logits[path] = np.asarray(jax.jit(lambda p, gt, pl: model.apply(p, gt, pl, train=False))(params, gt, pl))
            row["speedup"] = row["gather_s"] / row["csr_s"]
            row["max_abs_logit_diff"] = float(np.max(np.abs(logits["gather"] - logits["csr"])))
            C.log(f"gnn step {dataset} {conv_name}: {row['gather_s'] * 1e3:.1f} -> {row['csr_s'] * 1e3:.1f} ms "
                  f"({row['speedup']:.1f}x)")
            rows.append(row)
    return rows


def fit(cfg) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxclp.experiments.methods import gnn_train_config
    from jaxclp.gnn import _train_model

    rows = []
    for dataset in cfg["fit_datasets"]:
        for conv_name in cfg["fit_convs"]:
            ds, spec, model, gt, plan, _ = _setup(dataset, conv_name, cfg["layers"])
            train, val = _masks(ds)
            labels = jnp.asarray(np.maximum(ds.labels, 0))
            tcfg = gnn_train_config(ds.metric)
            row = {"dataset": dataset, "conv": conv_name, "layers": cfg["layers"]}
            for path, pl in (("gather", None), ("csr", plan)):
                key = jax.random.PRNGKey(0)
                f = jax.jit(lambda key, gt, pl, labels, train, val: _train_model(model, (gt, pl), key, labels, train,
                                                                                 val, tcfg))
                args = (key, gt, pl, labels, jnp.asarray(train), jnp.asarray(val))
                f = f.lower(*args).compile()  # compile excluded: one timed fit per repeat
                t, res = C.time_call(lambda f=f, args=args: f(*args), repeats=cfg["fit_repeats"], warmup=0,
                                     first_call=False, min_repeats=1)
                row[f"{path}_s"], row[f"{path}_epochs"] = t.median, int(res.info.epochs_run)
                row[f"{path}_foreign_cores"] = t.foreign_cores
            row["speedup"] = row["gather_s"] / row["csr_s"]
            C.log(f"gnn fit {dataset} {conv_name}: {row['gather_s']:.1f} -> {row['csr_s']:.1f} s")
            rows.append(row)
    return rows


def _masks(ds):
    """Split 0 of the runner's medium protocol (10/10/80): the masks a table's first run uses."""
    import jax.numpy as jnp

    from jaxclp.experiments.runner import get_splits

    sp = get_splits(ds, "medium", 1, seed=0)
    return jnp.asarray(sp.train[0]), jnp.asarray(sp.val[0])


def write_markdown(path: Path, payload: dict) -> None:
    ms = lambda s: f"{s * 1e3:.1f}"  # noqa: E731
    lines = ["# Tuned-GNN message passing: gather + segment sum vs CSR kernel with a transpose plan "
             "(`python -m benchmarks.gnn`)", "", C.machine_header_md(payload["machine"]), "",
             "One training step (value and gradient, dropout on), residual + LayerNorm + feed-forward blocks, hidden "
             "64: milliseconds, median (min) of the timed calls; `foreign` = CPU cores used by other processes "
             "meanwhile. `gather` is what a fit without a plan runs: gather + segment sum for SAGE and GAT, but the "
             "symmetric CSR kernel for GCN-sep on these undirected graphs (so its row compares that path with the "
             "planned one: fits keep the symmetric path for GCN on undirected graphs).", "",
             C.md_table(["dataset", "conv", "n", "edges", "layers", "gather", "csr", "speed-up", "foreign",
                         "max |logit diff|"],
                        [[r["dataset"], r["conv"], r["n"], r["edges"], r["layers"],
                          f"{ms(r['gather_s'])} ({ms(r['gather_min_s'])})", f"{ms(r['csr_s'])} ({ms(r['csr_min_s'])})",
                          f"{r['speedup']:.1f}x", f"{r['gather_foreign_cores']:.1f} / {r['csr_foreign_cores']:.1f}",
                          f"{r['max_abs_logit_diff']:.1e}"] for r in payload["step"]]), ""]
    if payload["fit"]:
        lines += ["One whole fit (split 0 of the medium protocol, <= 500 epochs with early stopping), seconds, "
                  "compile excluded (early stopping ends both paths at the same epoch; the rest of an epoch — "
                  "optimizer, validation forward, metric — is common to both):", "",
                  C.md_table(["dataset", "conv", "layers", "gather", "epochs", "csr", "epochs", "speed-up"],
                             [[r["dataset"], r["conv"], r["layers"], f"{r['gather_s']:.1f}", r["gather_epochs"],
                               f"{r['csr_s']:.1f}", r["csr_epochs"], f"{r['speedup']:.1f}x"]
                              for r in payload["fit"]]), ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict:
    return C.sections_main("gnn", __doc__, {"step": step, "fit": fit}, FULL, QUICK, write_markdown, argv, out)


if __name__ == "__main__":
    main()

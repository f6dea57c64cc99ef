"""Sparse node features: ``X @ W`` by gather + segment sum (no plan) vs the CSR kernel with the plan that
:func:`jaxclp.features.as_features` builds (``jaxclp.features.matmul`` -> ``jaxclp.sparse.csr_matmul_planned``), in one
process, on the real bag-of-words features of the tables' graphs.

* ``product``: ``jax.value_and_grad`` w.r.t. ``W`` of ``sum((X @ W) * C)`` — the first layer of an MLP or GNN,
  forward and backward — at widths 64 (the paper's MLP) and 256; the max difference of both paths' outputs
  and gradients is recorded (the two sum the same terms in the same order).
* ``fit``: one :func:`jaxclp.fit_mlp` (the paper's MLP: hidden 64, <= 500 epochs, early stopping) on split 0
  of the medium protocol, dense input vs sparse without plan vs sparse with plan, compile excluded.

Usage: ``python -m benchmarks.sparse_features [--quick] [--out DIR]`` (also
``python -m benchmarks.run sparse_features``). Data: ``$JAXCLP_DATA`` (default ``../shared/datasets``).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import _common as C

FULL = {"datasets": ("chameleon", "twitch-en", "coauthor-cs", "coauthor-physics", "deezer-europe"),
        "widths": (64, 256), "repeats": 7, "fit_datasets": ("chameleon", "coauthor-cs"), "fit_repeats": 2}
QUICK = {"datasets": ("texas",), "widths": (16,), "repeats": 2, "fit_datasets": (), "fit_repeats": 1}


def _features(dataset: str):
    """(dataset, SparseFeatures with plan, the same without plan)."""
    import jaxclp
    from jaxclp.features import SparseFeatures, as_features

    ds = jaxclp.datasets.load(dataset, root=C.data_root(), download=False, cache=False, sparse_features=True)
    f = as_features(ds.features, "float32")
    return ds, f, SparseFeatures(f.rows, f.cols, f.values, f.shape)


def product(cfg) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxclp.features import matmul

    rows = []
    for dataset in cfg["datasets"]:
        ds, planned, plain = _features(dataset)
        n, d = planned.shape
        for h in cfg["widths"]:
            w = jax.random.normal(jax.random.PRNGKey(0), (d, h), jnp.float32)
            c = jax.random.normal(jax.random.PRNGKey(1), (n, h), jnp.float32)
            row = {"dataset": dataset, "n": n, "d": d, "nnz": planned.nnz, "width": h}
            outs = {}
            for path, x in (("segment", plain), ("csr", planned)):
                f = jax.jit(jax.value_and_grad(lambda w, x, c: jnp.sum(matmul(x, w) * c)))
                C.time_call(lambda f=f, x=x: f(w, x, c), repeats=cfg["repeats"])[0].into(row, path)
                outs[path] = (np.asarray(jax.jit(matmul)(x, w)), np.asarray(f(w, x, c)[1]))
            row["speedup"] = row["segment_s"] / row["csr_s"]
            row["max_abs_diff_out"] = float(np.max(np.abs(outs["segment"][0] - outs["csr"][0])))
            row["max_abs_diff_grad"] = float(np.max(np.abs(outs["segment"][1] - outs["csr"][1])))
            C.log(f"sparse product {dataset} h={h}: {row['segment_s'] * 1e3:.1f} -> {row['csr_s'] * 1e3:.1f} ms "
                  f"({row['speedup']:.1f}x)")
            rows.append(row)
    return rows


def fit(cfg) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxclp
    from jaxclp.experiments.runner import get_splits

    rows = []
    for dataset in cfg["fit_datasets"]:
        ds, planned, plain = _features(dataset)
        sp = get_splits(ds, "medium", 1, seed=0)
        train, val, test = (jnp.asarray(a[0]) for a in (sp.train, sp.val, sp.test))
        labels = jnp.asarray(np.maximum(ds.labels, 0))
        dense = jnp.asarray(ds.features.toarray(), jnp.float32)
        row = {"dataset": dataset, "n": planned.shape[0], "d": planned.shape[1], "nnz": planned.nnz}
        for path, x in (("dense", dense), ("segment", plain), ("csr", planned)):
            call = lambda x=x: jaxclp.fit_mlp(jax.random.PRNGKey(0), x, labels, train, val,  # noqa: E731
                                              num_classes=ds.num_classes)
            t, res = C.time_call(call, repeats=cfg["fit_repeats"], warmup=0, min_repeats=1)
            row[f"{path}_s"], row[f"{path}_first_s"] = t.median, t.first_call
            row[f"{path}_foreign_cores"] = t.foreign_cores
            pred = np.asarray(res.prior).argmax(1)
            row[f"{path}_test_acc"] = float(np.mean(pred[np.asarray(test)] == np.asarray(labels)[np.asarray(test)]))
        row["speedup_vs_dense"] = row["dense_s"] / row["csr_s"]
        row["speedup_vs_segment"] = row["segment_s"] / row["csr_s"]
        C.log(f"mlp fit {dataset}: dense {row['dense_s']:.1f} s, segment {row['segment_s']:.1f} s, "
              f"csr {row['csr_s']:.1f} s")
        rows.append(row)
    return rows


def write_markdown(path: Path, payload: dict) -> None:
    ms = lambda s: f"{s * 1e3:.1f}"  # noqa: E731
    lines = ["# Sparse node features: gather + segment sum vs the CSR kernel with a plan "
             "(`python -m benchmarks.sparse_features`)", "", C.machine_header_md(payload["machine"]), "",
             "`X @ W` forward and gradient w.r.t. `W` (the first layer of the MLP and of the GNNs), float32: "
             "milliseconds, median (min) of the timed calls; `foreign` = CPU cores used by other processes "
             "meanwhile; max |diff| between the two paths' outputs / gradients.", "",
             C.md_table(["dataset", "n x d", "nnz", "width", "segment", "csr", "speed-up", "foreign",
                         "max |diff| out / grad"],
                        [[r["dataset"], f"{r['n']} x {r['d']}", r["nnz"], r["width"],
                          f"{ms(r['segment_s'])} ({ms(r['segment_min_s'])})", f"{ms(r['csr_s'])} ({ms(r['csr_min_s'])})",
                          f"{r['speedup']:.1f}x", f"{r['segment_foreign_cores']:.1f} / {r['csr_foreign_cores']:.1f}",
                          f"{r['max_abs_diff_out']:.1e} / {r['max_abs_diff_grad']:.1e}"] for r in payload["product"]]),
             ""]
    if payload["fit"]:
        lines += ["One `fit_mlp` (hidden 64, <= 500 epochs, early stopping; split 0 of the medium protocol), seconds "
                  "(median of the timed fits, compile excluded), and its test accuracy:", "",
                  C.md_table(["dataset", "n x d", "nnz", "dense", "segment", "csr", "vs dense", "vs segment",
                              "test acc dense / segment / csr"],
                             [[r["dataset"], f"{r['n']} x {r['d']}", r["nnz"], f"{r['dense_s']:.1f}",
                               f"{r['segment_s']:.1f}", f"{r['csr_s']:.1f}", f"{r['speedup_vs_dense']:.1f}x",
                               f"{r['speedup_vs_segment']:.1f}x",
                               f"{r['dense_test_acc']:.4f} / {r['segment_test_acc']:.4f} / {r['csr_test_acc']:.4f}"]
                              for r in payload["fit"]]), ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict:
    return C.sections_main("sparse_features", __doc__, {"product": product, "fit": fit}, FULL, QUICK, write_markdown, argv, out)


if __name__ == "__main__":
    main()

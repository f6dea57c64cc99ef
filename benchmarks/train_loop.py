"""The training loop's epoch, before and after its evaluation and gradient were fused, in one process.

Every fit of jaxclp (the MLP priors, LINKX, the GNNs, the tuned grids) runs :func:`jaxclp.train.train_until`. Its
epoch used to take the optimizer step at ``p`` (a training forward and backward pass) and then evaluate the new
parameters (a second forward pass): two computations on different parameters, so a model's input projection
``x W`` (on a feature-rich graph the largest product of an epoch: Wiki, 2,405 x 4,973 features) was computed twice
per epoch for ``p`` (once in the evaluation that ended the epoch before, once in the training pass). Now each
pass of the loop evaluates ``p`` and differentiates the training loss at it in one computation
(:func:`jaxclp.train._evaluate_and_grad`), then steps, so XLA computes that projection once: the same parameters
are evaluated, with the same dropout keys, and the fits are the same (checked here bit for bit). The whole-fit
program holds one evaluation fewer (the first is the loop's own pass), so compilation does not grow.

``python -m benchmarks.train_loop [--datasets wiki,deezer-europe,...] [--repeats 3]``: for each graph
(medium split 0, published files read in place), one fit of each model with :func:`_previous_train` (the loop as
it was, kept here as the reference) and with :func:`jaxclp.train.train_full_batch`, alternating, warm (the first
call of each compiles and is not counted); min and median seconds per epoch, their ratio, and whether the best
parameters and diagnostics are identical. Results: ``benchmarks/results/train_loop.{json,md}``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from benchmarks import _common as C

DATASETS = ("texas", "chameleon", "wiki", "twitch-en", "deezer-europe")


def _previous_train(apply_fn, opt, epochs, patience, params, key, labels, train_mask, val_mask, score):
    """:func:`jaxclp.train.train_full_batch`'s loop as it was before the fusion: each epoch steps at ``p`` (its
    own training forward and backward pass) and then evaluates the new parameters."""
    import jax
    import jax.numpy as jnp
    import optax

    from jaxclp.train import TrainInfo, _evaluate, masked_cross_entropy

    labels = jnp.where(train_mask | val_mask, labels, 0)
    m0, loss0, acc0 = _evaluate(apply_fn, params, key, labels, val_mask, score)
    state = dict(params=params, opt=opt.init(params), best=params, best_m=m0, best_loss=loss0, best_acc=acc0,
                 best_epoch=jnp.int32(-1), bad=jnp.int32(0), epoch=jnp.int32(0), key=key,
                 train_loss=jnp.asarray(jnp.inf, loss0.dtype))

    def cond(s):
        return (s["epoch"] < epochs) & ~((patience > 0) & (s["bad"] >= patience))

    def body(s):
        k, sub = jax.random.split(s["key"])
        loss, grads = jax.value_and_grad(lambda q: masked_cross_entropy(apply_fn(q, sub, True), labels,
                                                                        train_mask))(s["params"])
        updates, opt_state = opt.update(grads, s["opt"], s["params"])
        p = optax.apply_updates(s["params"], updates)
        m, vloss, acc = _evaluate(apply_fn, p, key, labels, val_mask, score)
        better = (m > s["best_m"]) | ((m == s["best_m"]) & (vloss < s["best_loss"]))
        pick = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b), new, old)
        return dict(params=p, opt=opt_state, best=pick(p, s["best"]), best_m=jnp.where(better, m, s["best_m"]),
                    best_acc=jnp.where(better, acc, s["best_acc"]),
                    best_loss=jnp.where(better, vloss, s["best_loss"]),
                    best_epoch=jnp.where(better, s["epoch"], s["best_epoch"]),
                    bad=jnp.where(better, 0, s["bad"] + 1), epoch=s["epoch"] + 1, key=k, train_loss=loss)

    s = jax.lax.while_loop(cond, body, state)
    return s["best"], TrainInfo(best_epoch=s["best_epoch"], epochs_run=s["epoch"], best_val_accuracy=s["best_acc"],
                                best_val_loss=s["best_loss"], final_train_loss=s["train_loss"],
                                best_val_metric=s["best_m"])


def _models(ds, x):
    """``(name, make, data, cfg)`` of the models timed: the runner's depth-1 MLP prior, the tuned GCN's first spec
    (one plain block), the tuned SAGE's last (five residual feed-forward blocks), and the tuned GCN grid's program
    (:func:`jaxclp.gnn.fit_gnn_grid`: the union of its 8 specs, run as the first). ``make(key, data)`` gives
    ``(apply_fn, initial params, dropout key)`` as the library's fit of that model does."""
    import functools

    import jax
    import jax.numpy as jnp

    from jaxclp import gnn
    from jaxclp.mlp import mlp_build
    from jaxclp.train import TrainConfig, _built

    def built(key, data, *, build, opts):
        model, _, init_inputs, apply_fn = _built(build, data, opts)
        init_key, drop_key = jax.random.split(key)
        return apply_fn, model.init(init_key, *init_inputs, train=False), drop_key

    def grid_candidate(key, data, *, opts):
        graph, features, flags = data
        return gnn._grid_model(key, graph, features, flags, **opts)

    cfg = TrainConfig(metric=ds.metric)
    tuned = gnn.tuned_train_config(cfg)
    mlp = dict(num_classes=ds.num_classes, hidden=(64,), dropout=0.5)
    out = [("mlp depth 1", functools.partial(built, build=mlp_build, opts=mlp), (x,), cfg)]
    for spec in (gnn.tuned_grid("gcn")[0], gnn.tuned_grid("sage")[-1]):
        name = f"{spec.conv}_tuned {spec.num_layers} {'residual' if spec.residual else 'plain'}"
        opts = dict(num_classes=ds.num_classes, spec=spec)
        out.append((name, functools.partial(built, build=gnn._tuned_build, opts=opts), (ds.graph, x), tuned))
    grid = gnn.tuned_grid("gcn")
    flags = jnp.asarray([grid[0].num_layers, grid[0].residual, grid[0].norm, grid[0].ffn], jnp.int32)
    opts = dict(num_classes=ds.num_classes, spec=gnn._grid_union(grid))
    out.append(("gcn_tuned grid program (1 plain block)", functools.partial(grid_candidate, opts=opts),
                (ds.graph, x, flags), tuned))
    return out


def measure(name: str, repeats: int) -> list[dict]:
    import functools

    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxclp
    from jaxclp import priors
    from jaxclp.train import make_optimizer, train_full_batch, validation_metric

    ds = jaxclp.datasets.load(name, root=C.data_root(), download=False, cache=False)
    sp = jaxclp.datasets.random_splits(ds.num_nodes, "medium", num_splits=1, seed=0)
    x = priors._gnn_features(ds.features, ds.num_nodes, name)
    y, tm, vm = jnp.asarray(ds.labels), jnp.asarray(sp.train[0]), jnp.asarray(sp.val[0])
    rows = []
    for model_name, make, data, cfg in _models(ds, x):
        def fit(which, data, key, *, make=make, cfg=cfg):
            apply_fn, params, drop_key = make(key, data)
            if which == "before":
                return _previous_train(apply_fn, make_optimizer(cfg), cfg.epochs, cfg.patience, params, drop_key,
                                       y, tm, vm, validation_metric(cfg.metric))
            return train_full_batch(apply_fn, params, drop_key, y, tm, vm, cfg)

        key = jax.random.PRNGKey(0)
        jitted, compile_s = {}, {}
        for w in ("before", "after"):  # trace + lower + compile of the whole fit, one program each
            t = time.perf_counter()
            jitted[w] = jax.jit(functools.partial(fit, w)).lower(data, key).compile()
            compile_s[w] = time.perf_counter() - t
        out = {w: jax.block_until_ready(f(data, key)) for w, f in jitted.items()}
        times = {"before": [], "after": []}
        for _ in range(repeats):
            for w in ("before", "after"):
                t = time.perf_counter()
                out[w] = jax.block_until_ready(jitted[w](data, key))
                times[w].append(time.perf_counter() - t)
        same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in
                   zip(jax.tree_util.tree_leaves(out["before"]), jax.tree_util.tree_leaves(out["after"])))
        epochs = int(out["after"][1].epochs_run)
        row = {"dataset": name, "nodes": int(ds.num_nodes), "features": int(x.shape[1]), "model": model_name,
               "epochs": epochs, "identical": bool(same), "before_compile_s": compile_s["before"],
               "after_compile_s": compile_s["after"],
               "before_ms_per_epoch_min": 1e3 * min(times["before"]) / epochs,
               "after_ms_per_epoch_min": 1e3 * min(times["after"]) / epochs,
               "before_ms_per_epoch_median": 1e3 * statistics.median(times["before"]) / epochs,
               "after_ms_per_epoch_median": 1e3 * statistics.median(times["after"]) / epochs}
        row["ratio_median"] = row["after_ms_per_epoch_median"] / row["before_ms_per_epoch_median"]
        C.log(f"train_loop: {name} {model_name}: {row['before_ms_per_epoch_median']:.1f} -> "
              f"{row['after_ms_per_epoch_median']:.1f} ms/epoch ({row['ratio_median']:.2f}x), identical {same}")
        rows.append(row)
    return rows


def markdown(payload: dict) -> str:
    rows = [[r["dataset"], r["nodes"], r["features"], r["model"], r["epochs"],
             f"{r['before_ms_per_epoch_median']:.1f} ({r['before_ms_per_epoch_min']:.1f})",
             f"{r['after_ms_per_epoch_median']:.1f} ({r['after_ms_per_epoch_min']:.1f})",
             f"{r['ratio_median']:.2f}", f"{r['before_compile_s']:.2f}", f"{r['after_compile_s']:.2f}",
             "yes" if r["identical"] else "**no**"] for r in payload["rows"]]
    return "\n\n".join([
        "# The training loop's epoch, before and after fusing its evaluation and gradient",
        f"Command: `{payload['command']}`",
        C.machine_header_md(payload["machine"]),
        "One fit per model on medium split 0 of each graph (key 0), the previous loop and the current one "
        "alternating in one process, warm (compilation not counted); milliseconds per epoch, median (min) over "
        f"{payload['repeats']} fits each; ratio = after / before of the medians; identical: the best parameters "
        "and every diagnostic equal bit for bit; compile: trace, lower and compile of the whole fit (one program), once each.",
        C.md_table(["graph", "nodes", "features", "model", "epochs", "before ms/epoch", "after ms/epoch", "ratio",
                    "compile s before", "compile s after", "identical"], rows),
        "The fused epoch saves the second computation of the input projection `x W`: most where that product is "
        "the epoch (many features, few blocks); a deep model on a graph with few features (minesweeper: 7) has "
        "nothing to share and runs as before.",
    ]) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    payload = {"command": "python -m benchmarks.train_loop " + " ".join(argv if argv is not None else sys.argv[1:]),
               "machine": C.machine_info(), "repeats": a.repeats, "rows": []}
    for name in a.datasets.split(","):
        payload["rows"] += measure(name, a.repeats)
        C.save_report("train_loop", payload, markdown(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())

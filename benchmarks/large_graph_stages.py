"""Where `jaxclp predict`'s time would go on the ogbn-arxiv-shaped graph, stage by stage, and what each prior is worth.

``python -m benchmarks.large_graph_stages [--scale 1.0]`` builds the graph of
:mod:`benchmarks.large_graph` (same seed, same hidden nodes), makes ``predict``'s hold-out of the labelled
nodes (:func:`jaxclp.datasets.holdout_split`, 20 %, seed 0) and times, in one process (compilation included):

* the base predictor: the depth-1 MLP (``clp``'s first prior), LINK (the cheap graph-aware one) and a GCN (the
  graph-aware prior the default 60-s limit leaves out at this size), each with the paper's training settings;
* CLP's closed-form candidates on each (the six linear variants of ``clp``'s grid x its 9 alphas), each variant timed
  apart, the best chosen on validation.

For each it reports seconds and the accuracy on validation and on the hidden nodes, beside PyG's MLP + C&S from
``benchmarks/results/large_graph.json`` (same graph and split). Results: ``benchmarks/results/
large_graph_stages.{json,md}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks import _common as C
from benchmarks import large_graph
from jaxclp.experiments.methods import CLP_VARIANTS

PRIORS = ("mlp", "link", "gcn")


CLOSED_VARIANTS = tuple(v for v in CLP_VARIANTS if not v[1])
"""``clp``'s grid variants whose candidates are closed forms (normalization x prior source, linear)."""


def stages(folder: Path, cfg=None, priors=PRIORS) -> list[dict]:
    """One row per prior of ``priors``: its fit and CLP's closed form on it (seconds, validation and hidden-node
    accuracy), on the graph files :func:`benchmarks.large_graph.build` wrote into ``folder``."""
    import jax
    import jax.numpy as jnp

    import jaxclp
    from jaxclp.datasets import load_file
    from jaxclp.datasets.splits import holdout_split
    from jaxclp.experiments import candidates, methods as M
    from jaxclp.gnn import fit_gcn
    from jaxclp.priors import fit_prior

    cfg = cfg or jaxclp.TrainConfig()
    with warnings.catch_warnings():  # "N node(s) have label -1": the hidden nodes, by design
        warnings.simplefilter("ignore", UserWarning)
        ds = load_file(folder / "edges.npy", labels=folder / "labels.npy", features=folder / "features.npy")
    truth, hidden = np.load(folder / "truth.npy"), np.load(folder / "labels.npy") < 0
    y = np.asarray(ds.labels)
    train, val = holdout_split(y, 0.2, 0)
    y0, tm, vm = jnp.asarray(np.where(train | val, y, 0)), jnp.asarray(train), jnp.asarray(val)
    x, k, key = jnp.asarray(ds.features), int(y.max()) + 1, jax.random.key(0)

    def accuracy(scores, mask):
        return float((np.asarray(scores).argmax(1)[mask] == truth[mask]).mean())

    fits = {"mlp": lambda: jaxclp.fit_mlp(key, x, y0, tm, vm, num_classes=k, cfg=cfg).prior,
            "link": lambda: fit_prior("link", key, ds.graph, x, y0, tm, vm, k, cfg).prior,
            "gcn": lambda: fit_gcn(key, ds.graph, x, y0, tm, vm, num_classes=k, cfg=cfg).prior}
    rows = []
    for name in priors:
        t0 = time.perf_counter()
        prior = jax.block_until_ready(fits[name]())
        row = {"prior": name, "prior_s": time.perf_counter() - t0, "prior_val": accuracy(prior, val),
               "prior_hidden": accuracy(prior, hidden)}
        ctx = candidates.Context(graph=ds.graph, features=None,
                                 labels=jnp.asarray(candidates.visible_labels(y, train, val)), train=tm, val=vm,
                                 num_classes=k, metric="accuracy", key=key, priors={1: prior}, mlp_depth=1)
        # variant by variant (timed apart), in the grid's order: merged, the same candidates as the whole grid
        cands, row["variants"] = {}, []
        for v in CLOSED_VARIANTS:
            t0 = time.perf_counter()
            part = M.method_clp(dataclasses.replace(ctx, cache={}), variants=(v,), authors=False, spectral=False)
            jax.block_until_ready(list(part.values()))
            seconds = time.perf_counter() - t0
            best, best_val = candidates.select(part, np.asarray(ctx.labels), val, ctx.metric)
            row["variants"].append({"normalization": v[0], "source": v[2], "s": seconds, "alpha": float(best[-1]),
                                    "val": float(best_val), "hidden": accuracy(part[best], hidden)})
            cands.update(part)
        chosen, val_score = candidates.select(cands, np.asarray(ctx.labels), val, ctx.metric)
        params = dict(zip(chosen[0::2], chosen[1::2]))
        row |= {"closed_s": sum(v["s"] for v in row["variants"]), "closed_val": float(val_score),
                "closed_choice": [params["normalization"], params["prior"], float(params["alpha"])],
                "closed_hidden": accuracy(cands[chosen], hidden)}
        C.log(f"large_graph_stages: {row}")
        rows.append(row)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0, help="fraction of arxiv's node count (1: its size)")
    a = p.parse_args(argv)
    out = C.RESULTS_DIR / "large_graph_stages.json"
    payload = {"command": "python -m benchmarks.large_graph_stages " + " ".join(argv or sys.argv[1:]),
               "machine": C.machine_info()}
    with tempfile.TemporaryDirectory() as tmp:
        payload["graph"] = large_graph.build(Path(tmp), scale=a.scale)
        payload["rows"] = stages(Path(tmp))
    pyg = (C.load_json(C.RESULTS_DIR / "large_graph.json") or {}).get("pyg_mlp_cs", {})
    payload["pyg_mlp_cs_accuracy"] = pyg.get("accuracy") if a.scale == 1.0 else None
    C.save_json(out, payload)
    out.with_suffix(".md").write_text(markdown(payload))
    return 0


def markdown(payload: dict) -> str:
    g = payload["graph"]
    rows = [[r["prior"], f"{r['prior_s']:.1f}", f"{r['prior_val']:.4f}", f"{r['prior_hidden']:.4f}",
             f"{r['closed_s']:.1f}", " / ".join(str(c) for c in r["closed_choice"]), f"{r['closed_val']:.4f}",
             f"{r['closed_hidden']:.4f}"] for r in payload["rows"]]
    pyg = payload.get("pyg_mlp_cs_accuracy")
    return "\n".join([
        "# The arxiv-shaped graph stage by stage: each prior's fit, then CLP's closed form on it", "",
        f"Command: `{payload['command']}`", "", C.machine_header_md(payload["machine"]), "",
        f"Graph: {g['nodes']} nodes, {g['undirected_edges']} undirected edges, {g['features']} features, "
        f"{g['classes']} classes; `predict`'s 80/20 hold-out of the labelled nodes; {g['hidden']} hidden nodes "
        "scored. One process, seconds include compilation.", "",
        C.md_table(["prior", "fit s", "val acc", "hidden acc", "closed form s", "chosen (norm / source / alpha)",
                    "val acc", "hidden acc"], rows), "",
        *(["Each closed-form variant apart (its 9 alphas; the best on validation), in the grid's order, the order a "
           "time limit computes them in:", "",
           C.md_table(["prior", "normalization / source", "s", "alpha", "val acc", "hidden acc"],
                      [[r["prior"], f"{v['normalization']} / {v['source']}", f"{v['s']:.1f}", f"{v['alpha']:g}",
                        f"{v['val']:.4f}", f"{v['hidden']:.4f}"] for r in payload["rows"]
                       for v in r.get("variants", [])]), ""]
          if any(r.get("variants") for r in payload["rows"]) else []),
        *([f"PyG's MLP + C&S on the same graph and split ([`large_graph.md`](large_graph.md)): hidden accuracy "
           f"{pyg:.4f}.", ""] if pyg is not None else [])])


if __name__ == "__main__":
    sys.exit(main())

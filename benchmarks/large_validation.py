"""The large-validation step of ``clp``'s rule, cross-fitted on the arxiv-shaped graph's validation nodes.

``python -m benchmarks.large_validation [--scale 1.0] [--priors mlp,link]``

:func:`jaxclp.selection.prior_first` takes the base predictor with the best validation score alone, then CLP on
it. On a validation set of at least :data:`jaxclp.selection.LARGE_VALIDATION` nodes (accuracy) it also scores
CLP's candidates on every other predictor and takes the best of them where it beats the prior-first choice by more
than :data:`jaxclp.selection.MARGIN_SE` standard errors.

The rule and its adoption criterion, written before this benchmark ran: on the arxiv-shaped graph of
``benchmarks/large_graph.py`` (the hold-out ``jaxclp predict`` makes: 20 % of the labelled nodes), the validation
nodes are halved at random (seeded); each rule chooses on one half and is scored on the other, then the halves
swap. The step is adopted if its mean held-out accuracy is at least the prior-first rule's. Each half holds about
12k nodes, so the step is active on a half as it is on the whole. No hidden (test) label is read by either rule;
the hidden nodes' accuracy of each rule's choice on the whole validation set is reported beside it, for the
reader, after the choice.

The candidates are the ones ``jaxclp predict --method clp --time-limit 60`` computes on this graph for each
predictor: the closed-form variants (the costlier kinds are left out for time there). Results:
``benchmarks/results/large_validation.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0, help="fraction of arxiv's node count (1: its size)")
    p.add_argument("--priors", default="mlp,link", help="the base predictors (the ones the 60 s limit fits)")
    p.add_argument("--folder", default=None, help="an existing folder of large_graph.build's files")
    p.add_argument("--markdown-only", action="store_true", help="rewrite the .md from the committed .json")
    a = p.parse_args(argv)
    out = C.RESULTS_DIR / "large_validation.json"
    if a.markdown_only:
        out.with_suffix(".md").write_text(markdown(C.load_json(out)))
        return 0
    payload = {"command": "python -m benchmarks.large_validation " + " ".join(argv or sys.argv[1:]),
               "machine": C.machine_info()}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(a.folder) if a.folder else Path(tmp)
        if not a.folder:
            from benchmarks.large_graph import build

            payload["graph"] = build(folder, scale=a.scale)
        payload |= crossfit(folder, a.priors.split(","))
    C.save_report("large_validation", payload, markdown(payload))
    return 0


def crossfit(folder: Path, priors: list[str], seed: int = 0, epochs: int = 500) -> dict:
    """Fits ``priors`` and CLP's closed-form candidates on each as ``jaxclp predict`` would (``epochs``: its
    default), then scores both rules by 2-fold cross-fitting on the validation nodes."""
    import jax.numpy as jnp

    import jaxclp.selection as S
    from jaxclp.datasets import load_file
    from jaxclp.datasets.splits import Splits, holdout_split
    from jaxclp.experiments import candidates, methods as M, runner
    from jaxclp.train import TrainConfig

    ds = load_file(folder / "edges.npy", labels=folder / "labels.npy", features=folder / "features.npy")
    ids = np.asarray(ds.node_ids) if ds.node_ids is not None else np.arange(ds.num_nodes)
    truth = np.load(folder / "truth.npy")[ids]
    hidden = (np.load(folder / "labels.npy") < 0)[ids]
    labels = np.asarray(ds.labels)
    train, val = holdout_split(labels, 0.2, seed)
    sp = Splits(train=train[None], val=val[None], test=np.zeros((1, labels.size), bool), seeds=[seed], name="p")
    feats, _ = runner.node_features(ds)
    cfg = TrainConfig(epochs=int(epochs), metric=ds.metric)
    t0 = time.perf_counter()
    setup = runner.prepare_splits(ds, feats, sp, 1, [0], seed, cfg, True, None, 60.0)  # the MLP depths predict fits
    ctx = setup.context(0)
    seconds = {"mlp": time.perf_counter() - t0}
    grids, alone = [], []
    for name in priors:
        t0 = time.perf_counter()
        prior = ctx.prior if name == "mlp" else M.fit_base_priors(ctx, (name,))[name]
        c = ctx if name == "mlp" else candidates.with_prior(ctx, prior)
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0
        t0 = time.perf_counter()
        cands = M.method_clp(c, variants=tuple(v for v in M.CLP_VARIANTS if not v[1]), authors=False,
                             spectral=False)
        seconds[f"clp on {name}"] = time.perf_counter() - t0
        alone.append(np.asarray(prior))
        grids.append([(k, np.asarray(v)) for k, v in cands.items()])
        C.log(f"large_validation: {name} and its {len(cands)} candidates ({seconds})")
    y = np.asarray(ctx.labels)

    def choose(mask, large: bool):
        n = int(mask.sum())
        ps = S.validation_scores("accuracy", alone, y, mask)
        c = S.prior_first(ps, lambda i: S.validation_scores("accuracy", [b for _, b in grids[i]], y, mask),
                          num_val=n if large else None)
        return (alone[c.prior] if c.candidate is None else grids[c.prior][c.candidate][1]), c

    def describe(c):
        key = "alone" if c.candidate is None else grids[c.prior][c.candidate][0]
        return {"prior": priors[c.prior], "candidate": str(key), "val": c.score, "prior_val": c.prior_score}

    rng = np.random.default_rng(seed + 7)
    vidx = np.flatnonzero(np.asarray(ctx.val))
    perm = rng.permutation(vidx)
    halves = [np.isin(np.arange(labels.size), perm[: perm.size // 2]),
              np.isin(np.arange(labels.size), perm[perm.size // 2:])]
    rules = {"prior_first": False, "prior_first_large": True}
    folds = []
    for f in range(2):
        pick, score = halves[f], halves[1 - f]
        row = {"fold": f, "choose_on": int(pick.sum()), "score_on": int(score.sum())}
        for rule, large in rules.items():
            b, c = choose(pick, large)
            row[rule] = describe(c) | {"held_out": float(S.validation_scores("accuracy", [b], y, score)[0])}
        folds.append(row)
    whole = {}
    for rule, large in rules.items():
        b, c = choose(np.asarray(ctx.val), large)
        whole[rule] = describe(c) | {"hidden_accuracy": float((b.argmax(1)[hidden] == truth[hidden]).mean())}
    mean = {r: float(np.mean([row[r]["held_out"] for row in folds])) for r in rules}
    return {"priors": priors, "num_val": int(np.asarray(ctx.val).sum()), "seconds": seconds, "folds": folds,
            "held_out_mean": mean, "adopted": mean["prior_first_large"] >= mean["prior_first"], "whole": whole,
            "large_validation": S.LARGE_VALIDATION, "margin_se": S.MARGIN_SE}


def markdown(payload: dict) -> str:
    lines = ["# The large-validation step of `clp`'s rule, cross-fitted (arxiv-shaped graph)", "",
             f"Command: `{payload['command']}`", "", C.machine_header_md(payload["machine"]), ""]
    g = payload.get("graph")
    if g:
        lines += [f"Graph: {g['nodes']} nodes, {g['undirected_edges']} undirected edges, {g['features']} features, "
                  f"{g['classes']} classes; {g['hidden']} nodes' labels hidden. Base predictors: "
                  f"{', '.join(payload['priors'])}; CLP's closed-form candidates on each; "
                  f"{payload['num_val']} validation nodes, halved for the cross-fit.", ""]
    rows = []
    for row in payload["folds"]:
        for rule in ("prior_first", "prior_first_large"):
            r = row[rule]
            rows.append([row["fold"], rule, r["prior"], r["candidate"], f"{r['val']:.4f}", f"{r['held_out']:.4f}"])
    lines += [C.md_table(["fold", "rule", "prior", "candidate", "val (choosing half)", "held-out half"], rows), ""]
    m = payload["held_out_mean"]
    lines += [f"Mean held-out accuracy: prior-first {m['prior_first']:.4f}, with the large-validation step "
              f"{m['prior_first_large']:.4f}: the step is {'adopted' if payload['adopted'] else 'NOT adopted'} "
              "(criterion: at least the prior-first rule's).", ""]
    rows = [[rule, r["prior"], r["candidate"], f"{r['val']:.4f}", f"{r['hidden_accuracy']:.4f}"]
            for rule, r in payload["whole"].items()]
    lines += ["Chosen on the whole validation set, and the hidden nodes' accuracy of that choice (read after it):",
              "", C.md_table(["rule", "prior", "candidate", "val", "hidden nodes"], rows), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())

"""Accelerator benchmark: the library's hot calls on JAX's default backend (a GPU or TPU where one is present),
beside a PyTorch reference on the same device where torch sees one. Nothing here is specific to a backend: on a
CPU-only machine it measures the CPU (``--quick`` is the CI smoke test).

* ``step``: one CLP step for all K classes on synthetic graphs (average degree 20, K = 5, float32, the paper's
  operator ``A^F_k = diag(b0_k) Ahat_sym diag((b0 H)_k)``) of growing size: ``FactoredOperator.matvec`` (one
  SpMM for all K), the edgewise engine (precomputed (m, K) edge values, ``jaxclp.graph.spmm``), the per-step cost
  inside ``jaxclp.propagate`` (difference of two iteration counts, so call overhead cancels) and, where torch
  has CUDA, ``torch.sparse.mm`` on a CSR matrix (factored form) on the GPU. Effective GB/s by the byte model
  of :mod:`benchmarks.throughput` (compulsory traffic; > the device's bandwidth means cache reuse).
* ``solve``: ``jaxclp.solve`` (closed form, ``method="auto"``, tol 1e-6, alpha 0.9) on the middle graph.
* ``end_to_end``: ``jaxclp.CLP(...).fit(...).predict_proba()`` on real graphs (the jaxclp side of
  :mod:`benchmarks.end_to_end`: MLP prior with early stopping, Sinkhorn, alpha grid, selection).
* ``gnn``: one training step (value and gradient) and one whole fit of the tuned GNNs of
  :mod:`benchmarks.gnn` on Squirrel (residual + LayerNorm + FFN, depth 3), gather path and the CSR path.

Each section stops starting new work once ``--budget`` seconds have passed (what was skipped is recorded).
Usage: ``python -m benchmarks.device [--quick] [--out DIR] [--budget S]``; results ``device.{json,md}``.
Data: ``$JAXCLP_DATA`` (default ``../shared/datasets``), read in place.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C
from benchmarks.throughput import bytes_edgewise, bytes_factored

FULL = {"sizes": ((100_000, 20), (1_000_000, 20), (5_000_000, 20)), "K": 5, "repeats": 21, "solve_size": 1,
        "datasets": ("chameleon", "squirrel", "twitch-en"), "e2e_repeats": 3,
        "gnn": {"datasets": ("squirrel",), "convs": ("sage", "gat", "gat_sep"), "layers": 3, "repeats": 7,
                "fit_datasets": ("squirrel",), "fit_convs": ("sage", "gat"), "fit_repeats": 1}}
QUICK = {"sizes": ((2_000, 10),), "K": 3, "repeats": 3, "solve_size": 0, "datasets": ("texas",), "e2e_repeats": 1,
         "gnn": {"datasets": ("texas",), "convs": ("sage",), "layers": 1, "repeats": 2, "fit_datasets": (),
                 "fit_convs": (), "fit_repeats": 1}}


def backend_info() -> dict:
    import jax

    d = jax.devices()[0]
    info = {"jax": jax.__version__, "backend": jax.default_backend(), "device_kind": d.device_kind,
            "devices": len(jax.devices())}
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = bool(torch.cuda.is_available())
        if info["torch_cuda"]:
            info["torch_device"] = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - optional
        info["torch"] = None
    return info


class _Budget:
    def __init__(self, seconds: float):
        self.t0, self.seconds = time.time(), seconds

    def left(self) -> float:
        return self.seconds - (time.time() - self.t0)


def _row(name, t, model_bytes, err=None, note=""):
    return {"name": name, "time_s": t.median, "time_min_s": t.min, "time_max_s": t.max, "runs": t.runs,
            "compile_s": t.compile, "GBps_model": model_bytes / t.median / 1e9, "max_rel_err": err, "note": note}


def step(cfg, budget: _Budget) -> list[dict]:
    import jax
    import jax.numpy as jnp

    import jaxclp
    from jaxclp.graph import spmm

    out = []
    k, reps = cfg["K"], cfg["repeats"]
    for n, deg in cfg["sizes"]:
        if budget.left() < 60:
            out.append({"n": n, "skipped": "time budget"})
            continue
        t0 = time.perf_counter()
        prob = C.make_problem(n, deg, k, seed=0)
        g = prob.graph
        m = int(g.num_edges)
        res = {"n": n, "m": m, "K": k, "setup_s": time.perf_counter() - t0, "rows": []}
        op = jaxclp.clp_operator(g, prob.b0, prob.H, normalization="sym")
        x = jnp.asarray(np.random.default_rng(3).random((n, k), dtype=np.float32))
        mv = jax.jit(lambda o, v: o.matvec(v))
        comp, f = C.aot_compile_time(mv, op, x)
        t, y = C.time_call(lambda: f(op, x), repeats=reps, warmup=2)
        t.compile = comp
        ref = np.asarray(y)
        refn = float(np.abs(ref).max())
        bf, be = bytes_factored(n, m, k), bytes_edgewise(n, m, k)
        res["rows"].append(_row("jaxclp factored (FactoredOperator.matvec)", t, bf))
        emat = jax.block_until_ready(op.edge_matrix())
        ew = jax.jit(lambda gr, e, v: spmm(gr, e, v))
        comp, f = C.aot_compile_time(ew, g, emat, x)
        t, y = C.time_call(lambda: f(g, emat, x), repeats=reps, warmup=2)
        t.compile = comp
        res["rows"].append(_row("jaxclp edgewise (precomputed (m,K), jaxclp.spmm)", t, be,
                                float(np.abs(np.asarray(y) - ref).max() / refn)))
        del emat
        n1, n2 = 5, 25

        def prop(ni):
            return jaxclp.propagate(g, prob.b0, prob.H, prob.prior, alpha=0.9, num_iters=ni, engine="factored")

        t1, _ = C.time_call(lambda: prop(n1), repeats=max(3, reps // 3))
        t2, _ = C.time_call(lambda: prop(n2), repeats=max(3, reps // 3))
        per = C.Timing(median=(t2.median - t1.median) / (n2 - n1), min=(t2.min - t1.min) / (n2 - n1),
                       max=(t2.max - t1.max) / (n2 - n1), runs=min(t1.runs, t2.runs))
        res["rows"].append(_row("jaxclp.propagate per step (factored)", per, bf,
                                note=f"(t({n2}) - t({n1})) / {n2 - n1}; t({n1}) = {t1.median * 1e3:.2f} ms"))
        res["rows"].extend(_torch_rows(g, op, x, ref, refn, reps, bf))
        if cfg["solve_size"] is not None and len(out) == cfg["solve_size"]:
            res["solve"] = _solve(prob)
        for r in res["rows"]:
            C.log(f"device step n={n} m={m}: {r['name']}: {r['time_s'] * 1e3:.3f} ms "
                  f"({r['GBps_model']:.0f} GB/s model)")
        out.append(res)
        del prob, g, op, x
    return out


def _torch_rows(g, op, x, ref, refn, reps, bf) -> list[dict]:
    try:
        import torch
    except Exception:  # noqa: BLE001 - optional
        return []
    if not torch.cuda.is_available():
        return []
    n = int(g.num_nodes)
    dev = torch.device("cuda")
    r_np, s_np = np.asarray(g.receivers), np.asarray(g.senders)
    indptr = np.searchsorted(r_np, np.arange(n + 1))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        A = torch.sparse_csr_tensor(torch.from_numpy(indptr.astype(np.int64)),
                                    torch.from_numpy(s_np.astype(np.int64)),
                                    torch.from_numpy(np.asarray(op.values, dtype=np.float32)), size=(n, n)).to(dev)
    left, right, xt = (torch.from_numpy(np.array(a, dtype=np.float32)).to(dev) for a in (op.left, op.right, x))

    def fn():
        return left * torch.sparse.mm(A, right * xt)

    def sync(o):
        torch.cuda.synchronize()
        return o

    with torch.inference_mode():
        t, y = C.time_call(fn, repeats=reps, warmup=2, sync=sync)
    err = float(np.abs(y.cpu().numpy() - ref).max() / refn)
    return [_row(f"torch {torch.__version__} sparse.mm CSR, factored (CUDA)", t, bf, err)]


def _solve(prob) -> dict:
    import jax

    import jaxclp

    def run():
        return jaxclp.solve(prob.graph, prob.b0, prob.H, prob.prior, alpha=0.9, tol=1e-6)

    def sync(sol):
        jax.block_until_ready(sol.value)
        return sol

    t, sol = C.time_call(run, repeats=5, sync=sync)
    res = {"method": str(sol.method), "time_s": t.median, "time_min_s": t.min, "first_call_s": t.first_call,
           "iterations_max": int(np.max(np.asarray(sol.iterations))),
           "relative_residual_max": float(np.max(np.asarray(sol.relative_residual)))}
    C.log(f"device solve: {res}")
    return res


def end_to_end(cfg, budget: _Budget) -> list[dict]:
    import jax
    import jax.numpy as jnp

    import jaxclp
    from jaxclp import datasets as D
    from benchmarks.end_to_end import _split, _test_metric, data_root

    rows = []
    for name in cfg["datasets"]:
        if budget.left() < 60:
            rows.append({"dataset": name, "skipped": "time budget"})
            continue
        ds = D.load(name, root=data_root(), download=False, cache=False)
        train, val, test, split_name = _split(ds)
        y = np.asarray(ds.labels)
        xj = jnp.asarray(np.asarray(ds.features, dtype=np.float32))
        yj, tj, vj = jnp.asarray(y), jnp.asarray(train), jnp.asarray(val)
        k = ds.num_classes

        def full():
            model = jaxclp.CLP(metric=ds.metric, seed=0, num_classes=k).fit(ds.graph, xj, yj, tj, vj)
            proba = jax.block_until_ready(model.predict_proba())
            return model, proba

        t, (model, proba) = C.time_call(full, repeats=cfg["e2e_repeats"], warmup=1,
                                        min_repeats=min(3, cfg["e2e_repeats"]), sync=lambda z: z)
        row = {"dataset": name, "n": ds.num_nodes, "m": int(ds.graph.num_edges), "split": split_name,
               "time_s": t.median, "time_min_s": t.min, "first_call_s": t.first_call, "runs": t.runs,
               "alpha": model.alpha_, "mlp_epochs": int(np.asarray(model.mlp_.info.epochs_run)),
               "test_score": _test_metric(ds.metric, proba, y, test), "metric": ds.metric}
        C.log(f"device end_to_end {name}: {row}")
        rows.append(row)
    return rows


def gnn(cfg, budget: _Budget) -> dict:
    from benchmarks import gnn as G

    out = {}
    if budget.left() < 60:
        return {"skipped": "time budget"}
    out["step"] = G.step(cfg["gnn"])
    if budget.left() < 60:
        out["fit"] = {"skipped": "time budget"}
    else:
        out["fit"] = G.fit(cfg["gnn"])
    return out


def _section(name, fn, *args):
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001 - one failing section must not lose the others
        import traceback

        C.log(f"device: {name} FAILED\n{traceback.format_exc()}")
        return {"error": f"{type(err).__name__}: {str(err)[:500]}"}


def write_markdown(path: Path, payload: dict) -> None:
    info = payload["backend"]
    lines = ["# Accelerator benchmark (`python -m benchmarks.device`)", "",
             f"JAX {info['jax']} on **{info['backend']}** ({info['device_kind']}, {info['devices']} device(s)); "
             f"torch {info.get('torch')} (CUDA: {info.get('torch_cuda')}). Host: {C.machine_header_md(payload['machine'])}",
             "", f"## One CLP step for all K classes (synthetic, average degree 20, K = {payload['config']['K']}, float32)", ""]
    steps = payload["step"] if isinstance(payload["step"], list) else []
    table = []
    for s in steps:
        for r in s.get("rows", []):
            table.append([f"{s['n']:,}", f"{s['m']:,}", r["name"], f"{r['time_s'] * 1e3:.3f}",
                          f"{r['time_min_s'] * 1e3:.3f}", f"{r['GBps_model']:.0f}",
                          "" if r["max_rel_err"] is None else f"{r['max_rel_err']:.1e}"])
        if "skipped" in s:
            table.append([f"{s['n']:,}", "", f"skipped ({s['skipped']})", "", "", "", ""])
    lines.append(C.md_table(["n", "edges", "implementation", "median ms", "min ms", "GB/s (model)",
                             "max rel err vs matvec"], table))
    for s in steps:
        if "solve" in s:
            v = s["solve"]
            lines += ["", f"Closed form `jaxclp.solve(..., alpha=0.9, tol=1e-6)` at n = {s['n']:,}, m = {s['m']:,}: "
                      f"method {v['method']}, {v['iterations_max']} iterations, median {v['time_s'] * 1e3:.1f} ms "
                      f"(min {v['time_min_s'] * 1e3:.1f}; first call with compilation {v['first_call_s']:.1f} s), "
                      f"max relative residual {v['relative_residual_max']:.1e}."]
    if isinstance(payload["step"], dict):
        lines += ["", f"step: {payload['step']}"]
    lines += ["", "## `jaxclp.CLP` fit + alpha selection + predict (real graphs)", ""]
    e2e = payload["end_to_end"]
    if isinstance(e2e, list):
        lines.append(C.md_table(
            ["dataset", "n", "edges", "split", "median s", "min s", "first call s (compile)", "MLP epochs", "test"],
            [[r["dataset"], r.get("n", ""), r.get("m", ""), r.get("split", r.get("skipped", "")),
              f"{r['time_s']:.2f}" if "time_s" in r else "", f"{r['time_min_s']:.2f}" if "time_s" in r else "",
              f"{r['first_call_s']:.1f}" if "time_s" in r else "", r.get("mlp_epochs", ""),
              f"{r['test_score']:.3f}" if "test_score" in r else ""] for r in e2e]))
    else:
        lines.append(f"end_to_end: {e2e}")
    lines += ["", "## Tuned GNNs (residual + LayerNorm + FFN), gather vs CSR path", ""]
    g = payload["gnn"]
    if isinstance(g.get("step"), list):
        lines.append(C.md_table(["dataset", "conv", "layers", "train step gather ms", "train step CSR ms"],
                                [[r["dataset"], r["conv"], r["layers"], f"{r['gather_s'] * 1e3:.2f}",
                                  f"{r['csr_s'] * 1e3:.2f}"] for r in g["step"]]))
    if isinstance(g.get("fit"), list) and g["fit"]:
        lines += ["", C.md_table(["dataset", "conv", "whole fit gather s (epochs)", "whole fit CSR s (epochs)"],
                                 [[r["dataset"], r["conv"], f"{r['gather_s']:.2f} ({r['gather_epochs']})",
                                   f"{r['csr_s']:.2f} ({r['csr_epochs']})"] for r in g["fit"]])]
    for key in ("error", "skipped"):
        if key in g:
            lines.append(f"{key}: {g[key]}")
    lines += ["", f"Whole run: {payload['elapsed_s']:.0f} s. Command: `{payload['command']}`.", ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.device", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=out)
    ap.add_argument("--budget", type=float, default=1800.0, help="seconds after which no new section starts")
    ap.add_argument("--sections", default="step,end_to_end,gnn", help="comma-separated subset of "
                    "step,end_to_end,gnn (default: all)")
    args = ap.parse_args(argv)
    od = C.out_dir(args.out)
    t0 = time.time()
    cfg = QUICK if args.quick else FULL
    budget = _Budget(args.budget)
    payload = {"benchmark": "device", "quick": args.quick, "machine": C.machine_info(), "backend": backend_info(),
               "config": cfg, "command": "python -m benchmarks.device" + (" --quick" if args.quick else "")}
    C.log(f"device: {payload['backend']}")
    sections = {s.strip() for s in args.sections.split(",")}
    payload["command"] += f" --sections {args.sections}" if sections != {"step", "end_to_end", "gnn"} else ""
    for name, fn in (("step", step), ("end_to_end", end_to_end), ("gnn", gnn)):
        payload[name] = _section(name, fn, cfg, budget) if name in sections else {"skipped": "not asked for"}
    return C.write_results(od, "device", payload, write_markdown, t0)


if __name__ == "__main__":
    main()

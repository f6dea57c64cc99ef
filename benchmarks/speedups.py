"""Speed-ups of jaxclp's performance changes: each change timed against the code path it replaced (the numbers
quoted in ``SUMMARY.md`` and the README come from this script):

* ``norm_bounds`` and ``edge_values`` jitted: the eager functions (``__wrapped__``) vs the jitted ones.
* GMRES: jax's default ``solve_method='batched'`` with ``maxiter=max_iters`` (what ``solve`` did before) vs
  ``jaxclp.solve(method='gmres')`` now (``'incremental'``, ``maxiter`` in restart cycles); BiCGStab for scale.
* ``CLP.fit`` with a given prior: fit + reading ``spectral_`` (the power iteration ``fit`` used to run) vs fit
  alone (``spectral_`` is computed on first access now).
* The CLI's persistent XLA cache: ``jaxclp run`` in fresh processes, cache off / cold / warm.
* Class-axis sharding over two forced host CPU devices (``shard_map``) vs one device, for one CLP step.

Usage: ``python -m benchmarks.speedups [--quick] [--out DIR]`` (also
``python -m benchmarks.run speedups``).
Data: ``$JAXCLP_DATA`` (default ``../shared/datasets``), read in place (``cache=False``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from benchmarks import _common as C
from jaxclp.solve import GMRES_RESTART

REPO = C.REPO
FULL = {"bounds_n": 1_000_000, "gmres_n": 20_000, "fit_dataset": "squirrel", "cli_dataset": "texas",
        "cli_epochs": 500, "shard_n": 200_000, "shard_ks": (8, 16, 32), "repeats": 5}
QUICK = {"bounds_n": 5_000, "gmres_n": 2_000, "fit_dataset": "texas", "cli_dataset": "texas", "cli_epochs": 5,
         "shard_n": 2_000, "shard_ks": (8,), "repeats": 2}


def bounds(cfg) -> list[dict]:
    from jaxclp.graph import _edge_values
    from jaxclp.operator import clp_operator, norm_bounds

    p = C.make_problem(cfg["bounds_n"], 10, 5)
    op = clp_operator(p.graph, p.b0, p.H)
    rows = []
    for name, before, after in (("norm_bounds", lambda: norm_bounds.__wrapped__(op), lambda: norm_bounds(op)),
                                ("edge_values sym", lambda: _edge_values.__wrapped__(p.graph, "sym"),
                                 lambda: _edge_values(p.graph, "sym"))):
        tb, _ = C.time_call(before, repeats=cfg["repeats"])
        ta, _ = C.time_call(after, repeats=cfg["repeats"])
        rows.append({"what": name, "n": p.n, "m": p.m, "K": 5, "before_s": tb.median, "after_s": ta.median})
        C.log(f"speedups: {name} n={p.n}: {tb.median * 1e3:.1f} -> {ta.median * 1e3:.1f} ms")
    return rows


def _sync_solution(sol):
    import jax

    jax.block_until_ready(sol.value)
    return sol


def _gmres_columns(op, prior, alpha, solve_method, maxiter):
    """jaxclp.solve's GMRES kernel (per class, vmapped) with the given jax gmres settings."""
    import jax

    rhs = (1.0 - alpha) * prior

    def one_class(left, right, b):
        def apply(v):  # gather + segment_sum: jax's gmres transposes its matvec (the CSR kernel's VJP is not)
            msg = op.values * (right * v)[op.graph.senders]
            return left * jax.ops.segment_sum(msg, op.graph.receivers, op.graph.num_nodes, indices_are_sorted=True)

        x, _ = jax.scipy.sparse.linalg.gmres(lambda v: v - alpha * apply(v), b, tol=1e-6,
                                             atol=0.0, restart=GMRES_RESTART, maxiter=maxiter,
                                             solve_method=solve_method)
        return x
    return jax.vmap(one_class, in_axes=(1, 1, 1), out_axes=1)(op.left, op.right, rhs)


def gmres(cfg) -> list[dict]:
    import functools

    import jax
    import jax.numpy as jnp

    import jaxclp
    from jaxclp.operator import clp_operator

    p = C.make_problem(cfg["gmres_n"], 10, 5)
    op = clp_operator(p.graph, p.b0, p.H)
    kernel = jax.jit(_gmres_columns, static_argnames=("solve_method", "maxiter"))
    # before the fix: jax's default 'batched' and maxiter = max_iters (10000 restart cycles); after: as jaxclp.solve
    before = functools.partial(kernel, solve_method="batched", maxiter=10_000)
    after = functools.partial(kernel, solve_method="incremental", maxiter=-(-10_000 // GMRES_RESTART))
    rows = []
    for alpha in (0.5, 0.9, 0.99):
        a = jnp.asarray(alpha, p.prior.dtype)
        t_old, x_old = C.time_call(lambda: before(op, p.prior, a), repeats=cfg["repeats"])
        t_new, x_new = C.time_call(lambda: after(op, p.prior, a), repeats=cfg["repeats"])
        t_bi, sol = C.time_call(lambda: jaxclp.solve(p.graph, p.b0, p.H, p.prior, alpha=alpha, method="bicgstab",
                                                     throw=False),
                                repeats=cfg["repeats"], sync=_sync_solution)
        rows.append({"alpha": alpha, "alpha_rho_bound": alpha * float(jnp.max(sol.rho_bound)), "n": p.n, "m": p.m,
                     "K": 5, "before_s": t_old.median, "after_s": t_new.median, "bicgstab_solve_s": t_bi.median,
                     "max_abs_diff": float(jnp.max(jnp.abs(x_old - x_new)))})
        C.log(f"speedups: gmres alpha={alpha}: {t_old.median * 1e3:.0f} -> {t_new.median * 1e3:.0f} ms "
              f"(jaxclp.solve bicgstab {t_bi.median * 1e3:.0f} ms)")
    return rows


def clp_fit(cfg) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxclp
    from jaxclp import datasets as D

    ds = D.load(cfg["fit_dataset"], root=C.data_root(), download=False, cache=False)
    sp = ds.splits
    tm, vm = jnp.asarray(sp.train[0]), jnp.asarray(sp.val[0])
    y = jnp.asarray(np.where(np.asarray(sp.train[0] | sp.val[0]), ds.labels, 0))
    prior = jax.nn.softmax(jnp.asarray(np.random.default_rng(0).normal(size=(ds.num_nodes, ds.num_classes)),
                                       jnp.float32))

    def fit():
        return jaxclp.CLP(num_classes=ds.num_classes).fit(ds.graph, None, y, tm, vm, prior=prior)

    t_after, _ = C.time_call(lambda: fit().beliefs_, repeats=cfg["repeats"])
    t_before, _ = C.time_call(lambda: fit().spectral_.rho, repeats=cfg["repeats"])
    C.log(f"speedups: CLP.fit({ds.name}, prior): {t_before.median * 1e3:.0f} -> {t_after.median * 1e3:.0f} ms")
    return {"dataset": ds.name, "n": ds.num_nodes, "m": ds.graph.num_edges, "before_s": t_before.median,
            "after_s": t_after.median}


def xla_cache(cfg) -> dict:
    out = {"dataset": cfg["cli_dataset"], "epochs": cfg["cli_epochs"]}
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, JAXCLP_DATA=str(C.data_root()), JAXCLP_CACHE=str(Path(tmp) / "parsed"))
        for label, cache in (("off", "off"), ("cold", str(Path(tmp) / "xla")), ("warm", str(Path(tmp) / "xla"))):
            cmd = [sys.executable, "-m", "jaxclp", "run", "--dataset", cfg["cli_dataset"], "--methods",
                   "mlp,clp,lp", "--runs", "2", "--epochs", str(cfg["cli_epochs"]), "--no-progress",
                   "--out", str(Path(tmp) / f"out-{label}")]
            t = time.perf_counter()
            subprocess.run(cmd, cwd=REPO, env=dict(env, JAXCLP_XLA_CACHE=cache), check=True, capture_output=True)
            out[f"{label}_s"] = time.perf_counter() - t
            recs = [json.loads(x) for x in (Path(tmp) / f"out-{label}" / "results.jsonl").read_text().splitlines()]
            out[f"{label}_tests"] = sorted((r["run"], r["method"], r["test"]) for r in recs if r["type"] == "result")
    out["identical_results"] = out["off_tests"] == out["cold_tests"] == out["warm_tests"]
    C.log(f"speedups: jaxclp run {cfg['cli_dataset']}: off {out['off_s']:.1f} s, cold {out['cold_s']:.1f} s, "
          f"warm {out['warm_s']:.1f} s; identical results: {out['identical_results']}")
    return out


SHARD_SCRIPT = textwrap.dedent("""
    import os, sys, json
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from benchmarks import _common as C
    from jaxclp.graph import spmm
    from jaxclp.operator import clp_operator
    n, k, repeats = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    p = C.make_problem(n, 10, k)
    op = clp_operator(p.graph, p.b0, p.H)
    mesh = Mesh(np.array(jax.devices()), ("d",))
    cols = NamedSharding(mesh, P(None, "d"))
    one = jax.jit(lambda o, x: o.matvec(x))
    local = jax.jit(jax.shard_map(lambda l, r, x: l * spmm(p.graph, op.values, r * x), mesh=mesh,
                                  in_specs=(P(None, "d"),) * 3, out_specs=P(None, "d"), check_vma=False))
    ls, rs, xs = (jax.device_put(a, cols) for a in (op.left, op.right, p.prior))
    t1, y1 = C.time_call(lambda: one(op, p.prior), repeats=repeats)
    t2, y2 = C.time_call(lambda: local(ls, rs, xs), repeats=repeats)
    print(json.dumps({"n": n, "m": p.m, "K": k, "one_device_s": t1.median, "sharded_2_s": t2.median,
                      "max_abs_diff": float(jnp.max(jnp.abs(y1 - y2)))}))
""")


def sharding(cfg) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    rows = []
    for k in cfg["shard_ks"]:
        done = subprocess.run([sys.executable, "-c", SHARD_SCRIPT, str(cfg["shard_n"]), str(k), str(cfg["repeats"])],
                              cwd=REPO, env=env, check=True, capture_output=True, text=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        C.log(f"speedups: step K={k}: 1 device {r['one_device_s'] * 1e3:.1f} ms, 2 host devices "
              f"{r['sharded_2_s'] * 1e3:.1f} ms")
    return rows


def write_markdown(path: Path, payload: dict) -> None:
    ms = lambda s: f"{s * 1e3:.1f}"  # noqa: E731
    lines = ["# Speed-ups: the replaced code path vs the current one (`python -m benchmarks.speedups`)", "",
             C.machine_header_md(payload["machine"]), "", "Milliseconds, median of the timed calls.", "",
             "## norm_bounds / edge_values: eager -> jitted", "",
             C.md_table(["what", "n", "m", "K", "eager", "jitted"],
                        [[r["what"], r["n"], r["m"], r["K"], ms(r["before_s"]), ms(r["after_s"])]
                         for r in payload["bounds"]]), "",
             "## GMRES kernel: batched, maxiter = max_iters -> incremental, maxiter in restart cycles", "",
             C.md_table(["alpha", "alpha*rho_bound", "n", "m", "before", "after", "jaxclp.solve bicgstab (all of it)",
                         "max |before - after|"],
                        [[r["alpha"], f"{r['alpha_rho_bound']:.2f}", r["n"], r["m"], ms(r["before_s"]),
                          ms(r["after_s"]), ms(r["bicgstab_solve_s"]), f"{r['max_abs_diff']:.1e}"]
                         for r in payload["gmres"]]), "",
             "## CLP.fit with a given prior: with the power iteration -> spectral_ on first access", "",
             C.md_table(["dataset", "n", "m", "fit + spectral_", "fit"],
                        [[payload["clp_fit"][k] for k in ("dataset", "n", "m")]
                         + [ms(payload["clp_fit"]["before_s"]), ms(payload["clp_fit"]["after_s"])]]), "",
             "## `jaxclp run` (mlp, clp, lp; 2 splits) in fresh processes, seconds", "",
             C.md_table(["dataset", "epochs", "XLA cache off", "cold", "warm", "identical results"],
                        [[payload["xla_cache"]["dataset"], payload["xla_cache"]["epochs"]]
                         + [f"{payload['xla_cache'][k]:.1f}" for k in ("off_s", "cold_s", "warm_s")]
                         + [payload["xla_cache"]["identical_results"]]]), "",
             "## One CLP step, class axis sharded over two forced host CPU devices (shard_map)", "",
             C.md_table(["n", "m", "K", "1 device", "2 host devices", "max |diff|"],
                        [[r["n"], r["m"], r["K"], ms(r["one_device_s"]), ms(r["sharded_2_s"]),
                          f"{r['max_abs_diff']:.1e}"] for r in payload["sharding"]]), ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.speedups", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=out)
    args = ap.parse_args(argv)
    od = C.out_dir(args.out)
    t0 = time.time()
    cfg = QUICK if args.quick else FULL
    payload = {"benchmark": "speedups", "quick": args.quick, "machine": C.machine_info(), "config": cfg,
               "bounds": bounds(cfg), "gmres": gmres(cfg), "clp_fit": clp_fit(cfg), "xla_cache": xla_cache(cfg),
               "sharding": sharding(cfg)}
    return C.write_results(od, "speedups", payload, write_markdown, t0)


if __name__ == "__main__":
    main()

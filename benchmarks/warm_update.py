"""Warm vs cold closed-form solves after 1% of the nodes get new labels (:mod:`jaxclp.update`).

The setting of :meth:`jaxclp.CLP.update`: a fitted CLP (prior D, H, alpha, solver) on a synthetic graph
(:func:`jaxclp.datasets.synthetic`: 5 classes x 20,000 nodes = 100,000 nodes, average degree 10, edge homophily
0.3, undirected), a noisy float32 prior (each row 0.4 on the node's class, or on a wrong class for 40% of the
nodes, plus Dirichlet noise), 10% of the nodes labelled at fit time and H estimated from them. Then 1% of the
nodes (1,000, chosen at random among the unlabelled) get their labels: B0 and the edge weights change, H is kept,
and the closed form ``(I - a A^F_k) x_k = (1 - a) D_k`` of the new operator is solved

* cold: from each method's own start (what a refit's solve does), and
* warm: from the previous solution (``x0``, :func:`jaxclp.solve.solve_operator`).

Both stop on the same test (relative residual 1e-6 or the float32 precision floor, :mod:`jaxclp.solve`).
Operators: the paper's (sym Â, unscaled: rho(A^F_k) ~ 0.1-0.3, alpha 0.9; ``"auto"`` picks neumann there) and the
rho-scaled one (:func:`jaxclp.operator.spectral_scale`, alpha 0.9 and 0.99, where ``"auto"`` picks cg). Every
method that takes a start: neumann, jacobi, cg, bicgstab, gmres ("dense" is a direct solve, and needs n <= a few
thousand); at the scaled alpha 0.99 the Krylov methods only (the stationary ones need ~1,000 products there,
and ``"auto"`` never picks them). Seconds: min and median of ``repeats`` timed calls of the solve alone (operator built beforehand),
after one untimed call (compile excluded), all in one process; iterations per class as the solver counts them
(gmres reports none: -1). ``max |warm - cold|``: the largest difference of the two values.

Usage: ``nice -n 10 python -m benchmarks.warm_update [--quick] [--out DIR]``.
"""

from __future__ import annotations

import sys

from benchmarks import _common as C

FULL = {"classes": 5, "nodes_per_class": 20_000, "avg_degree": 10, "h": 0.3, "train": 0.1, "added": 0.01,
        "cases": [["paper", 0.9, ["neumann", "jacobi", "cg", "bicgstab", "gmres"]],
                  ["scaled", 0.9, ["neumann", "jacobi", "cg", "bicgstab", "gmres"]],
                  ["scaled", 0.99, ["cg", "bicgstab", "gmres"]]],
        "repeats": 3, "tol": 1e-6}
QUICK = {"classes": 3, "nodes_per_class": 300, "avg_degree": 6, "h": 0.3, "train": 0.1, "added": 0.01,
         "cases": [["paper", 0.9, ["neumann", "cg", "bicgstab"]], ["scaled", 0.99, ["neumann", "cg", "bicgstab"]]],
         "repeats": 3, "tol": 1e-6}


def _ready(sol):
    """Blocks until a :class:`jaxclp.solve.Solution`'s value is computed; returns the solution."""
    import jax

    jax.block_until_ready(sol.value)
    return sol


def rows(cfg: dict) -> list:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxclp
    from jaxclp.operator import spectral_scale
    from jaxclp.solve import solve_operator

    k = cfg["classes"]
    ds = jaxclp.datasets.synthetic(cfg["h"], avg_degree=cfg["avg_degree"], num_classes=k,
                                   nodes_per_class=cfg["nodes_per_class"], seed=0, features=None)
    g, n = ds.graph, ds.num_nodes
    y = np.asarray(ds.labels)
    rng = np.random.default_rng(0)
    noisy = np.where(rng.random(n) < 0.6, y, (y + rng.integers(1, k, n)) % k)
    prior = 0.4 * np.eye(k)[noisy] + 0.6 * rng.dirichlet(np.ones(k), n)
    prior = jnp.asarray((prior / prior.sum(1, keepdims=True)).astype(np.float32))
    tm = rng.random(n) < cfg["train"]
    new = tm.copy()
    new[rng.choice(np.flatnonzero(~tm), int(round(cfg["added"] * n)), replace=False)] = True
    yj = jnp.asarray(y, jnp.int32)
    H, _ = jaxclp.estimate_compatibility(g, prior, yj, jnp.asarray(tm))
    C.log(f"warm_update: {n} nodes, {int(g.senders.shape[0])} directed edges, {int(tm.sum())} labels + "
          f"{int(new.sum() - tm.sum())} new")
    out = []
    for kind, alpha, methods in cfg["cases"]:
        ops = []
        for mask in (tm, new):
            op = jaxclp.clp_operator(g, jaxclp.initial_beliefs(prior, yj, jnp.asarray(mask)), H)
            ops.append(spectral_scale(op)[0] if kind == "scaled" else op)
        for method in methods:
            kw = dict(alpha=alpha, method=method, tol=cfg["tol"])
            before = solve_operator(ops[0], prior, **kw)  # the fitted solution
            x0 = jax.block_until_ready(before.value)
            C.log(f"warm_update: {kind} alpha {alpha} {method}")
            t_cold, cold = C.time_call(lambda: solve_operator(ops[1], prior, **kw), repeats=cfg["repeats"],
                                       sync=_ready)
            t_warm, warm = C.time_call(lambda: solve_operator(ops[1], prior, x0=x0, **kw), repeats=cfg["repeats"],
                                       sync=_ready)
            out.append({"operator": kind, "alpha": alpha, "method": method, "nodes": n, "classes": k,
                        "edges": int(g.senders.shape[0]), "labels_before": int(tm.sum()),
                        "labels_added": int(new.sum() - tm.sum()),
                        "iterations_cold": np.asarray(cold.iterations).tolist(),
                        "iterations_warm": np.asarray(warm.iterations).tolist(),
                        "cold": t_cold.as_dict(), "warm": t_warm.as_dict(),
                        "converged_cold": bool(np.asarray(cold.converged).all()),
                        "converged_warm": bool(np.asarray(warm.converged).all()),
                        "relres_cold_max": float(np.asarray(cold.relative_residual).max()),
                        "relres_warm_max": float(np.asarray(warm.relative_residual).max()),
                        "max_abs_diff": float(jnp.max(jnp.abs(warm.value - cold.value))),
                        "max_abs_change": float(jnp.max(jnp.abs(cold.value - x0)))})
    return out


def write_markdown(path, payload: dict) -> None:
    table = []
    for r in payload["rows"]:
        ic, iw = r["iterations_cold"], r["iterations_warm"]
        its = "-" if max(ic) < 0 else f"{max(ic)} / {max(iw)} ({sum(ic)} / {sum(iw)})"
        c, w = r["cold"], r["warm"]
        table.append([r["operator"], r["alpha"], r["method"], its,
                      f"{c['min']:.3f} / {c['median']:.3f}", f"{w['min']:.3f} / {w['median']:.3f}",
                      f"{c['median'] / w['median']:.2f}x",
                      "yes" if r["converged_cold"] and r["converged_warm"] else "no",
                      f"{r['max_abs_diff']:.1e}", f"{r['max_abs_change']:.1e}"])
    first = payload["rows"][0] if payload["rows"] else {}
    cfg = payload["config"]
    lines = [f"# Warm vs cold solves after new labels (`{payload['command']}`)", "",
             C.machine_header_md(payload["machine"]), "",
             f"Graph: `jaxclp.datasets.synthetic` ({first.get('nodes', 0):,} nodes = {cfg['classes']} classes x "
             f"{cfg['nodes_per_class']:,}, {first.get('edges', 0):,} directed edges, average degree "
             f"{cfg['avg_degree']}, h = {cfg['h']}), float32; {first.get('labels_before', 0):,} labelled nodes at "
             f"fit time, then {first.get('labels_added', 0):,} more (1% of the nodes); H kept. Each row solves the "
             "new closed form cold (the method's own start) and warm (from the previous solution, "
             "`x0`); same stopping test (relative residual 1e-6 or the float32 floor). Seconds: min / median of "
             f"{cfg['repeats']} timed solves in one process after one untimed call (compile excluded); operator "
             "built beforehand. Iterations: the most over the classes, cold / warm (in brackets: summed over the "
             "classes; gmres does not count). `max |warm - cold|`: the values' largest difference; `max change`: "
             "the largest change of the solution that the new labels caused. Operators: `paper` (sym Â unscaled, "
             "rho ~ 0.1-0.3, where `auto` picks neumann) and `scaled` (divided by rho, where `auto` picks cg).",
             "", C.md_table(["operator", "alpha", "method", "iterations cold / warm", "cold s (min / median)",
                             "warm s (min / median)", "speed-up (median)", "converged", "max |warm - cold|",
                             "max change"], table), "",
             f"Total run time {payload.get('elapsed_s', 0):.0f} s (graph generation included)."]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None, out=None) -> dict:
    command = "python -m benchmarks.warm_update" + ("" if not (argv or sys.argv[1:]) else
                                                    " " + " ".join(argv if argv is not None else sys.argv[1:]))

    def written(path, payload):
        payload["command"] = command
        write_markdown(path, payload)

    return C.sections_main("warm_update", __doc__, {"rows": rows}, FULL, QUICK, written, argv, out)


if __name__ == "__main__":
    main()

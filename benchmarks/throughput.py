"""Task 2: throughput of one CLP propagation step for all K classes on the same graph and machine.

Graph: synthetic, n = 100k nodes, ~2M directed edges (1M undirected pairs, both directions), K = 5, float32,
the paper's CLP operator ``A^F_k = diag(b0_k) Ahat_sym diag((b0 H)_k)``. One step = ``Y = A^F X`` for an
(n, K) block X. Implementations:

* jaxclp: ``FactoredOperator.matvec`` (factored, one SpMM for all K), the edgewise engine (precomputed (m, K)
  edge values, ``jaxclp.graph.spmm``), and the per-step cost inside ``jaxclp.propagate`` (fori_loop; difference
  of two iteration counts, so fixed call overhead cancels).
* scipy.sparse: one CSR matvec per class with the per-class edge weights; one CSR @ dense (n, K) (factored).
* torch CPU (optional): ``torch.sparse.mm`` (CSR and COO) on the factored form; ``index_add_`` as PyG's
  gather/scatter message passing (LabelPropagation), factored and edgewise.
* C: a CSR loop with OpenMP (1 and 2 threads), compiled with gcc at benchmark time (``benchmarks/c``).
* memory bandwidth: STREAM-like triad ``a = b + s c`` in numpy (1 thread) and in C (2 threads).
* candidate JAX formulations from :mod:`benchmarks.kernels` (what jaxclp could port).

Byte-count model (effective GB/s): compulsory traffic of a CSR implementation in float32 with int32 indices,
every array touched once and gathers of X served from cache (X is 2 MB here):
factored ``8 m + 4 (n + 1) + 16 n K`` (column index + value per edge, row pointers, X/left/right read, Y
written); edgewise ``4 m (K + 1) + 4 (n + 1) + 8 n K``. jaxclp's COO layout reads 4 more bytes per edge
(receivers), not counted: the model is the algorithm's floor, not jaxclp's layout.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C

FULL = {"n": 100_000, "avg_degree": 20, "K": 5, "side_K": (2, 40), "repeats": 21}
QUICK = {"n": 10_000, "avg_degree": 20, "K": 5, "side_K": (), "repeats": 3}
QUICK_FORMULATIONS = ("reference (jaxclp matvec)", "chunked4 + barrier", "BCSR, K padded to 8")
_QUIET = {"on": True}


def bytes_factored(n, m, k):
    return 8 * m + 4 * (n + 1) + 16 * n * k


def bytes_edgewise(n, m, k):
    return 4 * m * (k + 1) + 4 * (n + 1) + 8 * n * k


def _timeit(fn, repeats, quiet=True, sync=None):
    import jax

    kw = {"sync": sync} if sync is not None else {"sync": jax.block_until_ready}
    t, out = C.time_call(fn, repeats=repeats, warmup=2, min_repeats=repeats,
                         quiet=0.3 if (quiet and _QUIET["on"]) else None, **kw)
    return t, out


def _np_sync(x):
    return x


def bandwidth(repeats: int, cref, n_elem: int = 1 << 25) -> dict:
    """STREAM-like triad a = b + s*c (12 bytes per element in the STREAM convention)."""
    b = np.random.default_rng(0).random(n_elem, dtype=np.float32)
    c = np.random.default_rng(1).random(n_elem, dtype=np.float32)
    a = np.empty_like(b)

    def np_triad():
        np.multiply(c, np.float32(3.0), out=a)
        np.add(a, b, out=a)
        return a

    res = {}
    t, _ = _timeit(np_triad, repeats, sync=_np_sync)
    res["numpy triad (1 thread, 2 passes)"] = {"time_s": t.median, "GBps": 12 * n_elem / t.median / 1e9,
                                                "timing": t.as_dict()}
    if cref is not None:
        for th in (1, 2):
            t, _ = _timeit(lambda th=th: cref.triad(a, b, c, 3.0, th), repeats, sync=_np_sync)
            res[f"C triad ({th} thread{'s' if th > 1 else ''})"] = {"time_s": t.median,
                                                                 "GBps": 12 * n_elem / t.median / 1e9,
                                                                 "timing": t.as_dict()}
    return res


def run_one(n, deg, k, repeats, cref, *, full: bool) -> dict:
    import jax
    import jax.numpy as jnp
    import scipy.sparse as sp

    import jaxclp
    from benchmarks import kernels as KR
    from jaxclp.graph import spmm

    prob = C.make_problem(n, deg, k, seed=0)
    g = prob.graph
    m = g.num_edges
    op = jaxclp.clp_operator(g, prob.b0, prob.H, normalization="sym")
    x = jnp.asarray(np.random.default_rng(3).random((n, k), dtype=np.float32))
    ref = np.asarray(jax.jit(lambda o, v: o.matvec(v))(op, x))
    refn = float(np.abs(ref).max())
    rows = []

    def add(name, family, t, out, model_bytes, note=""):
        err = None if out is None else float(np.abs(np.asarray(out) - ref).max() / refn)
        rows.append({"name": name, "family": family, "time_s": t.median, "time_min_s": t.min,
                     "compile_s": t.compile, "foreign_cores": t.foreign_cores, "runs": t.runs,
                     "GBps_model": model_bytes / t.median / 1e9, "bytes_model": model_bytes,
                     "max_rel_err": err, "note": note})
        C.log(f"  K={k} {name}: {t.median * 1e3:.2f} ms (min {t.min * 1e3:.2f}, foreign {t.foreign_cores:.2f})")

    bf, be = bytes_factored(n, m, k), bytes_edgewise(n, m, k)
    # ---------------------------------------------------------------- jaxclp
    mv = jax.jit(lambda o, v: o.matvec(v))
    comp, _ = C.aot_compile_time(mv, op, x)
    t, out = _timeit(lambda: mv(op, x), repeats)
    t.compile = comp
    add("jaxclp factored (FactoredOperator.matvec)", "jaxclp", t, out, bf)
    emat = jax.block_until_ready(op.edge_matrix())
    ew = jax.jit(lambda gr, e, v: spmm(gr, e, v))
    comp, _ = C.aot_compile_time(ew, g, emat, x)
    t, out = _timeit(lambda: ew(g, emat, x), repeats)
    t.compile = comp
    add("jaxclp edgewise (precomputed (m,K), jaxclp.spmm)", "jaxclp", t, out, be)
    # per step inside propagate (fori_loop): (t(N2) - t(N1)) / (N2 - N1)
    prior = prob.prior
    for engine in ("factored", "edgewise") if full else ("factored",):
        n1, n2 = 5, 25 if full else 10

        def prop(ni, engine=engine):
            return jaxclp.propagate(g, prob.b0, prob.H, prior, alpha=0.9, num_iters=ni, engine=engine)

        t1, _ = _timeit(lambda: prop(n1), max(5, repeats // 3))
        t2, _ = _timeit(lambda: prop(n2), max(5, repeats // 3))
        per = C.Timing(median=(t2.median - t1.median) / (n2 - n1), min=(t2.min - t1.min) / (n2 - n1),
                       max=(t2.max - t1.max) / (n2 - n1), runs=min(t1.runs, t2.runs), compile=None,
                       foreign_cores=max(t1.foreign_cores, t2.foreign_cores))
        add(f"jaxclp.propagate per step ({engine})", "jaxclp", per, None, bf if engine == "factored" else be,
            note=f"(t({n2} its) - t({n1} its)) / {n2 - n1}; call overhead {max(0.0, t1.median - n1 * per.median) * 1e3:.1f} ms")
    # ---------------------------------------------------------------- scipy
    s_np, r_np = np.asarray(g.senders), np.asarray(g.receivers)
    indptr = np.searchsorted(r_np, np.arange(n + 1)).astype(np.int32)
    vals = np.asarray(op.values, dtype=np.float32)
    left, right, xn = (np.ascontiguousarray(np.asarray(a, dtype=np.float32)) for a in (op.left, op.right, x))
    E = np.ascontiguousarray(np.asarray(emat, dtype=np.float32))
    mats = [sp.csr_matrix((np.ascontiguousarray(E[:, j]), s_np.astype(np.int32), indptr), shape=(n, n))
            for j in range(k)]
    xcols = [np.ascontiguousarray(xn[:, j]) for j in range(k)]

    def scipy_per_class():
        return np.stack([mats[j] @ xcols[j] for j in range(k)], axis=1)

    t, out = _timeit(scipy_per_class, repeats, sync=_np_sync)
    add("scipy per-class CSR matvec (K x A_k @ x_k)", "scipy", t, out, be)
    A = sp.csr_matrix((vals, s_np.astype(np.int32), indptr), shape=(n, n))

    def scipy_factored():
        return left * (A @ (right * xn))

    t, out = _timeit(scipy_factored, repeats, sync=_np_sync)
    add("scipy CSR @ dense (n,K), factored", "scipy", t, out, bf)
    # ---------------------------------------------------------------- torch
    torch_info = None
    try:
        import torch
    except Exception:  # noqa: BLE001 - optional
        torch = None
    if torch is not None:
        torch_info = {"version": torch.__version__, "threads": torch.get_num_threads()}
        tl, tr, tx = (torch.from_numpy(np.array(a)) for a in (left, right, xn))  # writable copies
        with_warn = __import__("warnings")
        with with_warn.catch_warnings():
            with_warn.simplefilter("ignore")
            At = torch.sparse_csr_tensor(torch.from_numpy(indptr.astype(np.int64)),
                                         torch.from_numpy(s_np.astype(np.int64)), torch.from_numpy(vals),
                                         size=(n, n))
            Ac = torch.sparse_coo_tensor(torch.from_numpy(np.stack([r_np, s_np]).astype(np.int64)),
                                         torch.from_numpy(vals), size=(n, n)).coalesce()
        row = torch.from_numpy(r_np.astype(np.int64))
        col = torch.from_numpy(s_np.astype(np.int64))
        tv = torch.from_numpy(vals)
        tE = torch.from_numpy(E)
        buf = torch.zeros(n, k)

        def t_csr():
            return tl * torch.sparse.mm(At, tr * tx)

        def t_coo():
            return tl * torch.sparse.mm(Ac, tr * tx)

        def t_index_add():
            y = tr * tx
            return tl * buf.zero_().index_add_(0, row, tv[:, None] * y[col])

        def t_index_add_edgewise():
            return buf.zero_().index_add_(0, row, tE * tx[col])

        def tsync(o):
            return o.numpy()

        with torch.inference_mode():
            for name, fn, mb in [("torch.sparse.mm CSR, factored", t_csr, bf),
                                 ("torch.sparse.mm COO, factored", t_coo, bf),
                                 ("torch index_add_ (PyG-style gather/scatter), factored", t_index_add, bf),
                                 ("torch index_add_ (PyG-style), edgewise (m,K)", t_index_add_edgewise, be)]:
                t, out = _timeit(fn, repeats, sync=tsync)
                add(name, "torch", t, out, mb)
    # ---------------------------------------------------------------- C
    if cref is not None:
        indptr64 = indptr.astype(np.int64)
        col32 = s_np.astype(np.int32)
        tmp = np.empty_like(xn)
        outc = np.empty_like(xn)
        for th in (1, 2):
            t, out = _timeit(lambda th=th: cref.factored(indptr64, col32, vals, left, right, xn, tmp, outc, th),
                             repeats, sync=_np_sync)
            add(f"C CSR loop, factored ({th} thread{'s' if th > 1 else ''})", "C", t, out, bf)
        t, out = _timeit(lambda: cref.edgewise(indptr64, col32, E, xn, outc, 2), repeats, sync=_np_sync)
        add("C CSR loop, edgewise (2 threads)", "C", t, out, be)
    # ---------------------------------------------------------------- candidate JAX formulations
    for F in KR.FORMULATIONS:
        if not full and F.name not in QUICK_FORMULATIONS:
            continue
        try:
            aux = F.prepare(s_np, r_np, vals, n)
            f = jax.jit(F.apply)
            comp, _ = C.aot_compile_time(f, aux, op.left, op.right, x)
            t, out = _timeit(lambda f=f, aux=aux: f(aux, op.left, op.right, x), repeats)
            t.compile = comp
            add(f"kernel: {F.name}", "candidate", t, out, bf, note=F.note)
        except Exception as err:  # noqa: BLE001
            rows.append({"name": f"kernel: {F.name}", "family": "candidate", "error": str(err)[:300]})
    # ---------------------------------------------------------------- under vmap (3 alphas) and grad
    transforms = []
    if full or k == 5:
        xb = jnp.stack([x, 0.5 * x, 0.25 * x])
        cands = [("reference (jaxclp matvec)", KR.reference_prepare, KR.reference_apply),
                 ("BCSR, K padded to 8", KR.bcsr_prepare, lambda a, lf, rt, v: KR.bcsr_padded_apply(a, lf, rt, v)),
                 ("csr_spmm (custom_vmap + custom_vjp)", KR.csr_prepare, KR.csr_factored_apply)]
        for name, prep, app in cands:
            aux = prep(s_np, r_np, vals, n)
            fv = jax.jit(jax.vmap(lambda a, v, app=app: app(a, op.left, op.right, v), in_axes=(None, 0)))
            fg = jax.jit(jax.grad(lambda v, a, app=app: jnp.sum(jnp.sin(app(a, op.left, op.right, v)))))
            tv, _ = _timeit(lambda: fv(aux, xb), max(5, repeats // 3))
            tg, _ = _timeit(lambda: fg(x, aux), max(5, repeats // 3))
            transforms.append({"name": name, "vmap3_s": tv.median, "grad_s": tg.median,
                               "foreign_cores": max(tv.foreign_cores, tg.foreign_cores)})
            C.log(f"  K={k} {name}: vmap(3) {tv.median * 1e3:.1f} ms, grad {tg.median * 1e3:.1f} ms")
    return {"n": n, "m": m, "K": k, "avg_degree": deg, "rows": rows, "torch": torch_info,
            "transforms": transforms}


def analyse(res: dict, bw: dict) -> dict:
    by = {r["name"]: r for r in res["rows"] if "time_s" in r}
    jf = by.get("jaxclp factored (FactoredOperator.matvec)")
    if jf is None:
        return {}
    t = jf["time_s"]
    best_bw = max((v["GBps"] for v in bw.values()), default=None)
    out = {"jaxclp_ms": t * 1e3}

    def ratio(name):
        r = by.get(name)
        return None if r is None else r["time_s"] / t  # > 1: jaxclp faster

    out["speedup_vs_scipy_per_class"] = ratio("scipy per-class CSR matvec (K x A_k @ x_k)")
    out["speedup_vs_scipy_factored"] = ratio("scipy CSR @ dense (n,K), factored")
    out["speedup_vs_torch_csr"] = ratio("torch.sparse.mm CSR, factored")
    out["speedup_vs_torch_coo"] = ratio("torch.sparse.mm COO, factored")
    out["speedup_vs_torch_index_add"] = ratio("torch index_add_ (PyG-style gather/scatter), factored")
    c2 = by.get("C CSR loop, factored (2 threads)")
    out["jaxclp_over_C2"] = None if c2 is None else t / c2["time_s"]
    c1 = by.get("C CSR loop, factored (1 thread)")
    out["jaxclp_over_C1"] = None if c1 is None else t / c1["time_s"]
    if best_bw:
        tb = jf["bytes_model"] / (best_bw * 1e9)
        out["bandwidth_bound_ms"] = tb * 1e3
        out["jaxclp_over_bandwidth_bound"] = t / tb
        out["best_bandwidth_GBps"] = best_bw
    cands = [r for r in res["rows"] if r["family"] == "candidate" and "time_s" in r]
    if cands:
        best = min(cands, key=lambda r: r["time_s"])
        out["best_candidate"] = best["name"]
        out["best_candidate_ms"] = best["time_s"] * 1e3
        out["best_candidate_speedup_vs_jaxclp"] = t / best["time_s"]
        sc = by.get("scipy per-class CSR matvec (K x A_k @ x_k)")
        out["best_candidate_speedup_vs_scipy_per_class"] = None if sc is None else sc["time_s"] / best["time_s"]
        tc = by.get("torch.sparse.mm CSR, factored")
        out["best_candidate_speedup_vs_torch_csr"] = None if tc is None else tc["time_s"] / best["time_s"]
        ti = by.get("torch index_add_ (PyG-style gather/scatter), factored")
        out["best_candidate_speedup_vs_torch_index_add"] = None if ti is None else ti["time_s"] / best["time_s"]
        out["best_candidate_over_C2"] = None if c2 is None else best["time_s"] / c2["time_s"]
    return out


def write_markdown(path: Path, payload: dict) -> None:
    lines = ["# Task 2: propagation throughput (one CLP step, all classes)", "",
             C.machine_header_md(payload["machine"]), "",
             (__doc__ or "").split("\n\n", 1)[1].strip(), "",
             f"Median of {payload['repeats']} runs after 2 warm-up calls (each block waits up to 20 s for other "
             "processes to go below 0.3 cores; `foreign` = cores used by other processes during the timed runs). "
             "Compile time is the AOT lower+compile of the jitted call."]
    if payload.get("c_compiler"):
        lines += ["", f"C reference: `{payload['c_command']}` ({payload['c_compiler']})."]
    lines += ["", "## Memory bandwidth (STREAM-like triad, 12 B/element, 3 x 128 MiB)", ""]
    lines += [C.md_table(["kernel", "GB/s", "ms"], [[k, v["GBps"], v["time_s"] * 1e3] for k, v in
                                                    payload["bandwidth"].items()]), ""]
    for res in payload["results"]:
        a = res.get("analysis", {})
        lines += [f"## n = {res['n']}, m = {res['m']} edges, K = {res['K']}", ""]
        if a:
            def fx(v, fmt="{:.2f}"):
                return "-" if v is None else fmt.format(v)

            lines += [f"jaxclp factored: **{a['jaxclp_ms']:.2f} ms** per step. Speed-up of jaxclp (time of other / "
                      f"time of jaxclp; target >= 3): scipy per-class CSR {fx(a['speedup_vs_scipy_per_class'])}x, "
                      f"scipy factored CSR@dense {fx(a['speedup_vs_scipy_factored'])}x, torch.sparse.mm CSR "
                      f"{fx(a['speedup_vs_torch_csr'])}x, torch COO {fx(a['speedup_vs_torch_coo'])}x, torch "
                      f"index_add_ {fx(a['speedup_vs_torch_index_add'])}x. jaxclp / C (2 threads) = "
                      f"{fx(a['jaxclp_over_C2'])} (target <= 2), jaxclp / C (1 thread) = {fx(a['jaxclp_over_C1'])}; "
                      f"jaxclp / bandwidth bound ({fx(a.get('bandwidth_bound_ms'))} ms at "
                      f"{fx(a.get('best_bandwidth_GBps'), '{:.1f}')} GB/s) = {fx(a.get('jaxclp_over_bandwidth_bound'))}.",
                      ""]
            if a.get("best_candidate"):
                lines += [f"Best candidate formulation: **{a['best_candidate']}**, {a['best_candidate_ms']:.2f} ms "
                          f"= {a['best_candidate_speedup_vs_jaxclp']:.2f}x faster than jaxclp today; vs scipy "
                          f"per-class {fx(a['best_candidate_speedup_vs_scipy_per_class'])}x, vs torch CSR "
                          f"{fx(a['best_candidate_speedup_vs_torch_csr'])}x, vs torch index_add_ "
                          f"{fx(a['best_candidate_speedup_vs_torch_index_add'])}x; / C 2 threads "
                          f"{fx(a['best_candidate_over_C2'])}.", ""]
        body = []
        for r in res["rows"]:
            if "time_s" not in r:
                body.append([r["family"], r["name"], None, None, None, None, None, None, "error: " + r["error"][:80]])
                continue
            body.append([r["family"], r["name"], round(r["time_s"] * 1e3, 2), round(r["time_min_s"] * 1e3, 2),
                         round(r["GBps_model"], 2),
                         None if r["compile_s"] is None else round(r["compile_s"], 2),
                         None if r["max_rel_err"] is None else f"{r['max_rel_err']:.0e}",
                         r["foreign_cores"], r["note"]])
        lines += [C.md_table(["family", "implementation", "ms (median)", "ms (min)", "GB/s (model)", "compile s",
                              "max rel err", "foreign", "note"], body), ""]
        if res.get("transforms"):
            lines += ["Under `jax.vmap` over a batch of 3 right-hand sides (as `solve` does for a vector of alphas) "
                      "and under `jax.grad` (sum(sin(step(x))) w.r.t. x):", ""]
            lines += [C.md_table(["formulation", "vmap(3) ms", "grad ms", "foreign"],
                                 [[t["name"], t["vmap3_s"] * 1e3, t["grad_s"] * 1e3, t["foreign_cores"]]
                                  for t in res["transforms"]]), ""]
    path.write_text("\n".join(lines))


def plot(path: Path, payload: dict) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = payload["results"][0]
    rows = [r for r in res["rows"] if "time_s" in r]
    rows.sort(key=lambda r: r["time_s"])
    colors = {"jaxclp": "tab:red", "scipy": "tab:blue", "torch": "tab:orange", "C": "tab:green",
              "candidate": "tab:purple"}
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.5))
    ax.barh([r["name"] for r in rows], [r["time_s"] * 1e3 for r in rows],
            color=[colors.get(r["family"], "grey") for r in rows])
    a = res.get("analysis", {})
    if a.get("bandwidth_bound_ms"):
        ax.axvline(a["bandwidth_bound_ms"], color="k", ls="--", lw=1, label="bandwidth bound (model)")
        ax.legend(fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("ms per propagation step (median)")
    ax.set_title(f"One CLP step: n={res['n']}, m={res['m']}, K={res['K']}, float32")
    ax.tick_params(axis="y", labelsize=7)
    ax.invert_yaxis()
    return C.save_figure(fig, path)


# ------------------------------------------- fused kernel: one CLP step left * (Ahat @ (right * x)) per implementation

KERNEL = {"n": 100_000, "avg_degree": 20, "Ks": (2, 5, 40), "rounds": {2: 25, 5: 25, 40: 9}}
KERNEL_QUICK = {"n": 10_000, "avg_degree": 20, "Ks": (2, 5), "rounds": {2: 5, 5: 5}}


def run_kernel(cfg: dict, cref) -> list[dict]:
    """One CLP step ``left * (Ahat @ (right * x))`` per implementation, all in this process, interleaved in
    rounds (each round calls every implementation once, in the same order), so that the load of a shared
    machine hits all of them alike. Reports min and median per implementation and the load averages."""
    import os as _os

    import jax
    import jax.numpy as jnp
    import scipy.sparse as sp

    import jaxclp
    from jaxclp import sparse as S

    out = []
    for k in cfg["Ks"]:
        n = cfg["n"]
        prob = C.make_problem(n, cfg["avg_degree"], k, seed=0)
        g = prob.graph
        op = jaxclp.clp_operator(g, prob.b0, prob.H, normalization="sym")
        op = op._replace(values=op.values.astype(jnp.float32), left=op.left.astype(jnp.float32),
                         right=op.right.astype(jnp.float32))
        x = jnp.asarray(np.random.default_rng(3).random((n, k), dtype=np.float32))
        impls = {}  # name -> (call, sync)
        fused = jax.jit(lambda o, v: S.factored_matmul(o.values, o.graph.senders, o.graph.receivers,
                                                       o.graph.indptr, o.left, o.right, v))
        if S.kernel_available():
            impls["jaxclp fused kernel (factored_matmul)"] = (lambda: fused(op, x), jax.block_until_ready)
            mv_now = jax.jit(lambda o, v: o.matvec(v))
            impls["jaxclp FactoredOperator.matvec (the library step: fused kernel)"] = (lambda: mv_now(op, x),
                                                                                  jax.block_until_ready)
        with S.xla_path():  # today's path: traced here, so it lowers to XLA's own CSR kernel
            mv_xla = jax.jit(lambda o, v: o.matvec(v) + 0)
            jax.block_until_ready(mv_xla(op, x))
        impls["jaxclp XLA path (FactoredOperator.matvec before the kernel)"] = (lambda: mv_xla(op, x),
                                                                             jax.block_until_ready)
        s_np, r_np = np.asarray(g.senders), np.asarray(g.receivers)
        indptr = np.asarray(g.indptr).astype(np.int32)
        vals = np.asarray(op.values, dtype=np.float32)
        left, right, xn = (np.ascontiguousarray(np.asarray(a, dtype=np.float32)) for a in (op.left, op.right, x))
        A = sp.csr_matrix((vals, s_np.astype(np.int32), indptr), shape=(n, n))
        impls["scipy CSR @ dense, factored (1 thread)"] = (lambda: left * (A @ (right * xn)), lambda z: z)
        torch_info = None
        try:
            import torch
        except Exception:  # noqa: BLE001 - optional
            torch = None
        if torch is not None:
            torch.set_num_threads(2)
            torch_info = {"version": torch.__version__, "threads": torch.get_num_threads()}
            import warnings as _w
            with _w.catch_warnings():
                _w.simplefilter("ignore")
                At = torch.sparse_csr_tensor(torch.from_numpy(indptr.astype(np.int64)),
                                             torch.from_numpy(s_np.astype(np.int64)), torch.from_numpy(vals),
                                             size=(n, n))
            tl, tr, tx = (torch.from_numpy(np.array(a)) for a in (left, right, xn))

            def t_csr():
                with torch.inference_mode():
                    return tl * torch.sparse.mm(At, tr * tx)

            impls["torch.sparse.mm CSR, factored (2 threads)"] = (t_csr, lambda o: o.numpy())
        if cref is not None:
            ip64, col32 = indptr.astype(np.int64), s_np.astype(np.int32)
            tmp, outc = np.empty_like(xn), np.empty_like(xn)
            for th in (1, 2):
                impls[f"C CSR loop, factored ({th} thread{'s' if th > 1 else ''})"] = (
                    lambda th=th: cref.factored(ip64, col32, vals, left, right, xn, tmp, outc, th), lambda z: z)
        ref = left * (A.astype(np.float64) @ (right.astype(np.float64) * xn))
        errs = {}
        for name, (fn, sync) in impls.items():  # warm-up (compiles) and accuracy vs float64 scipy
            for _ in range(2):
                o = np.asarray(sync(fn()))
            errs[name] = float(np.abs(o - ref).max() / np.abs(ref).max())
        times = {name: [] for name in impls}
        cpu = {name: [] for name in impls}
        load0 = _os.getloadavg()
        for _ in range(cfg["rounds"][k]):
            for name, (fn, sync) in impls.items():
                c, t = time.process_time(), time.perf_counter()
                sync(fn())
                times[name].append(time.perf_counter() - t)
                cpu[name].append(time.process_time() - c)
        load1 = _os.getloadavg()
        rows = [{"name": nm, "min_ms": 1e3 * min(ts), "median_ms": 1e3 * float(np.median(ts)), "runs": len(ts),
                 "cpu_median_ms": 1e3 * float(np.median(cpu[nm])), "max_rel_err": errs[nm]}
                for nm, ts in times.items()]
        by = {r["name"]: r for r in rows}
        res = {"n": n, "m": g.num_edges, "K": k, "rows": rows, "load_before": load0, "load_after": load1,
               "torch": torch_info, "kernel": S.kernel_status()}
        fk = by.get("jaxclp fused kernel (factored_matmul)")
        if fk is not None:
            def ratio(name, stat):
                r = by.get(name)
                return None if r is None else fk[stat] / r[stat]
            res["ratios"] = {stat: {"fused/torch_csr_2t": ratio("torch.sparse.mm CSR, factored (2 threads)", stat),
                                    "fused/C_2t": ratio("C CSR loop, factored (2 threads)", stat),
                                    "fused/C_1t": ratio("C CSR loop, factored (1 thread)", stat),
                                    "fused/xla_path": ratio(
                                        "jaxclp XLA path (FactoredOperator.matvec before the kernel)", stat),
                                    "fused/scipy": ratio("scipy CSR @ dense, factored (1 thread)", stat)}
                             for stat in ("min_ms", "median_ms")}
        C.log(f"kernel K={k}: " + ", ".join(f"{r['name'][:28]} {r['min_ms']:.2f}/{r['median_ms']:.2f}" for r in rows)
              + f"; load {load0[0]:.1f} -> {load1[0]:.1f}")
        out.append(res)
    return out


def write_kernel_markdown(path: Path, payload: dict) -> None:
    lines = ["# One CLP step: the fused CPU kernel against the XLA path, torch, scipy and C", "",
             C.machine_header_md(payload["machine"]), "",
             f"Command: `{payload['command']}`. All implementations run in ONE process, interleaved in rounds "
             f"(each round calls each once), float32, n = {payload['results'][0]['n']}, average degree 20 "
             "(`_common.make_problem`). "
             "Times in ms; ratios < 1 mean the fused kernel is faster. The machine was shared with other jobs: "
             "the 1-minute load average before/after each block is given (2 cores). CPU ms is the process time of "
             "the call summed over its threads (spin-waiting OpenMP/torch threads count too).", ""]
    for res in payload["results"]:
        lines += [f"## K = {res['K']} (m = {res['m']})", "",
                  f"Load average {res['load_before'][0]:.1f} before, {res['load_after'][0]:.1f} after; "
                  f"kernel: {res['kernel']}; torch: {res['torch']}.", ""]
        lines += [C.md_table(["implementation", "min ms", "median ms", "CPU ms (median, all threads)", "runs",
                              "max rel err vs f64"],
                             [[r["name"], round(r["min_ms"], 2), round(r["median_ms"], 2),
                               round(r["cpu_median_ms"], 2), r["runs"],
                               f"{r['max_rel_err']:.0e}"] for r in res["rows"]]), ""]
        if res.get("ratios"):
            keys = list(res["ratios"]["min_ms"])
            lines += [C.md_table(["ratio", *keys],
                                 [[stat, *[None if res["ratios"][stat][k] is None else round(res["ratios"][stat][k], 2)
                                           for k in keys]] for stat in ("min_ms", "median_ms")]), ""]
    path.write_text("\n".join(lines))


def main_kernel(quick: bool, out) -> dict:
    import sys

    t0 = time.time()
    od = C.out_dir(out)
    from benchmarks import c_ref

    cref, cmsg = c_ref.build(od / "_scratch")
    C.log(f"throughput --kernel: C reference: {cmsg}")
    payload = {"benchmark": "throughput_kernel", "quick": quick, "machine": C.machine_info(),
               "command": "nice python -m benchmarks.throughput --kernel" + (" --quick" if quick else ""),
               "argv": sys.argv[1:], "c_compiler": cmsg if cref else None,
               "results": run_kernel(KERNEL_QUICK if quick else KERNEL, cref)}
    return C.write_results(od, "throughput_kernel", payload, write_kernel_markdown, t0)


def main(argv=None, out=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=out)
    ap.add_argument("--kernel", action="store_true",
                    help="only the fused-kernel head-to-head at K = 2, 5, 40 (throughput_kernel.json/md)")
    args = ap.parse_args(argv)
    if args.kernel:
        return main_kernel(args.quick, args.out)
    cfg = QUICK if args.quick else FULL
    _QUIET["on"] = not args.quick
    od = C.out_dir(args.out)
    t0 = time.time()
    info = C.machine_info()
    from benchmarks import c_ref

    cref, cmsg = c_ref.build(od / "_scratch")
    C.log(f"throughput: C reference: {cmsg}")
    bw = bandwidth(cfg["repeats"] if not args.quick else 3, cref, n_elem=(1 << 25) if not args.quick else (1 << 22))
    results = []
    for k in (cfg["K"], *cfg["side_K"]):
        C.log(f"throughput: n={cfg['n']} K={k}")
        res = run_one(cfg["n"], cfg["avg_degree"], k, cfg["repeats"] if k == cfg["K"] else max(7, cfg["repeats"] // 2),
                      cref, full=not args.quick)
        res["analysis"] = analyse(res, bw)
        results.append(res)
    payload = {"benchmark": "throughput", "quick": args.quick, "machine": info, "repeats": cfg["repeats"],
               "bandwidth": bw, "results": results, "c_compiler": cmsg if cref else None,
               "c_command": cref.command if cref else None}
    payload["plots"] = [plot(od / "throughput.png", payload)]
    return C.write_results(od, "throughput", payload, write_markdown, t0)


if __name__ == "__main__":
    main()

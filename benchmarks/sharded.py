"""A graph of ogbn-products' shape through the node-sharded pipeline on 1, 2, 4, 8 devices.

One fresh subprocess per (device count P, partition), with ``XLA_FLAGS=--xla_force_host_platform_device_count=P``
set in its environment before jax starts. Each child generates the same graph (seeded) and runs the user's
path: ``Graph.from_edge_index`` (int32 (2, m/2) undirected pairs, ``symmetrize=True``) ->
:func:`jaxclp.halo_plan.build_plan` (partition ``"rcm"``, and ``"metis"`` where pymetis imports) ->
:func:`jaxclp.shard_graph` (``plan=``; the unsharded ``Graph`` is dropped afterwards) ->
:func:`jaxclp.sharded_clp.estimate_compatibility` -> :func:`jaxclp.sharded_clp.solve` (alpha 0.9, ``"sym"``, method
``"auto"``, tol 1e-6). Per child: wall time of every stage, iterations, time of one sharded product (one step:
the halo exchange + the shard's local CSR product; before that change a local gather / ``segment_sum``), peak
RSS of the whole process after each stage (``VmHWM`` and ``ru_maxrss``, the larger; the process baseline, the
generator's output and the user's input arrays included), the bytes per stored edge, the halo of one step from
the plan (rows received over all shards, the ``ppermute`` bytes for K float32 columns, the fraction of nodes that
some other shard reads) and XLA's compiled temporary memory of one product per device (``memory_analysis``).

Graph: Chung-Lu-like: node weights from a Pareto law (tail exponent ``--gamma``, capped so the largest
expected degree is ``--max-degree``), both ends of every pair drawn proportionally to the weights; classes with
Zipf-like sizes, and the receiver's class drawn from :func:`benchmarks._common.compat_matrix`
(``--homophily`` on the diagonal, the rest mostly on class c + 1), so the compatibility matrix that
``estimate_compatibility`` recovers has a planted structure. Default: the shape of ogbn-products (n =
2,449,029, 123,718,280 stored directed nonzeros before deduplication, K = 47), float32; ``--scale s``
multiplies n and m.

The P "devices" are host CPU devices of ONE process sharing this machine's cores (2 here): the times show the
cost of the sharded program and its communication volume, not a speed-up, and the peak RSS is that of all P
devices together.

Usage: ``python -m benchmarks.sharded [--quick] [--scale 0.1] [--devices 1,2,4,8]
[--partitions rcm,metis] [--k 47] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C
from benchmarks.graph_memory import _peak, _peak_mib, _status_kib

PRODUCTS = {"n": 2_449_029, "m": 123_718_280, "k": 47}  # ogbn-products: nodes, directed nonzeros, classes
QUICK = {"n": 4_000, "m": 80_000, "k": 8}
ALPHA = 0.9
TOL = 1e-6
METHOD = "auto"


# ------------------------------------------------------------------------------------------- generation
def generate(n: int, m: int, k: int, *, seed: int = 0, gamma: float = 2.5, max_degree: float = 20_000.0,
             homophily: float = 0.8, train_frac: float = 0.1, chunk: int = 1 << 20):
    """A skewed graph with planted classes (deterministic for a seed; int32 output built chunk by chunk).

    Args:
        n: nodes. m: directed nonzeros wanted (``m // 2`` undirected pairs are drawn; repeats and loops are
            removed later by ``from_edge_index``, so the stored count is a little lower).
        k: classes. gamma: degree tail exponent (P(deg > d) ~ d^-(gamma - 1)). max_degree: cap of the
            expected degree. homophily: diagonal of the class-linking matrix. train_frac: training fraction.

    Returns:
        ``(edge_index (2, m // 2) int32, labels (n,) int32, prior (n, k) float32, train_mask (n,) bool)``.
    """
    rng = np.random.default_rng(seed)
    pc = 1.0 / np.arange(1, k + 1) ** 0.9  # Zipf-like class sizes
    labels = rng.choice(k, size=n, p=pc / pc.sum()).astype(np.int32)
    w = rng.pareto(gamma - 1.0, n) + 1.0
    w = np.minimum(w, max_degree * w.sum() / max(m, 1))  # expected degree ~ m w / sum(w)
    # nodes sorted by class; cumulative weights globally and per class
    order = np.argsort(labels, kind="stable").astype(np.int32)
    cw = np.cumsum(w[order])
    bounds = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=k))])
    lo_w = np.concatenate([[0.0], cw])[bounds[:-1]]
    hi_w = cw[np.maximum(bounds[1:] - 1, 0)]
    cw_all = np.cumsum(w)
    cdf = np.cumsum(C.compat_matrix(k, homophily), axis=1)
    pairs = m // 2
    ei = np.empty((2, pairs), np.int32)
    for a in range(0, pairs, chunk):
        c = min(chunk, pairs - a)
        src = np.minimum(np.searchsorted(cw_all, rng.random(c) * cw_all[-1], side="right"), n - 1)
        u = rng.random(c)
        t = (u[:, None] > cdf[labels[src]]).sum(axis=1).clip(0, k - 1)
        target = lo_w[t] + rng.random(c) * (hi_w[t] - lo_w[t])
        pos = np.clip(np.searchsorted(cw, target, side="right"), bounds[t], np.maximum(bounds[t + 1] - 1, bounds[t]))
        ei[0, a:a + c] = src
        ei[1, a:a + c] = order[np.minimum(pos, n - 1)]
    del cw, cw_all, order
    prior = C.synthetic_prior(labels, k, strength=2.0, seed=seed)
    train = np.random.default_rng(seed + 2).random(n) < train_frac
    train[0] = True
    return ei, labels, prior, train


# ------------------------------------------------------------------------------------------- the child
def _rss_mib() -> float | None:
    cur = _status_kib("VmRSS")
    return None if cur is None else cur / 1024.0


def worker(cfg: dict) -> dict:
    """One (P, partition) run in this process (``XLA_FLAGS`` set by the parent before jax starts)."""
    import jax
    import jax.numpy as jnp

    import jaxclp
    from jaxclp import shard_graph, sharded_clp
    from jaxclp.graph import Graph
    from jaxclp.halo_plan import build_plan
    from jaxclp.sharded_graph import to_internal

    P, part, n, m, k = cfg["devices"], cfg["partition"], cfg["n"], cfg["m"], cfg["k"]
    jax.block_until_ready(jnp.ones(8) + 1)
    out = {"devices_seen": len(jax.devices()), "baseline_rss_mib": _rss_mib(), "stages": {}}
    if len(jax.devices()) < P:
        raise RuntimeError(f"{len(jax.devices())} devices < {P}: XLA_FLAGS was not applied")
    stages, times = out["stages"], {}

    def mark(name, t0):
        times[name] = time.perf_counter() - t0
        stages[name] = _peak(_peak_mib())

    t0 = time.perf_counter()
    ei, labels, prior, train = generate(n, m, k, seed=cfg["seed"], gamma=cfg["gamma"],
                                        max_degree=cfg["max_degree"], homophily=cfg["homophily"])
    mark("generate", t0)
    t0 = time.perf_counter()
    g = Graph.from_edge_index(ei, n)  # int32 input, symmetrize, deduplicate, drop loops
    jax.block_until_ready(g.senders)
    del ei
    mark("from_edge_index", t0)
    m_stored = int(g.num_edges)
    deg = np.bincount(np.asarray(g.receivers), minlength=n)
    out["degree"] = {"mean": float(deg.mean()), "max": int(deg.max()), "p99": float(np.percentile(deg, 99)),
                     "median": float(np.median(deg)), "isolated": int((deg == 0).sum())}
    del deg

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:P]), ("nodes",))
    t0 = time.perf_counter()
    plan = build_plan(g, P, partition=part, seed=cfg["seed"])
    mark("build_plan", t0)
    halo = plan.halo_stats(num_classes=k, itemsize=4)
    halo["rounds"] = len(plan.offsets)
    t0 = time.perf_counter()
    sg = shard_graph(g, mesh, "nodes", plan=plan)
    jax.block_until_ready(sg.receivers)
    del plan, g  # at scale the user keeps only the sharded graph
    mark("shard_graph", t0)
    out["sharded_graph_bytes"] = int(sum(x.nbytes for x in jax.tree.leaves(sg)))
    from jaxclp import sparse

    out["product"] = "csr" if hasattr(sg, "indptr") else "gather"
    out["kernel"] = sparse.kernel_status()
    out["edges_per_shard"] = int(sg.receivers.shape[1])

    prior_j, labels_j, train_j = jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(train)
    del prior
    t0 = time.perf_counter()
    H, sk = sharded_clp.estimate_compatibility(sg, prior_j, labels_j, train_j)
    jax.block_until_ready(H)
    mark("estimate_compatibility", t0)
    t0 = time.perf_counter()
    b0 = jaxclp.initial_beliefs(prior_j, labels_j, train_j)
    sol = sharded_clp.solve(sg, b0, H, prior_j, alpha=ALPHA, normalization="sym", method=METHOD, tol=TOL)
    jax.block_until_ready(sol.value)
    mark("solve", t0)
    out["peak_mib"] = stages["solve"]
    its = int(np.asarray(sol.iterations).max())
    test = ~train
    pred = np.asarray(jnp.argmax(sol.value, axis=1))
    out["solve"] = {"method": sol.method, "iterations": its, "converged": bool(np.asarray(sol.converged).all()),
                    "rel_residual": float(np.asarray(sol.relative_residual).max()),
                    "accuracy": float((pred[test] == labels[test]).mean()),
                    "prior_accuracy": float((np.asarray(jnp.argmax(prior_j, axis=1))[test] == labels[test]).mean())}
    Hn = np.asarray(H)
    out["compat"] = {"H_diag_mean": float(np.diag(Hn).mean()),
                     "H_next_mean": float(np.mean(Hn[np.arange(k), (np.arange(k) + 1) % k])),
                     "sinkhorn_converged": bool(np.asarray(getattr(sk, "converged", True))),
                     "edge_homophily": float(sharded_clp.edge_homophily(sg, labels_j))}
    del sol, pred

    # ---- after the peak: steady-state times (a second solve, one product) and XLA's temporaries of a product
    kw = dict(repeats=cfg["repeats"], warmup=1, min_repeats=min(2, cfg["repeats"]), budget_s=30.0)
    t_solve, _ = C.time_call(
        lambda: sharded_clp.solve(sg, b0, H, prior_j, alpha=ALPHA, normalization="sym", method=METHOD, tol=TOL),
        sync=lambda s_: (jax.block_until_ready(s_.value), s_)[1], **kw)
    op = sharded_clp.clp_operator(sg, to_internal(sg, b0), H, normalization="sym")
    mv = jax.jit(lambda o, x: o.matvec(x))
    t_mv, _ = C.time_call(lambda: mv(op, op.left), **kw)
    try:
        ma = mv.lower(op, op.left).compile().memory_analysis()
        out["product_temp_bytes_per_device"] = int(ma.temp_size_in_bytes)
    except Exception:  # noqa: BLE001 - memory_analysis is optional on some backends
        out["product_temp_bytes_per_device"] = None
    times["solve_steady"] = t_solve.median
    times["product"] = t_mv.median
    out["foreign_cores"] = max(t_solve.foreign_cores or 0, t_mv.foreign_cores or 0)
    out.update(times=times, halo=halo, m=m_stored, m_drawn=m, n=n, k=k, devices=P, partition=part,
               loadavg=list(os.getloadavg()))
    return out


# ------------------------------------------------------------------------------------------- the parent
def run_child(cfg: dict, timeout: float, max_rss_gib: float) -> dict:
    """Runs :func:`worker` in a fresh process; kills it past ``timeout`` s or ``max_rss_gib`` resident."""
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={cfg['devices']}"])
    env["JAX_PLATFORMS"] = "cpu"  # the forced host devices exist on the CPU backend only (a GPU machine: 1 device)
    cmd = [sys.executable, "-m", "benchmarks.sharded", "--worker", json.dumps(cfg)]
    t0 = time.time()
    peak_seen = 0.0
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True, env=C.module_env(env))
        reason = None
        while proc.poll() is None:
            time.sleep(0.5)
            try:
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        peak_seen = max(peak_seen, int(line.split()[1]) / 2**20)
            except OSError:
                pass
            if peak_seen > max_rss_gib:
                reason = f"killed: resident memory {peak_seen:.1f} GiB > --max-rss-gib {max_rss_gib}"
            elif time.time() - t0 > timeout:
                reason = f"killed: timeout after {timeout:.0f} s"
            if reason:
                proc.kill()
                proc.wait()
                break
        fo.seek(0)
        fe.seek(0)
        stdout, stderr = fo.read(), fe.read()
    base = {k: cfg[k] for k in ("devices", "partition", "n", "m", "k")}
    if reason:
        return {**base, "error": reason, "wall_s": time.time() - t0}
    if proc.returncode != 0:
        return {**base, "error": f"exit {proc.returncode}: {stderr.strip()[-800:]}", "wall_s": time.time() - t0}
    res = json.loads(stdout.strip().splitlines()[-1])
    res["wall_s"] = time.time() - t0
    return res


PRODUCT = "csr"  # the product of the current jaxclp.halo: the local CSR (no (E, K) array); "gather" before


def predicted_peak_gib(n: int, m: int, k: int, devices: int, product: str = PRODUCT) -> float:
    """Peak RSS of one child from the measured models (``benchmarks/results/sharded*.md``, float32; ``m`` the
    drawn nonzeros). ``product="gather"`` (jaxclp before the local CSR): the solve keeps two (E, K) gathers of
    the senders' rows (4 K bytes per edge each), plus the sharded graph and the edge values (36 B per edge in
    all), about a dozen (n, K) arrays and a 250 MiB baseline; edges padded to the largest shard (x 1.25 for
    P > 1). ``product="csr"`` with the lean plan building (int32 ids, counting sorts): no per-edge (E, K) array
    is left; measured at 0.1 x the products shape, the peak above the 250 MiB baseline is 78 B per drawn edge at
    P = 1 (the generated input, ``from_edge_index``, the plan, the solve) and 166 B at P = 8 with METIS (METIS's
    own memory and the solve's halo buffers, ~4.7 x each block on this power-law graph); 80 and 170 used."""
    if product == "gather":
        edges = m * (1.25 if devices > 1 else 1.0)
        return (edges * (2 * 4 * k + 36) + n * 4 * k * 12) / 2**30 + 0.25
    return m * (80 if devices == 1 else 170) / 2**30 + 0.25


def _row(r: dict) -> dict:
    """Derived numbers of one child."""
    if "error" in r:
        return r
    h, m, n, k, P = r["halo"], r["m"], r["n"], r["k"], r["devices"]
    d = dict(r)
    d["peak_b_per_edge"] = r["peak_mib"] * 2**20 / m
    d["peak_above_baseline_b_per_edge"] = (r["peak_mib"] - r["baseline_rss_mib"]) * 2**20 / m
    d["sharded_graph_b_per_edge"] = r["sharded_graph_bytes"] / m
    t = r.get("product_temp_bytes_per_device")
    d["product_temp_b_per_edge_total"] = None if t is None else t * P / m
    d["step_s"] = r["times"]["solve_steady"] / max(r["solve"]["iterations"], 1)
    d["halo_mib_per_step"] = h["ppermute_bytes"] / 2**20
    d["remote_fraction"] = h["remote_fraction"]
    d["halo_fraction"] = h["halo_fraction"]
    return d


def write_markdown(path: Path, payload: dict) -> None:
    cfg = payload["config"]
    rows = [_row(r) for r in payload["rows"]]
    ok = [r for r in rows if "error" not in r]
    lines = ["# ogbn-products-shaped graph through the node-sharded pipeline", "",
             C.machine_header_md(payload["machine"]), "",
             f"Command: `{payload['command']}`. Load average at start {payload['loadavg_start'][0]:.2f}, at end "
             f"{payload['loadavg_end'][0]:.2f}; elapsed {payload['elapsed_s']:.0f} s.", "",
             (__doc__ or "").split("\n\n", 1)[1].split("\n\nUsage")[0].strip(), ""]
    lines += [f"**Scale of this run**: {payload['scale_note']}", ""]
    seen = set()
    for r0 in ok:  # one line per graph size
        if (r0["n"], r0["m"], r0["k"]) in seen:
            continue
        seen.add((r0["n"], r0["m"], r0["k"]))
        lines += [f"Graph: n = {r0['n']}, {r0.get('m_drawn', cfg['m']) // 2} pairs drawn -> m = {r0['m']} stored "
                  f"directed nonzeros after symmetrizing and deduplicating (degree mean {r0['degree']['mean']:.1f}, "
                  f"median {r0['degree']['median']:.0f}, 99th percentile {r0['degree']['p99']:.0f}, max "
                  f"{r0['degree']['max']}, {r0['degree']['isolated']} isolated), K = {r0['k']}, float32; edge "
                  f"homophily {r0['compat']['edge_homophily']:.3f}; estimated H: diagonal mean "
                  f"{r0['compat']['H_diag_mean']:.3f}, (c, c+1) mean {r0['compat']['H_next_mean']:.3f} (planted: "
                  f"{cfg['homophily']} on the diagonal, most of the rest on c + 1); solve accuracy on the "
                  f"non-training nodes {r0['solve']['accuracy']:.3f} (prior {r0['solve']['prior_accuracy']:.3f}).",
                  ""]
    errors = [r for r in rows if "error" in r]
    if errors:
        lines += ["Not run / failed: " + "; ".join(f"P={r['devices']} {r['partition']} (n={r['n']}): "
                                                    f"{r['error'][:300]}" for r in errors), ""]
    if ok:
        lines += ["## Time (seconds; P host devices sharing the cores: not a speed-up)", "",
                  C.md_table(["n", "m", "K", "P", "partition", "generate", "from_edge_index", "build_plan",
                              "shard_graph", "estimate_compat", "solve (1st)", "solve (steady)", "method", "iters",
                              "step ms", "one product ms", "product", "foreign cores", "load"],
                             [[r["n"], r["m"], r["k"], r["devices"], r["partition"], r["times"]["generate"],
                               r["times"]["from_edge_index"], r["times"]["build_plan"], r["times"]["shard_graph"],
                               r["times"]["estimate_compatibility"], r["times"]["solve"],
                               r["times"]["solve_steady"], r["solve"]["method"], r["solve"]["iterations"],
                               r["step_s"] * 1e3, r["times"]["product"] * 1e3, r.get("product", "gather"),
                               r["foreign_cores"],
                               r["loadavg"][0]] for r in ok]), "",
                  "`solve (1st)` includes compilation and the spectral/norm checks; `step ms` = steady solve / "
                  "iterations (the solve also runs the two norm-bound products); `one product`: one "
                  "`ShardedOperator.matvec`, jitted, median; `product`: how the shard computes it after the halo "
                  "exchange: `gather` (jaxclp before the local CSR: the (E, K) gather of the senders' rows + a "
                  "sorted `segment_sum`) or `csr` (the shard's local CSR over `[x_local | halo]` through "
                  "`jaxclp.sparse.csr_matmul`, the fused C++ kernel on CPU: no (E, K) array).", "",
                  "## Memory (peak RSS of the whole process, all P devices together)", "",
                  C.md_table(["n", "m", "K", "P", "partition", "baseline MiB", "after input", "after from_edge_index",
                              "after build_plan", "after shard_graph", "after compat", "after solve = peak",
                              "B/edge (peak)", "B/edge above baseline", "ShardedGraph B/edge",
                              "product temp B/edge (all devices)", "model GiB"],
                             [[r["n"], r["m"], r["k"], r["devices"], r["partition"], r["baseline_rss_mib"],
                               r["stages"]["generate"], r["stages"]["from_edge_index"], r["stages"]["build_plan"],
                               r["stages"]["shard_graph"], r["stages"]["estimate_compatibility"],
                               r["stages"]["solve"], r["peak_b_per_edge"], r["peak_above_baseline_b_per_edge"],
                               r["sharded_graph_b_per_edge"], r["product_temp_b_per_edge_total"],
                               predicted_peak_gib(r["n"], r["m_drawn"] if r.get("product") == "csr" else r["m"],
                                                  r["k"], r["devices"], r.get("product", "gather"))]
                              for r in ok]), "",
                  "`product temp`: XLA's temporary buffers of one compiled product per device "
                  "(`memory_analysis().temp_size_in_bytes`) times P, per stored edge: for the `gather` product "
                  "the (E, K) gather of the senders' rows (4 K bytes per edge in float32); the `csr` product has "
                  "none (what remains is (b + S, K) halo buffers, per node, not per edge). "
                  "`model GiB`: `predicted_peak_gib` of the row's product, the rule that decides which sizes run: "
                  "`gather`: two (E, K) gathers alive in the solve + 36 B per edge + 12 (n, K) arrays + 0.25 GiB, "
                  "edges x 1.25 for P > 1 (within 3 % at P = 1 in the first run; P = 2, 4 and METIS needed less; "
                  "RCM at P = 8 can need more, its shards padded to the largest one, 1.9-2.2 x the mean edge "
                  "count); `csr`: 150 B per drawn edge (x 1.25 for P > 1) + 0.25 GiB, the host-side peak of "
                  "generating the input, `from_edge_index` and `build_plan` (the solve stays below it at P = 1). "
                  "For the full ogbn-products "
                  f"shape (n = {PRODUCTS['n']}, m = {PRODUCTS['m']}, K = {PRODUCTS['k']}) the gather model "
                  f"predicts {predicted_peak_gib(PRODUCTS['n'], PRODUCTS['m'], PRODUCTS['k'], 1, 'gather'):.0f} GiB "
                  "on one device and "
                  f"{predicted_peak_gib(PRODUCTS['n'], PRODUCTS['m'], PRODUCTS['k'], 8, 'gather'):.0f} GiB for 8 "
                  "host devices, the csr model "
                  f"{predicted_peak_gib(PRODUCTS['n'], PRODUCTS['m'], PRODUCTS['k'], 1, 'csr'):.1f} and "
                  f"{predicted_peak_gib(PRODUCTS['n'], PRODUCTS['m'], PRODUCTS['k'], 8, 'csr'):.1f} GiB "
                  f"(this machine: {payload['machine']['mem_total_gib']} GiB).", "",
                  "## Halo of one step (from the plan)", "",
                  C.md_table(["n", "K", "P", "partition", "halo rows", "halo rows / n", "remote fraction",
                              "received fraction", "edge cut", "ppermute rounds", "halo MiB per step (ppermute)",
                              "all_to_all MiB", "all-gather MiB", "max E / mean E"],
                             [[r["n"], r["k"], r["devices"], r["partition"], r["halo"]["halo_rows"],
                               r["halo"]["halo_fraction"], r["halo"]["remote_fraction"],
                               r["halo"]["received_fraction"], r["halo"]["edge_cut"], r["halo"]["rounds"],
                               r["halo_mib_per_step"], r["halo"]["padded_bytes"] / 2**20,
                               r["halo"]["allgather_bytes"] / 2**20,
                               r["halo"]["max_edges"] / max(r["halo"]["mean_edges"], 1e-9)] for r in ok]), "",
                  "Bytes are for K float32 columns, summed over all shards; one product moves them once (the "
                  "transposed product once backwards). `halo rows / n`: rows received over all "
                  "shards per node; `remote fraction`: nodes some other shard reads.", ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict | None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sharded", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny graph (n = 4000, m = 8e4, K = 8), P = 1 and 2")
    ap.add_argument("--out", default=out)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the products shape's n and m")
    ap.add_argument("--n", type=int, default=None, help="nodes (overrides the shape)")
    ap.add_argument("--m", type=int, default=None, help="directed nonzeros to draw (overrides the shape)")
    ap.add_argument("--k", type=int, default=None, help="classes (default 47)")
    ap.add_argument("--devices", default=None, help="comma-separated device counts (default 1,2,4,8)")
    ap.add_argument("--partitions", default="rcm,metis", help="comma-separated partitions (metis: where "
                    "pymetis imports; never at P = 1)")
    ap.add_argument("--gamma", type=float, default=2.5)
    ap.add_argument("--max-degree", type=float, default=20_000.0)
    ap.add_argument("--homophily", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per child")
    ap.add_argument("--max-rss-gib", type=float, default=14.0, help="a child predicted to need more is not run, "
                    "one that reaches it is killed")
    ap.add_argument("--force", action="store_true", help="run children whose predicted peak is above --max-rss-gib")
    ap.add_argument("--name", default=None, help="results file name (default sharded, quick sharded_quick)")
    ap.add_argument("--append", action="store_true", help="keep the rows (and commands) of the existing results "
                    "file of the same name and add this run's")
    ap.add_argument("--rewrite", action="store_true", help="only rebuild the markdown from the existing json")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rewrite:
        name = args.name or ("sharded_quick" if args.quick else "sharded")
        od = C.out_dir(args.out)
        payload = C.load_json(od / f"{name}.json")
        if payload is None:
            raise SystemExit(f"sharded: no {od / (name + '.json')} to rewrite")
        write_markdown(od / f"{name}.md", payload)
        return payload
    if args.worker:
        print(json.dumps(C._jsonable(worker(json.loads(args.worker)))))
        return None
    t0 = time.time()
    load0 = list(os.getloadavg())
    base = QUICK if args.quick else {"n": round(PRODUCTS["n"] * args.scale), "m": round(PRODUCTS["m"] * args.scale),
                                     "k": PRODUCTS["k"]}
    n, m, k = args.n or base["n"], args.m or base["m"], args.k or base["k"]
    devices = [int(x) for x in (args.devices or ("1,2" if args.quick else "1,2,4,8")).split(",")]
    parts = [p for p in args.partitions.split(",") if p]
    if "metis" in parts:
        try:
            import pymetis  # noqa: F401
        except ImportError:
            C.log("sharded: pymetis not installed, METIS skipped (pip install 'jaxclp[scale]')")
            parts.remove("metis")
    cfg = {"n": n, "m": m, "k": k, "gamma": args.gamma, "max_degree": args.max_degree, "homophily": args.homophily,
           "seed": args.seed, "repeats": 1 if args.quick else args.repeats}
    rows = []
    for P in devices:
        for part in parts:
            if part == "metis" and P == 1:
                continue  # one part: the identity order
            pred = predicted_peak_gib(n, m, k, P)
            if pred > args.max_rss_gib and not args.force:
                res = {"devices": P, "partition": part, "n": n, "m": m, "k": k, "skipped": True,
                       "error": f"not run: predicted peak {pred:.1f} GiB > --max-rss-gib {args.max_rss_gib} (the "
                                f"model of predicted_peak_gib; --force runs it anyway)"}
            else:
                res = run_child({**cfg, "devices": P, "partition": part}, args.timeout, args.max_rss_gib)
            rows.append(res)
            C.log(f"sharded: n={n} P={P} {part}: " + (res["error"][:300] if "error" in res else
                  f"solve {res['times']['solve']:.1f} s ({res['solve']['iterations']} its), peak "
                  f"{res['peak_mib']:.0f} MiB, halo {res['halo']['ppermute_bytes'] / 2**20:.1f} MiB/step"))
    full = n == PRODUCTS["n"] and m == PRODUCTS["m"]
    scale_note = ("the full ogbn-products shape" if full else
                  f"n = {n}, m = {m} drawn ({n / PRODUCTS['n']:.3g} x the ogbn-products shape of n = "
                  f"{PRODUCTS['n']}, m = {PRODUCTS['m']})") + f", K = {k}."
    argv_ = sys.argv[1:] if argv is None else list(argv)
    argv_ = [a for i, a in enumerate(argv_) if a != "--out" and (i == 0 or argv_[i - 1] != "--out")]
    name = args.name or ("sharded_quick" if args.quick else "sharded")
    od = C.out_dir(args.out)
    if all(r.get("skipped") for r in rows):
        C.log(f"sharded: nothing ran (every child predicted above --max-rss-gib); {name}.* left as they are")
        return {"rows": rows, "written": False}
    command = "python -m benchmarks.sharded " + " ".join(argv_)
    old = C.load_json(od / f"{name}.json") if args.append else None
    if old:
        rows = old["rows"] + rows
        command = old["command"] + "`, then `" + command
        scale_note = old["scale_note"] + " Then " + scale_note
        load0 = old["loadavg_start"]
        t0 -= old.get("elapsed_s", 0.0)
    payload = {"benchmark": "sharded", "quick": args.quick, "machine": C.machine_info(), "command": command,
               "config": cfg, "scale_note": scale_note, "loadavg_start": load0, "rows": rows,
               "derived": [_row(r) for r in rows], "host_devices_share_cores": os.cpu_count()}
    payload["loadavg_end"] = list(os.getloadavg())
    return C.write_results(od, name, payload, write_markdown, t0)


if __name__ == "__main__":
    main()

"""Halo sizes of the node-sharded graph (:mod:`jaxclp.sharded_graph`) per partitioner, and one sharded product.

For each graph and partitioner the host plan (:func:`jaxclp.halo_plan.build_plan`) gives what one product
communicates: the rows every shard receives (``received``: rows received / rows of the other shards), the
fraction of nodes some other shard reads, the edge cut, and the rows/bytes each exchange moves: ``ppermute``
(one round per shard offset, each padded to its longest list), ``all_to_all`` (``P (P - 1) h`` rows, every
list padded to the longest one ``h``) and an all-gather of the whole state (``P (P - 1) b`` rows). Graphs
(n = 1e5, average degree 20, node ids in random order): a uniform random graph, a planted-partition
stochastic block model (64 communities, 90 % of the edges inside a community) and a random geometric graph
(spatial locality, like meshes and road networks). Optionally (``--time``) one sharded product per exchange
on ``--devices`` forced host CPU devices: the host devices share this machine's cores, so the times show
overheads, not a speed-up.

Usage: ``python -m benchmarks.halo [--quick] [--time] [--devices 8] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from benchmarks import _common as C

FULL = {"n": 100_000, "avg_degree": 20, "shards": (2, 4, 8), "communities": 64, "p_in": 0.9, "k": 8,
        "repeats": 5}
QUICK = {"n": 5_000, "avg_degree": 20, "shards": (8,), "communities": 16, "p_in": 0.9, "k": 8, "repeats": 2}


def random_graph(n, avg_degree, seed=0):
    rng = np.random.default_rng(seed)
    m_half = int(n * avg_degree / 2)
    return rng.integers(0, n, m_half), rng.integers(0, n, m_half)


def sbm_graph(n, avg_degree, communities, p_in, seed=0):
    """Planted partition: each undirected edge joins two nodes of one community with probability p_in, else
    two uniform nodes; community ids are random, so the user order carries no locality."""
    rng = np.random.default_rng(seed)
    comm = rng.integers(0, communities, n)
    members = np.argsort(comm, kind="stable")
    start = np.concatenate([[0], np.cumsum(np.bincount(comm, minlength=communities))])
    m_half = int(n * avg_degree / 2)
    src = rng.integers(0, n, m_half)
    inside = rng.random(m_half) < p_in
    c = comm[src]
    size = start[c + 1] - start[c]
    pick = members[start[c] + (rng.random(m_half) * size).astype(np.int64)]
    dst = np.where(inside, pick, rng.integers(0, n, m_half))
    return src, dst


def geometric_graph(n, avg_degree, seed=0):
    """Random geometric graph: n uniform points in the unit square, an edge between points closer than r with
    ``pi r^2 n = avg_degree``; ids in random order (spatial locality, as in meshes and road networks)."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    pts = rng.random((n, 2))
    pairs = cKDTree(pts).query_pairs(np.sqrt(avg_degree / (np.pi * n)), output_type="ndarray")
    return pairs[:, 0], pairs[:, 1]


def _partitions():
    parts = ["none", "rcm", "bfs"]
    try:
        import pymetis  # noqa: F401
        parts.append("metis")
    except ImportError:
        C.log("halo: pymetis not installed, METIS skipped (pip install 'jaxclp[scale]')")
    return parts


def plan_rows(graphs, cfg) -> list[dict]:
    from jaxclp.halo_plan import build_plan

    rows = []
    for gname, g in graphs.items():
        for P in cfg["shards"]:
            for part in _partitions():
                t = time.perf_counter()
                plan = build_plan(g, P, partition=part)
                dt = time.perf_counter() - t
                st = plan.halo_stats(num_classes=cfg["k"], itemsize=4)
                st.update(graph=gname, partition=part, plan_s=dt, rounds=len(plan.offsets))
                rows.append(st)
                C.log(f"halo: {gname} P={P} {part}: received {st['received_fraction']:.3f} of remote rows, "
                      f"cut {st['edge_cut']:.3f}, ppermute {st['ppermute_bytes'] / 2**20:.1f} MiB, all_to_all "
                      f"{st['padded_bytes'] / 2**20:.1f} MiB, all-gather {st['allgather_bytes'] / 2**20:.1f} MiB "
                      f"({dt:.1f} s)")
    return rows


def time_rows(graphs, cfg, devices) -> list[dict]:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as PSpec

    from jaxclp import shard_graph
    from jaxclp.halo import EXCHANGES, sharded_spmm
    from jaxclp.sharded_graph import edge_values, to_internal

    if len(jax.devices()) < devices:
        C.log(f"halo: only {len(jax.devices())} devices (set XLA_FLAGS before jax starts); timing skipped")
        return []
    mesh = Mesh(np.array(jax.devices()[:devices]), ("nodes",))
    rows = []
    for gname, g in graphs.items():
        for part in ("none", "rcm"):
            sg = shard_graph(g, mesh, "nodes", partition=part)
            ev = edge_values(sg, "sym").astype(jnp.float32)
            x = to_internal(sg, jnp.ones((g.num_nodes, cfg["k"]), jnp.float32))
            for ex in EXCHANGES:
                timing, y = C.time_call(lambda: sharded_spmm(sg, ev, x, exchange=ex),
                                        repeats=cfg["repeats"])
                assert y.sharding.spec == PSpec("nodes")
                rows.append(dict(graph=gname, partition=part, exchange=ex, devices=devices, k=cfg["k"],
                                 rounds=len(sg.offsets) if ex == "ppermute" else 1,
                                 median_s=timing.median, min_s=timing.min, compile_s=timing.compile,
                                 foreign_cores=timing.foreign_cores))
                C.log(f"halo: {gname} {part} {ex}: {timing.median * 1e3:.1f} ms per product "
                      f"(foreign load {timing.foreign_cores:.2f} cores)")
    return rows


def write_md(path, payload):
    cfg = payload["config"]
    lines = [
        "# Halo sizes of the node-sharded graph (`jaxclp.sharded_graph`)", "",
        f"Command: `{payload['command']}`", "",
        C.machine_header_md(payload["machine"]), "",
        f"Graphs: uniform random (n = {cfg['n']}, average degree {cfg['avg_degree']}) and a planted-partition "
        f"SBM ({cfg['communities']} communities, {cfg['p_in']:.0%} of edges inside) and a random geometric "
        f"graph (points in the unit square, radius for the same average degree), all symmetrized, nodes "
        f"in random order; blocks of equal rows. Per product: `received`: rows a shard receives / rows of the "
        f"other shards, averaged (unpadded; 1 = all-gather); `remote`: fraction of nodes some other shard reads; "
        f"`cut`: fraction of edges crossing shards; `rounds`: ppermute rounds (shard offsets with a nonempty "
        f"list); then the MiB moved over all shards by each exchange for K = {cfg['k']} float32 columns: "
        f"`ppermute` (each offset padded to its longest list), `all_to_all` (every list padded to the longest, "
        f"`h`), `all-gather` (the whole state); `max E/mean E`: edge imbalance of the shards; `plan s`: host "
        f"time of `build_plan` (ordering included).", "",
    ]
    header = ["graph", "P", "partition", "received", "remote", "cut", "rounds", "ppermute MiB", "all_to_all MiB",
              "all-gather MiB", "max E/mean E", "plan s"]
    table = [[r["graph"], r["num_shards"], r["partition"], r["received_fraction"], r["remote_fraction"],
              r["edge_cut"], r["rounds"], r["ppermute_bytes"] / 2**20, r["padded_bytes"] / 2**20,
              r["allgather_bytes"] / 2**20, r["max_edges"] / r["mean_edges"], r["plan_s"]] for r in payload["plans"]]
    lines += [C.md_table(header, table), ""]
    if payload.get("timings"):
        lines += [f"One `sharded_spmm` (K = {cfg['k']}, float32) on {payload['timings'][0]['devices']} forced host "
                  "CPU devices sharing this machine's cores: overheads, not a speed-up.", ""]
        lines += [C.md_table(["graph", "partition", "exchange", "rounds", "median ms", "min ms", "foreign cores"],
                             [[r["graph"], r["partition"], r["exchange"], r["rounds"], r["median_s"] * 1e3,
                               r["min_s"] * 1e3, r["foreign_cores"]] for r in payload["timings"]]), ""]
    path.write_text("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--time", action="store_true", help="also time one sharded product per exchange")
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.time and "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        # jax reads XLA_FLAGS when its CPU backend starts (first device use), not at import
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={args.devices}").strip()
    cfg = QUICK if args.quick else FULL
    t0 = time.time()
    g_rand = C.fast_graph(*random_graph(cfg["n"], cfg["avg_degree"]), cfg["n"])
    g_sbm = C.fast_graph(*sbm_graph(cfg["n"], cfg["avg_degree"], cfg["communities"], cfg["p_in"]), cfg["n"])
    g_geo = C.fast_graph(*geometric_graph(cfg["n"], cfg["avg_degree"]), cfg["n"])
    graphs = {"random": g_rand, "sbm": g_sbm, "geometric": g_geo}
    payload = {"config": cfg, "machine": C.machine_info(),
               "command": "python -m benchmarks.halo " + " ".join(sys.argv[1:] if argv is None else argv),
               "plans": plan_rows(graphs, cfg)}
    if args.time:
        payload["timings"] = time_rows(graphs, cfg, args.devices)
    name = "halo_quick" if args.quick else "halo"
    return C.write_results(C.out_dir(args.out), name, payload, write_md, t0)


if __name__ == "__main__":
    main()

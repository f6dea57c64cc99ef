"""The CSR product's lowering on a GPU: XLA's BCSR @ dense (a gather + scatter-add) vs cuSPARSE.

On CUDA, ``jax.experimental.sparse.BCSR @ dense`` lowers to cuSPARSE only under the global flag
``jax_bcoo_cusparse_lowering`` (off by default); otherwise it is BCOO's generic lowering, a gather of the
(m, K) block rows times the values followed by a scatter-add. The ``csr_matmat`` primitive of
``jax.experimental.sparse.csr`` lowers to cuSPARSE's SpMM unconditionally (float32/float64). This measures, on
the default backend, for synthetic CSR matrices (uniform random senders, ``degree`` per row, sorted):

* ``xla``: :func:`jaxclp.sparse._xla_mm` (padded BCSR @ dense, the path every GPU product took before);
* ``segment``: :func:`jaxclp.sparse._segment_mm`, gather + sorted ``segment_sum`` (the XLA path for K < 3, the CUDA
  default since session 25);
* ``cusparse``: :func:`jaxclp.sparse._cusparse_mm` (the ``csr_matmat`` primitive);

per variant: median / min time of ``--repeats`` calls, the compiled program's temporary bytes
(``Compiled.memory_analysis().temp_size_in_bytes``: whether XLA materializes the (m, K) gather), and the max
relative difference to ``segment``. Then ``jaxclp.operator.norm_bounds`` (run by every solve) and one
``jaxclp.solve`` per path (``JAXCLP_GPU_SPMM`` set per trace), and whether two cuSPARSE calls are bitwise equal.

Usage: ``python -m benchmarks.gpu_spmm [--quick] [--out DIR]``; results ``gpu_spmm.{json,md}``.
On a CPU-only machine the ``cusparse`` variant lowers to the primitive's CPU fallback (a COO product) and the
numbers say nothing about GPUs (``--quick`` is the smoke test).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

FULL = {"sizes": ((1_000_000, 20, 5), (1_000_000, 20, 16), (5_000_000, 20, 5)), "repeats": 21}
QUICK = {"sizes": ((2_000, 5, 3),), "repeats": 3}


def _graph(n: int, degree: int, seed: int = 0):
    """A receiver-sorted CSR with ``degree`` uniform random senders per row (sorted within rows), built on the
    default device."""
    import jax
    import jax.numpy as jnp

    m = n * degree
    k1, k2 = jax.random.split(jax.random.key(seed))
    receivers = jnp.repeat(jnp.arange(n, dtype=jnp.int32), degree, total_repeat_length=m)
    senders = jax.random.randint(k1, (m,), 0, n, dtype=jnp.int32)
    receivers, senders = jax.lax.sort((receivers, senders), num_keys=2)
    values = jax.random.uniform(k2, (m,), jnp.float32, 0.01, 1.0) / degree
    indptr = jnp.arange(n + 1, dtype=jnp.int32) * degree
    return values, senders, receivers, indptr


def _time(fn, args, repeats: int) -> dict:
    import jax

    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    out = jax.block_until_ready(compiled(*args))
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        ts.append(time.perf_counter() - t0)
    mem = compiled.memory_analysis()
    temp = None if mem is None else int(mem.temp_size_in_bytes)
    return {"median_ms": statistics.median(ts) * 1e3, "min_ms": min(ts) * 1e3, "compile_s": compile_s,
            "temp_bytes": temp}, out


def main(argv=None) -> int:
    import jax
    import jax.numpy as jnp

    from jaxclp import sparse as S

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "benchmarks" / "results"))
    a = ap.parse_args(argv)
    cfg = QUICK if a.quick else FULL
    dev = jax.devices()[0]
    rows = []
    for n, degree, k in cfg["sizes"]:
        values, senders, receivers, indptr = _graph(n, degree)
        y = jax.random.normal(jax.random.key(1), (n, k), jnp.float32)
        m = int(values.shape[0])
        ref = None
        for name in ("segment", "xla", "cusparse"):
            fn = S._GPU_MM[name]  # the CUDA path JAXCLP_GPU_SPMM=name selects, called directly
            try:
                res, out = _time(fn, (values, senders, receivers, indptr, y), cfg["repeats"])
            except Exception as e:  # a lowering this backend does not have
                rows.append({"n": n, "m": m, "K": k, "variant": name, "error": f"{type(e).__name__}: {e}"[:300]})
                continue
            out = np.asarray(out, np.float64)
            if ref is None:
                ref = out
            res["max_rel_diff_vs_segment"] = float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))
            res["mk_bytes"] = m * k * 4
            if name == "cusparse":
                again = np.asarray(jax.jit(fn)(values, senders, receivers, indptr, y), np.float64)
                res["bitwise_repeat"] = bool((again == out).all())
            rows.append({"n": n, "m": m, "K": k, "variant": name, **res})
            print(json.dumps(rows[-1]), flush=True)
        del values, senders, receivers, indptr, y

    # norm_bounds and one solve through the public API, each path chosen by JAXCLP_GPU_SPMM at trace time
    from jaxclp.graph import Graph, edge_values
    from jaxclp.operator import FactoredOperator, norm_bounds
    from jaxclp.solve import solve_operator

    n, degree, k = cfg["sizes"][0]
    values, senders, receivers, indptr = _graph(n, degree)
    g = Graph.from_edge_index(np.stack([np.asarray(senders), np.asarray(receivers)]), n, symmetrize=False)
    key = jax.random.key(2)
    left = jax.random.uniform(key, (n, k), jnp.float32)
    right = jax.random.uniform(jax.random.fold_in(key, 1), (n, k), jnp.float32)
    op = FactoredOperator(g, edge_values(g, "row").astype(jnp.float32), left, right)
    d = jax.nn.softmax(jax.random.normal(jax.random.fold_in(key, 2), (n, k)), axis=-1)
    api = []
    before = os.environ.get(S.GPU_SPMM_ENV)
    for path in ("xla", "segment", "cusparse"):
        os.environ[S.GPU_SPMM_ENV] = path
        jax.clear_caches()  # the path is chosen at trace time: retrace every jitted function
        r, _ = _time(lambda o: norm_bounds.__wrapped__(o), (op,), cfg["repeats"])
        api.append({"what": "norm_bounds", "path": path, **r})
        t0 = time.perf_counter()
        sol = solve_operator(op, d, alpha=0.9, tol=1e-6)
        jax.block_until_ready(sol.value)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        sol = solve_operator(op, d, alpha=0.9, tol=1e-6)
        jax.block_until_ready(sol.value)
        api.append({"what": "solve(alpha=0.9, tol=1e-6)", "path": path, "first_s": first,
                    "second_s": time.perf_counter() - t0, "method": str(getattr(sol, "method", "")),
                    "iterations": int(np.max(np.asarray(sol.iterations)))})
        print(json.dumps(api[-1]), flush=True)
    if before is None:
        os.environ.pop(S.GPU_SPMM_ENV, None)
    else:
        os.environ[S.GPU_SPMM_ENV] = before
    jax.clear_caches()  # nothing traced under this benchmark's last path stays cached

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"device": str(dev), "device_kind": getattr(dev, "device_kind", ""), "jax": jax.__version__,
           "rows": rows, "api": api}
    (out / "gpu_spmm.json").write_text(json.dumps(doc, indent=1))
    lines = [f"# CSR product lowerings on {getattr(dev, 'device_kind', dev)} (jax {jax.__version__})", "",
             "| n | m | K | variant | median ms | min ms | temp MiB (compiled) | (m, K) MiB | rel diff vs segment |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['n']:,} | {r['m']:,} | {r['K']} | {r['variant']} | {r['error']} | | | | |")
            continue
        t = "-" if r["temp_bytes"] is None else f"{r['temp_bytes'] / 2**20:.1f}"
        lines.append(f"| {r['n']:,} | {r['m']:,} | {r['K']} | {r['variant']} | {r['median_ms']:.3f} | "
                     f"{r['min_ms']:.3f} | {t} | {r['mk_bytes'] / 2**20:.1f} | {r['max_rel_diff_vs_segment']:.1e} |")
    lines += ["", "| call | path | median ms / first s | min ms / second s | temp MiB |", "|---|---|---|---|---|"]
    for r in api:
        if r["what"] == "norm_bounds":
            t = "-" if r["temp_bytes"] is None else f"{r['temp_bytes'] / 2**20:.1f}"
            lines.append(f"| norm_bounds | {r['path']} | {r['median_ms']:.3f} | {r['min_ms']:.3f} | {t} |")
        else:
            lines.append(f"| {r['what']} ({r['method']}, {r['iterations']} it.) | {r['path']} | {r['first_s']:.2f} | "
                         f"{r['second_s']:.3f} | |")
    (out / "gpu_spmm.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

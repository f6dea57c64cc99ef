"""Task 4: time and peak memory vs number of edges, up to an ogbn-proteins-sized graph.

Series: n = 132,534 nodes (ogbn-proteins), K = 5 classes, float32, average degree growing so that the number of
directed edges m goes from 2.5e5 to 4e7 (ogbn-proteins has 3.96e7 undirected = 7.9e7 directed edges; the
largest size that was run is reported). Per size, the graph (planted classes, both directions, no duplicates)
is generated once and saved to ``results/_scratch``; then one fresh subprocess per measurement loads it and
reports its peak resident memory (``VmHWM`` of ``/proc/self/status``; see ``_rss_mib``):

* ``step``     -- one CLP propagation step for all classes (``FactoredOperator.matvec``, jitted).
* ``solve``    -- closed-form CLP ``jaxclp.solve(..., alpha=0.9, method="auto", tol=1e-6)`` (the paper's
  normalized operator), including the method choice and the residual check.
* ``step_bcsr`` -- the best candidate formulation from :mod:`benchmarks.kernels` (BCSR, K padded to 8), for
  comparison.

The baseline RSS (python + jax + the loaded arrays, before any compute) is reported separately so that the
growth exponent of the memory *used by the computation* can be fitted as well as that of the whole process.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C

N_PROTEINS = 132_534
FULL_EDGES = (250_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 40_000_000)
QUICK_EDGES = (20_000, 80_000)
QUICK_N = 10_000
K = 5
ALPHA = 0.9


def _status_mib(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _rss_mib() -> float:
    """Peak resident memory of this process: ``VmHWM`` (the high-water mark of this process image, reset at
    exec). Not ``ru_maxrss``: Linux carries the parent's RSS at fork over into a child's ru_maxrss, so every
    worker would report at least the (large) RSS of the benchmark runner that started it."""
    hwm = _status_mib("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB


def _current_rss_mib() -> float:
    cur = _status_mib("VmRSS")
    return float("nan") if cur is None else cur


# ------------------------------------------------------------------------------------------- generation
def generate(path: Path, n: int, m_target: int, seed: int = 0) -> dict:
    """Writes senders/receivers (int32, sorted by receiver), labels, prior, train mask to ``path``."""
    t0 = time.perf_counter()
    deg = m_target / n
    src, dst, labels = C.synthetic_edges(n, deg * 1.02, K, seed=seed)  # ~2% lost to duplicates
    s = np.concatenate([src, dst])
    r = np.concatenate([dst, src])
    del src, dst
    keep = s != r
    key = np.unique(r[keep].astype(np.int64) * n + s[keep])
    del s, r, keep
    rr, ss = np.divmod(key, n)
    del key
    path.mkdir(parents=True, exist_ok=True)
    np.save(path / "senders.npy", ss.astype(np.int32))
    np.save(path / "receivers.npy", rr.astype(np.int32))
    np.save(path / "labels.npy", labels)
    np.save(path / "prior.npy", C.synthetic_prior(labels, K, seed=seed))
    rng = np.random.default_rng(seed + 2)
    np.save(path / "train.npy", rng.random(n) < 0.1)
    meta = {"n": n, "m": int(ss.shape[0]), "gen_s": time.perf_counter() - t0}
    (path / "meta.json").write_text(json.dumps(meta))
    return meta


# ------------------------------------------------------------------------------------------- worker
def worker(path: Path, mode: str, repeats: int) -> dict:
    import jax
    import jax.numpy as jnp

    import jaxclp
    from jaxclp.graph import Graph
    from jaxclp.sparse import host_row_pointers

    rss0 = _rss_mib()
    meta = json.loads((path / "meta.json").read_text())
    n = meta["n"]
    s = jnp.asarray(np.load(path / "senders.npy"))
    r = jnp.asarray(np.load(path / "receivers.npy"))
    g = Graph(senders=s, receivers=r, weights=jnp.ones(s.shape[0], jnp.float32), num_nodes=n, symmetric=True,
              indptr=host_row_pointers(r, n))
    labels = jnp.asarray(np.load(path / "labels.npy"))
    prior = jnp.asarray(np.load(path / "prior.npy"))
    train = jnp.asarray(np.load(path / "train.npy"))
    b0 = jaxclp.initial_beliefs(prior, labels, train)
    H, _ = jaxclp.estimate_compatibility(g, prior, labels, train)
    jax.block_until_ready((b0, H))
    out = {"mode": mode, "n": n, "m": meta["m"], "K": K, "rss_python_jax_mib": rss0}
    if mode in ("step", "step_bcsr"):
        op = jaxclp.clp_operator(g, b0, H, normalization="sym")
        x = b0
        jax.block_until_ready(op)
        out["rss_baseline_mib"] = _current_rss_mib()
        if mode == "step":
            f = jax.jit(lambda o, v: o.matvec(v))
            comp, _ = C.aot_compile_time(f, op, x)
            t, _ = C.time_call(lambda: f(op, x), repeats=repeats, warmup=1, min_repeats=3, budget_s=30.0)
        else:
            from benchmarks import kernels as KR

            aux = KR.bcsr_prepare(np.asarray(s), np.asarray(r), np.asarray(op.values), n)
            f = jax.jit(lambda a, lft, rgt, v: KR.bcsr_padded_apply(a, lft, rgt, v, multiple=8))
            comp, _ = C.aot_compile_time(f, aux, op.left, op.right, x)
            t, _ = C.time_call(lambda: f(aux, op.left, op.right, x), repeats=repeats, warmup=1, min_repeats=3,
                               budget_s=30.0)
        out.update(time_s=t.median, time_min_s=t.min, runs=t.runs, compile_s=comp, foreign_cores=t.foreign_cores)
    elif mode == "solve":
        out["rss_baseline_mib"] = _current_rss_mib()

        def call():
            return jaxclp.solve(g, b0, H, prior, alpha=ALPHA, normalization="sym", method="auto", tol=1e-6,
                                throw=False)

        t, sol = C.time_call(lambda: call(), repeats=max(3, repeats // 2), warmup=1, min_repeats=3, budget_s=60.0,
                             sync=lambda s_: (jax.block_until_ready(s_.value), s_)[1])
        sol = call()
        out.update(time_s=t.median, time_min_s=t.min, runs=t.runs, compile_s=t.compile,
                   foreign_cores=t.foreign_cores, method=sol.method,
                   iterations=int(np.asarray(sol.iterations).max()),
                   converged=bool(np.asarray(sol.converged).all()),
                   rel_residual=float(np.asarray(sol.relative_residual).max()))
    else:
        raise ValueError(mode)
    out["rss_peak_mib"] = _rss_mib()
    return out


def run_worker(path: Path, mode: str, repeats: int, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.scaling", "--worker", str(path), "--mode", mode,
           "--repeats", str(repeats)]
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           cwd=str(C.REPO))
    except subprocess.TimeoutExpired:
        return {"mode": mode, "error": f"timeout after {timeout:.0f} s"}
    if r.returncode != 0:
        return {"mode": mode, "error": f"exit {r.returncode}: {r.stderr.strip()[-400:]}"}
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.time() - t0
    return res


# ------------------------------------------------------------------------------------------- outputs
def analyse(rows: list[dict]) -> dict:
    fits = {}
    for mode in ("step", "solve", "step_bcsr"):
        ok = [r for r in rows if r.get("mode") == mode and "time_s" in r]
        big = [r for r in ok if r["m"] >= 1_000_000] or ok
        fits[mode] = {
            "time_vs_m": C.fit_power_law([r["m"] for r in big], [r["time_s"] for r in big]),
            "peak_rss_vs_m": C.fit_power_law([r["m"] for r in big], [r["rss_peak_mib"] for r in big]),
            "compute_rss_vs_m": C.fit_power_law(
                [r["m"] for r in big if r["rss_peak_mib"] - r["rss_baseline_mib"] > 1],
                [r["rss_peak_mib"] - r["rss_baseline_mib"] for r in big if r["rss_peak_mib"] - r["rss_baseline_mib"] > 1]),
            "largest_m": max((r["m"] for r in ok), default=None),
            "fit_range": [min((r["m"] for r in big), default=None), max((r["m"] for r in big), default=None)],
        }
    return fits


def write_markdown(path: Path, payload: dict) -> None:
    rows = payload["rows"]
    lines = ["# Task 4: scaling with the number of edges", "", C.machine_header_md(payload["machine"]), "",
             (__doc__ or "").split("\n\n", 1)[1].strip(), "",
             f"n = {payload['n']}, K = {K}, float32. Times: median of several runs after warm-up, compilation "
             f"excluded (reported separately). Elapsed {payload['elapsed_s']:.0f} s.", ""]
    fits = payload["fits"]
    lines += ["## Fitted growth exponents (time or memory ~ m^b, sizes m >= 1e6)", ""]
    body = []
    for mode, f in fits.items():
        body.append([mode, f["time_vs_m"]["exponent"], f["time_vs_m"]["r2"], f["peak_rss_vs_m"]["exponent"],
                     f["compute_rss_vs_m"]["exponent"], f["largest_m"]])
    lines += [C.md_table(["measurement", "time exponent", "R^2", "peak RSS exponent (whole process)",
                          "RSS above baseline exponent", "largest m run"], body), ""]
    lines += ["## Per size", ""]
    body = []
    for r in rows:
        if "error" in r:
            body.append([r.get("m_target"), r.get("m"), r["mode"], None, None, None, None, None, None, r["error"][:80]])
            continue
        extra = ""
        if r["mode"] == "solve":
            extra = f"{r['method']}, {r['iterations']} its, rel.res {r['rel_residual']:.1e}"
        body.append([r.get("m_target"), r["m"], r["mode"], round(r["time_s"] * 1e3, 2), round(r["compile_s"] or 0, 2),
                     round(r["rss_baseline_mib"]), round(r["rss_peak_mib"]),
                     round(r["rss_peak_mib"] - r["rss_baseline_mib"]), r["foreign_cores"], extra])
    lines += [C.md_table(["m target", "m", "measurement", "ms (median)", "compile s", "RSS baseline MiB",
                          "peak RSS MiB", "peak - baseline MiB", "foreign", "note"], body), ""]
    path.write_text("\n".join(lines))


def plot(path: Path, payload: dict) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in payload["rows"] if "time_s" in r]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode, mk in (("step", "o-"), ("step_bcsr", "s--"), ("solve", "^-")):
        pts = sorted((r["m"], r["time_s"], r["rss_peak_mib"], r["rss_peak_mib"] - r["rss_baseline_mib"])
                     for r in rows if r["mode"] == mode)
        if not pts:
            continue
        m, t, rss, extra = zip(*pts)
        e = payload["fits"][mode]["time_vs_m"]["exponent"]
        axes[0].loglog(m, t, mk, label=f"{mode} (m^{e:.2f})" if e else mode)
        axes[1].loglog(m, rss, mk, label=f"{mode}: peak RSS")
        axes[1].loglog(m, np.maximum(extra, 1), mk, alpha=0.4, label=f"{mode}: peak - baseline")
    axes[0].set_xlabel("edges m")
    axes[0].set_ylabel("seconds (median)")
    axes[0].set_title(f"time, n={payload['n']}, K={K}")
    axes[1].set_xlabel("edges m")
    axes[1].set_ylabel("MiB")
    axes[1].set_title("peak resident memory (VmHWM)")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return C.save_figure(fig, path)


def main(argv=None, out=None) -> dict | None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=out)
    ap.add_argument("--max-edges", type=float, default=None, help="largest m to run (default 4e7)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="step", help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=7, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        res = worker(Path(args.worker), args.mode, args.repeats)
        print(json.dumps(C._jsonable(res)))
        return None
    od = C.out_dir(args.out)
    scratch = od / "_scratch" / "scaling"
    t0 = time.time()
    info = C.machine_info()
    n = QUICK_N if args.quick else N_PROTEINS
    sizes = QUICK_EDGES if args.quick else FULL_EDGES
    if args.max_edges:
        sizes = tuple(mm for mm in sizes if mm <= args.max_edges) or sizes[:1]
    rows = []
    for mt in sizes:
        path = scratch / f"m{mt}"
        meta = generate(path, n, mt)
        C.log(f"scaling: m target {mt}: m={meta['m']} generated in {meta['gen_s']:.1f}s")
        for mode in ("step", "solve") if args.quick else ("step", "step_bcsr", "solve"):
            res = run_worker(path, mode, repeats=3 if args.quick else 7, timeout=600 if not args.quick else 120)
            res["m_target"] = mt
            res.setdefault("m", meta["m"])
            rows.append(res)
            C.log(f"scaling:   {mode}: " + (f"{res['time_s'] * 1e3:.1f} ms, peak RSS {res['rss_peak_mib']:.0f} MiB"
                                            if "time_s" in res else res["error"]))
        for f in path.iterdir():
            f.unlink()
        path.rmdir()
    payload = {"benchmark": "scaling", "quick": args.quick, "machine": info, "n": n, "K": K, "alpha": ALPHA,
               "rows": rows}
    payload["fits"] = analyse(rows)
    payload["plots"] = [plot(od / "scaling.png", payload)]
    return C.write_results(od, "scaling", payload, write_markdown, t0)


if __name__ == "__main__":
    main()

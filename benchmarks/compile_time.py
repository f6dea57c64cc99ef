"""End to end, where the time goes: compile vs run time per stage, and what the XLA cache saves.

Each case runs in a FRESH subprocess (``python -m benchmarks.compile_time --worker CASE``), niced and
with XLA's CPU executor single-threaded (``--xla_cpu_multi_thread_eigen=false``), five times:

* ``off``: persistent compilation cache disabled (``JAXCLP_XLA_CACHE=off``);
* ``cache cold``: the cache enabled on an EMPTY directory (compiles and writes it);
* ``cache warm``: a second fresh process on the now populated directory (what a second ``jaxclp run`` sees);
* ``cache cold/warm, min 0 s``: the same with ``jax_persistent_cache_min_compile_time_secs = 0`` instead of
  ``jaxclp run``'s 0.2 s, so the many small op-by-op compilations are cached too (a proposed change).

The cache is switched on exactly as ``jaxclp run`` does (``jaxclp.experiments.cli._enable_xla_cache``: cache dir
``$JAXCLP_XLA_CACHE``, entries for compiles over 0.2 s). Cases:

* ``clp_tiny``: ``jaxclp.CLP().fit(graph, features, ...)`` + ``predict()`` on ``jaxclp.datasets.synthetic(0.2,
  5, num_classes=3, nodes_per_class=50)`` (n = 150, a random 50/25/25 split);
* ``clp_texas``: the same on Texas (published split 0; data from ``$JAXCLP_DATA_URL``, default
  ``file:///work/shared/datasets``);
* ``runner_texas``: ``jaxclp.experiments.runner.run("texas", "medium", ["mlp", "clp_mlp"], runs=2, epochs=500)``.

Stages are attributed by wrapping the library functions the pipeline calls (each wrapper blocks on its
result, so asynchronous dispatch does not move time between stages): ``mlp prior`` (``fit_prior`` /
``fit_mlp_splits``), ``compatibility`` (``estimate_compatibility``), ``operator/solve`` (the rest of
``clp_beliefs``), ``authors propagation`` (``nonlinear_grid``, the nonlinear step of the authors' code; runner's
``clp_mlp`` only), ``selection`` (the validation metric over the alpha grid / ``select`` / test scoring); ``other``
is the rest of the wall time (loading, validation, Python). Compile time is what JAX reports through
``jax.monitoring``
(``/jax/core/compile/jaxpr_trace_duration`` + ``jaxpr_to_mlir_module_duration`` + ``backend_compile_duration``,
the last one being the cache read on a hit); ``run`` = stage wall time - compile time; ``#comp`` = number of
backend compilations (or cache reads) inside the stage. Timings are indicative: the 2-core machine is shared
with other jobs (the load average and the CPU used by other processes are recorded).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import _common as C

CASES = ("clp_tiny", "clp_texas", "runner_texas")
VARIANT_FLAGS = {"default": "", "-O0": "--xla_backend_optimization_level=0"}
QUICK_CASES = ("clp_tiny",)
MODES = ("off", "cache cold", "cache warm", "cache cold, min 0 s", "cache warm, min 0 s")
STAGES = ("mlp prior", "compatibility", "operator/solve", "authors propagation", "selection", "other")
DEFAULT_DATA_URL = "file:///work/shared/datasets"
FINDINGS = """\
* On graphs of Texas' size a fresh process spends nearly all its time compiling: the run time of every stage is
  a fraction of a second. The single largest executables are the MLP training loops (``mlp prior``): one per
  MLP depth in the runner (depths 1, 2, 3 have different parameter shapes, so three executables; the splits are
  ``vmap``-ed, so the split count does not multiply compiles, but a different number of splits to do is a new
  shape and compiles again). ``CLP.fit`` compiles the unbatched loop once. ``compatibility`` shows no compile
  in the runner because ``nonlinear_grid`` (run first by ``clp_mlp``) already compiled ``estimate_compatibility``.
* The rest is dozens of small op-by-op compilations (eager ``jnp`` glue: ``zeros``, ``.at[].set``,
  ``broadcast_in_dim``, reductions) in ``clp_beliefs`` / ``nonlinear_grid`` / the selection, each 20 to 150 ms.
  ``jaxclp run``'s persistent cache keeps only compilations over 0.2 s, so a warm process still pays all of
  them; with a 0 s threshold (``cache warm, min 0 s``) every executable is read back.
* ``lax.map`` over the splits instead of ``vmap`` (the variants table) compiles the runner's MLP loops about a
  third faster, and the unbatched ``fit_mlp`` executable called once per split (``per split``: the executable
  ``CLP.fit`` uses, independent of the number of splits) about 40 % faster, for the same run time (each split stops at its own epoch); priors agree to ~1e-6 (float
  reassociation), best epochs are identical. ``-O0`` (``--xla_backend_optimization_level=0``) cuts compile
  further but makes the training loop 2-3x slower to run, a loss on any graph bigger than Texas.
"""
_COMPILE_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
                   "/jax/core/compile/backend_compile_duration": "backend"}


# --------------------------------------------------------------------------------------------- worker side
class _Recorder:
    """Attributes wall time and JAX compile events to the innermost active stage."""

    def __init__(self):
        self.stack: list[str] = []
        self.wall = collections.defaultdict(float)
        self.compile = collections.defaultdict(float)
        self.parts = collections.defaultdict(lambda: collections.defaultdict(float))
        self.count = collections.defaultdict(int)
        self.cache_hits = collections.defaultdict(int)
        self.functions = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0.0]))

    def on_duration(self, event, secs, **kw):
        part = _COMPILE_EVENTS.get(event)
        if part is None:
            return
        stage = self.stack[-1] if self.stack else "other"
        self.compile[stage] += secs
        self.parts[stage][part] += secs
        if part == "backend":
            self.count[stage] += 1
            f = self.functions[stage][str(kw.get("fun_name", "?"))]
            f[0] += 1
            f[1] += secs

    def on_event(self, event, **kw):
        if event == "/jax/compilation_cache/cache_hits":
            self.cache_hits[self.stack[-1] if self.stack else "other"] += 1

    def wrap(self, stage, fn):
        import jax

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            if self.stack and self.stack[-1] == stage:  # nested call of the same stage
                return fn(*args, **kwargs)
            parent = self.stack[-1] if self.stack else None
            self.stack.append(stage)
            t = time.perf_counter()
            try:
                out = fn(*args, **kwargs)
                jax.tree_util.tree_map(lambda a: a.block_until_ready() if hasattr(a, "block_until_ready") else a,
                                       out)
                return out
            finally:
                dt = time.perf_counter() - t
                self.stack.pop()
                self.wall[stage] += dt
                if parent is not None:  # exclusive times: the parent loses what the child took
                    self.wall[parent] -= dt
        return wrapped


@contextlib.contextmanager
def _patched(targets):
    """Temporarily replaces ``module.attr`` for every ``(module, attr, new)``."""
    old = [(m, a, getattr(m, a)) for m, a, _ in targets]
    for m, a, new in targets:
        setattr(m, a, new)
    try:
        yield
    finally:
        for m, a, v in old:
            setattr(m, a, v)


def _instrument(rec: _Recorder):
    import jaxclp
    import jaxclp.clp as clp_mod
    import jaxclp.estimator as est
    from jaxclp.experiments import candidates, methods as M, runner as R

    beliefs = rec.wrap("operator/solve", clp_mod.clp_beliefs)
    select = rec.wrap("selection", candidates.select)
    return _patched([
        (est, "fit_prior", rec.wrap("mlp prior", est.fit_prior)),
        (R, "fit_mlp_splits", rec.wrap("mlp prior", R.fit_mlp_splits)),
        (clp_mod, "estimate_compatibility", rec.wrap("compatibility", clp_mod.estimate_compatibility)),
        (est, "clp_beliefs", beliefs), (jaxclp, "clp_beliefs", beliefs),
        (est, "validation_scores", rec.wrap("selection", est.validation_scores)),
        (R, "select", select), (R, "score_test", rec.wrap("selection", R.score_test)),
        (R, "reference_scores", rec.wrap("selection", R.reference_scores)),
        (M, "nonlinear_grid", rec.wrap("authors propagation", M.nonlinear_grid)),
    ])


def _data_root_for_url() -> str:
    url = os.environ.get("JAXCLP_DATA_URL", DEFAULT_DATA_URL)
    return url[len("file://"):] if url.startswith("file://") else url


def _case_clp(name: str, epochs: int):
    import jax.numpy as jnp
    import numpy as np

    import jaxclp
    from jaxclp import datasets as D

    if name == "clp_tiny":
        ds = D.synthetic(0.2, 5, num_classes=3, nodes_per_class=50, seed=0)
        rng = np.random.default_rng(0)
        perm = rng.permutation(ds.num_nodes)
        train = np.zeros(ds.num_nodes, bool)
        val = np.zeros(ds.num_nodes, bool)
        train[perm[:75]] = True
        val[perm[75:112]] = True
    else:
        ds = D.load("texas", root=_data_root_for_url(), download=False, cache=False)
        train, val = np.asarray(ds.splits.train[0]), np.asarray(ds.splits.val[0])
    model = jaxclp.CLP(epochs=epochs, num_classes=int(ds.num_classes))  # Texas split 0: a class only in val
    model.fit(ds.graph, np.asarray(ds.features, np.float32), jnp.asarray(np.asarray(ds.labels)), train, val)
    pred = model.predict()
    return {"n": ds.num_nodes, "m": ds.graph.num_edges, "alpha": model.alpha_, "val_score": model.val_score_,
            "pred_classes": int(len(set(pred.tolist())))}


def _case_runner(epochs: int, runs: int):
    from jaxclp.experiments import runner as R

    with tempfile.TemporaryDirectory() as tmp:
        recs = R.run("texas", "medium", ["mlp", "clp_mlp"], runs=runs, out=tmp, epochs=epochs, progress=False,
                     data_root=_data_root_for_url())
    return {"records": len(recs), "test": {r["method"]: r["test"] for r in recs}}


def _mapped_splits(keys, features, labels, train_masks, val_masks, *, num_classes, hidden, dropout, cfg):
    """The candidate cut: :func:`jaxclp.mlp.fit_mlp_splits` with ``lax.map`` over the splits instead of
    ``vmap`` (one unbatched training loop in a scan; each split stops at its own epoch)."""
    import jax

    from jaxclp.mlp import fit_mlp_kernel

    f = functools.partial(fit_mlp_kernel, num_classes=num_classes, hidden=hidden, dropout=dropout, cfg=cfg)
    return jax.lax.map(lambda a: f(a[0], features, a[1], a[2], a[3]), (keys, labels, train_masks, val_masks))


def _vmapped_splits(keys, features, labels, train_masks, val_masks, *, num_classes, hidden, dropout, cfg):
    """:func:`jaxclp.mlp.fit_mlp_splits`' fit without a deadline: :func:`jaxclp.mlp.fit_mlp_kernel` vmapped over the
    splits (the same computation as its one-chunk program)."""
    import jax

    from jaxclp.mlp import fit_mlp_kernel

    f = functools.partial(fit_mlp_kernel, num_classes=num_classes, hidden=hidden, dropout=dropout, cfg=cfg)
    return jax.vmap(f, in_axes=(0, None, 0, 0, 0))(keys, features, labels, train_masks, val_masks)


def mlp_variants(epochs: int, runs: int, depths=(1, 2, 3)) -> dict:
    """The runner's MLP prior fits on Texas (``runs`` splits, every depth), compiled ahead of time three ways:
    ``vmap`` (what :func:`jaxclp.mlp.fit_mlp_splits` does), ``lax.map`` over the splits, and ``per split`` (the
    unbatched :func:`jaxclp.mlp.fit_mlp` executable compiled once, called once per split)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxclp import datasets as D
    from jaxclp.mlp import _fit_mlp_jit
    from jaxclp.train import TrainConfig

    ds = D.load("texas", root=_data_root_for_url(), download=False, cache=False)
    x = jnp.asarray(np.asarray(ds.features, np.float32))
    tr = jnp.asarray(np.asarray(ds.splits.train[:runs]))
    va = jnp.asarray(np.asarray(ds.splits.val[:runs]))
    y = jnp.asarray(np.stack([np.asarray(ds.labels)] * runs))
    keys = jax.random.split(jax.random.key(0), runs)
    cfg = TrainConfig(epochs=epochs)
    mapped = jax.jit(_mapped_splits, static_argnames=("num_classes", "hidden", "dropout", "cfg"))
    vmapped = jax.jit(_vmapped_splits, static_argnames=("num_classes", "hidden", "dropout", "cfg"))
    rows = []
    for d in depths:
        static = dict(num_classes=int(ds.num_classes), hidden=(64,) * d, dropout=0.5, cfg=cfg)
        ref = None
        for name, fn in (("vmap", vmapped), ("lax.map", mapped), ("per split", _fit_mlp_jit)):
            t = time.perf_counter()
            if name == "per split":
                exe = fn.lower(keys[0], x, y[0], tr[0], va[0], **static).compile()
            else:
                exe = fn.lower(keys, x, y, tr, va, **static).compile()
            comp = time.perf_counter() - t
            t = time.perf_counter()
            if name == "per split":
                outs = [exe(keys[i], x, y[i], tr[i], va[i]) for i in range(runs)]
                prior = jax.block_until_ready(jnp.stack([o.prior for o in outs]))
                epochs_run = [int(o.info.epochs_run) for o in outs]
            else:
                out = jax.block_until_ready(exe(keys, x, y, tr, va))
                prior, epochs_run = out.prior, np.asarray(out.info.epochs_run).tolist()
            run_s = time.perf_counter() - t
            ref = prior if ref is None else ref
            rows.append({"depth": d, "variant": name, "compile_s": comp, "run_s": run_s, "epochs_run": epochs_run,
                         "max_abs_prior_diff_vs_vmap": float(jnp.max(jnp.abs(prior - ref)))})
    return {"rows": rows, "xla_flags": os.environ.get("XLA_FLAGS", "")}


def worker(case: str, epochs: int, runs: int) -> dict:
    """Runs one case in this (fresh) process and returns its per-stage times."""
    t_start = time.perf_counter()
    import jax

    jax.config.update("jax_platforms", "cpu")
    from jax import monitoring

    from jaxclp.experiments import cli

    if os.environ.get("JAXCLP_BENCH_CACHE_MIN_S"):  # the proposed cli change: cache small compiles too
        cli.XLA_CACHE_MIN_COMPILE_SECONDS = float(os.environ["JAXCLP_BENCH_CACHE_MIN_S"])
    cli._enable_xla_cache()  # honours JAXCLP_XLA_CACHE (off / a directory), as `jaxclp run`
    rec = _Recorder()
    monitoring.register_event_duration_secs_listener(rec.on_duration)
    monitoring.register_event_listener(rec.on_event)
    import jaxclp  # noqa: F401
    import jaxclp.experiments.runner  # noqa: F401

    t_import = time.perf_counter() - t_start
    if case == "mlp_variants":
        return {"case": case, "import_s": t_import, "loadavg": list(os.getloadavg())} | mlp_variants(epochs, runs)
    with C.CpuMonitor() as mon:
        t0 = time.perf_counter()
        with _instrument(rec):
            facts = _case_runner(epochs, runs) if case == "runner_texas" else _case_clp(case, epochs)
        total = time.perf_counter() - t0
    rec.wall["other"] += total - sum(rec.wall.values())
    stages = {}
    for s in STAGES:
        if s not in rec.wall and s not in rec.compile:
            continue
        comp = rec.compile.get(s, 0.0)
        stages[s] = {"wall_s": rec.wall.get(s, 0.0), "compile_s": comp, "run_s": max(0.0, rec.wall.get(s, 0.0) - comp),
                     "compilations": rec.count.get(s, 0), "cache_hits": rec.cache_hits.get(s, 0),
                     "compile_parts": dict(rec.parts.get(s, {})), "functions": {k: v for k, v in rec.functions.get(s, {}).items()}}
    return {"case": case, "total_s": total, "import_s": t_import, "compile_s": sum(rec.compile.values()),
            "compilations": sum(rec.count.values()), "cache_hits": sum(rec.cache_hits.values()),
            "foreign_cores": round(mon.foreign_cores, 3), "loadavg": list(os.getloadavg()), "stages": stages,
            "facts": facts, "xla_cache": os.environ.get("JAXCLP_XLA_CACHE")}


# --------------------------------------------------------------------------------------------- driver side
def _spawn(case: str, cache: str, epochs: int, runs: int, timeout: float, extra_flags: str = "",
           cache_min_s: float | None = None) -> dict:
    env = dict(os.environ)
    env.pop("JAXCLP_BENCH_CACHE_MIN_S", None)
    if cache_min_s is not None:
        env["JAXCLP_BENCH_CACHE_MIN_S"] = str(cache_min_s)
    env["JAXCLP_XLA_CACHE"] = cache
    env.setdefault("JAXCLP_DATA_URL", DEFAULT_DATA_URL)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false " + extra_flags).strip()
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = ["nice", "-n", "10", sys.executable, "-m", "benchmarks.compile_time", "--worker", case,
           "--epochs", str(epochs), "--runs", str(runs)]
    t = time.perf_counter()
    p = subprocess.run(cmd, env=C.module_env(env), capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        return {"case": case, "error": p.stderr[-2000:], "process_s": wall}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["process_s"] = wall
    return out


def _best(reps: list[dict]) -> dict:
    ok = [r for r in reps if "error" not in r]
    return min(ok, key=lambda r: r["total_s"]) if ok else reps[0]


def measure(cases, repeats: int, epochs: int, runs: int, timeout: float, modes=MODES) -> list[dict]:
    rows = []
    for case in cases:
        got = {}
        for rep in range(repeats):
            with tempfile.TemporaryDirectory(prefix="jaxclp-xla-") as d1, \
                    tempfile.TemporaryDirectory(prefix="jaxclp-xla0-") as d0:
                for mode in modes:
                    cache = "off" if mode == "off" else (d0 if "min 0" in mode else d1)
                    C.log(f"compile_time: {case} [{mode}] repeat {rep + 1}/{repeats}")
                    r = _spawn(case, cache, epochs, runs, timeout, cache_min_s=0.0 if "min 0" in mode else None)
                    if "error" in r:
                        C.log(f"  error: {r['error'][-500:]}")
                    else:
                        C.log(f"  total {r['total_s']:.1f}s, compile {r['compile_s']:.1f}s in {r['compilations']} "
                              f"compilations ({r['cache_hits']} cache hits), process {r['process_s']:.1f}s")
                    got.setdefault(mode, []).append(r)
        rows.append({"case": case, "modes": {m: {"best": _best(v), "repeats": v} for m, v in got.items()}})
    return rows


def write_markdown(path: Path, payload: dict) -> None:
    lines = ["# Compile vs run time per stage", "", C.machine_header_md(payload["machine"]), "",
             (__doc__ or "").split("\n\n", 1)[1].strip(), "",
             f"Command: `{payload['command']}`. Min over {payload['repeats']} repeat(s) (by total time) of "
             f"each fresh process; MLP epochs <= {payload['epochs']}. Seconds.", ""]
    summary = []
    for row in payload["rows"]:
        for mode, v in row["modes"].items():
            b = v["best"]
            if "error" in b:
                summary.append([row["case"], mode, "error", None, None, None, None, None, None])
                continue
            summary.append([row["case"], mode, b["process_s"], b["import_s"], b["total_s"], b["compile_s"],
                            b["total_s"] - b["compile_s"], b["compilations"], b["cache_hits"],
                            b["foreign_cores"]])
    lines += ["## Totals", "", C.md_table(["case", "cache", "process s", "import s", "pipeline s", "compile s",
                                          "run s", "#comp", "cache hits", "foreign cores"], summary), ""]
    for row in payload["rows"]:
        lines += [f"## {row['case']}", ""]
        body = []
        for mode, v in row["modes"].items():
            b = v["best"]
            for s, st in b.get("stages", {}).items():
                body.append([mode, s, st["compile_s"], st["run_s"], st["compilations"], st["cache_hits"]])
        lines += [C.md_table(["cache", "stage", "compile s", "run s", "#comp", "cache hits"], body), ""]
        off = row["modes"].get("off", {}).get("best", {})
        top = sorted(((s, st["compile_s"], st["compilations"], st["functions"])
                      for s, st in off.get("stages", {}).items()), key=lambda t: -t[1])[:2]
        for s, c, n, fns in top:
            names = ", ".join(f"`{k}` x{v[0]} {v[1]:.2f} s" for k, v in sorted(fns.items(), key=lambda kv: -kv[1][1])[:6])
            lines.append(f"- cache off, `{s}`: {c:.1f} s compiling {n} executables ({names}).")
        lines.append("")
    if payload.get("variants"):
        lines += ["## The runner's MLP prior fits compiled three ways (Texas, one process per XLA flag set)", "",
                  " ".join(mlp_variants.__doc__.split()), ""]
        body = []
        for label, v in payload["variants"].items():
            if "error" in v:
                body.append([label, "error", None, None, None, None, None])
                continue
            for r in v["rows"]:
                body.append([label, r["depth"], r["variant"], r["compile_s"], r["run_s"],
                             "/".join(str(e) for e in r["epochs_run"]), r["max_abs_prior_diff_vs_vmap"]])
        lines += [C.md_table(["XLA flags", "depth", "variant", "compile s", "run s", "epochs per split",
                              "max abs prior diff vs vmap"], body), ""]
        for label, v in payload["variants"].items():
            if "error" not in v:
                tot = collections.defaultdict(lambda: [0.0, 0.0])
                for r in v["rows"]:
                    tot[r["variant"]][0] += r["compile_s"]
                    tot[r["variant"]][1] += r["run_s"]
                lines.append(f"- {label}: all depths, compile + run: " + "; ".join(
                    f"{k} {c:.1f} + {r:.1f} s" for k, (c, r) in tot.items()) + ".")
        lines.append("")
    lines += ["## What dominates and what cuts it", "", FINDINGS, ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict | None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compile_time", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="tiny graph only, 30 epochs, one repeat, cache cold + warm only, no MLP variants")
    ap.add_argument("--out", default=out)
    ap.add_argument("--cases", nargs="*", default=None, choices=CASES)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--worker", default=None, choices=CASES + ("mlp_variants",), help=argparse.SUPPRESS)
    ap.add_argument("--no-variants", action="store_true", help="skip the MLP compile variants (vmap / lax.map)")
    args = ap.parse_args(argv)
    epochs = args.epochs or (30 if args.quick else 500)
    if args.worker:
        print(json.dumps(C._jsonable(worker(args.worker, epochs, args.runs))))
        return None
    od = C.out_dir(args.out)
    t0 = time.time()
    cases = args.cases or (QUICK_CASES if args.quick else CASES)
    repeats = args.repeats or (1 if args.quick else 2)
    payload = {"benchmark": "compile_time", "quick": args.quick, "machine": C.machine_info(),
               "command": " ".join(["python -m benchmarks.compile_time"]
                                   + list(argv if argv is not None else sys.argv[1:])),
               "repeats": repeats, "epochs": epochs, "runs": args.runs}
    modes = MODES[1:3] if args.quick else MODES  # quick: the cache's cold and warm processes only
    payload["rows"] = measure(cases, repeats, epochs, args.runs, args.timeout, modes)
    if not args.quick and not args.no_variants:
        payload["variants"] = {}
        for label, flags in VARIANT_FLAGS.items():
            C.log(f"compile_time: MLP variants, XLA flags {label}")
            payload["variants"][label] = _spawn("mlp_variants", "off", epochs, args.runs, args.timeout, flags)
    payload["errors"] = [r["case"] for r in payload["rows"] for v in r["modes"].values() if "error" in v["best"]]
    name = "compile_time_quick" if args.quick and args.out is None else "compile_time"
    return C.write_results(od, name, payload, write_markdown, t0)


if __name__ == "__main__":
    main()

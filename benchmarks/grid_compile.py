"""Compile and run time of the tuned GNN grid programs (``jaxclp.gnn.grid``), one fresh process per case.

    python -m benchmarks.grid_compile [--graphs user900 texas] [--priors gcn_tuned sage_tuned]
                                      [--label after] [--src DIR]

Each case (graph x tuned prior x deadline or none) runs in a FRESH subprocess with the persistent compilation
cache off (``JAXCLP_XLA_CACHE=off``): ``jaxclp.priors.fit_prior(prior, ...)`` on split 0 (the published split
of a registry graph, else a seeded 48/32/20 random split) with the default :class:`jaxclp.train.TrainConfig`
(500 epochs, patience 50), then the same call again (every program compiled). Reported:

* per grid program (``_grid_chunk_jit``, with and without a deadline; results committed before it replaced them
  name ``_grid_kernel``, ``_grid_start_jit``, ``_grid_until_jit`` and ``_grid_outcome_jit``): compile seconds = tracing + lowering to MLIR + XLA's backend compile, from
  JAX's compile events (``jax.monitoring``) attributed by function name;
* ``compile`` = every compile event of the first call (the grid programs and the small ones around them);
* ``ms/epoch`` = the second call's wall time / the epochs the specs ran (sum of ``epochs_run``);
* the result: chosen spec (depth, residual), its validation score, test accuracy of the prior's argmax, the
  epochs of every spec, and a digest of the prior (``label`` rows of the JSON are compared field by field).

"Under a deadline" is ``deadline = now + 10^6 s``: the grid trains in rounds (``jaxclp.train.next_chunk``) with
the same program, and ends with the results it gives without one (bit for bit).

``--label`` names the row set (``before`` / ``after``); ``--src DIR`` runs the workers on another copy of the
library (``DIR`` put first on ``PYTHONPATH``, e.g. ``git archive HEAD src | tar -x -C /tmp/head``), so the
committed result holds both implementations measured the same way on the same machine. Rows of other labels
already in ``benchmarks/results/grid_compile.json`` are kept. The machine is shared: the load and the CPU used
by other processes are recorded per case.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import _common as C

NAME = "grid_compile"
GRAPHS = {"user900": "/tmp/c69/user900.npz", "texas": "texas"}
PRIORS = ("gcn_tuned", "sage_tuned")
MODES = ("none", "deadline")
_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
           "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
           "/jax/core/compile/backend_compile_duration": "backend"}
GRID_PROGRAMS = ("_grid_chunk_jit",)
FINDINGS = """\
Findings (issue 69, "compile once"; labels: `before` = the committed grid, HEAD c7ab810; `scan` = the blocks of
`_grid_logits` as one `lax.scan` over the block index, parameters stacked inside the program, the `i < depth`
`lax.cond` inside the scan body; `noinit` = `_grid_until_jit` / `_grid_outcome_jit` without the dead union
initialization; both variants were run from patched copies of HEAD's `src` via `--src` and are NOT adopted):

* The five unrolled blocks are not where the grid's compile time goes. The scan compiles the block once (its
  HLO no longer grows with depth), yet the grid programs compile in the same time: `_grid_kernel` 5.8 vs 5.7 CPU s
  (gcn_tuned), 5.9 vs 6.0 (sage_tuned); under a deadline `_grid_until_jit` ~4.5-5.3 CPU s either way. Ad hoc
  (user900, gcn, `_fit_grid_jit.lower(...).compile()` of one union): depth 1 3.9 s, depth 5 4.5 s with the
  unrolled loop (4.8 s scanned), i.e. all five block copies together are <= ~0.7 s of a ~4-5 s program; the rest
  is depth-independent: the union's in-program initialization (~1.5-2 s compiled alone: a rolled Threefry
  `while` per initializer, 24 loops after inlining), the forward/backward around the blocks, Adam and the
  training loop.
* The scan made training slower: process CPU ms/epoch 7.3 -> 10.0 (gcn_tuned), and wall ms/epoch
  7.4 -> 9.2 / 7.3 -> 11.6 (gcn, none / deadline), 7.4 -> 10.9 (sage, none), on the shared machine.
* Results: the scan's chosen spec, epochs of every spec and validation/test scores equal the committed grid's
  (user900, both priors, with and without a deadline); priors within 2.6e-6 (the chosen specs), one sage spec
  not chosen within 8.6e-3 (round-off over ~110 epochs of training). `noinit`: priors bit for bit.
* Dropping the dead initialization from the resuming programs (`noinit`) saves nothing measurable either
  (`_grid_until_jit` 4.85 vs 4.85 CPU s gcn, 5.34 vs 5.08 sage; XLA removes it early).
* Wall seconds here are inflated by other jobs (foreign cores up to 1.46 of 2): read the AOT CPU seconds. The
  `deadline` rows of `before` are from the second command (run beside `noinit`); the `scan` deadline rows were run
  beside a `before` run of the first command (AOT CPU 6.08 s gcn_tuned, 6.62 s sage_tuned; 7.3 / 13.3 ms/epoch
  wall), whose rows the second replaced. Not measured for lack of time: texas, gat_tuned."""


def _load(graph: str):
    import numpy as np

    import jaxclp
    from jaxclp.datasets import random_splits
    from jaxclp.datasets.files import load_file

    path = GRAPHS.get(graph, graph)
    ds = load_file(path) if path.endswith(".npz") else jaxclp.datasets.load(path)
    if ds.splits is not None:
        tr, va, te = (np.asarray(m[0]) for m in (ds.splits.train, ds.splits.val, ds.splits.test))
    else:
        sp = random_splits(ds.graph.num_nodes, "dense", 1, seed=0, labelled=ds.labels >= 0)
        tr, va, te = sp.train[0], sp.val[0], sp.test[0]
    return ds, tr, va, te


def worker(graph: str, prior: str, mode: str, prior_dir: str | None = None) -> dict:
    import jax
    import numpy as np

    from jaxclp import gnn
    from jaxclp import priors as P
    from jaxclp.train import TrainConfig

    ds, tr, va, te = _load(graph)
    labels = np.where(tr | va, ds.labels, -1).astype(np.int32)
    events: dict = collections.defaultdict(float)
    per_fun: dict = collections.defaultdict(lambda: collections.defaultdict(float))
    counts: dict = collections.defaultdict(int)

    def on_duration(event, secs, **kw):
        part = _EVENTS.get(event)
        if part is None:
            return
        events[part] += secs
        name = str(kw.get("fun_name", "?"))
        name = name[4:-1] if name.startswith("jit(") and name.endswith(")") else name
        per_fun[name][part] += secs
        if part == "backend":
            counts[name] += 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    cfg = TrainConfig(metric=ds.metric)
    fits = []
    fit_gnn_grid = gnn.fit_gnn_grid

    def recording(*a, **k):  # every spec's result, as tuned_gnn_prior gets them
        fits[:] = fit_gnn_grid(*a, **k)
        return list(fits)

    gnn.fit_gnn_grid = recording
    from jaxclp.gnn import grid as G

    calls = {}
    for attr, name in (("_grid_chunk_jit", "_grid_chunk_jit"),):
        def spy(*a, _orig=getattr(G, attr), _name=name, **k):  # the first call's arguments, for the AOT compile
            calls.setdefault(_name, (_orig, a, k))
            return _orig(*a, **k)

        setattr(G, attr, spy)

    def fit():
        deadline = None if mode == "none" else time.perf_counter() + 1e6
        r = P.fit_prior(prior, jax.random.key(0), ds.graph, ds.features, labels, tr, va, ds.num_classes, cfg,
                        deadline=deadline)
        return jax.block_until_ready(r)

    t = time.perf_counter()
    with C.CpuMonitor() as mon1:
        first = fit()
    first_s = time.perf_counter() - t
    compile_first = dict(events)
    grid = {k: dict(v, n=counts[k], total=sum(v.values())) for k, v in per_fun.items() if k in GRID_PROGRAMS}
    events.clear()
    t, c = time.perf_counter(), time.process_time()
    with C.CpuMonitor() as mon2:
        second = fit()
    second_s, second_cpu = time.perf_counter() - t, time.process_time() - c
    aot = {}
    for name, (jitted, a, k) in sorted(calls.items()):  # each program alone: trace + lower, then XLA compile
        jax.clear_caches()
        t, c = time.perf_counter(), time.process_time()
        lowered = jitted.lower(*a, **k)
        t1, c1 = time.perf_counter(), time.process_time()
        lowered.compile()
        t2, c2 = time.perf_counter(), time.process_time()
        aot[name] = dict(lower_wall=t1 - t, lower_cpu=c1 - c, compile_wall=t2 - t1, compile_cpu=c2 - c1,
                         wall=t2 - t, cpu=c2 - c)
    prior_np = np.asarray(first.prior, np.float64)
    epochs = [int(f.info.epochs_run) for f in fits]
    spec_val = [float(f.info.best_val_metric) for f in fits]
    if prior_dir:
        Path(prior_dir).mkdir(parents=True, exist_ok=True)
        np.savez(Path(prior_dir) / f"{graph}_{prior}_{mode}.npz", prior=np.asarray(first.prior),
                 **{f"spec{i}": np.asarray(f.prior) for i, f in enumerate(fits)})
    return dict(
        graph=graph, prior=prior, mode=mode,
        compile_s=sum(compile_first.values()), compile_parts=compile_first, grid_programs=grid,
        grid_compile_s=sum(v["total"] for v in grid.values()),
        aot=aot, aot_wall_s=sum(v["wall"] for v in aot.values()), aot_cpu_s=sum(v["cpu"] for v in aot.values()),
        first_call_s=first_s, second_call_s=second_s, second_call_cpu_s=second_cpu, second_call_compile_s=sum(events.values()),
        foreign_cores_first=round(mon1.foreign_cores, 3), foreign_cores_second=round(mon2.foreign_cores, 3),
        choice=[int(first.choice.num_layers), bool(first.choice.residual)],
        val=float(first.val_score),
        test=float(np.mean(prior_np.argmax(1)[te] == ds.labels[te])),
        epochs=epochs, spec_val=spec_val,
        prior_sha=hashlib.sha256(np.asarray(first.prior).tobytes()).hexdigest()[:16],
        same_twice=bool(np.array_equal(np.asarray(first.prior), np.asarray(second.prior))),
    )


# ----------------------------------------------------------------------------------------- driver
def _run_case(graph, prior, mode, src, prior_dir) -> dict:
    env = C.module_env()
    if src:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(src).resolve()), env["PYTHONPATH"]])
    env["JAXCLP_XLA_CACHE"] = "off"
    env.setdefault("JAXCLP_DATA_URL", "file:///work/shared/datasets")
    cmd = [sys.executable, "-m", f"benchmarks.{NAME}", "--worker", graph, prior, mode]
    if prior_dir:
        cmd += ["--prior-dir", str(prior_dir)]
    load = os.getloadavg()[0]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=C.REPO)
    if out.returncode:
        raise RuntimeError(f"worker {graph} {prior} {mode} failed:\n{out.stderr[-4000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["loadavg"] = round(load, 2)
    return row


def _epoch_ms(r):
    return 1e3 * r["second_call_s"] / max(1, sum(r["epochs"]))


def _markdown(info, commands, rows) -> str:
    by = collections.defaultdict(dict)
    for r in rows:
        by[(r["graph"], r["prior"], r["mode"])][r["label"]] = r
    labels = sorted({r["label"] for r in rows}, key=lambda s: (s != "before", s))
    lines = [f"# Tuned GNN grid programs: compile and run time ({NAME})", ""]
    lines += [f"Command: `{c}`" for c in commands]
    lines += ["", C.machine_header_md(info), "", FINDINGS, "",
             "Fresh process per case, persistent cache off; compile = trace + lower + XLA backend (JAX's compile "
             "events); `grid` = the grid programs only (per program in the JSON); ms/epoch = second call's wall "
             "/ epochs run (all specs). `deadline`: the grid in rounds under a far deadline (3 programs). AOT: the "
             "grid programs compiled again alone after `jax.clear_caches()` (`jitted.lower(...).compile()`), wall "
             "and process CPU seconds (CPU time is less sensitive to the other jobs on the shared machine).", ""]
    head = ["graph", "prior", "deadline"]
    for lab in labels:
        head += [f"grid compile s ({lab})", f"AOT wall / CPU s ({lab})", f"all compile s ({lab})",
                 f"ms/epoch ({lab})"]
    head += ["same result"]
    table = []
    for (g, p, m), d in sorted(by.items()):
        row = [g, p, m]
        for lab in labels:
            r = d.get(lab)
            row += [None] * 4 if r is None else [round(r["grid_compile_s"], 2),
                                                 f"{r['aot_wall_s']:.2f} / {r['aot_cpu_s']:.2f}",
                                                 round(r["compile_s"], 2), round(_epoch_ms(r), 2)]
        keys = ("choice", "val", "test", "epochs")
        rs = [d[lab] for lab in labels if lab in d]
        same = all(all(r[k] == rs[0][k] for k in keys) for r in rs) if len(rs) > 1 else None
        row.append(None if same is None else ("yes" if same else "NO"))
        table.append(row)
    lines.append(C.md_table(head, table))
    lines += ["", "Per program (compile s = trace + lower + backend; n = backend compilations):", ""]
    prog_rows = []
    for (g, p, m), d in sorted(by.items()):
        for lab in labels:
            r = d.get(lab)
            if r is None:
                continue
            for name, v in sorted(r["grid_programs"].items()):
                aot = r.get("aot", {}).get(name, {})
                prog_rows.append([g, p, m, lab, name, v["n"], round(v.get("trace", 0), 2),
                                  round(v.get("lower", 0), 2), round(v.get("backend", 0), 2), round(v["total"], 2),
                                  round(aot.get("wall", 0), 2), round(aot.get("cpu", 0), 2)])
    lines.append(C.md_table(["graph", "prior", "deadline", "label", "program", "n", "trace s", "lower s",
                             "backend s", "total s", "AOT wall s", "AOT CPU s"], prog_rows))
    lines += ["", "Results (chosen depth/residual, validation score, test accuracy, epochs per spec):", ""]
    res_rows = []
    for (g, p, m), d in sorted(by.items()):
        for lab in labels:
            r = d.get(lab)
            if r is not None:
                res_rows.append([g, p, m, lab, str(r["choice"]), round(r["val"], 4), round(r["test"], 4),
                                 " ".join(map(str, r["epochs"])), r["prior_sha"], r["foreign_cores_first"]])
    lines.append(C.md_table(["graph", "prior", "deadline", "label", "choice", "val", "test", "epochs",
                             "prior sha", "foreign cores"], res_rows))
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", nargs=3, metavar=("GRAPH", "PRIOR", "MODE"))
    ap.add_argument("--prior-dir", default=None, help="save every case's priors there (npz) to compare runs")
    ap.add_argument("--graphs", nargs="+", default=list(GRAPHS))
    ap.add_argument("--priors", nargs="+", default=list(PRIORS))
    ap.add_argument("--modes", nargs="+", default=list(MODES))
    ap.add_argument("--label", nargs="+", default=["after"],
                    help="row labels; several: each case runs once per label, interleaved")
    ap.add_argument("--src", nargs="+", default=None,
                    help="one jaxclp source folder (holding jaxclp/) per label for the workers; '-': the clone's")
    ap.add_argument("--out", default=None, help="result folder (default benchmarks/results)")
    args = ap.parse_args(argv)
    if args.worker:
        row = worker(*args.worker, prior_dir=args.prior_dir)
        print(json.dumps(C._jsonable(row)))
        return 0
    srcs = args.src or ["-"] * len(args.label)
    if len(srcs) != len(args.label):
        ap.error("--src takes one folder per --label")
    info = C.machine_info()
    out = C.out_dir(args.out)
    dest = out / f"{NAME}.json"
    old = C.load_json(dest) or {}
    rows = old.get("rows", [])
    commands = list(old.get("commands", []))
    commands.append("python -m benchmarks.grid_compile " + " ".join(argv if argv is not None else sys.argv[1:]))
    for g in args.graphs:
        for p in args.priors:
            for m in args.modes:
                for label, src in zip(args.label, srcs):
                    C.log(f"{label}: {g} {p} {m}")
                    pdir = None if args.prior_dir is None else Path(args.prior_dir) / label
                    r = _run_case(g, p, m, None if src == "-" else src, pdir)
                    r["label"] = label
                    rows = [x for x in rows if (x["graph"], x["prior"], x["mode"], x["label"]) != (g, p, m, label)]
                    rows.append(r)
                    C.log(f"  grid compile {r['grid_compile_s']:.2f}s (AOT wall {r['aot_wall_s']:.2f}s cpu "
                          f"{r['aot_cpu_s']:.2f}s) all {r['compile_s']:.2f}s {_epoch_ms(r):.2f} ms/epoch "
                          f"choice {r['choice']} val {r['val']:.4f} foreign {r['foreign_cores_first']}")
                    C.save_json(dest, dict(commands=commands, machine=info, rows=rows))
    md = _markdown(info, commands, rows)
    dest.with_suffix(".md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Dropout masks on CPU: jaxclp's Threefry-2x32 lowering (:mod:`jaxclp._rng`: unrolled for large arrays, rolled
for small ones) vs JAX's rolled one.

jaxclp's lowering is that of its own key type (:func:`jaxclp._rng.fast_key`, which the trainers use and the
draws below call; ``JAXCLP_ROLLED_THREEFRY=1`` makes it return the key unchanged, i.e. JAX's), so every
measurement runs in a child process per mode; children alternate (jaxclp, rolled, jaxclp, rolled, ...), each
pair under the same background load, and every child reports the SHA-256 of the random bits it drew, so the
benchmark also checks that both lowerings give the same bits.

* ``masks``: 12 dropout masks of 18333 x 64 (a 4-block GNN step on Coauthor-CS draws this many) from one jitted
  function, ``jax.random.bernoulli(key_i, 0.5, shape)``; median (min) of the timed calls, compile excluded.
* ``compile``: compile time of one jitted function drawing 64 sequential ``jax.random.split`` +
  ``uniform`` calls (the cost side: an unrolled hash is a larger program; jaxclp unrolls only call sites of at least
  ``UNROLL_MIN_SIZE`` counter pairs, so these small draws stay rolled).
* ``fit``: one :func:`jaxclp.fit_mlp` (the paper's MLP, hidden 64, dropout 0.5, <= 500 epochs, early stopping)
  on split 0 of the medium protocol of each dataset, compile excluded; its test accuracy (identical bits ->
  identical fit).

Usage: ``python -m benchmarks.rng [--quick] [--out DIR]`` (also ``python -m benchmarks.run rng``).
Data: ``$JAXCLP_DATA`` (default ``../shared/datasets``); ``fit`` is skipped for datasets not found there.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks import _common as C

REPO = C.REPO
MODES = ("jaxclp", "rolled")
FULL = {"mask_shape": (18333, 64), "masks": 12, "repeats": 7, "compile_draws": 64, "fit_datasets": ("texas", "coauthor-cs"),
        "fit_repeats": 2, "pairs": 3}
QUICK = {"mask_shape": (512, 16), "masks": 2, "repeats": 2, "compile_draws": 4, "fit_datasets": ("texas",),
         "fit_repeats": 1, "pairs": 1}


# ------------------------------------------------------------------------------------------------ child side
def _child(cfg: dict) -> dict:
    """Runs in a fresh process whose lowering was fixed by the environment; returns timings and bit hashes."""
    import hashlib
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxclp
    from jaxclp import _rng

    out = {"lowering": _rng.status()}
    shape, count = tuple(cfg["mask_shape"]), cfg["masks"]

    @jax.jit
    def masks(key):
        return jnp.stack([jax.random.bernoulli(_rng.fast_key(k), 0.5, shape) for k in jax.random.split(key, count)])

    t, m = C.time_call(lambda: masks(jax.random.PRNGKey(0)), repeats=cfg["repeats"])
    out["masks"] = {"median_s": t.median, "min_s": t.min, "first_s": t.first_call, "foreign_cores": t.foreign_cores,
                    "sha256": hashlib.sha256(np.asarray(m).tobytes()).hexdigest()}

    def draws(key):
        acc = jnp.zeros(())
        for _ in range(cfg["compile_draws"]):
            key, sub = jax.random.split(key)
            acc = acc + jax.random.uniform(_rng.fast_key(sub), ())
        return acc

    t0 = time.perf_counter()
    compiled = jax.jit(draws).lower(jax.random.PRNGKey(0)).compile()
    out["compile"] = {"seconds": time.perf_counter() - t0,
                      "sha256": hashlib.sha256(np.asarray(compiled(jax.random.PRNGKey(0))).tobytes()).hexdigest()}

    out["fit"] = []
    for dataset in cfg["fit_datasets"]:
        try:
            ds = jaxclp.datasets.load(dataset, root=C.data_root(), download=False, cache=False)
        except Exception as e:  # noqa: BLE001 - absent data: skip this dataset, say why
            out["fit"].append({"dataset": dataset, "skipped": f"{type(e).__name__}: {e}"})
            continue
        from jaxclp.experiments.runner import get_splits
        from jaxclp.features import as_features

        sp = get_splits(ds, "medium", 1, seed=0)
        train, val, test = (jnp.asarray(a[0]) for a in (sp.train, sp.val, sp.test))
        labels = jnp.asarray(np.maximum(ds.labels, 0))
        x = as_features(ds.features, "float32")
        call = lambda: jaxclp.fit_mlp(jax.random.PRNGKey(0), x, labels, train, val,  # noqa: E731
                                      num_classes=ds.num_classes)
        t, res = C.time_call(call, repeats=cfg["fit_repeats"], warmup=1, min_repeats=1)
        prior = np.asarray(res.prior)
        pred = prior.argmax(1)
        out["fit"].append({"dataset": dataset, "median_s": t.median, "min_s": t.min, "first_s": t.first_call,
                           "foreign_cores": t.foreign_cores,
                           "test_acc": float(np.mean(pred[np.asarray(test)] == np.asarray(labels)[np.asarray(test)])),
                           "sha256": hashlib.sha256(prior.tobytes()).hexdigest()})
    return out


def _spawn(mode: str, cfg: dict) -> dict:
    env = dict(os.environ)
    env.pop("JAXCLP_ROLLED_THREEFRY", None)
    if mode == "rolled":
        env["JAXCLP_ROLLED_THREEFRY"] = "1"
    env.setdefault("JAX_PLATFORMS", "cpu")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.rng", "--child", json.dumps(cfg)],
                          env=env, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"rng benchmark child ({mode}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------------- parent side
def measure(cfg) -> dict:
    """Alternating children, ``pairs`` per mode; per quantity the median (min) over children of their medians."""
    runs = {m: [] for m in MODES}
    for i in range(cfg["pairs"]):
        for mode in MODES:
            runs[mode].append(_spawn(mode, cfg))
            C.log(f"rng pair {i} {mode}: masks {runs[mode][-1]['masks']['median_s'] * 1e3:.1f} ms, "
                  f"compile {runs[mode][-1]['compile']['seconds']:.2f} s ({runs[mode][-1]['lowering']})")
    res = {"children": runs, "modes": {}}
    for mode in MODES:
        rs = runs[mode]
        res["modes"][mode] = {
            "lowering": rs[0]["lowering"],
            "masks_median_s": statistics.median(r["masks"]["median_s"] for r in rs),
            "masks_min_s": min(r["masks"]["min_s"] for r in rs),
            "compile_median_s": statistics.median(r["compile"]["seconds"] for r in rs),
            "compile_min_s": min(r["compile"]["seconds"] for r in rs),
            "foreign_cores": statistics.median(r["masks"]["foreign_cores"] for r in rs),
            "fit": [{"dataset": f["dataset"],
                     **({"skipped": f["skipped"]} if "skipped" in f else {
                         "median_s": statistics.median(r["fit"][j]["median_s"] for r in rs),
                         "min_s": min(r["fit"][j]["min_s"] for r in rs),
                         "first_s": statistics.median(r["fit"][j]["first_s"] for r in rs),
                         "test_acc": f["test_acc"],
                         "foreign_cores": statistics.median(r["fit"][j]["foreign_cores"] for r in rs)})}
                    for j, f in enumerate(rs[0]["fit"])],
        }
    hashes = lambda key: {r[key]["sha256"] for m in MODES for r in runs[m]}  # noqa: E731
    res["same_bits"] = {"masks": len(hashes("masks")) == 1, "compile": len(hashes("compile")) == 1,
                        "fit": all(len({r["fit"][j].get("sha256") for m in MODES for r in runs[m]}) == 1
                                   for j in range(len(runs[MODES[0]][0]["fit"])))}
    return res


def write_markdown(path: Path, payload: dict) -> None:
    r, cfg = payload["measure"], payload["config"]
    u, o = r["modes"]["jaxclp"], r["modes"]["rolled"]
    ms = lambda s: f"{s * 1e3:.1f}"  # noqa: E731
    shape = " x ".join(map(str, cfg["mask_shape"]))
    rows = [[f"{cfg['masks']} dropout masks of {shape} (ms)", f"{ms(o['masks_median_s'])} ({ms(o['masks_min_s'])})",
             f"{ms(u['masks_median_s'])} ({ms(u['masks_min_s'])})", f"{o['masks_median_s'] / u['masks_median_s']:.1f}x",
             f"{o['foreign_cores']:.1f} / {u['foreign_cores']:.1f}"],
            [f"compile {cfg['compile_draws']} sequential split + uniform (s)",
             f"{o['compile_median_s']:.2f} ({o['compile_min_s']:.2f})",
             f"{u['compile_median_s']:.2f} ({u['compile_min_s']:.2f})",
             f"{o['compile_median_s'] / u['compile_median_s']:.2f}x", "–"]]
    for fo, fu in zip(o["fit"], u["fit"]):
        if "skipped" in fo:
            continue
        rows.append([f"`fit_mlp` on {fo['dataset']} (s; test acc {fu['test_acc']:.4f})",
                     f"{fo['median_s']:.2f} ({fo['min_s']:.2f})", f"{fu['median_s']:.2f} ({fu['min_s']:.2f})",
                     f"{fo['median_s'] / fu['median_s']:.1f}x",
                     f"{fo['foreign_cores']:.1f} / {fu['foreign_cores']:.1f}"])
        rows.append(["its first call (s: trace + compile + one fit)", f"{fo['first_s']:.2f}", f"{fu['first_s']:.2f}",
                     f"{fo['first_s'] / fu['first_s']:.2f}x", "–"])
    same = r["same_bits"]
    lines = ["# Dropout masks on CPU: jaxclp's vs JAX's rolled Threefry lowering (`python -m benchmarks.rng`)",
             "", C.machine_header_md(payload["machine"]), "",
             f"{cfg['pairs']} child process(es) per lowering, alternating; each cell: median over children of each "
             "child's median (min over all timed calls); rolled = `JAXCLP_ROLLED_THREEFRY=1` (JAX's own lowering), "
             "jaxclp = the default (unrolled from `UNROLL_MIN_SIZE` counter pairs, rolled below); speed-up = rolled / "
             "jaxclp (below 1: jaxclp's is slower); `foreign` = CPU cores used by other processes meanwhile "
             "(rolled / jaxclp).", "",
             C.md_table(["measurement", "rolled (JAX)", "jaxclp", "speed-up", "foreign"], rows), "",
             f"Same random bits in every child: masks {same['masks']}, compiled draws {same['compile']}, "
             f"fitted priors {same['fit']}.", ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--child"]:
        print(json.dumps(_child(json.loads(argv[1]))))
        return {}
    return C.sections_main("rng", __doc__, {"measure": measure}, FULL, QUICK, write_markdown, argv, out)


if __name__ == "__main__":
    main()

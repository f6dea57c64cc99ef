"""bfloat16 matrix products on XLA:CPU against float32, at the shapes jaxclp's trained priors multiply.

Issue 69 asked whether bf16 matmuls pay on CPUs that have them (``avx512_bf16`` on this project's machines) at equal
accuracy. Before any accuracy question: are they faster? Each case times, warm and in one process, a jitted product
``tanh(x @ w)`` of an (n, d) block by a (d, h) weight (a layer of the MLP / GNN priors: n nodes, d input features or
hidden units, h hidden units) in float32, with bfloat16 operands cast inside the program (``preferred_element_type``
float32: accumulation in float32), with operands stored in bfloat16, and the gradient with respect to ``w`` of
``sum(tanh(x @ w) ** 2)`` (a training step's backward product) in float32 and with bfloat16 operands.

``python -m benchmarks.bf16_matmul``: minimum and median over repeats of each, and the ratio bf16 / float32 (below 1:
bfloat16 faster). Results: ``benchmarks/results/bf16_matmul.{json,md}``.
"""

from __future__ import annotations

import statistics
import time

from benchmarks import _common as C

SHAPES = ((300, 64, 64), (2000, 64, 64), (10000, 300, 64), (10000, 2048, 64), (50000, 128, 256))
"""(n, d, h): small and medium graphs at the tuned GNNs' hidden width 64; a feature-rich input projection (Wiki:
2,405 x 4,973 features; here 10k x 2,048); an arxiv-sized hidden layer of width 256."""
REPEATS = 30
KINDS = ("float32", "bf16 cast", "bf16 stored", "grad float32", "grad bf16")


def _time(f, *args, repeats: int) -> list[float]:
    import jax

    jax.block_until_ready(f(*args))  # compiles
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        out.append(time.perf_counter() - t)
    return out


def measure(shapes=SHAPES, repeats: int = REPEATS) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    bf = jnp.bfloat16
    product = jax.jit(lambda x, w: jnp.tanh(x @ w))
    cast = jax.jit(lambda x, w: jnp.tanh(jnp.dot(x.astype(bf), w.astype(bf), preferred_element_type=jnp.float32)))
    stored = jax.jit(lambda x, w: jnp.tanh(jnp.dot(x, w, preferred_element_type=jnp.float32)))

    def loss(w, x, low):
        x, w = (x.astype(bf), w.astype(bf)) if low else (x, w)
        return jnp.sum(jnp.tanh(jnp.dot(x, w, preferred_element_type=jnp.float32)) ** 2)

    grad32 = jax.jit(jax.grad(lambda w, x: loss(w, x, False)))
    grad16 = jax.jit(jax.grad(lambda w, x: loss(w, x, True)))
    rows = []
    for n, d, h in shapes:
        kx, kw = jax.random.split(jax.random.key(0))
        x = jax.random.normal(kx, (n, d), jnp.float32)
        w = jax.random.normal(kw, (d, h), jnp.float32) / np.sqrt(d)
        C.log(f"[bf16_matmul] n={n} d={d} h={h}")
        times = dict(zip(KINDS, (_time(product, x, w, repeats=repeats), _time(cast, x, w, repeats=repeats),
                                 _time(stored, x.astype(bf), w.astype(bf), repeats=repeats),
                                 _time(grad32, w, x, repeats=repeats), _time(grad16, w, x, repeats=repeats))))
        exact = np.asarray(product(x, w), np.float64)
        err = float(np.max(np.abs(np.asarray(cast(x, w), np.float64) - exact)))
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append(dict(n=n, d=d, h=h, seconds=times, max_abs_diff_bf16=err,
                         ratio_cast=med["bf16 cast"] / med["float32"], ratio_stored=med["bf16 stored"] / med["float32"],
                         ratio_grad=med["grad bf16"] / med["grad float32"]))
    return rows


def markdown(payload: dict) -> str:
    med = lambda r, k: statistics.median(r["seconds"][k])
    low = lambda r, k: min(r["seconds"][k])
    lines = ["# bfloat16 matrix products on XLA:CPU", "", f"Command: `{payload['command']}`", "",
             C.machine_header_md(payload["machine"]), "",
             f"Warm, one process, {payload['repeats']} calls each (module docstring). Milliseconds: minimum (median). "
             "`ratio` = bf16 / float32 of the medians (below 1: bfloat16 faster); `max |diff|` = the bf16-cast "
             "product's largest difference from float32's on tanh's (-1, 1) scale.", "",
             C.md_table(["n", "d", "h", "float32 ms", "bf16 cast ms", "bf16 stored ms", "ratio cast / stored",
                         "grad float32 ms", "grad bf16 ms", "ratio grad", "max |diff|"],
                        [[r["n"], r["d"], r["h"]]
                         + [f"{1e3 * low(r, k):.3f} ({1e3 * med(r, k):.3f})" for k in KINDS[:3]]
                         + [f"{r['ratio_cast']:.2f} / {r['ratio_stored']:.2f}"]
                         + [f"{1e3 * low(r, k):.3f} ({1e3 * med(r, k):.3f})" for k in KINDS[3:]]
                         + [f"{r['ratio_grad']:.2f}", f"{r['max_abs_diff_bf16']:.1g}"]
                         for r in payload["rows"]]), ""]
    slower = sum(r["ratio_stored"] >= 1.0 for r in payload["rows"])
    has = "avx512_bf16" in payload["machine"].get("cpu_flags", [])
    lines.append(f"bfloat16 operands are not faster than float32 in {slower} of {len(payload['rows'])} shapes (stored "
                 "in bfloat16, no cast counted) on this CPU, which "
                 + ("has avx512_bf16: XLA:CPU's products do not use it at these shapes, so jaxclp's priors train "
                    "in float32." if has else
                    "lacks avx512_bf16 (the emulated bfloat16 product is what a CPU without it gets); whether "
                    "XLA:CPU's products gain on a CPU with it is not measured here: run this benchmark there."))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])  # measures XLA, not a checkout: no --src
    p.add_argument("--quick", action="store_true", help="two small shapes, 3 calls each (prints only)")
    a = p.parse_args(argv)
    shapes, repeats = (SHAPES[:2], 3) if a.quick else (SHAPES, REPEATS)
    payload = dict(command=C.command_line("bf16_matmul", argv), machine=C.machine_info(), repeats=repeats,
                   rows=measure(shapes, repeats))
    return C.quick_or_report("bf16_matmul", payload, markdown, a.quick)


if __name__ == "__main__":
    raise SystemExit(main())

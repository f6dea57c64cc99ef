"""The CLP stage compiles its kernels, not its glue (issue 69, "compile once").

An eager ``jnp`` operation outside ``jax.jit`` (an index ``x[idx]``, ``jnp.zeros``, ``.at[].set``, a comparison)
compiles a program of its own for every shape it sees: ~100 of the ~145 programs of a ``jaxclp run`` were such
one-operation programs before the glue moved to the host (numpy, for the (A,) alpha grids and (K,) bounds) or into
one jitted function per block. These tests run the CLP entry points on a graph whose shapes no other test uses and
list what compiled: no one-primitive eager program may appear.
"""

from __future__ import annotations

import contextlib
import logging
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from jaxclp.nonlinear import nonlinear_grid

# names XLA gives the programs of eager jax.numpy / lax operations (jit(<primitive or jnp helper>)); "stage" is
# jnp.asarray of a host array (jax.device_put compiles nothing)
EAGER = {"broadcast_in_dim", "gather", "scatter", "scatter-add", "add", "subtract", "multiply", "true_divide",
         "select_n", "_where", "less", "less_equal", "greater", "greater_equal", "equal", "bitwise_or",
         "bitwise_and", "convert_element_type", "dynamic_slice", "_squeeze", "_broadcast_arrays", "_reduce_max",
         "_reduce_min", "_reduce_sum", "maximum", "minimum", "sqrt", "_one_hot", "stack", "concatenate", "stage",
         "iota", "copy", "reshape", "_take", "dynamic_update_slice"}


@contextlib.contextmanager
def compiled_programs():
    """Collects the names of the XLA programs compiled inside the block."""
    names = []

    class Handler(logging.Handler):
        def emit(self, record):
            m = re.match(r"Finished XLA compilation of jit\((.*)\) in", record.getMessage())
            if m:
                names.append(m.group(1))

    handler = Handler(level=logging.DEBUG)
    loggers = [logging.getLogger(n) for n in ("jax", "jax._src")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    try:
        with jax.log_compiles(True):
            yield names
    finally:
        for lg, level in zip(loggers, levels):
            lg.removeHandler(handler)
            lg.setLevel(level)


def _problem(n=173, k=3, seed=7):
    rng = np.random.default_rng(seed)
    m = 4 * n
    s, r = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = s != r
    g = jaxclp.Graph.from_edge_index(np.stack([s[keep], r[keep]]), n)
    y = rng.integers(0, k, n)
    prior = jax.nn.softmax(jnp.asarray(rng.normal(size=(n, k)) + 2.0 * np.eye(k)[y]), axis=1)
    train = jnp.asarray(rng.random(n) < 0.3)
    val = jnp.asarray((rng.random(n) < 0.3) & ~np.asarray(train))
    return g, prior, jnp.asarray(y), train, val


def test_the_probe_sees_an_eager_program():
    """The log capture works: an eager operation on a fresh shape shows up as its one-primitive program."""
    with compiled_programs() as names:
        jax.block_until_ready(jnp.zeros((3, 171, 5)) + 1.0)
    assert set(names) & EAGER, names


@pytest.mark.parametrize("kw", [dict(normalization="sym"), dict(normalization="none"),
                                dict(normalization="row", l1_normalize=True),
                                dict(normalization="sym", spectral_scale=True, alphas=(0.5, 0.9, 0.99)),
                                dict(normalization="none", compat="refined", prior_source="b0")])
def test_clp_beliefs_compiles_no_eager_glue(kw):
    g, prior, y, train, _ = _problem()
    with compiled_programs() as names:
        res = jaxclp.clp_beliefs(g, prior, y, train, spectrum=False, **kw)
        jax.block_until_ready(res.beliefs)
    assert not set(names) & EAGER, names
    assert isinstance(res.beliefs, jax.Array) and isinstance(res.alphas, jax.Array)
    assert isinstance(res.converged, jax.Array)


def test_solve_and_nonlinear_grid_compile_no_eager_glue():
    g, prior, y, train, val = _problem(n=181)
    H, _ = jaxclp.estimate_compatibility(g, prior, y, train)
    b0 = jaxclp.initial_beliefs(prior, y, train)
    visible = jnp.asarray(np.where(np.asarray(train | val), np.asarray(y), -1))
    with compiled_programs() as names:
        sol = jaxclp.solve(g, b0, H, prior, alpha=np.asarray([0.3, 0.6, 0.9]), method="bicgstab", throw=False)
        jax.block_until_ready(sol.value)
        res = nonlinear_grid(g, prior, visible, train, val, alphas=(0.5, 1.0),
                             num_layers=3)
        jax.block_until_ready(res.beliefs)
    assert not set(names) & EAGER, names
    assert isinstance(sol.converged, jax.Array) and isinstance(sol.rho_bound, jax.Array)


@pytest.mark.parametrize("scale", ["auto", 2.0])
def test_correct_and_smooth_compiles_no_eager_glue(scale):
    g, prior, y, train, _ = _problem(n=193)
    with compiled_programs() as names:
        out = jaxclp.correct_and_smooth(g, prior, y, train, alpha_correct=0.8, alpha_smooth=np.asarray([0.5, 0.9]),
                                        scale=scale)
        jax.block_until_ready(out)
    # a fixed scale holds the training rows (reset_mask): the scalar a / (1 - a) stays eager (see below)
    assert set(names) & EAGER <= (set() if scale == "auto" else {"subtract", "true_divide"}), names
    assert out.shape == (2, 193, 3)


def test_label_propagation_with_reset_keeps_only_the_scalar_step_eager():
    """Label propagation with the training rows held keeps one eager step per alpha: the scalar a / (1 - a),
    apart from the product it scales, so that XLA cannot fuse the two into a multiply-add (bits as before)."""
    g, prior, y, train, _ = _problem(n=197)
    with compiled_programs() as names:
        jax.block_until_ready(jaxclp.label_propagation(g, y, train, 3, alpha=np.asarray([0.5, 0.9]),
                                                       reset_train=True))
    assert set(names) & EAGER <= {"subtract", "true_divide"}, names

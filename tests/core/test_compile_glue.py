"""The CLP stage compiles its kernels, not its glue (issue 69, "compile once").

An eager ``jnp`` operation outside ``jax.jit`` (an index ``x[idx]``, ``jnp.zeros``, ``.at[].set``, a comparison)
compiles a program of its own for every shape it sees: ~100 of the ~145 programs of a ``jaxclp run`` were such
one-operation programs before the glue moved to the host (numpy, for the (A,) alpha grids and (K,) bounds) or into
one jitted function per block. These tests run the CLP entry points on a graph whose shapes no other test uses and
list what compiled: no one-primitive eager program may appear.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from files import compiled_programs, propagation_problem

import jaxclp
from jaxclp.clp import valid_operator
from jaxclp.experiments.methods import _alpha_grid, _row, _rows
from jaxclp.graph import edge_values
from jaxclp.metrics import _evaluate_jit, evaluate
from jaxclp.nonlinear import nonlinear_grid
from jaxclp.operator import _scale_left, _scale_left_host, clp_operator, spectral_scale

# names XLA gives the programs of eager jax.numpy / lax operations (jit(<primitive or jnp helper>)); "stage" is
# jnp.asarray of a host array (jax.device_put compiles nothing)
EAGER = {"broadcast_in_dim", "gather", "scatter", "scatter-add", "add", "subtract", "multiply", "true_divide",
         "select_n", "_where", "less", "less_equal", "greater", "greater_equal", "equal", "bitwise_or",
         "bitwise_and", "convert_element_type", "dynamic_slice", "_squeeze", "_broadcast_arrays", "_reduce_max",
         "_reduce_min", "_reduce_sum", "maximum", "minimum", "sqrt", "_one_hot", "stack", "concatenate", "stage",
         "iota", "copy", "reshape", "_take", "dynamic_update_slice", "matmul"}
# small jitted helpers whose work now runs on the host for arrays on the CPU (or inside a larger program)
HOST_GLUE = {"_place", "_zero_invalid_jit", "_row", "_evaluate", "_scale_left", "_initial_beliefs_arrays", "_extremes"}


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
    g, prior, y, train, _ = propagation_problem()
    with compiled_programs() as names:
        res = jaxclp.clp_beliefs(g, prior, y, train, spectrum=False, **kw)
        jax.block_until_ready(res.beliefs)
    assert not set(names) & EAGER, names
    assert isinstance(res.beliefs, jax.Array) and isinstance(res.alphas, jax.Array)
    assert isinstance(res.converged, jax.Array)


def test_solve_and_nonlinear_grid_compile_no_eager_glue():
    g, prior, y, train, val = propagation_problem(n=181)
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
    g, prior, y, train, _ = propagation_problem(n=193)
    with compiled_programs() as names:
        out = jaxclp.correct_and_smooth(g, prior, y, train, alpha_correct=0.8, alpha_smooth=np.asarray([0.5, 0.9]),
                                        scale=scale)
        jax.block_until_ready(out)
    # a fixed scale holds the training rows (reset_mask): its scalar a / (1 - a) is computed on the host too
    assert not set(names) & EAGER, names
    assert out.shape == (2, 193, 3)


def test_label_propagation_with_reset_compiles_no_eager_glue():
    """Label propagation with the training rows held, on the CPU: the scalar a / (1 - a) and the product it scales
    are computed on the host (numpy, each operation rounded once: the bits of the device path, which keeps the two
    apart so that XLA cannot fuse them into a multiply-add), so no eager program is compiled."""
    g, prior, y, train, _ = propagation_problem(n=197)
    with compiled_programs() as names:
        jax.block_until_ready(jaxclp.label_propagation(g, y, train, 3, alpha=np.asarray([0.5, 0.9]),
                                                       reset_train=True))
    assert not set(names) & EAGER, names


def test_clp_grid_compiles_one_factor_program_and_no_host_glue():
    """The variants of ``clp``'s grid share one program for the operator's factors (edge values of every
    normalization and ``b0 @ H``) and one for its bounds; placing the valid alphas, the spectral scale, b0 and the
    accuracy of the candidates run on the host."""
    g, prior, y, train, val = propagation_problem(n=211)
    with compiled_programs() as names:
        for norm in ("sym", "row", "none"):
            res = jaxclp.clp_beliefs(g, prior, y, train, normalization=norm, spectrum=False,
                                     alphas=(0.1, 0.5, 0.9, 0.95, 0.99))
            jax.block_until_ready(res.beliefs)
            scaled = jaxclp.clp_beliefs(g, prior, y, train, normalization=norm, spectrum=False, spectral_scale=True,
                                        alphas=(0.1, 0.5, 0.9, 0.99, 0.999))
            jax.block_until_ready(scaled.beliefs)
            for b in _rows(res.beliefs):
                float(evaluate("accuracy", b, y, val))
    assert not set(names) & (EAGER | HOST_GLUE | {"_edge_values"}), names
    assert names.count("_clp_factors") == 1 and names.count("norm_bounds") == 1, names


def test_clp_solves_every_alpha_of_its_grid_whichever_the_data_leaves_valid():
    """The "none" normalization keeps the alphas below its spectral bound, a count the data decides: the solve
    still sees the grid's shape (an invalid alpha solved at the smallest valid one, its row zeroed after), so a
    grid of the same length with fewer valid alphas compiles no new solver program; the valid rows are the closed
    form of those alphas alone, the invalid ones zero and not converged."""
    g, prior, y, train, _ = propagation_problem(n=223)
    H, _ = jaxclp.estimate_compatibility(g, prior, y, train)
    op = clp_operator(g, jaxclp.initial_beliefs(prior, y, train), H, normalization="none")
    _, _, bound = valid_operator(op, np.asarray([0.99]), "none", scaled=False)
    assert bound is not None and bound > 1.0  # the norm bound does not prove these alphas: validity is the data's
    edge = 1.0 / bound
    above = lambda t: edge + t * (1.0 - edge)  # an alpha in (1 / bound, 1): invalid
    grids = [np.asarray([0.2 * edge, 0.5 * edge, 0.8 * edge, 0.98 * edge, above(0.5)]),
             np.asarray([0.2 * edge, 0.8 * edge, 0.98 * edge, above(0.3), above(0.6)])]  # 4 valid, then 3 (same
    # largest valid alpha: the same method)
    results = []
    with compiled_programs() as names:
        for alphas in grids:
            res = jaxclp.clp_beliefs(g, prior, y, train, normalization="none", spectrum=False, alphas=alphas)
            results.append((alphas, jax.block_until_ready(res)))
    assert names.count("_solve_kernel") == 1, names
    for alphas, res in results:
        valid = np.asarray(res.valid)
        ref = jaxclp.solve(g, jaxclp.initial_beliefs(prior, y, train), H, prior, alpha=alphas[valid],
                           normalization="none", throw=False)
        np.testing.assert_allclose(np.asarray(res.beliefs)[valid], np.asarray(ref.value), rtol=1e-5, atol=1e-6)
        assert np.all(np.asarray(res.beliefs)[~valid] == 0) and not np.asarray(res.converged)[~valid].any()
    assert [int(np.asarray(r.valid).sum()) for _, r in results] == [4, 3]


def test_edge_values_one_program_for_sym_and_row_bits_as_per_normalization():
    """"sym" and "row" share one program (the normalization traced), "none" is the weights themselves; the values
    are those of a program per normalization."""
    rng = np.random.default_rng(3)
    n, m = 223, 900
    ei = np.stack([rng.integers(0, n, m), rng.integers(0, n, m)])
    for g in (jaxclp.Graph.from_edge_index(ei, n), jaxclp.Graph.from_edge_index(ei, n, symmetrize=False),
              jaxclp.Graph.from_edge_index(ei, n, weights=rng.random(m) + 0.1)):
        with compiled_programs() as names:
            got = {norm: np.asarray(edge_values(g, norm)) for norm in ("sym", "row", "none")}
        assert names.count("_edge_values") <= 1 and not set(names) & EAGER, names
        assert edge_values(g, "none") is g.weights

        @jax.jit
        def sym(g):
            inv_in = jnp.where(g.in_degree() > 0, 1.0 / jnp.where(g.in_degree() > 0, g.in_degree(), 1.0), 0.0)
            inv_out = jnp.where(g.out_degree() > 0, 1.0 / jnp.where(g.out_degree() > 0, g.out_degree(), 1.0), 0.0)
            return g.weights * jnp.sqrt(inv_in)[g.receivers] * jnp.sqrt(inv_out)[g.senders]

        @jax.jit
        def row(g):
            inv_in = jnp.where(g.in_degree() > 0, 1.0 / jnp.where(g.in_degree() > 0, g.in_degree(), 1.0), 0.0)
            return g.weights * inv_in[g.receivers]

        assert got["sym"].tobytes() == np.asarray(sym(g)).tobytes()
        assert got["row"].tobytes() == np.asarray(row(g)).tobytes()
        assert got["none"].tobytes() == np.asarray(g.weights).tobytes()


def test_graph_construction_compiles_nothing():
    rng = np.random.default_rng(4)
    n, m = 227, 800
    ei = np.stack([rng.integers(0, n, m), rng.integers(0, n, m)])
    with compiled_programs() as names:
        g = jaxclp.Graph.from_edge_index(ei, n)
        w = jaxclp.Graph.from_edge_index(ei, n, weights=rng.random(m), symmetrize=False)
    assert not names, names
    assert g.weights.dtype == jnp.result_type(float) and bool(jnp.all(g.weights == 1))
    assert w.weights.dtype == jnp.result_type(float) and g.senders.dtype == jnp.int32


def test_rows_and_alpha_grids_on_the_host_compile_nothing():
    """The candidates' rows and the methods' alpha grids: the arrays the eager programs made, made on the host."""
    x = jnp.asarray(np.random.default_rng(5).normal(size=(7, 229, 3)), dtype=jnp.float32)
    with compiled_programs() as names:
        rows = _rows(x)
        grid = _alpha_grid((0.1, 0.35, 0.6, 0.85, 0.95, 0.975, 0.999))
    assert not names, names
    want = jnp.asarray((0.1, 0.35, 0.6, 0.85, 0.95, 0.975, 0.999))
    assert grid.dtype == want.dtype and np.asarray(grid).tobytes() == np.asarray(want).tobytes()
    assert all(isinstance(r, jax.Array) and np.asarray(r).tobytes() == np.asarray(_row(x, np.int32(i))).tobytes()
               for i, r in enumerate(rows))


def test_host_accuracy_is_the_jitted_accuracy():
    """Bit for bit, ties, NaN and infinities included (the first maximum; a NaN is the maximum)."""
    rng = np.random.default_rng(6)
    for t in range(60):
        n, k = int(rng.integers(1, 50)), int(rng.integers(1, 5))
        s = rng.integers(0, 3, (n, k)).astype(np.float32)
        s[rng.random((n, k)) < 0.1 * (t % 3)] = [np.nan, np.inf, -np.inf][t % 3]
        y, m = jnp.asarray(rng.integers(-1, k, n)), jnp.asarray(rng.random(n) < rng.random())
        got, want = evaluate("accuracy", jnp.asarray(s), y, m), _evaluate_jit("accuracy", jnp.asarray(s), y, m)
        assert isinstance(got, jax.Array) and got.dtype == want.dtype and got.shape == want.shape
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


def test_host_spectral_scale_is_the_jitted_scale():
    """The host's ``left * (1 / rho)`` is what XLA makes of ``left / rho`` (bit for bit), the floor included."""
    g, prior, y, train, _ = propagation_problem(n=233, k=4)
    H, _ = jaxclp.estimate_compatibility(g, prior, y, train)
    b0 = jaxclp.initial_beliefs(prior, y, train)
    for norm in ("sym", "row", "none"):
        op = clp_operator(g, b0, H, normalization=norm)
        info = jaxclp.operator.operator_spectral_radius(op)
        for rho in (info.rho, info.rho.at[1].set(0.0)):
            args = (op.left, rho, info.row_sum_bound, info.col_sum_bound)
            for got, want in zip(_scale_left_host(*args), _scale_left(*args)):
                assert got.dtype == want.dtype and np.asarray(got).tobytes() == np.asarray(want).tobytes()
        with compiled_programs() as names:
            spectral_scale(op, info)
        assert not names, names

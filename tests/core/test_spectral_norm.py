"""Spectrally normalized CLP operators: A^F_k / rho(A^F_k) (jaxclp.operator.spectral_scale)."""

import functools

import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
import jaxclp
from jaxclp import Graph
from jaxclp.operator import spectral_scale
from jaxclp.solve import solve_operator

N, K = 14, 3


@functools.lru_cache(maxsize=None)
def _graph(directed):
    rng = np.random.default_rng(21 if directed else 22)
    pairs = set()
    while len(pairs) < 30:
        s, r = (int(v) for v in rng.integers(0, N, 2))
        if s != r:
            pairs.add((s, r))
    return Graph.from_edge_index(np.array(sorted(pairs)).T, N, symmetrize=not directed)


def _op(directed, normalization, seed=0):
    rng = np.random.default_rng(seed)
    b0 = rng.dirichlet(np.ones(K), size=N)
    H = rng.dirichlet(np.ones(K), size=K)
    return jaxclp.clp_operator(_graph(directed), jnp.asarray(b0), jnp.asarray(H), normalization=normalization)


def _radii(dense):
    return np.array([np.max(np.abs(np.linalg.eigvals(a))) for a in dense])


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("normalization", ["sym", "row", "none"])
def test_scaled_operators_have_spectral_radius_one(directed, normalization):
    op = _op(directed, normalization)
    before = _radii(np.asarray(op.to_dense()))
    assert np.all(before < 0.999) or normalization == "none"  # the paper's operators: rho well below one
    scaled, rho = spectral_scale(op)
    np.testing.assert_allclose(np.asarray(rho), before, rtol=1e-7)
    np.testing.assert_allclose(_radii(np.asarray(scaled.to_dense())), 1.0, rtol=1e-7)


def test_cg_stays_valid_after_scaling_sym():
    """For symmetric Ahat and c = sqrt(left * right / rho), S A S^-1 = diag(c) Ahat diag(c) with
    S = diag(sqrt(right / left)): a positive scalar per class keeps it symmetric, so CG equals dense."""
    op = _op(False, "sym", seed=3)
    scaled, rho = spectral_scale(op)
    a = np.asarray(scaled.to_dense())
    b, g = np.asarray(scaled.left), np.asarray(scaled.right)
    for k in range(K):
        s = np.sqrt(g[:, k] / b[:, k])
        sym = s[:, None] * a[k] / s[None, :]
        np.testing.assert_allclose(sym, sym.T, atol=1e-14)
        assert np.all(np.linalg.eigvalsh(np.eye(N) - 0.99 * sym) > 0)  # SPD at alpha = 0.99
    prior = jnp.asarray(np.random.default_rng(4).dirichlet(np.ones(K), size=N))
    for alpha in (0.5, 0.95, 0.99):
        cg = solve_operator(scaled, prior, alpha=alpha, method="cg", tol=1e-12)
        dense = solve_operator(scaled, prior, alpha=alpha, method="dense")
        assert cg.method == "cg" and bool(np.all(np.asarray(cg.converged)))
        np.testing.assert_allclose(np.asarray(cg.value), np.asarray(dense.value), rtol=1e-9, atol=1e-11)
        want = np.stack([(1 - alpha) * np.linalg.solve(np.eye(N) - alpha * a[k], np.asarray(prior)[:, k])
                         for k in range(K)], axis=1)
        np.testing.assert_allclose(np.asarray(dense.value), want, rtol=1e-10, atol=1e-12)


def test_zero_radius_class_left_unscaled():
    """A class with no mass (b0[:, k] = 0) has A^F_k = 0: rho = 0 is guarded (no NaN, scale 1)."""
    op = _op(False, "sym", seed=5)
    left = op.left.at[:, 2].set(0.0)
    scaled, rho = spectral_scale(op._replace(left=left))
    assert float(rho[2]) == 1.0
    assert np.all(np.isfinite(np.asarray(scaled.left)))
    np.testing.assert_array_equal(np.asarray(scaled.left[:, 2]), 0.0)


@pytest.mark.parametrize("normalization", ["sym", "row"])
def test_clp_beliefs_spectral_scale_vs_numpy(normalization):
    g = _graph(False)
    prior, labels, mask = ref.random_problem(np.random.default_rng(6), N, K, train_frac=0.4)
    alphas = (0.5, 0.95, 0.99)
    res = jaxclp.clp_beliefs(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask), alphas=alphas,
                             normalization=normalization, spectral_scale=True, method="dense")
    assert res.valid.all()
    H = np.asarray(res.H)
    b0 = ref.initial_beliefs(prior, labels, mask)
    ahat = ref.normalize(ref.graph_dense(g), normalization)
    ops = ref.clp_operators(ahat, b0, H)
    rho = ref.spectral_radii(ops)
    for i, a in enumerate(alphas):
        want = ref.closed_form(ops / rho[:, None, None], prior, a)
        np.testing.assert_allclose(np.asarray(res.beliefs[i]), want, rtol=1e-6, atol=1e-9)
    # without scaling, the same alphas mean far less propagation (rho < 1): the outputs differ
    plain = jaxclp.clp_beliefs(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask), alphas=alphas,
                               normalization=normalization, method="dense")
    assert float(jnp.max(jnp.abs(plain.beliefs[2] - res.beliefs[2]))) > 1e-2
    with pytest.raises(ValueError, match="linear"):
        jaxclp.clp_beliefs(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask),
                           l1_normalize=True, spectral_scale=True)
